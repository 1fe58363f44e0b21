"""Provider batches that end without every result, or never end: `probe collect` stores what none answered as
failed (with the provider's words, or "given up with --final"), says so, and leaves the run resumable; the next
`probe run` sends only those. Against the loopback Files and Batches server (tests/support/batch_api_server.py)."""

from __future__ import annotations

import json

import pytest

from support.batch_api_server import BatchServer
from support.chat_api_server import user_text
from support.probe_runs import FAST, many_cases, replies, scripted_answer
from support.store_sql import table_rows
from support.workspace import run_cli


def batch_run(ws, url):
    sent = run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                    "--base-url", url, *FAST, "--batch", "--json"])
    assert sent.exit_code == 0, sent.stderr
    return json.loads(sent.stdout)


def live_run(ws, url):
    return run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                    "--base-url", url, *FAST, "--json"])


def collect(ws, run_id, *extra):
    return run_cli(["-w", str(ws), "probe", "collect", run_id, *extra])


def batch_rows(ws):
    return {row["id"]: row for row in table_rows(ws, "batches")}


def test_two_requests_a_batch_left_unanswered_are_said_in_the_plural(tmp_path):
    ws = many_cases(tmp_path / "ws", 3)
    with BatchServer(scripted_answer, polls=1, ends_as="expired") as server:
        sub = batch_run(ws, server.url)
        [batch_id] = sub["batch_ids"]
        server.expire = {line["custom_id"] for line in server.lines()
                         if "Is picture 1 " not in user_text(line["body"])}
        result = collect(ws, sub["run_id"])
        assert result.exit_code == 1
        [said] = [line for line in result.stderr.splitlines() if f"batch {batch_id} ended expired" in line]
        assert ": 1 result stored, 2 requests never answered (" in said
        assert "); they are stored as failed, and the same 'cfkit probe run' sends them again." in said
        assert "2 planned requests have no reply (run the same 'cfkit probe run' again to send them)" in result.stderr


@pytest.mark.parametrize("ends_as, listed", [("cancelled", True), ("cancelled", False), ("failed", True),
                                             ("expired", False)])
def test_a_batch_that_ends_with_requests_unanswered_stores_them_as_failed_and_the_next_run_sends_only_them(
        tiny_ws, ends_as, listed):
    with BatchServer(scripted_answer, polls=1, ends_as=ends_as, list_unanswered=listed) as server:
        sub = batch_run(tiny_ws, server.url)
        [batch_id] = sub["batch_ids"]
        server.expire = {line["custom_id"] for line in server.lines() if "Which event" in user_text(line["body"])}
        result = collect(tiny_ws, sub["run_id"])
        assert result.exit_code == 1
        # One line for the batch: how it ended, how many it left unanswered and why, and what happens next.
        said = [line for line in result.stderr.splitlines() if f"batch {batch_id} ended {ends_as}" in line]
        assert len(said) == 1 and ": 2 results stored, 1 request never answered (" in said[0]
        assert "); it is stored as failed, and the same 'cfkit probe run' sends it again." in said[0]
        assert "1 planned request has no reply (run the same 'cfkit probe run' again to send it)" in result.stderr
        stored = {r["case_id"]: r for r in replies(tiny_ws, sub["run_id"])}
        assert stored["T001"]["answer"] == "A" and stored["T002"]["answer"] == "A"  # the partial output is kept
        why = f"batch_{ends_as}" if listed else f"the batch ended {ends_as} without answering it"
        assert stored["T003"]["error"] == "transport" and why in stored["T003"]["detail"]
        assert table_rows(tiny_ws, "runs", "status") == [{"status": "incomplete"}]
        live = live_run(tiny_ws, server.url)
        assert live.exit_code == 0, live.stderr
        assert json.loads(live.stdout)["sent"] == 1 and server.calls("POST", "/chat/completions") == 1
    assert table_rows(tiny_ws, "runs", "status") == [{"status": "done"}]


def test_final_gives_up_on_batches_still_running_or_lost_and_the_run_resumes_with_only_their_requests(
        tiny_ws, monkeypatch):
    import cfkit.backends.openai_batch as wire

    monkeypatch.setattr(wire, "MAX_LINES", 1)  # one batch a request: one ends, one runs on, one is lost
    with BatchServer(scripted_answer, polls=50) as server:
        sub = batch_run(tiny_ws, server.url)
        run_id = sub["run_id"]
        ended, running, lost = sub["batch_ids"]
        server.looks[ended] = 50  # it ends at the next look
        server.forgotten.add(lost)
        # Without --final: what ended is stored, the lost batch is said, with the way out, and the run waits.
        plain = collect(tiny_ws, run_id)
        assert plain.exit_code == 1
        [line] = [line for line in plain.stderr.splitlines() if f"batch {lost}:" in line]
        assert f"the provider has no such batch (HTTP 404: No batch found with id '{lost}'.)" in line
        assert f"'cfkit probe collect {run_id} --final'" in line
        assert f"1 batch the provider no longer knows ({lost})" in plain.stderr
        assert plain.stderr.rstrip().endswith("the same 'cfkit probe run' then sends it again.")
        assert [r["case_id"] for r in replies(tiny_ws, run_id)] == ["T001"]
        assert batch_rows(tiny_ws)[lost]["status"] == "not found" and batch_rows(tiny_ws)[lost]["collected_at"] is None
        assert table_rows(tiny_ws, "runs", "status") == [{"status": "waiting"}]
        # --wait does not wait for a batch the provider does not know: it returns once the others have ended.
        server.looks[running] = 50
        waited = collect(tiny_ws, run_id, "--wait", "--poll", "1", "--json")
        assert waited.exit_code == 1 and json.loads(waited.stdout)["lost"] == [lost]
        assert sorted(r["case_id"] for r in replies(tiny_ws, run_id)) == ["T001", "T002"]


def test_final_cancels_a_running_batch_stores_what_it_answered_gives_up_the_lost_one_and_resume_sends_only_that(
        tiny_ws, monkeypatch):
    import cfkit.backends.openai_batch as wire

    monkeypatch.setattr(wire, "MAX_LINES", 1)
    with BatchServer(scripted_answer, polls=50) as server:
        sub = batch_run(tiny_ws, server.url)
        run_id = sub["run_id"]
        ended, running, lost = sub["batch_ids"]
        server.looks[ended] = 50
        server.forgotten.add(lost)
        refused = collect(tiny_ws, run_id, "--final", "--wait")
        assert refused.exit_code == 2 and "give one of the two" in refused.stderr
        final = collect(tiny_ws, run_id, "--final")
        assert final.exit_code == 1
        # The running batch is cancelled; it answered its request before it stopped, and that answer is stored.
        assert "2 results stored now; 1 request of batches given up stored as failed (--final)" in final.stderr
        assert "1 planned request has no reply (run the same 'cfkit probe run' again" in final.stderr
        assert f"batch {running} cancelled: it was in_progress; the provider was asked to cancel it" in final.stderr
        assert server.calls("POST", f"/batches/{running}/cancel") == 1
        assert server.calls("POST", "/cancel") == 1  # neither the ended batch nor the lost one
        assert server.batches[running]["status"] == "cancelled"
        rows = batch_rows(tiny_ws)
        assert {b: (rows[b]["status"], rows[b]["collected_at"] is not None) for b in rows} == {
            ended: ("completed", True), running: ("cancelled", True), lost: ("given up", True)}
        stored = {r["case_id"]: r for r in replies(tiny_ws, run_id)}
        assert stored["T001"]["answer"] == "A" and stored["T002"]["answer"] == "A"
        assert stored["T003"]["error"] == "transport" and "given up with --final" in stored["T003"]["detail"]
        assert "the provider no longer knows it" in stored["T003"]["detail"]
        assert table_rows(tiny_ws, "runs", "status") == [{"status": "incomplete"}]
        shown = run_cli(["-w", str(tiny_ws), "runs", "show", run_id])
        assert f"{lost}: given up" in shown.stdout
        # Nothing waits any more: collecting again reads nothing, and the run resumes with only the lost one.
        before = len(server.log)
        again = collect(tiny_ws, run_id)
        assert again.exit_code == 1 and len(server.log) == before
        live = live_run(tiny_ws, server.url)
        assert live.exit_code == 0, live.stderr
        assert json.loads(live.stdout)["sent"] == 1 and server.calls("POST", "/chat/completions") == 1
    assert table_rows(tiny_ws, "runs", "status") == [{"status": "done"}]


def test_final_says_when_the_provider_refuses_to_cancel_a_running_batch(tiny_ws):
    with BatchServer(scripted_answer, polls=50) as server:
        sub = batch_run(tiny_ws, server.url)
        server.refuse_cancel = True
        final = collect(tiny_ws, sub["run_id"], "--final")
        assert final.exit_code == 1
        [line] = [line for line in final.stderr.splitlines() if f"batch {sub['batch_ids'][0]} given up" in line]
        assert "cancelling it failed" in line and "cancelling batches is not allowed" in line
        assert "it may still run and be billed; cancel it in the provider's console" in line
        assert all(r["error"] == "transport" for r in replies(tiny_ws, sub["run_id"]))
        assert len(replies(tiny_ws, sub["run_id"])) == 3


def test_final_gives_up_on_batches_of_a_server_that_cannot_be_reached_and_says_they_may_still_run(
        tiny_ws, monkeypatch):
    import cfkit.backends.openai_batch as wire

    monkeypatch.setattr(wire, "ATTEMPTS", 1)
    with BatchServer(scripted_answer, polls=50) as server:
        sub = batch_run(tiny_ws, server.url)
    # The server is gone: a plain collect fails and keeps waiting; --final gives up and says what that means.
    plain = collect(tiny_ws, sub["run_id"])
    assert plain.exit_code != 0 and f"asking about batch {sub['batch_ids'][0]}" in plain.stderr
    assert f"run 'cfkit probe collect {sub['run_id']}' again later, or, if the batch will never" in plain.stderr
    assert table_rows(tiny_ws, "runs", "status") == [{"status": "waiting"}]
    final = collect(tiny_ws, sub["run_id"], "--final")
    assert final.exit_code == 1
    [line] = [line for line in final.stderr.splitlines() if f"batch {sub['batch_ids'][0]} given up" in line]
    assert "could not be asked about, nor cancelled" in line and "it may still run and be billed" in line
    assert len(replies(tiny_ws, sub["run_id"])) == 3
    assert table_rows(tiny_ws, "runs", "status") == [{"status": "incomplete"}]
