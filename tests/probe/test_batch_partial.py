"""Provider batches that end part way (expired, cancelled, cancelled by `probe collect --final` itself) still hold
the results they answered before they stopped, paid for: `probe collect` stores every one, stores the rest as
failed with the provider's reason, says the counts in one line, and the next `probe run` sends only the rest.
Against the loopback OpenAI Files and Batches server and the loopback Message Batches server (tests/support)."""

from __future__ import annotations

import json

import pytest

from support.anthropic_api_server import AnthropicServer
from support.anthropic_api_server import user_text as anthropic_text
from support.batch_api_server import BatchServer
from support.chat_api_server import user_text
from support.probe_runs import FAST, replies, scripted_answer
from support.store_sql import table_rows
from support.workspace import run_cli


def openai_batch(ws, url):
    sent = run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                    "--base-url", url, *FAST, "--batch", "--json"])
    assert sent.exit_code == 0, sent.stderr
    return json.loads(sent.stdout)


def collect(ws, run_id, *extra):
    return run_cli(["-w", str(ws), "probe", "collect", run_id, *extra])


def said_of(result, batch_id):
    return [line for line in result.stderr.splitlines() if f"batch {batch_id} " in line]


@pytest.mark.parametrize("listed", [True, False])
def test_final_cancels_a_running_batch_and_stores_what_it_answered_before_it_stopped(tiny_ws, listed):
    with BatchServer(scripted_answer, polls=50, list_unanswered=listed) as server:
        sub = openai_batch(tiny_ws, server.url)
        [batch_id] = sub["batch_ids"]
        # It answers two of its three requests before the cancel stops it (a cancelled batch's output file).
        server.expire = {line["custom_id"] for line in server.lines() if "Which event" in user_text(line["body"])}
        final = collect(tiny_ws, sub["run_id"], "--final")
        assert final.exit_code == 1
        assert server.calls("POST", f"/batches/{batch_id}/cancel") == 1
        [line] = [line for line in said_of(final, batch_id) if "never answered" in line]
        assert f"batch {batch_id} ended cancelled: 2 results stored, 1 request never answered (" in line
        assert "); it is stored as failed, and the same 'cfkit probe run' sends it again." in line
        stored = {r["case_id"]: r for r in replies(tiny_ws, sub["run_id"])}
        assert stored["T001"]["answer"] == "A" and stored["T002"]["answer"] == "A"
        why = "batch_cancelled" if listed else "the batch ended cancelled without answering it (cancelled by --final)"
        assert stored["T003"]["error"] == "transport" and why in stored["T003"]["detail"]
        [row] = table_rows(tiny_ws, "batches")
        assert row["status"] == "cancelled" and row["collected_at"] is not None
        assert table_rows(tiny_ws, "runs", "status") == [{"status": "incomplete"}]
        live = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                        "--base-url", server.url, *FAST, "--json"])
        assert live.exit_code == 0, live.stderr
        assert json.loads(live.stdout)["sent"] == 1 and server.calls("POST", "/chat/completions") == 1


def test_a_batch_still_cancelling_with_one_answer_is_said_in_the_singular(tiny_ws, monkeypatch):
    import cfkit.probe.batch_collect as collecting

    monkeypatch.setattr(collecting, "CANCEL_WAIT_S", 0.0)
    with BatchServer(scripted_answer, polls=50) as server:
        sub = openai_batch(tiny_ws, server.url)
        run_id, [batch_id] = sub["run_id"], sub["batch_ids"]
        server.expire = {line["custom_id"] for line in server.lines() if "spring fair" not in user_text(line["body"])}
        server.cancel_looks = 3
        first = collect(tiny_ws, run_id, "--final")
        assert first.exit_code == 1
        [line] = [line for line in said_of(first, batch_id) if "still cancelling" in line]
        assert (f"holds 1 answered request; nothing of it is given up yet: run 'cfkit probe collect {run_id} --final' "
                "again in a few minutes to store it.") in line, line


def test_final_leaves_a_batch_still_cancelling_waiting_while_it_holds_answers_and_reads_them_once_it_ends(
        tiny_ws, monkeypatch):
    import cfkit.probe.batch_collect as collecting

    monkeypatch.setattr(collecting, "CANCEL_WAIT_S", 0.0)  # it is looked at once after the cancel, not waited for
    with BatchServer(scripted_answer, polls=50) as server:
        sub = openai_batch(tiny_ws, server.url)
        run_id, [batch_id] = sub["run_id"], sub["batch_ids"]
        server.expire = {line["custom_id"] for line in server.lines() if "Which event" in user_text(line["body"])}
        server.cancel_looks = 3
        first = collect(tiny_ws, run_id, "--final")
        assert first.exit_code == 1
        [line] = [line for line in said_of(first, batch_id) if "still cancelling" in line]
        assert "holds 2 answered requests; nothing of it is given up yet" in line
        assert f"run 'cfkit probe collect {run_id} --final' again in a few minutes to store them" in line
        assert replies(tiny_ws, run_id) == []  # nothing thrown away, nothing stored as failed
        [row] = table_rows(tiny_ws, "batches")
        assert row["status"] == "cancelling" and row["collected_at"] is None
        assert table_rows(tiny_ws, "runs", "status") == [{"status": "waiting"}]
        # Once the cancel has ended it, the same command stores what it answered; it is not cancelled twice.
        again = collect(tiny_ws, run_id, "--final")
        assert again.exit_code == 1
        assert any("ended cancelled: 2 results stored, 1 request never answered" in line
                   for line in said_of(again, batch_id))
        assert server.calls("POST", "/cancel") == 1
        assert sorted((r["case_id"], r["error"]) for r in replies(tiny_ws, run_id)) == [
            ("T001", None), ("T002", None), ("T003", "transport")]


def test_final_gives_up_a_batch_still_cancelling_that_answered_nothing(tiny_ws, monkeypatch):
    import cfkit.probe.batch_collect as collecting

    monkeypatch.setattr(collecting, "CANCEL_WAIT_S", 0.0)
    with BatchServer(scripted_answer, polls=50) as server:
        sub = openai_batch(tiny_ws, server.url)
        server.expire = {line["custom_id"] for line in server.lines()}  # the provider counts none answered
        server.cancel_looks = 100
        final = collect(tiny_ws, sub["run_id"], "--final")
    assert final.exit_code == 1
    assert "3 requests of batches given up stored as failed (--final)" in final.stderr
    assert all(r["error"] == "transport" and "given up with --final" in r["detail"]
               for r in replies(tiny_ws, sub["run_id"]))
    assert table_rows(tiny_ws, "runs", "status") == [{"status": "incomplete"}]


def test_final_reads_a_batch_that_ended_while_its_cancel_was_refused(tiny_ws):
    with BatchServer(scripted_answer, polls=2) as server:  # running at the first look, ended at the next
        sub = openai_batch(tiny_ws, server.url)
        [batch_id] = sub["batch_ids"]
        server.refuse_cancel = True
        final = collect(tiny_ws, sub["run_id"], "--final")
    assert final.exit_code == 0, final.stderr
    assert f"batch {batch_id} completed: it was in_progress, and ended completed before the cancel reached it" \
        in final.stderr
    assert sorted((r["case_id"], r["answer"]) for r in replies(tiny_ws, sub["run_id"])) == [
        ("T001", "A"), ("T002", "A"), ("T003", "C")]


def claude_batch(ws, url):
    sent = run_cli(["-w", str(ws), "probe", "run", "-m", "anthropic:claude-test", "-s", "contextcanvas", "-o",
                    f"base_url={url}", *FAST, "--batch", "--json"])
    assert sent.exit_code == 0, sent.stderr
    return json.loads(sent.stdout)


@pytest.mark.parametrize("final, ended, words", [(False, "expired", "expired: the request was expired"),
                                                 (True, "cancelled", "canceled: the request was canceled")])
def test_a_message_batch_that_ended_part_way_keeps_its_succeeded_results(tiny_ws, final, ended, words):
    pytest.importorskip("anthropic")
    with AnthropicServer(scripted_answer_text, polls_before_end=1 if not final else 100) as server:
        sub = claude_batch(tiny_ws, server.url)
        [batch_id] = sub["batch_ids"]
        server.expire = {r["custom_id"] for r in server.batches[batch_id]["requests"]
                         if "Which event" in anthropic_text(r["params"])}
        result = collect(tiny_ws, sub["run_id"], *(["--final"] if final else []))
        assert result.exit_code == 1
        [line] = [line for line in said_of(result, batch_id) if "never answered" in line]
        assert f"batch {batch_id} ended {ended}: 2 results stored, 1 request never answered ({words}" in line
        stored = {r["case_id"]: r for r in replies(tiny_ws, sub["run_id"])}
        assert stored["T001"]["answer"] == "A" and stored["T002"]["answer"] == "A"
        assert stored["T003"]["error"] == "transport" and words in stored["T003"]["detail"]
        assert table_rows(tiny_ws, "batches", "status") == [{"status": ended}]
        assert table_rows(tiny_ws, "runs", "status") == [{"status": "incomplete"}]


def scripted_answer_text(params, n):
    from support.anthropic_api_server import Scripted
    from support.probe_runs import SCRIPTED

    text = anthropic_text(params)
    answer = next((a for needle, a in SCRIPTED.items() if needle in text), "A")
    return Scripted(text=json.dumps({"answer": answer, "reason": "scripted", "confidence": "high"}))
