"""A replica left out during a run (it answered 404: restarted on other weights) is asked again while the run sends,
as one left out at start is, and put back in use once it serves the model again: said once while the run goes,
and in the run's notes. It used to stay out for the rest of the run, however soon it came back. One that lists the
model but keeps refusing its requests is asked ever more rarely (each time it is left out again, twice as long)."""

from __future__ import annotations

import json
import threading

from support.chat_api_server import ChatServer, Scripted, error_body, listing
from support.probe_runs import many_cases, replicated, replies, scripted_answer
from support.workspace import run_cli

N = 40


def test_a_replica_left_out_during_the_run_is_put_back_when_it_serves_the_model_again(tmp_path):
    ws = many_cases(tmp_path / "ws", N)
    swapped = threading.Event()  # b is serving other weights: it answers 404 for test-model
    answered_after = []  # b's answers once it served test-model again

    def b_script(body, n):
        if swapped.is_set():
            return Scripted(404, error_body("The model `test-model` does not exist.", kind="NotFoundError"))
        if b.models == listing("test-model") and n > 1 and restored.is_set():
            answered_after.append(n)
        return scripted_answer(body, n)

    restored = threading.Event()

    def a_script(body, n):
        if n == 3:  # b restarted on other weights
            b.models = listing("other-model")
            swapped.set()
        if n == 15:  # … and on these again
            swapped.clear()
            b.models = listing("test-model")
            restored.set()
        return scripted_answer(body, n)

    with ChatServer(a_script, latency=0.03) as a, ChatServer(b_script, latency=0.03) as b:
        result = replicated(ws, [a.url, b.url], "-j", "1", "-o", "replica_recheck=0.1")
    assert result.exit_code == 0, result.stderr
    assert answered_after, "b was never asked again once it served the model again"
    stored = replies(ws)
    assert len(stored) == N and all(r["error"] is None for r in stored)
    lines = result.stderr.splitlines()
    back = [line for line in lines if f"replica {b.url} answers for 'test-model' now" in line]
    assert len(back) == 1 and "left out during the run: it answered HTTP 404" in back[0], result.stderr
    summary = json.loads(result.stdout)
    (note,) = [n for n in summary["notes"] if n.startswith(f"replica {b.url}")]
    assert "was left out during the run (it answered HTTP 404: The model `test-model` does not exist.) and put " \
           "back in use" in note and "asked again every 0.1 s or less often" in note, note
    shown = run_cli(["-w", str(ws), "runs", "show", summary["run_id"], "--json"])
    assert note in json.loads(shown.stdout)["run"]["notes"]["backend_notes"]


def test_a_replica_that_lists_the_model_but_answers_404_for_it_is_asked_ever_more_rarely(tmp_path):
    ws = many_cases(tmp_path / "ws", N)
    refused = []

    def b_script(body, n):
        if n > 1:  # it lists test-model, but answers 404 for it (an adapter it failed to load, say)
            refused.append(n)
            return Scripted(404, error_body("The model `test-model` does not exist.", kind="NotFoundError"))
        return scripted_answer(body, n)

    with ChatServer(scripted_answer, latency=0.03) as a, ChatServer(b_script) as b:
        result = replicated(ws, [a.url, b.url], "-j", "1", "-o", "replica_recheck=0.05")
    assert result.exit_code == 0, result.stderr
    # About 1.2 s of the run after b was left out: every 0.05 s would put it back some 20 times (and a request
    # that met it several times failed); waiting twice as long each time it is left out again, 0.05 + 0.1 + 0.2
    # + 0.4 + 0.8 s, some 5 times.
    assert 2 <= len(refused) <= 8, refused
    stored = replies(ws)
    assert len(stored) == N and all(r["error"] is None for r in stored)
    summary = json.loads(result.stdout)
    (note,) = [n for n in summary["notes"] if n.startswith(f"replica {b.url}")]
    assert "was left out during the run (it answered HTTP 404: The model `test-model` does not exist.) after " \
           "answering 1 request" in note
    assert f"put back in use {len(refused) - 1} time" in note and "left out again each time" in note, note


def test_a_replica_that_refused_the_key_during_the_run_is_not_asked_again(tmp_path):
    """The run's key does not change while it sends, and GET /models often needs none: it would be put back only
    to refuse again."""
    ws = many_cases(tmp_path / "ws", N)
    refused = []

    def b_script(body, n):
        if n > 1:
            refused.append(n)
            return Scripted(403, error_body("Forbidden", kind="permission_error"))
        return scripted_answer(body, n)

    with ChatServer(scripted_answer, latency=0.03) as a, ChatServer(b_script) as b:
        result = replicated(ws, [a.url, b.url], "-j", "1", "-o", "replica_recheck=0.05")
    assert result.exit_code == 0, result.stderr
    assert len(refused) == 1
    summary = json.loads(result.stdout)
    (note,) = [n for n in summary["notes"] if n.startswith(f"replica {b.url}")]
    assert "was left out during the run (it answered HTTP 403: Forbidden) after answering 1 request (not asked " \
           "again: the run's key does not change while it sends)" in note, note
