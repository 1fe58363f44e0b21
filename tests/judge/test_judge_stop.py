"""A judge stopped by an error that ends the whole invocation (a key refused, a quota spent, a server gone, Ctrl-C)
says what the invocation spent and kept, on stderr and in --json, exits non-zero, and keeps in the store what was
paid: the replies read and the attempts of the request it ended, so that the next invocation's totals include them.
Before, 'audit prelabel' and 'edits screen' printed the error line alone (no cost line, no JSON), and the attempts
the stopping request had given up once sent were counted nowhere."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import audit_workspace as aw
from support.chat_api_server import ChatServer, Scripted, completion, error_body
from support.hostile_http_server import HostileServer, answer, hang_up
from support.workspace import run_cli

JUDGE = "openai:judge-model"
#: 100 prompt and 20 completion tokens a reply (the loopback server's usage) at $1,000 a million: $0.12 a reply.
PRICES = ("-o", "price_in=1000", "-o", "price_out=1000")
KEY = {"OPENAI_API_KEY": "sk-x"}
REPO = Path(__file__).resolve().parents[2]


def cli(ws, *args, **kw):
    return run_cli(["-w", str(ws), *args], **kw)


def said(result) -> str:
    return " ".join(result.stderr.split())


@pytest.fixture()
def audited(tmp_path):
    ws = aw.build(tmp_path / "ws")
    run_ids = aw.run_models(ws)
    assert cli(ws, "audit", "plan", "--run", run_ids[aw.GPT], "--run", run_ids[aw.QWEN]).exit_code == 0
    items = len(json.loads(cli(ws, "audit", "items", "--as", "alice", "--json").stdout))
    return ws, 2 * items  # two questions an item


def _answers_then(k: int, status: int, body: dict, *, slow: tuple[int, ...] = ()):
    """Requests 1..k answered "Yes"; those in ``slow`` after 1.5 s (past a 0.5 s timeout: given up once sent, a
    provider may bill them); every request after k gets ``status`` with ``body``."""
    def script(request: dict, n: int) -> Scripted:
        if n in slow:
            return Scripted(body=completion("Yes", model=request["model"]), delay=1.5)
        if n <= k:
            return Scripted(body=completion("Yes", model=request["model"]))
        return Scripted(status=status, body=body)
    return script


def _status(ws) -> dict:
    (judge,) = json.loads(cli(ws, "audit", "status", "--json").stdout)["judges"]
    return judge


def test_prelabel_stopped_by_a_refused_key_says_and_keeps_what_it_spent(audited):
    # Three labels paid for, then request 4 timed out once sent (a provider may bill it) and its retry met a 401.
    ws, labels = audited
    with ChatServer(_answers_then(3, 401, error_body("Incorrect API key provided", kind="invalid_api_key"),
                                  slow=(4,))) as server:
        stopped = cli(ws, "audit", "prelabel", "--judge", JUDGE, "-o", f"base_url={server.url}", "-o", "timeout=0.5",
                      "-o", "max_retries=1", "-o", "api_key_env=JUDGE_KEY", *PRICES, "--json",
                      env=KEY | {"JUDGE_KEY": "wrong"})
        assert server.count == 5
    assert stopped.exit_code == 2, stopped.stderr  # the key: the user's to fix
    data = json.loads(stopped.stdout)
    assert (data["asked"], data["replies"], data["abandoned_attempts"], data["not_asked"]) == (3, 3, 1, labels - 3)
    assert data["cost_usd"] == pytest.approx(0.36) and data["abandoned_usd"] == pytest.approx(0.12)
    assert "refused the key (HTTP 401: Incorrect API key provided)" in data["stopped"]
    text = said(stopped)
    assert (f"3 answers stored now, 0 already stored, 0 without a valid Yes/No, 0 failed, {labels - 3} not asked "
            "(the judge stopped); 3 replies, cost $0.36; 1 abandoned attempt may be billed on top: up to ~$0.12."
            ) in text
    assert text.endswith("Check the key in its environment variable, or name another variable with -o api_key_env=NAME.")  # the error, last (the
    # judge commands have no --api-key-env: the hint names what this command takes)
    assert text.count("error:") == 1 and "Traceback" not in text
    # What was paid is in the store: the three labels and the abandoned attempt (a pending row, no label).
    judge = _status(ws)
    assert (judge["labels"], judge["replies"], judge["abandoned"]) == (3, 3, 1)
    assert judge["cost_usd"] == pytest.approx(0.36)

    with ChatServer(lambda body, n: Scripted(body=completion("No", model=body["model"]))) as server:
        again = cli(ws, "audit", "prelabel", "--judge", JUDGE, "-o", f"base_url={server.url}", *PRICES, env=KEY)
        assert again.exit_code == 0, again.stderr and server.count == labels - 3  # only what was not asked
    judge = _status(ws)  # the next invocation's totals include what the stopped one paid
    assert (judge["labels"], judge["replies"], judge["abandoned"]) == (labels, labels, 1)
    assert judge["cost_usd"] == pytest.approx(labels * 0.12)


def test_prelabel_stops_when_the_quota_is_spent_and_says_what_it_spent(audited):
    # OpenAI answers 429 insufficient_quota to every request once the quota is spent; the judge went on asking
    # (each request after its retries, as an overload) until five failed in a row, and said a server overloaded.
    # Now the first refusal stops it, asked once, with the line that says the account cannot pay.
    ws, labels = audited
    quota = error_body("You exceeded your current quota, please check your plan and billing details.",
                       kind="insufficient_quota")
    with ChatServer(_answers_then(2, 429, quota)) as server:
        stopped = cli(ws, "audit", "prelabel", "--judge", JUDGE, "-o", f"base_url={server.url}", "-o", "max_retries=2",
                      "-o", "backoff=0.01", *PRICES, "--json", env=KEY)
        asked = server.count
    assert asked == 2 + 1  # the refused request asked once: not retried
    assert stopped.exit_code == 2, stopped.stderr  # as a refused key: the account is the user's to fix
    data = json.loads(stopped.stdout)
    assert (data["asked"], data["replies"], len(data["failed"]), data["not_asked"]) == (2, 2, 0, labels - 2)
    assert data["cost_usd"] == pytest.approx(0.24)
    assert "refused the request for quota or billing (HTTP 429: You exceeded your current quota" in data["stopped"]
    text = said(stopped)
    assert f"0 failed, {labels - 2} not asked (the judge stopped); 2 replies, cost $0.24." in text
    assert "then run the same command again: what was answered is kept, and only the rest is asked." in text
    assert _status(ws)["cost_usd"] == pytest.approx(0.24)
    # Credit added: the same command asks only the questions not answered.
    with ChatServer(_answers_then(labels, 429, quota)) as server:
        again = cli(ws, "audit", "prelabel", "--judge", JUDGE, "-o", f"base_url={server.url}", *PRICES, "--json",
                    env=KEY)
        assert server.count == labels - 2
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout)["already_stored"] == 2


def test_prelabel_stops_when_the_server_goes_away_and_keeps_what_it_paid(audited):
    # Two answers, then every connection dropped without a word (attempts sent, which a provider may bill).
    ws, labels = audited
    served = []

    def choose(body: bytes):
        served.append(body)
        return answer if len(served) <= 2 else hang_up

    with HostileServer(choose) as server:
        stopped = cli(ws, "audit", "prelabel", "--judge", JUDGE, "-o", f"base_url={server.url}", "-o", "max_retries=0",
                      "--json", env=KEY)
        asked = server.count
    assert asked == 2 + 3 < labels and stopped.exit_code == 1, stopped.stderr
    data = json.loads(stopped.stdout)
    assert (data["asked"], data["replies"], data["not_asked"]) == (2, 2, labels - asked)
    assert "3 requests in a row could not reach" in data["stopped"]
    assert "error: the judge stopped asking: 3 requests in a row could not reach" in said(stopped)
    assert "-o base_url=URL is right" in data["stopped"] and "--base-url" not in data["stopped"]  # what it takes
    judge = _status(ws)
    assert (judge["labels"], judge["replies"], judge["abandoned"]) == (2, 2, data["abandoned_attempts"])


@pytest.fixture()
def edited(mini_ws):
    assert run_cli(["-w", str(mini_ws), "edit", "EX01", "--engine", "classical"]).exit_code == 0
    return mini_ws


def test_edits_screen_stopped_by_a_refused_key_says_and_keeps_what_it_spent(edited):
    # The first two questions answered as a good edit's are (the cue in the original: Yes; in the edit: No), then
    # the third timed out once sent and its retry met a 401.
    ws = edited

    def script(body: dict, n: int) -> Scripted:
        if n <= 3:
            return Scripted(body=completion("Yes" if n == 1 else "No"), delay=1.5 if n == 3 else 0.0)
        return Scripted(status=401, body=error_body("Incorrect API key provided", kind="invalid_api_key"))

    with ChatServer(script) as server:
        stopped = run_cli(["-w", str(ws), "edits", "screen", "EX01", "--judge", JUDGE, "-o", f"base_url={server.url}",
                           "-o", "timeout=0.5", "-o", "max_retries=1", *PRICES, "--json"], env=KEY)
    assert stopped.exit_code == 2, stopped.stderr
    data = json.loads(stopped.stdout)
    (edit,) = data["edits"]
    assert edit["state"] == "incomplete" and len(edit["answers"]) == 2  # never "clear" on two answers of six
    assert sum("not asked (the judge stopped)" in f for f in edit["failed"]) == 4
    run = data["this_run"]
    assert (run["replies"], run["abandoned_attempts"], run["not_asked"]) == (2, 1, 4)
    assert run["cost_usd"] == pytest.approx(0.24) and "wants a key (HTTP 401" in run["stopped"]  # none was sent
    stored = data["stored"]  # the abandoned attempt of the stopped request is kept, in a pending row
    assert (stored["labels"], stored["replies"], stored["abandoned"]) == (2, 2, 1)
    text = said(stopped)
    assert ("this run: 2 replies, cost $0.24; 1 abandoned attempt may be billed on top: up to ~$0.12, 4 questions not "
            f"asked (the judge stopped); judge {JUDGE}'s stored answers about these edits: 2 answers from 2 replies, "
            "cost $0.24") in text
    assert text.endswith("none was sent to it; name the variable holding its key with -o api_key_env=NAME.")

    with ChatServer(lambda body, n: Scripted(body=completion("No."))) as server:
        again = run_cli(["-w", str(ws), "edits", "screen", "EX01", "--judge", JUDGE, "-o", f"base_url={server.url}",
                         *PRICES, "--json"], env=KEY)
        assert server.count == 4  # only what was not asked
    assert again.exit_code == 0, again.stderr
    stored = json.loads(again.stdout)["stored"]  # what the stopped invocation paid is in the next one's total
    assert (stored["labels"], stored["replies"], stored["abandoned"]) == (6, 6, 1)
    assert stored["cost_usd"] == pytest.approx(0.72)


def _as_in_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(("stop", "status"), [("SIGINT", 130), ("SIGTERM", 143)])  # Ctrl-C, and a job scheduler
def test_prelabel_interrupted_says_what_it_spent_and_keeps_it(audited, stop, status):
    ws, labels = audited

    def script(body: dict, n: int) -> Scripted:  # the fourth request hangs until the signal comes
        return Scripted(body=completion("Yes", model=body["model"]), delay=20.0 if n == 4 else 0.0)

    with ChatServer(script) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cfkit", "-w", str(ws), "audit", "prelabel", "--judge", JUDGE, "-o",
             f"base_url={server.url}", *PRICES, "--json"],
            env=os.environ | {"PYTHONPATH": str(REPO), **KEY}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, preexec_fn=_as_in_a_terminal)
        deadline = time.monotonic() + 60
        while server.count < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, "prelabel ended before it could be stopped"
        proc.send_signal(getattr(signal, stop))
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == status, stderr
    data = json.loads(stdout)
    assert (data["asked"], data["replies"], data["stopped"], data["not_asked"]) == (3, 3, "interrupted", labels - 3)
    # The fourth request was sent when the signal came: a provider may bill it, so it counts as an abandoned attempt.
    assert data["abandoned_attempts"] == 1 and data["abandoned_usd"] == pytest.approx(0.12)
    text = " ".join(stderr.split())
    assert (f"{labels - 3} not asked (the judge stopped); 3 replies, cost $0.36; 1 abandoned attempt may be billed "
            "on top: up to ~$0.12.") in text
    assert "interrupted; everything saved before the interruption is kept" in text and "Traceback" not in text
    judge = _status(ws)  # kept for the next invocation's totals, as a timed-out attempt is
    assert (judge["labels"], judge["replies"], judge["abandoned"]) == (3, 3, 1)
    assert judge["cost_usd"] == pytest.approx(0.36)


@pytest.mark.parametrize(("stop", "status", "fourth", "requests", "abandoned"), [
    ("SIGINT", 130, Scripted(body=[]), 5, 2),  # thrown away (a whole response), then the retry out: both may be billed
    ("SIGTERM", 143, Scripted(body=[]), 5, 2),
    ("SIGTERM", 143, Scripted(503, error_body("busy", kind="server_error"), headers={"retry-after": "30"}), 4, 0),
], ids=["ctrl-c-retry-out", "sigterm-retry-out", "sigterm-waiting-to-retry"])
def test_prelabel_interrupted_while_retrying_counts_what_the_request_had_sent(audited, stop, status, fourth, requests,
                                                                            abandoned):
    """The fourth request's first attempt is thrown away and its retry hangs, or it waits 30 s to retry after a 503
    (nothing out). Before, the stop counted one abandoned attempt either way."""
    ws, labels = audited

    def script(body: dict, n: int) -> Scripted:
        if n == 4:
            return fourth
        return Scripted(body=completion("Yes", model=body["model"]), delay=20.0 if n > 4 else 0.0)

    with ChatServer(script) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cfkit", "-w", str(ws), "audit", "prelabel", "--judge", JUDGE, "-o",
             f"base_url={server.url}", "-o", "backoff=0.01", *PRICES, "--json"],
            env=os.environ | {"PYTHONPATH": str(REPO), **KEY}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, preexec_fn=_as_in_a_terminal)
        deadline = time.monotonic() + 60
        while server.count < requests and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)
        assert proc.poll() is None, "prelabel ended before it could be stopped"
        proc.send_signal(getattr(signal, stop))
        stdout, stderr = proc.communicate(timeout=30)
        assert server.count == requests, stderr
    assert proc.returncode == status, stderr
    data = json.loads(stdout)
    assert (data["asked"], data["replies"], data["stopped"], data["not_asked"]) == (3, 3, "interrupted", labels - 3)
    assert data["abandoned_attempts"] == abandoned, data
    assert _status(ws)["abandoned"] == abandoned  # kept for the next invocation's totals
