"""``cfkit edit`` with the images API stopped part-way: a key refused, an account without credit, Ctrl-C or
SIGTERM with a request in flight. Every edit received stays saved, one line says why it stopped (exit 2, 130,
143), and a line says what this invocation's calls came to, a call in flight counted as one a service may bill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("openai", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from cfkit.edit_session import held_stop
from support.images_api_server import ImagesAPI, serve
from support.store_sql import table_rows
from support.workspace import REPO, run_cli

NO_CREDIT = (429, {"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                             "type": "insufficient_quota", "code": "insufficient_quota"}})
HARD_LIMIT = (400, {"error": {"message": "Billing hard limit has been reached", "type": "invalid_request_error",
                              "code": "billing_hard_limit_reached"}})
BAD_KEY = (401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}})
RATE_LIMIT = (429, {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}})


@pytest.fixture
def api(monkeypatch):
    state = ImagesAPI()
    url, server = serve(state)
    state.url = url
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def three(tiny_ws: Path) -> Path:
    """TX01, TX02, TX03: the same edit of case T001, with the openai engine (no retry waits)."""
    spec = (tiny_ws / "interventions" / "TX01.yaml").read_text()
    for spec_id in ("TX02", "TX03"):
        (tiny_ws / "interventions" / f"{spec_id}.yaml").write_text(spec.replace("id: TX01", f"id: {spec_id}"))
    config = tiny_ws / "cfkit.toml"
    config.write_text(config.read_text() + '\n[edit]\nengine = "openai"\n\n[edit.engines.openai]\nbackoff = 0\n')
    return tiny_ws


def _rows(ws: Path) -> list[tuple]:
    if not (ws / ".cfkit").exists():
        return []
    return [tuple(r.values()) for r in table_rows(ws, "edits", "spec_id, status", order_by="id")]


@pytest.mark.parametrize("reply", [NO_CREDIT, HARD_LIMIT], ids=["429-insufficient_quota", "400-billing_hard_limit"])
def test_an_account_without_credit_stops_the_batch_at_once_and_keeps_what_was_made(api, three, reply):
    api.script = [None, reply]
    result = run_cli(["edit", "TX01", "TX02", "TX03", "-w", str(three)])
    assert result.exit_code == 2, result.output
    assert len(api.requests) == 2  # not retried, and TX03 not asked
    assert _rows(three) == [("TX01", "ok")]
    assert "[1/3] TX01 made #1" in result.stderr
    assert "refused the request for quota or billing" in result.stderr
    assert "1 made, 1 failed, 1 not asked" in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "Not edited: TX03; 'cfkit edit --pending' edits it (and any other spec" in last
    assert ("spent: 2 calls to openai (1 answered: 1 image, 4,050 tokens reported; 1 ended with an error); no price "
            "in dollars is known for them") in " ".join(result.stderr.split())


def test_a_rate_limit_is_still_retried(api, three):
    api.script = [RATE_LIMIT, None]
    result = run_cli(["edit", "TX01", "-w", str(three)])
    assert result.exit_code == 0, result.output
    assert len(api.requests) == 2


def test_a_refused_key_stops_the_batch_at_its_first_spec(api, three):
    api.script = [BAD_KEY, BAD_KEY, BAD_KEY]
    result = run_cli(["edit", "--all", "-w", str(three)])
    assert result.exit_code == 2, result.output
    assert len(api.requests) == 1  # not the same refusal three times
    # no key went (none is set); what cfkit edit takes for one, alone or in --engine auto's chain (where a bare
    # -o api_key_env is refused)
    assert "wants a key (HTTP 401" in result.stderr and "none was sent to it; name the variable holding its key " \
        "with -o openai.api_key_env=NAME." in " ".join(result.stderr.split())
    assert "1 failed, 2 not asked" in result.stderr
    assert "Not edited: TX02, TX03; 'cfkit edit --pending' edits them (and any" in result.stderr.strip().splitlines()[-1]


def test_one_spec_that_fails_does_not_stop_the_others(api, three):
    invalid = (400, {"error": {"message": "Invalid prompt", "code": "invalid_value"}})
    api.script = [None, invalid, None]
    result = run_cli(["edit", "--all", "-w", str(three)])
    assert result.exit_code == 1, result.output
    assert len(api.requests) == 3
    assert [spec for spec, status in _rows(three) if status == "ok"] == ["TX01", "TX03"]


def test_one_spec_refused_for_credit_exits_2_and_says_what_it_spent(api, three):
    api.script = [NO_CREDIT]
    result = run_cli(["edit", "TX01", "-w", str(three)])
    assert result.exit_code == 2, result.output
    assert len(api.requests) == 1
    assert ("spent: 1 call to openai (0 answered; 1 ended with an error); no price in dollars is known for it"
            in " ".join(result.stderr.split()))
    assert result.stderr.strip().splitlines()[-1].startswith("error: openai:")


# ── Ctrl-C and SIGTERM, real signals to a real process ───────────────────────


def _start(ws: Path, url: str, args: list[str]) -> subprocess.Popen:
    env = dict(os.environ, OPENAI_BASE_URL=url, PYTHONPATH=str(REPO), TORCH_HOME=str(ws / "no-torch"))
    env.pop("OPENAI_API_KEY", None)
    return subprocess.Popen([sys.executable, "-m", "cfkit", "edit", *args, "-w", str(ws)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _stop_when(proc: subprocess.Popen, api: ImagesAPI, requests: int, sig: int) -> tuple[int, str, str]:
    deadline = time.monotonic() + 60
    while len(api.requests) < requests:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the request never came"
        time.sleep(0.02)
    time.sleep(0.2)  # the request is read; its reply is not sent
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    return proc.returncode, stdout, stderr


@pytest.mark.parametrize("sig, code, said", [(signal.SIGINT, 130, "interrupted (Ctrl-C)"),
                                             (signal.SIGTERM, 143, "stopped by SIGTERM")], ids=["ctrl-c", "sigterm"])
def test_a_stop_in_flight_keeps_the_edits_made_and_counts_the_call_it_cut_off(api, three, sig, code, said):
    api.script = [None, 30.0]  # TX01 answered, TX02 hangs until the stop
    proc = _start(three, api.url, ["--all"])
    status, stdout, stderr = _stop_when(proc, api, 2, sig)
    assert status == code, stderr
    assert "Traceback" not in stderr
    assert _rows(three) == [("TX01", "ok")]
    assert (three / ".cfkit" / "edits" / "TX01" / "1-composite.png").is_file()
    assert "1 made, 1 interrupted, 1 not asked" in stderr
    assert ("spent: 2 calls to openai (1 answered: 1 image, 4,050 tokens reported; 1 in flight at the stop may be "
            "billed on top: up to ~4,050 tokens)") in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {said}; every edit received is saved (#1).")
    assert "Not edited: TX02, TX03" in last
    assert "TX03" in stdout and "not asked" in stdout  # the summary table still comes


def test_one_spec_stopped_in_flight_says_nothing_was_received_and_what_may_be_billed(api, three):
    api.script = [30.0]
    proc = _start(three, api.url, ["TX01"])
    status, _, stderr = _stop_when(proc, api, 1, signal.SIGTERM)
    assert status == 143, stderr
    assert "spent: 1 call to openai (0 answered; 1 in flight at the stop may be billed on top: no answered call to " \
           "estimate it by)" in stderr
    assert stderr.strip().splitlines()[-1] == ("error: stopped by SIGTERM; no edit was received, nothing was lost. "
                                               "Run 'cfkit edit TX01' to make it.")


@pytest.mark.parametrize("sig, kind", [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, KeyboardInterrupt)])
def test_images_received_are_written_before_a_stop_is_raised(sig, kind):
    written = []
    with pytest.raises(kind) as info:
        with held_stop():
            os.kill(os.getpid(), sig)
            time.sleep(0.05)  # the handler has run by now: without the hold the stop would be raised here
            written.append("image")
    assert written == ["image"]
    assert getattr(info.value, "exit_code", 130) == (143 if sig == signal.SIGTERM else 130)


# ── a stop while the engine retries: every attempt sent is counted ─────────────


def _retrying(ws: Path, *, timeout: float, backoff: float) -> Path:
    config = ws / "cfkit.toml"
    config.write_text(config.read_text().replace("backoff = 0\n", f"backoff = {backoff}\ntimeout = {timeout}\n"))
    return ws


def _stop_after(proc: subprocess.Popen, api: ImagesAPI, requests: int, wait: float, sig: int) -> tuple[int, str]:
    deadline = time.monotonic() + 60
    while len(api.requests) < requests:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the request never came"
        time.sleep(0.02)
    time.sleep(wait)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    return proc.returncode, stderr


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_a_stop_in_flight_after_an_attempt_timed_out_counts_both(api, three, sig, code):
    """The first attempt is given up once sent (timed out), the second is out when the stop comes: both may be
    billed. Before, only the one in flight was counted."""
    api.script = [2.0, 30.0]
    proc = _start(_retrying(three, timeout=1.0, backoff=0), api.url, ["TX01"])
    status, stderr = _stop_after(proc, api, 2, 0.2, sig)
    assert status == code, stderr
    assert ("spent: 1 call to openai (0 answered; 1 abandoned attempt (given up once sent) may be billed on top: no "
            "answered call to estimate them by; 1 in flight at the stop may be billed on top: no answered call to "
            "estimate it by)") in stderr, stderr
    assert _rows(three) == []


def test_a_stop_between_attempts_counts_those_sent_and_none_in_flight(api, three):
    """Stopped while the engine waits to retry: the attempt it gave up once sent may be billed; nothing is in
    flight. Before, the attempt was not counted and an attempt in flight was, that was never sent."""
    api.script = [2.0]
    proc = _start(_retrying(three, timeout=0.3, backoff=30), api.url, ["--all"])
    status, stderr = _stop_after(proc, api, 1, 0.8, signal.SIGTERM)  # 0.3 s to time out, then the 30 s wait
    assert status == 143, stderr
    assert len(api.requests) == 1
    assert ("spent: 1 call to openai (0 answered; 1 stopped between its attempts; 1 abandoned attempt (given up once "
            "sent) may be billed on top: no answered call to estimate them by)") in stderr, stderr
    assert "1 interrupted, 2 not asked" in stderr
