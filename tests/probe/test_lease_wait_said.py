"""A run resumed while another machine's process holds leases on some of its requests says, once, what it waits
for: how many requests, whose leases (host, process id), when they expire, and that a gone process's leases are
taken over then. It used to wait up to a minute (the leases' life) with nothing said."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from cfkit.store import Store, leases
from support.chat_api_server import ChatServer, Scripted, error_body
from support.probe_runs import FAST, many_cases, replies, scripted_answer
from support.workspace import run_cli

OTHER = "gpu-node-7.example:4242:99:abcd"  # a process on another machine: its liveness cannot be checked here


def test_waiting_for_another_hosts_leases_is_said_once_with_whose_and_until_when(tmp_path):
    ws = many_cases(tmp_path / "ws", 4)
    with ChatServer(lambda body, n: Scripted(400, error_body("scripted failure"))) as chat:
        command = ["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                   "--base-url", chat.url, *FAST]
        assert run_cli(command).exit_code == 1  # every request failed: the run is there, nothing answered
        stored = replies(ws)
        run_id = stored[0]["run_id"]
        with Store(ws / ".cfkit" / "cfkit.db") as store, store.transaction() as tx:
            leases.take(tx, run_id, [(r["case_id"], r["pair_id"], r["condition"]) for r in stored[:2]], OTHER,
                        time.time() + 1.5)
        chat.script = scripted_answer
        started = time.monotonic()
        result = run_cli(command)
        took = time.monotonic() - started
    assert result.exit_code == 0, result.stderr
    assert took >= 1.0  # it did wait for the other process's leases
    said = [line for line in result.stderr.splitlines() if line.startswith("warning: waiting for")]
    assert len(said) == 1, result.stderr
    (line,) = said
    assert f"2 requests of run {run_id} leased by process 4242 on gpu-node-7.example (cannot be checked from here)" \
        in line
    assert "when the leases expire (in 1 s" in line or "when the leases expire (in 2 s" in line
    assert "If that process is gone, they are taken over then; Ctrl-C stops waiting" in line
    assert all(r["error"] is None for r in replies(ws))
