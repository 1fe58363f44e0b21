"""The native Anthropic backend against a loopback server speaking the Messages and Message Batches wire formats
(tests/support/anthropic_api_server.py): suites, images as base64 blocks, the key policy, retries, cost, Message Batches."""

from __future__ import annotations

import base64
import json

import pytest

pytest.importorskip("anthropic")

from support.anthropic_api_server import AnthropicServer, Scripted, user_text  # noqa: E402
from support.workspace import run_cli  # noqa: E402
from support.probe_runs import SCRIPTED, add_modality, replies, report  # noqa: E402
from support.store_sql import table_rows  # noqa: E402

SECRET = "sk-ant-DO-NOT-LEAK-0123456789"
LOCAL_SECRET = "local-anthropic-key-DO-NOT-LEAK"
FAST = ["-o", "backoff=0.01", "-o", "max_retries=2"]


def scripted(params, n) -> Scripted:
    text = user_text(params)
    for needle, answer in SCRIPTED.items():
        if needle in text:
            return Scripted(text=json.dumps({"answer": answer, "reason": "scripted", "confidence": "high"}))
    return Scripted(text="no idea")


def claude(ws, url, suite="contextcanvas", *extra):
    return run_cli(["-w", str(ws), "probe", "run", "-m", "anthropic:claude-test", "-s", suite, "-o",
                    f"base_url={url}", *FAST, *extra])


def test_contextcanvas_and_modality_suites_with_images_as_base64_blocks(tiny_ws):
    add_modality(tiny_ws)
    with AnthropicServer(scripted) as server:
        first = claude(tiny_ws, server.url, "contextcanvas", "--json")
        assert first.exit_code == 0, first.stderr
        modality = claude(tiny_ws, server.url, "modality", "--json")
        assert modality.exit_code == 0, modality.stderr
    summary = json.loads(first.stdout)
    assert (summary["total"], summary["errors"]) == (3, 0)
    stored = {r["case_id"]: r for r in replies(tiny_ws, summary["run_id"])}
    assert {c: r["answer"] for c, r in stored.items()} == {"T001": "A", "T002": "A", "T003": "C"}
    assert all(r["server_model"] == "claude-test" for r in stored.values())
    body = server.messages[0]
    assert body["model"] == "claude-test" and body["temperature"] == 0 and body["max_tokens"] == 512
    assert isinstance(body["system"], str) and body["system"]
    image, text = body["messages"][0]["content"]
    assert image["type"] == "image" and image["source"]["type"] == "base64"
    assert image["source"]["media_type"] == "image/png"
    shown = base64.b64decode(image["source"]["data"])
    assert shown in {(tiny_ws / "data" / "images" / f"T00{i}.png").read_bytes() for i in (1, 2, 3)}
    assert text["type"] == "text"
    # Modality: four conditions a case, images only for the image condition; the report reads the runs.
    assert len(replies(tiny_ws, json.loads(modality.stdout)["run_id"])) == 8
    without_images = [b for b in server.messages if all(p["type"] == "text" for p in b["messages"][0]["content"])]
    assert len(without_images) == 6  # text, neutral and evidence for two cases
    rows = report(tiny_ws)
    assert rows["contextcanvas"][0]["model"] == "anthropic:claude-test"


def test_the_key_goes_only_where_it_belongs(tiny_ws, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", SECRET)
    monkeypatch.setenv("LOCAL_KEY", LOCAL_SECRET)
    with AnthropicServer(scripted) as server:
        plain = claude(tiny_ws, server.url, "contextcanvas", "--json")
        assert plain.exit_code == 0, plain.stderr
        named = claude(tiny_ws, server.url, "contextcanvas", "-o", "api_key_env=LOCAL_KEY", "-o", "top_p=0.5")
        assert named.exit_code == 0, named.stderr
    assert "$ANTHROPIC_API_KEY was not sent" in plain.stderr
    sent = [h.get("x-api-key", "") + h.get("authorization", "") for h in server.headers]
    assert not any(SECRET in s for s in sent)
    assert any(LOCAL_SECRET in s for s in sent)
    # A key never travels over plain http to another machine, and the official API needs its key.
    far = claude(tiny_ws, "http://192.0.2.1:9", "contextcanvas", "-o", "api_key_env=LOCAL_KEY")
    assert far.exit_code == 2 and "plain http" in far.stderr
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    official = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "anthropic:claude-test", "-s", "contextcanvas"])
    assert official.exit_code == 2 and "$ANTHROPIC_API_KEY is not set" in official.stderr


def test_retries_overload_then_answers_and_a_refused_key_stops(tiny_ws):
    def flaky(params, n):
        if n == 1:
            return Scripted(529, "Overloaded", error_type="overloaded_error", headers={"retry-after": "0"})
        return scripted(params, n)

    with AnthropicServer(flaky) as server:
        result = claude(tiny_ws, server.url, "contextcanvas", "-j", "1", "--json")
        assert result.exit_code == 0, result.stderr
        assert len(server.messages) == 4  # the overloaded attempt, then three answers
    assert "1 of 3 requests sent succeeded only after retrying (1 retry in all)" in json.loads(result.stdout)["notes"]
    with AnthropicServer(lambda p, n: Scripted(401, "invalid x-api-key", error_type="authentication_error")) as s:
        refused = claude(tiny_ws, s.url, "contextcanvas", "-o", "temperature=0.5")
    # no key went to this server ($ANTHROPIC_API_KEY goes only to Anthropic's): the line says so, and what to type
    assert refused.exit_code == 2 and "wants a key (HTTP 401: invalid x-api-key), and none was sent to it; name " \
        "the variable holding its key with -o api_key_env=NAME." in " ".join(refused.stderr.split()), refused.stderr


def test_cost_reasoning_refusal_and_controls(tiny_ws):
    def thoughtful(params, n):
        reply = scripted(params, n)
        if "winter card" in user_text(params):
            return Scripted(text="", stop_reason="refusal")
        reply.thinking = "weighing the options"
        return reply

    with AnthropicServer(thoughtful) as server:
        result = claude(tiny_ws, server.url, "contextcanvas", "--json", "-o", "price_in=1000", "-o", "price_out=0",
                        "-o", "temperature=0.5", "-o", "top_p=0.9", "-o", 'extra_body={"top_k": 5}')
        assert result.exit_code == 0, result.stderr
        seed = claude(tiny_ws, server.url, "contextcanvas", "-o", "seed=7")
        assert seed.exit_code == 2 and "does not take -o seed=7" in seed.stderr
    summary = json.loads(result.stdout)
    assert summary["cost_usd"] == pytest.approx(3 * 100 * 1000 / 1e6)
    assert all(b["temperature"] == 0.5 and b["top_p"] == 0.9 and b["top_k"] == 5 for b in server.messages)
    stored = {r["case_id"]: r for r in replies(tiny_ws, summary["run_id"])}
    assert stored["T002"]["error"] == "refused"
    assert stored["T001"]["reasoning"] == "weighing the options" and "weighing" not in stored["T001"]["raw"]


#: Anthropic's usage: ``input_tokens`` leaves out the input read from and written to the prompt cache; the writes
#: are split by the cache's lifetime (``cache_creation``).
CACHE_USAGE = {"input_tokens": 30, "cache_read_input_tokens": 60, "cache_creation_input_tokens": 10,
               "output_tokens": 20, "cache_creation": {"ephemeral_5m_input_tokens": 6, "ephemeral_1h_input_tokens": 4}}
PRICES = ["-o", "price_in=1000", "-o", "price_out=0"]
#: One reply's cache writes at Anthropic's rates: 6 for 5 minutes at 1.25 x 1000 USD a million, 4 for an hour at 2 x.
WRITES = (6 * 1250 + 4 * 2000) / 1e6
READ_AT_FULL = "cached input tokens (usage.cache_read_input_tokens) and no price for cached input was given"
WRITE_NOTE = "(usage.cache_creation_input_tokens) and no price for cache writes was given: it was priced at a rate"


def with_usage(usage):
    def script(params, n):
        reply = scripted(params, n)
        reply.usage = usage
        return reply
    return script


def test_cache_reads_and_writes_are_priced_each_once(tiny_ws, tmp_path):
    from support.workspace import write_workspace

    with AnthropicServer(with_usage(CACHE_USAGE)) as server:
        cached = claude(tiny_ws, server.url, "contextcanvas", "--json", *PRICES, "-o", "price_cached_in=100")
        full = claude(write_workspace(tmp_path / "other"), server.url, "contextcanvas", "--json", *PRICES)
        given = claude(write_workspace(tmp_path / "given"), server.url, "contextcanvas", "--json", *PRICES,
                       "-o", "price_cached_in=100", "-o", "price_cache_write=1500", "-o", "price_cache_write_1h=3000")
    assert cached.exit_code == 0 and full.exit_code == 0 and given.exit_code == 0, cached.stderr + full.stderr
    # 30 fresh at 1000 USD a million, 60 read at 100, 10 written at Anthropic's rates: each input token once.
    assert json.loads(cached.stdout)["cost_usd"] == pytest.approx(3 * ((30 * 1000 + 60 * 100) / 1e6 + WRITES))
    assert READ_AT_FULL not in cached.stderr and cached.stderr.count(WRITE_NOTE) == 1
    # Without a cached price the 90 input tokens read or not cost the input price, and the run says so once.
    assert json.loads(full.stdout)["cost_usd"] == pytest.approx(3 * (90 * 1000 / 1e6 + WRITES))
    assert full.stderr.count(READ_AT_FULL) == 1 and full.stderr.count(WRITE_NOTE) == 1
    # Cache-write prices of one's own: used, and nothing assumed.
    assert json.loads(given.stdout)["cost_usd"] == pytest.approx(3 * (30 * 1000 + 60 * 100 + 6 * 1500
                                                                      + 4 * 3000) / 1e6)
    assert "priced at a rate cfkit assumed" not in given.stderr
    # The counts stay with each reply's usage, the split by lifetime with them.
    usage = [json.loads(r["usage"]) for r in table_rows(tiny_ws, "responses")]
    assert usage and all(u["cache_read_input_tokens"] == 60 and u["cache_creation_input_tokens"] == 10
                         and u["cache_creation"] == CACHE_USAGE["cache_creation"] for u in usage)


def test_cache_writes_count_against_max_cost_at_their_own_rate(tiny_ws):
    # 10 fresh input tokens and 100 written to the 1-hour cache: 0.21 USD a reply at 1000 USD a million (0.11 if
    # the writes cost the input price, when all three replies would fit in 0.5).
    usage = {"input_tokens": 10, "cache_creation_input_tokens": 100, "output_tokens": 0,
             "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 100}}
    with AnthropicServer(with_usage(usage)) as server:
        result = claude(tiny_ws, server.url, "contextcanvas", "--json", "--max-cost", "0.5", *PRICES)
    assert result.exit_code == 1, result.stderr
    summary = json.loads(result.stdout)
    assert len(server.messages) == 2 and summary["cost_usd"] == pytest.approx(2 * 0.21)
    assert "--max-cost 0.5" in summary["stopped"]


def test_cache_write_prices_can_come_from_cfkit_toml_and_are_refused_without_input_prices(tiny_ws):
    config = tiny_ws / "cfkit.toml"
    config.write_text(config.read_text() + '\n[probe.prices."anthropic:claude-test"]\ninput = 1000.0\n'
                      'output = 0.0\ncache_write = 1500.0\ncache_write_1h = 3000.0\n')
    with AnthropicServer(with_usage(CACHE_USAGE)) as server:
        preview = claude(tiny_ws, server.url, "contextcanvas", "--dry-run")
        result = claude(tiny_ws, server.url, "contextcanvas", "--json")
        alone = claude(tiny_ws, server.url, "contextcanvas", "-o", "price_cache_write=1")
    assert preview.exit_code == 0 and "$1500 cache write / $3000 1-hour cache write" in preview.stdout
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["cost_usd"] == pytest.approx(3 * (90 * 1000 + 6 * 1500 + 4 * 3000) / 1e6)
    assert "priced at a rate cfkit assumed" not in result.stderr
    shown = json.loads(run_cli(["-w", str(tiny_ws), "runs", "show", json.loads(result.stdout)["run_id"],
                                "--json"]).stdout)
    assert shown["run"]["notes"]["prices"]["price_cache_write_1h"] == 3000
    assert alone.exit_code == 2 and "-o price_cache_write was given without -o price_in" in alone.stderr


@pytest.mark.parametrize("usage", [
    {"input_tokens": 30, "cache_read_input_tokens": -60, "output_tokens": 20},
    {"input_tokens": 30, "cache_creation_input_tokens": -10, "output_tokens": 20},
])
def test_an_unusable_cache_count_leaves_the_cost_unknown_and_stops_a_budget(tiny_ws, usage):
    with AnthropicServer(with_usage(usage)) as server:
        result = claude(tiny_ws, server.url, "contextcanvas", "--json", "--max-cost", "10", *PRICES)
    assert result.exit_code == 1, result.stderr
    summary = json.loads(result.stdout)
    assert len(server.messages) == 1 and summary["cost_unreported"] == 1  # not priced as if nothing was cached
    assert "cache_read/cache_creation_input_tokens" in result.stderr


def test_a_collected_batch_prices_cache_reads_and_writes_at_half_and_says_how(tiny_ws):
    with AnthropicServer(with_usage(CACHE_USAGE)) as server:
        run_id = json.loads(claude(tiny_ws, server.url, "contextcanvas", "--batch", "--json", *PRICES).stdout)["run_id"]
        done = run_cli(["-w", str(tiny_ws), "probe", "collect", run_id, "--json"])
        shown = run_cli(["-w", str(tiny_ws), "runs", "show", run_id], env={"COLUMNS": "400"})
    assert done.exit_code == 0, done.stderr
    collected = json.loads(done.stdout)
    said = " ".join(collected["notes"])
    assert said.count(READ_AT_FULL) == 1 and said.count(WRITE_NOTE) == 1
    # Half of 3 x (90 input tokens at 1000 USD a million and the writes at Anthropic's rates).
    assert collected["cost_usd"] == pytest.approx(0.5 * 3 * (90 * 1000 / 1e6 + WRITES))
    said = " ".join(shown.stdout.split())
    assert shown.stdout.count("cost note") == 2 and READ_AT_FULL in said and WRITE_NOTE in said


def test_message_batch_round_trip_at_half_price(tiny_ws):
    def one_fails(params, n):
        if "Which event" in user_text(params):
            return Scripted(400, "prompt is too long", error_type="invalid_request_error")
        return scripted(params, n)

    with AnthropicServer(one_fails, polls_before_end=2) as server:
        sent = claude(tiny_ws, server.url, "contextcanvas", "--batch", "--json", "-o", "price_in=1000",
                      "-o", "price_out=0")
        assert sent.exit_code == 0, sent.stderr
        run_id = json.loads(sent.stdout)["run_id"]
        assert not server.messages and len(server.batches) == 1
        [batch] = server.batches.values()
        assert len(batch["requests"]) == 3 and all(len(r["custom_id"]) == 64 for r in batch["requests"])
        assert batch["requests"][0]["params"]["messages"][0]["content"][0]["type"] == "image"
        waiting = run_cli(["-w", str(tiny_ws), "probe", "collect", run_id])
        assert waiting.exit_code == 1 and "still running" in waiting.stderr
        done = run_cli(["-w", str(tiny_ws), "probe", "collect", run_id, "--json"])
    collected = json.loads(done.stdout)
    assert (collected["stored"], collected["failed"]) == (3, 1)
    assert collected["cost_usd"] == pytest.approx(0.5 * 2 * 100 * 1000 / 1e6)  # half price, two answers
    stored = {r["case_id"]: r for r in replies(tiny_ws, run_id)}
    assert stored["T001"]["answer"] == "A" and stored["T002"]["answer"] == "A"
    assert stored["T003"]["error"] == "transport" and "prompt is too long" in stored["T003"]["detail"]


def test_bad_lines_in_batch_results_cost_only_their_own_requests(tiny_ws):
    """The SDK's results reader stops at the first line it cannot read; cfkit reads the lines as data instead."""
    kept = []

    def mangle(lines):
        cut, odd, whole = lines
        kept.append(json.loads(whole)["custom_id"])
        odd = json.dumps(json.loads(odd) | {"result": {"type": "mystery"}})
        return [cut[:len(cut) // 2], "<html>upstream reset</html>", odd, whole]

    with AnthropicServer(scripted, mangle=mangle) as server:
        run_id = json.loads(claude(tiny_ws, server.url, "contextcanvas", "--batch", "--json").stdout)["run_id"]
        done = run_cli(["-w", str(tiny_ws), "probe", "collect", run_id, "--json"])
    assert done.exit_code == 1 and "Traceback" not in done.stderr
    collected = json.loads(done.stdout)
    assert (collected["stored"], collected["failed"]) == (3, 2)
    assert any("line 2 is not a result line" in p for p in collected["problems"])
    stored = replies(tiny_ws, run_id)
    [answered] = [r for r in stored if r["error"] is None]
    [batch] = table_rows(tiny_ws, "batches")
    [case] = [r[0] for r in json.loads(batch["requests"]) if r[3] == kept[0]]
    assert (answered["case_id"], answered["answer"]) == (case, {"T001": "A", "T002": "A", "T003": "C"}[case])
    details = sorted(r["detail"] for r in stored if r["error"] == "transport")
    assert "line 1 of its results is not a JSON object" in details[0] and "'mystery'" in details[1]


def test_batch_results_on_another_host_are_not_fetched_with_the_key(tiny_ws, monkeypatch):
    monkeypatch.setenv("LOCAL_KEY", LOCAL_SECRET)
    with AnthropicServer(scripted) as elsewhere:
        with AnthropicServer(scripted, results_host=elsewhere.url.replace("127.0.0.1", "localhost")) as server:
            sent = claude(tiny_ws, server.url, "contextcanvas", "--batch", "--json", "-o", "api_key_env=LOCAL_KEY")
            run_id = json.loads(sent.stdout)["run_id"]
            collected = run_cli(["-w", str(tiny_ws), "probe", "collect", run_id])
    assert collected.exit_code != 0 and "does not send the key there" in collected.stderr
    assert elsewhere.requests == []


def test_gemini_through_its_openai_compatible_endpoint(tiny_ws, monkeypatch):
    """The README's Gemini configuration: the openai backend, Gemini's /v1beta/openai base URL, $GEMINI_API_KEY."""
    from support.chat_api_server import ChatServer
    from support.probe_runs import scripted_answer

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("GEMINI_API_KEY", LOCAL_SECRET)
    with ChatServer(scripted_answer) as server:
        base = server.url.removesuffix("/v1") + "/v1beta/openai"
        result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:gemini-3.1-pro-preview", "-s",
                          "contextcanvas", "--base-url", base, "--api-key-env", "GEMINI_API_KEY",
                          "--protocol", "paper", "--json"])
        assert result.exit_code == 0, result.stderr
    assert set(server.paths) == {"/v1beta/openai/chat/completions"}
    assert {h["authorization"] for h in server.headers} == {f"Bearer {LOCAL_SECRET}"}
    # The paper's settings for Gemini 3.1 Pro: temperature 0 and 800 output tokens.
    assert all(b["temperature"] == 0 and b["max_tokens"] == 800 for b in server.requests)
    assert len(replies(tiny_ws, json.loads(result.stdout)["run_id"])) == 3


def test_a_model_that_refuses_temperature_answers_at_its_default_and_says_so(tiny_ws):
    def no_sampling_settings(params, n):
        if "temperature" in params:
            return Scripted(400, "temperature is not supported for this model", error_type="invalid_request_error")
        return scripted(params, n)

    with AnthropicServer(no_sampling_settings) as server:
        result = claude(tiny_ws, server.url, "contextcanvas", "--json", "-j", "1")
        assert result.exit_code == 0, result.stderr
    stored = replies(tiny_ws, json.loads(result.stdout)["run_id"])
    assert len(stored) == 3 and all(r["error"] is None for r in stored)
    assert len(server.messages) == 4  # one refusal, then every request without temperature
    shown = run_cli(["-w", str(tiny_ws), "runs", "show", json.loads(result.stdout)["run_id"]])
    assert "refused temperature=0" in result.stderr + shown.stdout


@pytest.mark.parametrize("stop_reason", ["max_tokens", "model_context_window_exceeded"])
def test_a_message_stopped_at_max_tokens_is_stored_as_cut_off_and_the_run_says_so(tiny_ws, stop_reason):
    # A full context window stops a reply as the token limit does: its text is cut off, not an answer's end.
    def cut(params, n):
        if "winter card" in user_text(params):
            return Scripted(text='{"answer": "A", "rea', stop_reason=stop_reason)
        return scripted(params, n)

    with AnthropicServer(cut) as server:
        result = claude(tiny_ws, server.url, "contextcanvas", "--json")
    assert result.exit_code == 1  # a cut-off reply is not a finished answer
    assert "token limit" in result.stderr
    stored = {r["case_id"]: r for r in replies(tiny_ws, json.loads(result.stdout)["run_id"])}
    assert stored["T002"]["truncated"] == 1 and stored["T001"]["truncated"] == 0


def test_collect_final_cancels_a_running_message_batch_keeps_its_answer_and_gives_up_on_a_lost_one(tiny_ws):
    with AnthropicServer(scripted, polls_before_end=100) as server:
        run_ids = []
        for limit in ("1", "2"):  # two runs, one batch each
            sent = claude(tiny_ws, server.url, "contextcanvas", "--batch", "--json", "--limit", limit)
            assert sent.exit_code == 0, sent.stderr
            run_ids.append(json.loads(sent.stdout)["run_id"])
        running, lost = server.batches  # in the order they were created
        server.forgotten.add(lost)
        plain = run_cli(["-w", str(tiny_ws), "probe", "collect", run_ids[1]])
        assert plain.exit_code == 1 and f"batch {lost}: the provider has no such batch (HTTP 404" in plain.stderr
        assert f"'cfkit probe collect {run_ids[1]} --final'" in plain.stderr
        # The running batch is cancelled; it had answered its request before it ended, and that answer is kept.
        final = run_cli(["-w", str(tiny_ws), "probe", "collect", run_ids[0], "--final"])
        assert final.exit_code == 0, final.stderr
        assert f"batch {running} completed: it was in_progress; the provider was asked to cancel it" in final.stderr
        assert [r["answer"] for r in replies(tiny_ws, run_ids[0])] == ["A"]
        final = run_cli(["-w", str(tiny_ws), "probe", "collect", run_ids[1], "--final"])
        assert final.exit_code == 1 and f"batch {lost} given up: the provider no longer knows it" in final.stderr
        assert all(r["error"] == "transport" and "given up with --final" in r["detail"]
                   for r in replies(tiny_ws, run_ids[1]))
        assert server.batches[running].get("canceling") and not server.batches[lost].get("canceling")
        assert sorted(r["status"] for r in table_rows(tiny_ws, "runs", "status")) == ["done", "incomplete"]
