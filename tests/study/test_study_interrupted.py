"""A study stopped by Ctrl-C or SIGTERM while requests hang says what this invocation spent, the requests then in
flight counted as abandoned attempts a provider may bill (before, they were counted nowhere), and exits 130 after
Ctrl-C, 143 after SIGTERM (before, 130 after either)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.chat_api_server import ChatServer, first_option, listing
from support.probe_runs import many_cases
from support.workspace import REPO

pytestmark = pytest.mark.timeout(120)


def _answers_then_hangs(body, n):
    """100 prompt and 20 completion tokens at $1,000 a million: $0.12 a reply; from the fifth request on, none comes."""
    reply = first_option(body, n)
    reply.delay = 30.0 if n > 4 else 0.0
    return reply


def _as_in_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(("stop", "status", "as_json"), [("SIGINT", 130, True), ("SIGTERM", 143, False)])
def test_an_interrupted_study_says_what_it_spent_counting_the_requests_in_flight(tmp_path, stop, status, as_json):
    ws = many_cases(tmp_path / "ws", 10)
    with ChatServer(_answers_then_hangs) as chat:
        chat.models = listing("priced")
        path = ws / "study.toml"
        path.write_text(f"[endpoints.e]\nurl = '{chat.url}'\nconcurrency = 3\n"
                        "[models.p]\nmodel = 'openai:priced'\nendpoint = 'e'\n"
                        "options = { backoff = 0.01, price_in = 1000, price_out = 1000 }\n[suites.contextcanvas]\n")
        proc = subprocess.Popen(
            [sys.executable, "-m", "cfkit", "-w", str(ws), "study", "run", str(path), *(["--json"] if as_json else [])],
            env=os.environ | {"PYTHONPATH": str(REPO), "OPENAI_API_KEY": "sk-test", "COLUMNS": "200"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_as_in_a_terminal)
        deadline = time.monotonic() + 60
        while chat.count < 7 and time.monotonic() < deadline:  # four answered, three hanging
            time.sleep(0.02)
        time.sleep(0.3)
        assert proc.poll() is None, "the study ended before it could be stopped"
        proc.send_signal(getattr(signal, stop))
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == status, stderr
    text = " ".join(stderr.split())
    assert "interrupted; every reply received is saved" in text and "Traceback" not in text
    if as_json:
        (row,) = json.loads(stdout)
        assert row["spent_now_usd"] == pytest.approx(0.48) and row["spent_now_abandoned_attempts"] == 3
        assert row["spent_now_abandoned_usd"] == pytest.approx(0.36)
    else:
        assert "this invocation spent $0.48; 3 abandoned attempts may be billed on top: up to ~$0.36" in text



def _answers_then_retries(body, n):
    """One request at a time: the first is answered ($0.12); the second comes back twice as a body thrown away (a
    whole response the server may have generated), then hangs."""
    from support.chat_api_server import Scripted

    if n in (2, 3):
        return Scripted(body=[])
    reply = first_option(body, n)
    reply.delay = 30.0 if n > 1 else 0.0
    return reply


@pytest.mark.parametrize(("stop", "status"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_an_interrupted_study_counts_what_the_retried_request_had_sent(tmp_path, stop, status):
    """A request stopped with its third attempt out, after two given up once sent: three attempts may be billed.
    Before, one was counted."""
    ws = many_cases(tmp_path / "ws", 3)
    with ChatServer(_answers_then_retries) as chat:
        chat.models = listing("priced")
        path = ws / "study.toml"
        path.write_text(f"[endpoints.e]\nurl = '{chat.url}'\nconcurrency = 1\n"
                        "[models.p]\nmodel = 'openai:priced'\nendpoint = 'e'\n"
                        "options = { backoff = 0.01, max_retries = 5, price_in = 1000, price_out = 1000 }\n"
                        "[suites.contextcanvas]\n")
        proc = subprocess.Popen(
            [sys.executable, "-m", "cfkit", "-w", str(ws), "study", "run", str(path), "--json"],
            env=os.environ | {"PYTHONPATH": str(REPO), "OPENAI_API_KEY": "sk-test", "COLUMNS": "200"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_as_in_a_terminal)
        deadline = time.monotonic() + 60
        while chat.count < 4 and time.monotonic() < deadline:  # 1 answered, 3 attempts of the second
            time.sleep(0.02)
        time.sleep(0.3)
        assert proc.poll() is None, "the study ended before it could be stopped"
        proc.send_signal(getattr(signal, stop))
        stdout, stderr = proc.communicate(timeout=30)
        assert chat.count == 4, stderr
    assert proc.returncode == status, stderr
    (row,) = json.loads(stdout)
    assert row["spent_now_usd"] == pytest.approx(0.12) and row["spent_now_abandoned_attempts"] == 3, row
    assert row["spent_now_abandoned_usd"] == pytest.approx(0.36)
