"""Adaptive concurrency: a run backs off when the server says it is overloaded, honours Retry-After, and
recovers. Unit checks of the controller, then a real server on 127.0.0.1 that admits three requests at once."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from cfkit.probe import probe_suite
from cfkit.probe.pacing import COOLDOWN_S, Pacer
from cfkit.store import Store, runs
from cfkit.workspace import load_workspace
from support.chat_api_server import ChatServer, Scripted, answer_json, completion
from support.probe_runs import many_cases


def test_overload_halves_the_level_once_per_cooldown_and_successes_raise_it_by_one():
    async def go():
        pacer = Pacer(8)
        pacer.overloaded()
        pacer.overloaded()  # the same burst: counted once
        assert (pacer.level, pacer.lowest, pacer.overloads) == (4, 4, 2)
        for _ in range(4):  # a run of successes as long as the level: one more
            await pacer.acquire()
            await pacer.release(ok=True)
        assert pacer.level == 5
        pacer._decreased_at -= COOLDOWN_S  # a later burst
        pacer.overloaded()
        assert pacer.level == 2
        for _ in range(60):
            await pacer.acquire()
            await pacer.release(ok=True)
        assert pacer.level == 8  # back up to --concurrency, never past it

    asyncio.run(go())


def test_no_request_starts_before_the_retry_after_the_server_named():
    async def go():
        pacer = Pacer(4)
        pacer.overloaded(0.3)
        started = time.monotonic()
        await pacer.acquire()
        return time.monotonic() - started

    assert asyncio.run(go()) >= 0.29


def test_the_level_bounds_the_requests_in_flight():
    async def go():
        pacer = Pacer(6)
        pacer.overloaded()  # 3
        in_flight = most = 0

        async def one():
            nonlocal in_flight, most
            await pacer.acquire()
            in_flight += 1
            most = max(most, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1
            await pacer.release(ok=False)  # no recovery during the test

        await asyncio.gather(*(one() for _ in range(20)))
        return most

    assert asyncio.run(go()) == 3


class Crowded:
    """A script for :class:`ChatServer`: ``capacity`` requests are served at once, the rest answered 429."""

    def __init__(self, capacity: int, retry_after: float, latency: float):
        self.capacity, self.retry_after, self.latency = capacity, retry_after, latency
        self.lock = threading.Lock()
        self.in_flight = self.most = self.refused = self.served = 0

    def __call__(self, body, n) -> Scripted:
        with self.lock:
            admitted = self.in_flight < self.capacity
            self.in_flight += admitted
            self.most = max(self.most, self.in_flight)
            self.refused += not admitted
        if not admitted:
            return Scripted(429, {"error": {"message": "slow down", "type": "rate_limit_error"}},
                            {"retry-after": str(self.retry_after)})
        time.sleep(self.latency)  # held while it is served: the next request sees it in flight
        with self.lock:
            self.in_flight -= 1
            self.served += 1
        return Scripted(body=completion(answer_json("A")))


def test_a_run_against_an_overloaded_server_backs_off_and_every_request_is_answered(tmp_path):
    ws = load_workspace(many_cases(tmp_path / "ws", 48))
    server = Crowded(capacity=3, retry_after=0.2, latency=0.05)
    levels = []
    with ChatServer(server) as chat, Store(ws.db_path) as store:
        summary = probe_suite(ws, store, "openai:test-model", "contextcanvas", concurrency=12,
                              options={"base_url": chat.url, "max_retries": 12, "backoff": 0.01},
                              on_progress=lambda p: levels.append(p.concurrency))
        notes = runs.get_run(store, summary.run_id).notes["backend_notes"]
    assert summary.status == "done" and server.served == 48
    assert levels[1] == 12 and min(l for l in levels if l) <= 6  # shown as it changed: the progress bar reads it
    # Twelve at once against room for three would be refused about three times in four for the whole run
    # (about 144 refusals for 48 answers); backing off keeps it to about one per answer (a loaded machine
    # adds a few), so half of that is the bound.
    assert server.refused < 72, server.refused
    assert any("overloaded" in n and "of 12" in n for n in notes)


def test_waiters_are_served_first_come_first_served_and_a_cancelled_one_does_not_stall_the_line():
    async def go():
        pacer = Pacer(1)
        await pacer.acquire()  # the one slot is taken
        order = []

        async def waiter(name):
            await pacer.acquire()
            order.append(name)
            await pacer.release(ok=True)

        tasks = [asyncio.create_task(waiter(n)) for n in ("a", "b", "c", "d")]
        await asyncio.sleep(0.01)
        tasks[1].cancel()  # b gives up its place
        await asyncio.sleep(0.01)
        await pacer.release(ok=True)
        await asyncio.gather(*tasks, return_exceptions=True)
        return order, pacer.in_flight

    assert asyncio.run(go()) == (["a", "c", "d"], 0)


def test_a_rate_spaces_the_starts_for_every_worker_together():
    async def go():
        pacer = Pacer(8, rate=50)
        starts = []

        async def one():
            await pacer.acquire()
            starts.append(time.monotonic())
            await pacer.release(ok=True)

        await asyncio.gather(*(one() for _ in range(11)))
        return starts

    starts = sorted(asyncio.run(go()))
    assert starts[-1] - starts[0] >= 10 / 50 * 0.95  # 11 starts at 50 a second: 10 gaps of 20 ms
    assert min(b - a for a, b in zip(starts, starts[1:])) >= 0.02 * 0.8
