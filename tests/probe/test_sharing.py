"""Two processes on one run share its requests through leases: nothing is sent twice, a killed process's
requests are taken over. Real processes against a real Chat Completions server on 127.0.0.1 that counts."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter

import pytest

from cfkit.probe import plan_suite
from cfkit.probe.runner import run_identity
from cfkit.probe.sharing import SharedQueue, owner_alive
from cfkit.store import Store, leases, runs
from cfkit.store.runs import ReplyFields
from cfkit.workspace import load_workspace
from support.chat_api_server import ChatServer, user_text
from support.counting_backend import Counting
from support.probe_runs import FAST, many_cases, replies, scripted_answer
from support.workspace import REPO


def _probe(ws, url: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "cfkit", "-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s",
         "contextcanvas", "--base-url", url, *FAST, *extra],
        env=os.environ | {"PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_same_run_started_twice_sends_each_request_once(tmp_path):
    n = 60
    ws = many_cases(tmp_path / "ws", n)
    with ChatServer(scripted_answer, latency=0.1) as server:  # 1.5 s of sending each: the two overlap
        procs = [_probe(ws, server.url, "--concurrency", "4", "--json") for _ in range(2)]
        results = [p.communicate(timeout=120) for p in procs]
        asked = Counter(user_text(body) for body in server.requests)
    assert [p.returncode for p in procs] == [0, 0], results
    assert len(asked) == n and set(asked.values()) == {1}  # every request sent, none twice

    summaries = [json.loads(out) for out, _ in results]
    assert {s["run_id"] for s in summaries} == {summaries[0]["run_id"]} and {s["status"] for s in summaries} == {"done"}
    assert sum(s["sent"] for s in summaries) == n and all(s["sent"] > 0 for s in summaries)  # shared
    # Each ends with the whole run stored: what it did not send, the other process answered.
    assert all(s["sent"] + s["elsewhere"] + s["kept"] == n for s in summaries)
    assert len(replies(ws)) == n


@pytest.fixture
def run_setup(tmp_path):
    ws = load_workspace(many_cases(tmp_path / "ws", 6))
    store = Store(ws.db_path)
    plan = plan_suite(ws, "contextcanvas", Counting.capabilities, store=store)
    run_id, keys, _ = run_identity(Counting(), plan)
    runs.open_run(store, run_id, model="counting:test", suite="contextcanvas", options={}, cfkit_version="0",
                  templates_sha256="", n_requests=len(plan.items), notes={})
    yield store, plan, run_id, keys
    store.close()


def _drain(queue: SharedQueue, *, then=None) -> list[str]:
    async def go():
        taken = []
        while (item := await queue.next()) is not None:
            taken.append(item.case.id)
            if then and len(taken) == 5:
                then()
        return taken

    return asyncio.run(asyncio.wait_for(go(), 20))


def _lease(store, run_id, item, owner: str, expires_in: float, state: str = "sending") -> None:
    with store.transaction() as tx:
        leases.take(tx, run_id, [item.key], owner, time.time() + expires_in)
        if state == "failed":
            leases.mark_failed(tx, run_id, [item.key], owner)


def test_a_request_another_live_process_holds_is_waited_for_and_counted_when_it_answers(run_setup):
    store, plan, run_id, keys = run_setup
    held = plan.items[2]
    _lease(store, run_id, held, "elsewhere.example:4242:ab12cd34", expires_in=60)

    def other_process_answers():
        fields = ReplyFields(answer="A", parse="json", error=None, reason=None, confidence=None, detail=None)
        with store.transaction() as tx:
            runs.write_reply(tx, run_id, held.key, cache_key=keys[held.key], raw="A", fields=fields)
            leases.release(tx, run_id, [held.key], "elsewhere.example:4242:ab12cd34")

    queue = SharedQueue(store, run_id, list(plan.items), keys, claim=2)
    taken = _drain(queue, then=other_process_answers)
    assert held.case.id not in taken and len(taken) == 5 and queue.elsewhere == 1


@pytest.mark.parametrize("owner, expires_in", [
    ("elsewhere.example:4242:ab12cd34", -1.0),  # expired: its process stopped renewing it
    (f"{socket.gethostname()}:{2 ** 22 + 17}:ab12cd34", 60.0),  # a process on this machine that no longer runs
])
def test_a_lease_whose_owner_is_gone_is_taken_over(run_setup, owner, expires_in):
    store, plan, run_id, keys = run_setup
    assert not owner_alive(owner) or expires_in < 0
    _lease(store, run_id, plan.items[2], owner, expires_in)
    queue = SharedQueue(store, run_id, list(plan.items), keys, claim=2)
    assert len(_drain(queue)) == 6 and queue.elsewhere == 0
    with store.transaction() as tx:
        assert {l.owner for l in leases.held(tx, run_id, [i.key for i in plan.items]).values()} == {queue.owner}


def test_a_request_another_process_just_failed_is_not_tried_again_at_once(run_setup):
    store, plan, run_id, keys = run_setup
    failed = plan.items[4]
    _lease(store, run_id, failed, f"{socket.gethostname()}:{os.getpid()}:other000", 60, state="failed")
    fields = ReplyFields(answer=None, parse=None, error="transport", reason=None, confidence=None, detail="503")
    with store.transaction() as tx:
        runs.write_reply(tx, run_id, failed.key, cache_key=keys[failed.key], raw=None, fields=fields)
    queue = SharedQueue(store, run_id, list(plan.items), keys, claim=2)
    assert failed.case.id not in _drain(queue) and queue.elsewhere == 1


def test_a_process_sending_a_run_is_seen_between_two_claims_and_not_after_it_closes(run_setup):
    store, plan, run_id, keys = run_setup
    queue = SharedQueue(store, run_id, list(plan.items), keys, claim=2)
    queue.announce()
    taken = _drain(queue)
    fields = ReplyFields(answer="A", parse="json", error=None, reason=None, confidence=None, detail=None)
    with store.transaction() as tx:  # every claimed request answered and its lease given up, as the recorder does
        for item in plan.items:
            runs.write_reply(tx, run_id, item.key, cache_key=keys[item.key], raw="A", fields=fields)
        leases.release(tx, run_id, [i.key for i in plan.items], queue.owner)
        assert leases.held(tx, run_id, [i.key for i in plan.items]) == {}
    assert len(taken) == 6
    assert set(leases.owners(store, run_id)) == {queue.owner}  # 'study status' still sees it sending
    queue.close()
    assert leases.owners(store, run_id) == {}
