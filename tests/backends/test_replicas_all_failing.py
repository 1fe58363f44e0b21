"""A replica set whose servers all fail: the run gives up (or stops) at the pace one server would, saying why.

Each failing replica is backed off by the pool (1 s, doubling up to 30 s) so that requests go to the others; with
every replica failing there is no other, and that back-off used to hold each attempt back: a run of 24 requests
over two servers that both answer 500 took about four minutes to fail where one such server fails it in a
second. Now each request's own retries (-o backoff, -o max_retries) pace the set as they pace one server."""

from __future__ import annotations

import json
import sqlite3
import threading
import time

from support.chat_api_server import ChatServer, ChatServerProcess, Scripted, error_body
from support.probe_runs import many_cases, replicated, replies

N = 12


def failing(body, n):
    return Scripted(500, error_body("upstream crashed", kind="server_error"))


def overloaded(body, n):
    return Scripted(503, error_body("overloaded", kind="server_error"))


def test_every_replica_answering_500_fails_each_request_at_one_servers_pace(tmp_path):
    ws = many_cases(tmp_path / "ws", N)
    with ChatServer(failing) as a, ChatServer(failing) as b:
        started = time.monotonic()
        result = replicated(ws, [a.url, b.url])
        took = time.monotonic() - started
        # each request: its first attempt and two retries, as with one server (plus a fail-over to the other
        # replica while one was not yet backed off)
        assert N * 3 <= a.count + b.count <= N * 4 and a.count and b.count
    assert took < 15, f"{took:.1f} s"  # the pool's back-off made this minutes; one server fails it in a second
    assert result.exit_code == 1
    summary = json.loads(result.stdout)
    assert (summary["status"], summary["errors"]) == ("incomplete", N)
    last = result.stderr.strip().splitlines()[-1]
    assert "HTTP 500 from" in last and "after 3 attempts: upstream crashed" in last and "resume with" in last
    for url in (a.url, b.url):
        assert any(f"replica {url} failed" in line for line in result.stderr.splitlines())


def test_every_replica_overloaded_stops_the_run_as_one_overloaded_server_does(tmp_path):
    ws = many_cases(tmp_path / "ws", 24)
    with ChatServer(overloaded) as a, ChatServer(overloaded) as b:
        started = time.monotonic()
        result = replicated(ws, [a.url, b.url], "-j", "1")
        took = time.monotonic() - started
    assert took < 15, f"{took:.1f} s"
    assert result.exit_code == 1
    last = result.stderr.strip().splitlines()[-1]
    assert "HTTP 503" in last and "resume with" in last, last
    assert len(replies(ws)) < 24  # it stopped before sending everything


def test_every_replica_killed_mid_run_stops_the_run_on_connection_failures_within_seconds(tmp_path):
    ws = many_cases(tmp_path / "ws", 40)
    with ChatServerProcess(latency=0.02) as a, ChatServerProcess(latency=0.02) as b:
        def kill_both() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    if len(replies(ws)) >= 3:
                        break
                except sqlite3.OperationalError:  # the store is not made yet
                    pass
                time.sleep(0.01)
            a.kill()
            b.kill()

        killer = threading.Thread(target=kill_both, daemon=True)
        killer.start()
        started = time.monotonic()
        result = replicated(ws, [a.url, b.url], "-j", "1")
        took = time.monotonic() - started
        killer.join(timeout=30)
    assert took < 20, f"{took:.1f} s"
    assert result.exit_code == 1
    last = result.stderr.strip().splitlines()[-1]
    assert "ConnectionError" in last and "resume with" in last, last
    stored = [r for r in replies(ws) if r["error"] is None]
    assert 3 <= len(stored) < 40
