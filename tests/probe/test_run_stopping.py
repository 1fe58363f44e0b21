"""A run stops early, keeps what it has and says how to go on, when the server is not there or keeps refusing.

Against a port nothing listens on (the README's 'transformers serve' example
with no server started), a server that answers every request "429, come back
in an hour", one that asks for a second's pause for ever, and one that
refuses without saying for how long. Each ends in seconds, with the resume
line; the policy's counts are also checked one by one.
"""

from __future__ import annotations

import json
import socket
import time

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.workspace import run_cli
from support.hostile_http_server import HostileServer, answer, busy, refused, storm
from support.probe_runs import many_cases
from cfkit.probe import stopping
from cfkit.probe.stopping import CONNECTION_LIMIT, OVERLOAD_LIMIT, StopPolicy
from support.store_sql import table_rows

#: Slack for a loaded 2-core machine.
SLACK_S = 4.0


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def probe(ws, url, *extra):
    started = time.perf_counter()
    result = run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                      "--base-url", url, *extra])
    return result, time.perf_counter() - started


def run_status(ws):
    return [(r["status"], r["n_done"]) for r in table_rows(ws, "runs", "status, n_done")]


def test_a_dead_local_port_fails_in_seconds_with_what_to_do(tmp_path):
    ws = many_cases(tmp_path / "ws", 40)
    url = f"http://localhost:{closed_port()}/v1"  # as the README's transformers-serve example, nothing started
    result, elapsed = probe(ws, url)  # default retries and backoff: before, 5 attempts a request
    assert result.exit_code == 1
    assert elapsed < 1 + SLACK_S
    assert f"nothing is listening at {url} (connection refused): start the server" in result.stderr
    assert "resume with: cfkit -w" in result.stderr and "40 not sent" in result.stderr
    assert "Reports leave the run out until it has a reply" in result.stderr  # nothing to count wrong yet
    assert run_status(ws) == [("incomplete", 0)]


def test_a_429_storm_asking_for_an_hour_stops_the_run_at_once(tmp_path):
    ws = many_cases(tmp_path / "ws", 40)
    with HostileServer(lambda body: storm) as server:
        result, elapsed = probe(ws, server.url, "-j", "4")
        sent = server.count
    assert result.exit_code == 1 and elapsed < 2 + SLACK_S, (elapsed, result.stderr)
    assert "asked to wait 3600 s before any more requests (Retry-After)" in result.stderr
    assert "resume with: cfkit -w" in result.stderr
    assert sent <= 4 + 1  # the requests in flight when it said so (and the endpoint check's connection), no more
    assert run_status(ws)[0][0] == "incomplete"


def test_pauses_that_add_up_without_a_reply_stop_the_run_within_the_waiting_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(stopping, "WAIT_BUDGET_S", 3.0)
    ws = many_cases(tmp_path / "ws", 40)
    with HostileServer(lambda body: busy) as server:
        result, elapsed = probe(ws, server.url, "-o", "max_retries=20", "-j", "2")
    assert result.exit_code == 1 and elapsed < 3 + 2 + SLACK_S, (elapsed, result.stderr)
    assert "s of pauses without answering a request in between (more than 3 s)" in result.stderr
    assert "resume with" in result.stderr


def test_refusals_without_a_retry_after_stop_the_run_after_a_few_in_a_row(tmp_path):
    ws = many_cases(tmp_path / "ws", 40)
    with HostileServer(lambda body: refused) as server:
        result, elapsed = probe(ws, server.url, "-o", "max_retries=0", "-j", "1")
        sent = server.count
    assert result.exit_code == 1
    assert f"{OVERLOAD_LIMIT} requests in a row were refused as overloaded" in result.stderr
    assert sent == OVERLOAD_LIMIT  # (the endpoint check's connection sends no request)


def test_a_run_stopped_while_overloaded_does_not_say_the_server_recovered(tmp_path):
    ws = many_cases(tmp_path / "ws", 40)
    with HostileServer(lambda body: refused) as server:
        result, _ = probe(ws, server.url, "-o", "max_retries=0", "-j", "4")
    assert result.exit_code == 1
    assert "requests in flight went down to" in result.stderr
    assert "back up as it recovered" not in result.stderr  # it never answered
    assert "when sending ended" in result.stderr


def test_anthropic_saying_overloaded_request_after_request_stops_the_run_as_a_429_storm_does(tmp_path, monkeypatch):
    """HTTP 529 is Anthropic's "overloaded": before, each request failed after its retries and the next was sent,
    every one of the run's requests tried (minutes of backoff each at the default settings)."""
    pytest.importorskip("anthropic")
    from support.anthropic_api_server import AnthropicServer, Scripted

    monkeypatch.setenv("LOCAL_KEY", "sk-local")
    ws = many_cases(tmp_path / "ws", 40)
    with AnthropicServer(lambda params, n: Scripted(529, "Overloaded", error_type="overloaded_error")) as server:
        result = run_cli(["-w", str(ws), "probe", "run", "-m", "anthropic:claude-test", "-s", "contextcanvas",
                          "-o", f"base_url={server.url}", "-o", "api_key_env=LOCAL_KEY", "-o", "max_retries=0",
                          "-j", "1"])
        sent = len(server.messages)
    assert result.exit_code == 1
    assert f"{OVERLOAD_LIMIT} requests in a row were refused as overloaded by {server.url}" in result.stderr
    assert "resume with: cfkit -w" in result.stderr
    assert sent == OVERLOAD_LIMIT


def test_a_server_that_answers_is_not_stopped_by_its_pauses(tmp_path):
    calls = []

    def choose(body):
        calls.append(1)
        return busy if len(calls) % 2 else answer  # every other request paused for a second, then answered

    ws = many_cases(tmp_path / "ws", 6)
    with HostileServer(choose) as server:
        result, _ = probe(ws, server.url, "-j", "1", "-o", "max_retries=3", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "done"


def test_the_policy_counts_what_comes_in_a_row_and_a_reply_resets_it():
    policy = StopPolicy("http://x/v1")
    for _ in range(CONNECTION_LIMIT - 1):
        policy.failed("ConnectionError from http://x/v1 after 5 attempts: Cannot connect to host x:80")
    policy.answered()
    for _ in range(CONNECTION_LIMIT - 1):
        policy.failed("ConnectionError from http://x/v1 after 5 attempts: Cannot connect to host x:80")
    policy.failed("HTTP 400 from http://x/v1: bad image")  # the server is there: the count starts again
    assert policy.reason is None
    for _ in range(CONNECTION_LIMIT):
        policy.failed("Timeout from http://x/v1 after 5 attempts: no complete response within 120 s")
    assert policy.reason.startswith(f"{CONNECTION_LIMIT} requests in a row could not reach http://x/v1")
    other = StopPolicy("http://x/v1")
    other.overloaded(None)
    other.overloaded(60)
    assert other.reason is None and other.waited_s == pytest.approx(60, abs=0.5)
    other.overloaded(60)  # asked at the same moment: the pauses overlap, not add
    assert other.waited_s == pytest.approx(60, abs=0.5)
    other.overloaded(121)
    assert "asked to wait 121 s" in other.reason


@pytest.mark.parametrize(("stop", "status"), [("SIGINT", 130), ("SIGTERM", 143)])  # Ctrl-C, and a job scheduler
def test_a_stopped_run_keeps_what_arrived_and_is_marked_interrupted(tmp_path, stop, status):
    import signal

    from support.chat_api_server import ChatServer
    from support.probe_runs import _cli_process, scripted_answer

    # 100 requests one at a time take 10 s: room for a loaded machine to be slow to send the signal.
    ws = many_cases(tmp_path / "ws", 100)
    with ChatServer(scripted_answer, latency=0.1) as server:
        proc = _cli_process(ws, server.url, "--concurrency", "1")
        deadline = time.monotonic() + 60
        while server.count < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before it could be stopped"
        proc.send_signal(getattr(signal, stop))
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == status
    assert "interrupted; everything saved before the interruption is kept" in stderr and "Traceback" not in stderr
    listed = json.loads(run_cli(["-w", str(ws), "runs", "list", "--json"]).stdout)
    assert listed[0]["status"] == "interrupted" and 3 <= listed[0]["n_done"] < 100


def test_max_cost_without_prices_is_refused_even_when_the_run_is_complete_already(tmp_path):
    from support.chat_api_server import ChatServer
    from support.probe_runs import scripted_answer

    ws = many_cases(tmp_path / "ws", 3)
    with ChatServer(scripted_answer) as server:
        first, _ = probe(ws, server.url, "--json")
        assert first.exit_code == 0, first.stderr
        again, _ = probe(ws, server.url, "--max-cost", "1")  # complete: before, accepted without a word
    assert again.exit_code == 2 and "--max-cost needs prices" in again.stderr


def test_a_budget_stop_says_what_the_invocation_spent_with_the_requests_in_flight_when_it_stopped(tmp_path):
    """Before, the line said what was spent when the budget refused the next request ($0.60 here), while the
    requests still in flight then were answered and charged: the summary beside it said $0.96."""
    import re

    from support.chat_api_server import ChatServer
    from support.probe_runs import scripted_answer

    def script(body, n):  # 100 + 20 tokens at $1,000 a million: $0.12 a reply; the 3rd to 5th answered late
        reply = scripted_answer(body, n)
        reply.delay = 2.0 if n in (3, 4, 5) else 0.0
        return reply

    ws = many_cases(tmp_path / "ws", 10)
    with ChatServer(script) as server:
        result, _ = probe(ws, server.url, "-j", "4", "-o", "price_in=1000", "-o", "price_out=1000",
                          "--max-cost", "1")
    assert result.exit_code == 1
    spent = re.search(r"would be exceeded \(spent \$([\d.]+) in this invocation\)", result.stderr)
    shown = re.search(r"sent \(0 failed, \$([\d.]+)\)", result.stderr)
    assert spent and shown, result.stderr
    assert spent.group(1) == shown.group(1) == "0.96"


def test_a_server_that_dies_mid_run_stops_it_after_a_few_failures_in_a_row(tmp_path):
    import threading

    ws = many_cases(tmp_path / "ws", 40)
    holder = {}

    def choose(body):
        server = holder["server"]
        if server.count == 4:  # the endpoint check's connection, then three answers: the server goes away
            threading.Thread(target=lambda: (server.tcp.shutdown(), server.tcp.server_close())).start()
        return answer

    with HostileServer(choose) as server:
        holder["server"] = server
        result, elapsed = probe(ws, server.url, "-j", "1", "-o", "max_retries=1", "-o", "backoff=0.01", "--json")
    assert result.exit_code == 1
    assert f"{CONNECTION_LIMIT} requests in a row could not reach" in result.stderr
    summary = json.loads(result.stdout)
    assert summary["sent"] <= 3 + CONNECTION_LIMIT + 1 and summary["missing"] >= 40 - 3 - 1
    assert elapsed < 10 + SLACK_S


def test_a_name_whose_every_address_refuses_is_a_dead_port_too(monkeypatch):
    """'localhost' may resolve to ::1 and 127.0.0.1; when both refuse, asyncio raises one plain OSError."""
    import asyncio

    from cfkit.backends.http import JSONClient

    import errno

    async def both_refuse(*args, **kwargs):
        code = errno.ECONNREFUSED
        raise OSError(f"Multiple exceptions: [Errno {code}] Connect call failed ('::1', 8000, 0, 0), "
                      f"[Errno {code}] Connect call failed ('127.0.0.1', 8000)")

    monkeypatch.setattr(asyncio, "open_connection", both_refuse)
    client = JSONClient("http://localhost:8000/v1", {}, deadline=5)
    assert asyncio.run(client.endpoint_problem("http://localhost:8000/v1")).startswith(
        "nothing is listening at http://localhost:8000/v1 (connection refused)")


@pytest.mark.parametrize(("stop", "status", "as_json"), [("SIGINT", 130, True), ("SIGTERM", 143, False)])
def test_an_interrupted_run_says_what_it_spent_counting_the_requests_in_flight(tmp_path, stop, status, as_json):
    """Before, Ctrl-C or SIGTERM left the error line alone: no summary, no --json, nothing of what was spent, and
    the requests in flight (sent: a provider may bill them) were counted nowhere."""
    import signal

    from support.chat_api_server import ChatServer
    from support.probe_runs import _cli_process, scripted_answer

    def script(body, n):  # 100 + 20 tokens at $1,000 a million: $0.12 a reply; from the 5th on, none comes
        reply = scripted_answer(body, n)
        reply.delay = 30.0 if n > 4 else 0.0
        return reply

    ws = many_cases(tmp_path / "ws", 10)
    with ChatServer(script) as server:
        proc = _cli_process(ws, server.url, "-j", "3", "-o", "price_in=1000", "-o", "price_out=1000",
                            *(["--json"] if as_json else []))
        deadline = time.monotonic() + 60
        while server.count < 7 and time.monotonic() < deadline:  # four answered, three hanging
            time.sleep(0.02)
        time.sleep(0.3)
        assert proc.poll() is None, "the run ended before it could be stopped"
        proc.send_signal(getattr(signal, stop))
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == status, stderr
    text = " ".join(stderr.split())
    assert text.endswith("interrupted; everything saved before the interruption is kept. Run the command again to "
                         "resume.") and "Traceback" not in text
    if as_json:
        summary = json.loads(stdout)
        assert (summary["status"], summary["sent"], summary["abandoned"], summary["missing"]) == ("interrupted", 4, 3, 6)
        assert summary["cost_usd"] == pytest.approx(0.48) and summary["abandoned_usd"] == pytest.approx(0.36)
    else:
        assert ("interrupted: 10 requests; 0 already stored, 0 from cache, 4 sent (0 failed, $0.48; 3 abandoned "
                "attempts may be billed on top: up to ~$0.36)") in text
    run_id = json.loads(stdout)["run_id"] if as_json else stdout.strip()
    shown = " ".join(run_cli(["-w", str(ws), "runs", "show", run_id]).stdout.split())
    assert "3 abandoned attempts may be billed on top: up to ~$0.36" in shown  # kept with the run
