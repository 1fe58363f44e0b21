"""`probe run --batch` and `probe collect RUN` against a loopback server speaking the Files and Batches
wire format (tests/support/batch_api_server.py): custom ids are cache keys, results go through the live path."""

from __future__ import annotations

import base64
import json

import pytest

from support.batch_api_server import BatchServer
from support.chat_api_server import Scripted, error_body, user_text
from support.probe_runs import FAST, replies, report, scripted_answer
from support.store_sql import table_rows
from support.workspace import run_cli

PRICES = ["-o", "price_in=100", "-o", "price_out=1000"]  # 0.01 + 0.02 USD a live request at 100 in, 20 out


def batch_run(ws, url, *extra):
    return run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                    "--base-url", url, *FAST, "--batch", *extra])


def collect(ws, run_id, *extra):
    return run_cli(["-w", str(ws), "probe", "collect", run_id, *extra])


def test_a_batch_run_submits_cache_keyed_lines_and_collect_stores_them_like_live_replies(tiny_ws):
    with BatchServer(scripted_answer, polls=3) as server:
        submitted = batch_run(tiny_ws, server.url, *PRICES, "--json")
        assert submitted.exit_code == 0, submitted.stderr
        sub = json.loads(submitted.stdout)
        run_id = sub["run_id"]
        assert sub["status"] == "waiting" and sub["submitted"] == 3 and len(sub["batch_ids"]) == 1
        assert server.calls("POST", "/chat/completions") == 0  # nothing went live
        # The lines: custom ids are the requests' cache keys; bodies are what a live request would carry.
        lines = server.lines()
        [batch] = table_rows(tiny_ws, "batches")
        carried = json.loads(batch["requests"])
        assert sorted(line["custom_id"] for line in lines) == sorted(r[3] for r in carried)
        body = lines[0]["body"]
        assert body["model"] == "test-model" and body["response_format"]["type"] == "json_schema"
        image = body["messages"][1]["content"][1]["image_url"]["url"]
        assert image.startswith("data:image/png;base64,") and base64.b64decode(image.split(",", 1)[1]).startswith(
            b"\x89PNG")
        assert table_rows(tiny_ws, "runs", "status") == [{"status": "waiting"}]
        # While the batch runs: exit 1, what is running, how to go on; nothing stored yet.
        early = collect(tiny_ws, run_id)
        assert early.exit_code == 1 and "1 batch still running" in early.stderr
        assert f"Run 'cfkit probe collect {run_id}' again later, or add --wait." in early.stderr
        assert replies(tiny_ws) == []
        done = collect(tiny_ws, run_id, "--wait", "--poll", "1", "--json")
        assert done.exit_code == 0, done.stderr
        downloads = server.calls("GET", "/content")
        again = collect(tiny_ws, run_id, "--json")
        assert again.exit_code == 0 and server.calls("GET", "/content") == downloads  # each batch read once
        # The responses went to the cache: the same questions in a new run are answered without a model.
        relive = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                          "--base-url", server.url, *FAST, "--limit", "2", "--json"])
        assert relive.exit_code == 0 and json.loads(relive.stdout)["from_cache"] == 2
        assert server.calls("POST", "/chat/completions") == 0
    result = json.loads(done.stdout)
    assert (result["stored"], result["failed"], result["status"]) == (3, 0, "done")
    shown = run_cli(["-w", str(tiny_ws), "runs", "show", run_id])
    assert f"{sub['batch_ids'][0]}: completed, 3/3 done, collected" in shown.stdout
    # Stored as live replies are: parsed, with the server's model id, at batch prices (half of 0.03 USD).
    stored = {r["case_id"]: r for r in replies(tiny_ws, run_id)}  # not the cache-answered run's
    assert {c: (r["answer"], r["parse"]) for c, r in stored.items()} == {
        "T001": ("A", "json"), "T002": ("A", "json"), "T003": ("C", "json")}
    assert {r["server_model"] for r in stored.values()} == {"test-model"}
    assert [r["cost_usd"] for r in stored.values()] == pytest.approx([0.015] * 3)
    assert result["cost_usd"] == pytest.approx(0.045)
    row = report(tiny_ws)["contextcanvas"][0]
    assert row["accuracy"] == pytest.approx(200 / 3) and row["invalid"] == 0
    assert len(table_rows(tiny_ws, "responses", "cache_key")) == 3


def test_requests_a_batch_did_not_answer_are_failures_with_the_providers_words_and_go_live_next(tiny_ws):
    def script(body, n):
        if "winter card" in user_text(body):
            return Scripted(500, error_body("the model is overloaded", kind="server_error"))
        return scripted_answer(body, n)

    with BatchServer(script, polls=1) as server:
        run_id = json.loads(batch_run(tiny_ws, server.url, "--json").stdout)["run_id"]
        lines = {line["custom_id"]: user_text(line["body"]) for line in server.lines()}
        server.expire = {key for key, text in lines.items() if "Which event" in text}
        result = collect(tiny_ws, run_id)
        assert result.exit_code == 1 and "2 not answered by the batch" in result.stderr
        assert "2 planned requests have no reply (run the same 'cfkit probe run' again" in result.stderr
        stored = {r["case_id"]: r for r in replies(tiny_ws, run_id)}
        assert stored["T001"]["answer"] == "A"
        assert stored["T002"]["error"] == "transport" and "HTTP 500: the model is overloaded" in stored["T002"]["detail"]
        assert stored["T003"]["error"] == "transport" and "batch_expired" in stored["T003"]["detail"]
        assert table_rows(tiny_ws, "runs", "status") == [{"status": "incomplete"}]
        # The same command without --batch sends only the two, live.
        server.script = scripted_answer
        live = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                        "--base-url", server.url, *FAST, "--json"])
        assert live.exit_code == 0, live.stderr
        assert json.loads(live.stdout)["sent"] == 2 and server.calls("POST", "/chat/completions") == 2


def test_a_run_with_batches_in_flight_is_not_sent_live_nor_batched_again(tiny_ws):
    with BatchServer(scripted_answer, polls=5) as server:
        run_id = json.loads(batch_run(tiny_ws, server.url, "--json").stdout)["run_id"]
        for extra in ([], ["--batch"]):
            again = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                             "--base-url", server.url, *FAST, *extra])
            assert again.exit_code == 1 and f"has 1 batch in flight" in again.stderr
            assert f"; collect its results with 'cfkit probe collect {run_id}' before" in again.stderr
        assert server.calls("POST", "/chat/completions") == 0 and server.calls("POST", "/batches") == 1


def test_identical_questions_share_one_line_and_big_runs_are_split_within_the_limits(tiny_ws, monkeypatch):
    import cfkit.backends.openai_batch as wire

    cases = tiny_ws / "data" / "cases.jsonl"
    first = json.loads(cases.read_text().splitlines()[0])
    with cases.open("a") as fh:
        fh.write(json.dumps(first | {"id": "T009"}) + "\n")  # T001's question again, under another id
    monkeypatch.setattr(wire, "MAX_LINES", 2)
    with BatchServer(scripted_answer, polls=1) as server:
        sub = json.loads(batch_run(tiny_ws, server.url, "--json").stdout)
        assert sub["submitted"] == 3 and len(sub["batch_ids"]) == 2  # 4 questions, 3 distinct, 2 per file
        assert len(server.lines()) == 3
        assert collect(tiny_ws, sub["run_id"]).exit_code == 0
    stored = {r["case_id"]: r["answer"] for r in replies(tiny_ws)}
    assert stored == {"T001": "A", "T009": "A", "T002": "A", "T003": "C"}


def test_a_batch_is_refused_before_anything_is_sent_when_it_could_pass_max_cost(tiny_ws):
    with BatchServer(scripted_answer) as server:
        refused = batch_run(tiny_ws, server.url, *PRICES, "--max-cost", "0.5")
        assert refused.exit_code == 2 and "a batch cannot be stopped part way" in refused.stderr
        assert "Nothing was sent." in refused.stderr and server.calls("POST", "/files") == 0
        # 3 requests of 512 tokens at most: 3 x (0.01 + 0.512) / 2 = 0.78 USD at batch prices.
        preview = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                           "--base-url", server.url, *PRICES, "--batch", "--dry-run", "--json"])
        plan = json.loads(preview.stdout)
        assert plan["prices"]["price_in"] == 50 and "for a batch" in plan["prices"]["source"]
        allowed = batch_run(tiny_ws, server.url, *PRICES, "--max-cost", "2", "--json")
        assert allowed.exit_code == 0 and json.loads(allowed.stdout)["submitted"] == 3


def test_batch_needs_a_backend_with_a_batch_api_and_collect_a_batched_run(tiny_ws):
    refused = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-no", "-s", "contextcanvas",
                       "--batch"])
    assert refused.exit_code == 2 and "--batch needs a backend with a batch API" in refused.stderr
    live = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-no", "-s", "contextcanvas", "--json"])
    run_id = json.loads(live.stdout)["run_id"]
    nothing = collect(tiny_ws, run_id)
    assert nothing.exit_code == 2 and "was not sent in batches" in nothing.stderr


def test_collect_asks_for_a_base_url_whose_credentials_were_not_kept(tiny_ws):
    with BatchServer(scripted_answer, polls=1) as server:
        url = server.url.replace("http://", "http://alice:secret-pw@")
        run_id = json.loads(batch_run(tiny_ws, url, "--json").stdout)["run_id"]
        needs = collect(tiny_ws, run_id)
        assert needs.exit_code == 2 and "give the URL again with --base-url" in needs.stderr
        done = collect(tiny_ws, run_id, "--base-url", url)
        assert done.exit_code == 0, done.stderr
        assert {h.get("authorization") for _, _, h in server.log} == {
            "Basic " + base64.b64encode(b"alice:secret-pw").decode()}
