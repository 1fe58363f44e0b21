"""Ctrl-C or SIGTERM while a request of ``probe run`` is being retried counts what it had sent.

A request whose first attempt came back as a body it threw away (a whole
response the server may have generated and billed) is stopped with its next
attempt out, or while it waits to retry after a 503 asking for 30 s. Before,
the stop counted one abandoned attempt whatever the request had sent: the
attempts given up before were lost, and one was counted in flight while
nothing was out. A real CLI process, a real loopback server, real signals.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.chat_api_server import ChatServer, Scripted, error_body
from support.probe_runs import _as_in_a_terminal, many_cases, scripted_answer
from support.store_sql import table_rows
from support.workspace import REPO, run_cli

THROWN_AWAY = Scripted(body=[])  # a 200 whose body is no completion: read, thrown away, retried
HANGS = 30.0
WAIT_30_S = Scripted(503, error_body("busy", kind="server_error"), headers={"retry-after": "30"})


def _stopped(ws, script, requests: int, sig: int, *extra: str) -> tuple[int, str, str]:
    """Run one request against ``script``, stop the process once ``requests`` came (and a moment passed)."""
    with ChatServer(script) as server:
        env = os.environ | {"PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "cfkit", "-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s",
             "contextcanvas", "--base-url", server.url, "-j", "1", "-o", "backoff=0.01", "-o", "max_retries=5",
             "-o", "price_in=1000", "-o", "price_out=1000", *extra],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_as_in_a_terminal)
        deadline = time.monotonic() + 60
        while server.count < requests:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the requests never came"
            time.sleep(0.02)
        time.sleep(0.3)  # the attempt now out (or the wait now begun) stays so for 30 s
        assert proc.poll() is None, "the run ended before it could be stopped"
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
        assert server.count == requests  # nothing more was sent
    return proc.returncode, stdout, " ".join(stderr.split())


def _script(before: int, then: Scripted | None):
    """``before`` attempts thrown away, then ``then`` (None: an answer that does not come for 30 s)."""
    def script(body, n):
        if n <= before:
            return THROWN_AWAY
        if then is not None:
            return then
        reply = scripted_answer(body, n)
        reply.delay = HANGS
        return reply
    return script


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_a_stop_with_an_attempt_out_counts_those_given_up_before_it(tmp_path, sig, code):
    ws = many_cases(tmp_path / "ws", 1)
    status, stdout, stderr = _stopped(ws, _script(2, None), 3, sig, "--json")
    assert status == code, stderr
    summary = json.loads(stdout)
    assert (summary["status"], summary["abandoned"], summary["missing"]) == ("interrupted", 3, 1), summary
    assert "Traceback" not in stderr


@pytest.mark.parametrize(("before", "said"), [
    (2, "0 sent (0 failed, $0.00; 2 abandoned attempts may be billed on top (no priced reply to estimate them by))"),
    (0, "0 sent (0 failed, $0.00)"),
], ids=["two-given-up", "none-given-up"])
def test_a_stop_while_waiting_to_retry_counts_those_sent_and_none_out(tmp_path, before, said):
    ws = many_cases(tmp_path / "ws", 1)
    status, stdout, stderr = _stopped(ws, _script(before, WAIT_30_S), before + 1, signal.SIGTERM)
    assert status == 143, stderr
    assert f"interrupted: 1 request; 0 already stored, 0 from cache, {said};" in stderr, stderr
    notes = json.loads(table_rows(ws, "runs", "notes")[0]["notes"] or "{}")
    assert notes.get("abandoned_attempts", 0) == before  # kept with the run as said
    # The stored run's cost says the same (before: "cost —", the attempts dropped: no priced reply came).
    (listed,) = json.loads(run_cli(["-w", str(ws), "runs", "list", "--json"]).stdout)
    shown = run_cli(["-w", str(ws), "runs", "show", listed["id"]], env={"COLUMNS": "300"})
    assert f"cost {said.split('failed, ')[1][:-1]}" in " ".join(shown.stdout.split()), shown.stdout
    assert listed["cost"]["shown"] == said.split("failed, ")[1][:-1]
