"""Adaptive concurrency: a run backs off when the server says it is overloaded, honours Retry-After, and
recovers. Unit checks of the controller, then a real server on 127.0.0.1 that admits three requests at once."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from chat_api_server import answer_json, completion
from test_probe import many_cases
from cfkit.probe import probe_suite
from cfkit.probe.pacing import COOLDOWN_S, Pacer
from cfkit.store import Store, runs
from cfkit.workspace import load_workspace


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
    """A Chat Completions server that serves ``capacity`` requests at once and answers 429 to the rest."""

    def __init__(self, capacity: int, retry_after: float, latency: float):
        self.capacity, self.lock = capacity, threading.Lock()
        self.in_flight = self.most = self.refused = self.served = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers["content-length"]))
                with server.lock:
                    admitted = server.in_flight < server.capacity
                    server.in_flight += admitted
                    server.most = max(server.most, server.in_flight)
                    server.refused += not admitted
                if admitted:
                    time.sleep(latency)
                    status, body, headers = 200, completion(answer_json("A")), {}
                    with server.lock:
                        server.in_flight -= 1
                        server.served += 1
                else:
                    status, body = 429, {"error": {"message": "slow down", "type": "rate_limit_error"}}
                    headers = {"retry-after": str(retry_after)}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_run_against_an_overloaded_server_backs_off_and_every_request_is_answered(tmp_path):
    ws = load_workspace(many_cases(tmp_path / "ws", 48))
    server = Crowded(capacity=3, retry_after=0.2, latency=0.05)
    levels = []
    try:
        with Store(ws.db_path) as store:
            summary = probe_suite(ws, store, "openai:test-model", "contextcanvas", concurrency=12,
                                  options={"base_url": server.url, "max_retries": 12, "backoff": 0.01},
                                  on_progress=lambda p: levels.append(p.concurrency))
            notes = runs.get_run(store, summary.run_id).notes["backend_notes"]
    finally:
        server.close()
    assert summary.status == "done" and server.served == 48
    assert levels[1] == 12 and min(l for l in levels if l) <= 6  # shown as it changed: the progress bar reads it
    # Twelve at once against room for three would be refused about three times in four for the whole run
    # (about 144 refusals for 48 answers); backing off keeps it to about one per answer (a loaded machine
    # adds a few), so half of that is the bound.
    assert server.refused < 72, server.refused
    assert any("overloaded" in n and "of 12" in n for n in notes)
