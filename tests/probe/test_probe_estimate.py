"""A smoke test before a paid run: --limit, --cases, --dry-run, prices and --max-cost without hand-given prices."""

from __future__ import annotations

import json

import pytest

from cfkit.errors import UsageError
from cfkit.probe.estimate import image_tokens, text_tokens
from cfkit.probe.prices import BUILT_IN, resolve_prices
from cfkit.workspace import PriceConfig
from support.chat_api_server import ChatServer, user_text
from support.probe_runs import FAST, add_modality, many_cases, openai_run, scripted_answer
from support.workspace import run_cli, tree_snapshot


def test_image_tokens_follow_openais_published_examples():
    # OpenAI's vision guide: 1024 x 1024 at high detail costs 765 tokens, 2048 x 4096 costs 1105, low detail 85.
    assert image_tokens(1024, 1024) == 765
    assert image_tokens(2048, 4096) == 1105
    assert image_tokens(4096, 8192, "low") == 85
    assert image_tokens(96, 64) == 85 + 170  # a small image is not scaled up: one tile
    assert text_tokens("abcd" * 10) == 10 and text_tokens("abcde") == 2


def test_prices_come_from_the_options_then_cfkit_toml_then_the_built_in_table_for_openais_own_api():
    official, local = "https://api.openai.com/v1", "http://127.0.0.1:8000/v1"
    configured = {"openai:gpt-5.5": PriceConfig(input=1.0, output=2.0)}
    given = resolve_prices("openai:gpt-5.5", "gpt-5.5", official, {"price_in": "7", "price_out": "8"}, configured)
    assert (given.price_in, given.price_out, given.source) == (7.0, 8.0, "-o price_in/price_out")
    toml = resolve_prices("openai:gpt-5.5", "gpt-5.5", local, {}, configured)
    assert (toml.price_in, toml.price_out) == (1.0, 2.0) and "cfkit.toml" in toml.source
    built_in = resolve_prices("openai:gpt-5.5", "gpt-5.5", official, {}, {})
    assert (built_in.price_in, built_in.price_out) == BUILT_IN["gpt-5.5"]
    assert "built-in estimate of 2026-12-01" in built_in.source and "openai.com/api/pricing" in built_in.source
    # The same name on another server costs what that server charges: no guess.
    assert resolve_prices("openai:gpt-5.5", "gpt-5.5", local, {}, {}) is None
    assert resolve_prices("openai:other", "other", official, {}, {}) is None
    with pytest.raises(UsageError, match="-o price_in was given without -o price_out"):
        resolve_prices("openai:gpt-5.5", "gpt-5.5", official, {"price_in": "1"}, {})


def test_limit_and_cases_run_a_subset_as_a_run_of_its_own(tiny_ws, tmp_path):
    subset = tmp_path / "smoke.txt"
    subset.write_text("T003\nT001\n")
    with ChatServer(scripted_answer) as server:
        smoke = json.loads(openai_run(tiny_ws, server.url, "contextcanvas", "--limit", "1", "--json").stdout)
        assert (smoke["total"], smoke["sent"], smoke["status"]) == (1, 1, "done")
        picked = json.loads(openai_run(tiny_ws, server.url, "contextcanvas", "--cases", str(subset), "--json").stdout)
        assert picked["total"] == 2 and picked["run_id"] != smoke["run_id"]
        assert (picked["sent"], picked["from_cache"]) == (1, 1)  # T001 was asked by the smoke test
        assert "spring fair" in user_text(server.requests[0]) and "Which event" in user_text(server.requests[1])
        full = json.loads(openai_run(tiny_ws, server.url, "contextcanvas", "--json").stdout)
    assert full["total"] == 3 and full["from_cache"] == 2 and full["sent"] == 1  # the smoke answers are reused
    assert len({smoke["run_id"], picked["run_id"], full["run_id"]}) == 3
    listed = {r["id"]: r for r in json.loads(run_cli(["-w", str(tiny_ws), "runs", "list", "--json"]).stdout)}
    assert listed[smoke["run_id"]]["selection"]["limit"] == 1
    assert listed[picked["run_id"]]["selection"]["cases"]["path"] == str(subset)
    # The report reads the full run, not the newer-looking smoke tests.
    data = json.loads(run_cli(["report", "-w", str(tiny_ws), "--format", "json"]).stdout)
    assert data["contextcanvas"][0]["runs"] == [full["run_id"]] and data["missing"] == []
    # Until a full run exists, a smoke run reports as such: the rest of the suite is counted wrong and listed.
    assert run_cli(["-w", str(tiny_ws), "runs", "rm", full["run_id"], picked["run_id"]]).exit_code == 0
    data = json.loads(run_cli(["report", "-w", str(tiny_ws), "--format", "json"]).stdout)
    assert {m["case"] for m in data["missing"]} == {"T002", "T003"}
    assert all("asked only part of the suite" in m["detail"] for m in data["missing"])
    bad = tmp_path / "bad.txt"
    bad.write_text("NOPE\n")
    refused = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-no", "-s", "contextcanvas",
                       "--cases", str(bad)])
    assert refused.exit_code == 2 and "case 'NOPE' is not in" in refused.stderr


def test_dry_run_prints_the_plan_and_writes_nothing(tiny_ws):
    before = tree_snapshot(tiny_ws)
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:gpt-5.5", "-s", "contextcanvas",
                      "--dry-run", "--json"], env={"OPENAI_API_KEY": "sk-test-not-used"})
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert tree_snapshot(tiny_ws) == before  # no store, nothing sent
    assert plan["endpoint"] == "https://api.openai.com/v1" and plan["requests"] == 3 == plan["to_send"]["requests"]
    send = plan["to_send"]
    assert send["images"] == 3 and send["max_output_tokens"] == 3 * 512
    # Three 96 x 64 images of one tile each, plus the text at about four characters a token.
    assert send["input_tokens_approx"] > 3 * 255
    assert plan["prices"]["price_in"] == 5.0 and "built-in estimate" in plan["prices"]["source"]
    assert send["cost_in_usd_approx"] == pytest.approx(send["input_tokens_approx"] * 5.0 / 1e6)
    assert send["cost_max_usd_approx"] == pytest.approx(send["cost_in_usd_approx"] + 3 * 512 * 30.0 / 1e6)
    table = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:gpt-5.5", "-s", "contextcanvas",
                     "--dry-run", "--limit", "2"], env={"OPENAI_API_KEY": "sk-test-not-used", "COLUMNS": "200"})
    assert table.exit_code == 0
    text = " ".join(table.stdout.split())
    assert "2 planned: 0 already stored, 0 in the response cache, 2 to send" in text and "an estimate" in text
    assert "dry run: nothing was sent and nothing was written." in table.stderr
    assert tree_snapshot(tiny_ws) == before


def test_dry_run_counts_what_is_stored_and_cached(tiny_ws):
    with ChatServer(scripted_answer) as server:
        assert openai_run(tiny_ws, server.url, "contextcanvas", "--limit", "2").exit_code == 0
        preview = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                           "--base-url", server.url, *FAST, "--dry-run", "--json"])
        assert server.count == 2
    plan = json.loads(preview.stdout)
    assert (plan["requests"], plan["stored"], plan["cached"], plan["to_send"]["requests"]) == (3, 0, 2, 1)
    assert plan["prices"] is None and plan["to_send"]["cost_max_usd_approx"] is None  # a local server: no guess


def test_a_dry_run_without_prices_says_the_cost_is_not_known_and_how_to_give_prices(tiny_ws):
    with ChatServer(scripted_answer) as server:
        table = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                         "--base-url", server.url, *FAST, "--dry-run"], env={"COLUMNS": "300"})
        assert server.count == 0
    assert table.exit_code == 0, table.stderr
    text = " ".join(table.stdout.split())
    # Before: "about unknown (no prices) for the input …; at most unknown (no prices) if every reply …".
    assert "unknown (no prices)" not in text
    assert ("cost not known, since cfkit has no prices for openai:test-model: give them with -o price_in=… "
            "-o price_out=… (USD per million tokens), or as input and output under "
            '[probe.prices."openai:test-model"] in cfkit.toml') in text, text
    assert "prices none known for openai:test-model" in text
    # Given them, the same dry run prices the requests.
    priced = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                      "--base-url", "http://127.0.0.1:9/v1", *FAST, "--dry-run", "-o", "price_in=1",
                      "-o", "price_out=2"], env={"COLUMNS": "300"})
    assert priced.exit_code == 0 and "cost about $" in " ".join(priced.stdout.split()), priced.stdout
    # A model that runs here, without an endpoint, costs no provider anything.
    local = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-no", "-s", "contextcanvas",
                     "--dry-run"], env={"COLUMNS": "300"})
    assert "cost none to a provider: baseline:always-no runs here, without an endpoint" in " ".join(
        local.stdout.split()), local.stdout


def test_max_cost_works_with_prices_from_cfkit_toml(tiny_ws):
    config = tiny_ws / "cfkit.toml"
    config.write_text(config.read_text() + '\n[probe.prices."openai:test-model"]\ninput = 1000.0\noutput = 0.0\n')
    with ChatServer(scripted_answer) as server:
        result = openai_run(tiny_ws, server.url, "contextcanvas", "--max-cost", "0.15", "--json")
    assert result.exit_code == 1  # 0.10 USD a request: one fits, the run stops and says how to go on
    summary = json.loads(result.stdout)
    assert server.count == 1 and summary["cost_usd"] == pytest.approx(0.1) and summary["missing"] == 2
    shown = json.loads(run_cli(["-w", str(tiny_ws), "runs", "show", summary["run_id"], "--json"]).stdout)
    assert shown["run"]["notes"]["prices"]["source"] == 'cfkit.toml [probe.prices."openai:test-model"]'


def test_a_run_without_any_price_still_refuses_max_cost(tiny_ws):
    with ChatServer(scripted_answer) as server:
        result = openai_run(tiny_ws, server.url, "contextcanvas", "--max-cost", "1")
    assert result.exit_code == 2 and "--max-cost needs prices" in result.stderr and server.count == 0


def test_modality_limit_counts_cases_with_their_four_conditions(tiny_ws):
    add_modality(tiny_ws)
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-no", "-s", "modality", "--limit",
                      "1", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["total"] == 4
    data = json.loads(run_cli(["report", "-w", str(tiny_ws), "--format", "json", "--resamples", "50"]).stdout)
    assert data["modality"][0]["incomplete"] is True and {m["case"] for m in data["missing"]} == {"T002"}
    assert any("usable answers for 1 of the 2 subset cases" in n for n in data["notes"])


def test_a_run_answered_from_the_response_cache_costs_only_what_it_sent(tiny_ws):
    # 0.10 USD a request (100 prompt tokens at 1000 USD per million). A smoke run pays for 2 requests; the full run
    # gets those 2 from the cache and pays for 1. What the runs show adds up to what the server was asked, not more.
    prices = ["-o", "price_in=1000", "-o", "price_out=0"]
    with ChatServer(scripted_answer) as server:
        smoke = json.loads(openai_run(tiny_ws, server.url, "contextcanvas", *prices, "--limit", "2", "--json").stdout)
        full = json.loads(openai_run(tiny_ws, server.url, "contextcanvas", *prices, "--json").stdout)
        sent = server.count
    assert (full["from_cache"], full["sent"], sent) == (2, 1, 3)
    assert full["cost_usd"] == pytest.approx(0.1)
    listed = {r["id"]: r["cost_usd"] for r in json.loads(run_cli(["-w", str(tiny_ws), "runs", "list", "--json"]).stdout)}
    assert listed[smoke["run_id"]] == pytest.approx(0.2) and listed[full["run_id"]] == pytest.approx(0.1)
    assert sum(listed.values()) == pytest.approx(sent * 100 * 1000 / 1e6)
    shown = run_cli(["-w", str(tiny_ws), "runs", "show", full["run_id"]]).stdout
    assert "$0.10" in shown and "$0.30" not in shown
    export = run_cli(["-w", str(tiny_ws), "runs", "export", full["run_id"], "--format", "jsonl"])
    exported = [json.loads(line) for line in export.stdout.splitlines()]
    assert sorted(r["cost_usd"] for r in exported) == pytest.approx([0.0, 0.0, 0.1])


def _usage_as(kinds):
    """A script whose n-th reply carries the usage record ``kinds[n % len(kinds)]`` (None: no usage at all)."""
    def script(body, n):
        reply = scripted_answer(body, n)
        usage = kinds[(n - 1) % len(kinds)]
        if usage is None:
            del reply.body["usage"]
        else:
            reply.body["usage"] = usage
        return reply
    return script


def test_replies_without_token_counts_make_every_cost_shown_say_at_least(tiny_ws):
    # One reply reports its tokens (100 in at 1000 USD per million: 0.10 USD), one none, one a negative count.
    kinds = [{"prompt_tokens": 100, "completion_tokens": 20}, None, {"prompt_tokens": -100, "completion_tokens": 20}]
    prices = ["-o", "price_in=1000", "-o", "price_out=0"]
    with ChatServer(_usage_as(kinds)) as server:
        result = openai_run(tiny_ws, server.url, "contextcanvas", *prices, "-j", "1")
        summary = json.loads(openai_run(tiny_ws, server.url, "contextcanvas", *prices, "--json").stdout)
    assert result.exit_code == 0, result.stderr
    assert "at least $0.10: 2 replies without a reported cost" in result.stderr
    assert "reported no usable token counts" in result.stderr
    run_id = summary["run_id"]
    shown = json.loads(run_cli(["-w", str(tiny_ws), "runs", "show", run_id, "--json"]).stdout)["run"]
    assert shown["cost_usd"] == pytest.approx(100 * 1000 / 1e6) and shown["notes"]["cost_unreported"] == 2
    assert "at least $0.10: 2 replies without a reported cost" in run_cli(["-w", str(tiny_ws), "runs", "show",
                                                                            run_id]).stdout
    assert "at least $0.10" in run_cli(["-w", str(tiny_ws), "runs", "list"]).stdout


def test_max_cost_stops_sending_when_the_server_reports_no_token_counts(tmp_path):
    ws = many_cases(tmp_path / "ws", 12)
    prices = ["-o", "price_in=1000", "-o", "price_out=0"]
    with ChatServer(_usage_as([None])) as server:
        result = openai_run(ws, server.url, "contextcanvas", *prices, "-j", "8", "--max-cost", "100", "--json")
        sent = server.count
    assert result.exit_code == 1 and sent == 1  # the first request, sent alone, told the budget it cannot be kept
    summary = json.loads(result.stdout)
    assert (summary["sent"], summary["cost_unreported"], summary["not_sent"]) == (1, 1, 11)
    assert "--max-cost 100 USD cannot be kept" in summary["stopped"]
    resume = result.stderr.split("resume with: ")[1]
    assert "--max-cost" not in resume and "price_in=1000" in resume  # the stop says the resume goes on unbudgeted


def test_a_priced_run_resumed_without_prices_says_its_cost_leaves_those_replies_out(tiny_ws):
    with ChatServer(scripted_answer) as server:
        first = openai_run(tiny_ws, server.url, "contextcanvas", "--max-cost", "0.1", "-o", "price_in=1000",
                           "-o", "price_out=0")
        assert first.exit_code == 1 and server.count == 1, first.stderr
        rest = openai_run(tiny_ws, server.url, "contextcanvas", "--json")
    assert rest.exit_code == 0, rest.stderr
    run_id = json.loads(rest.stdout)["run_id"]
    # Only the first reply has a cost (0.10); the other two were sent without prices, so the run's cost is a floor.
    shown = run_cli(["-w", str(tiny_ws), "runs", "show", run_id]).stdout
    assert "at least $0.10: 2 replies without a reported cost" in shown
    assert "at least $0.10" in run_cli(["-w", str(tiny_ws), "runs", "list"]).stdout
