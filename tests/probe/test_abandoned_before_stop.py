"""Attempts given up once sent count in what a run may have cost also when the run stops on its backend's error.

A request whose first attempt timed out (sent: a provider may bill it) and whose retry met HTTP 401 stopped the run
with the key line alone: the abandoned attempt was dropped from --max-cost's count, from the stored run (`runs
show`, `runs list`, `study status`) and from the stop line. Now each counts it, and the stop line says what this
invocation spent and what the abandoned attempts may add."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.chat_api_server import ChatServer, Scripted, error_body
from support.probe_runs import FAST, many_cases, scripted_answer
from support.workspace import run_cli

#: 100 prompt and 20 completion tokens at $1,000 a million: $0.12 a reply.
PRICES = ["-o", "price_in=1000", "-o", "price_out=1000"]


def answers_two_then_times_out_then_refuses_the_key(body, n):
    if n <= 2:
        return scripted_answer(body, n)
    if n == 3:
        return Scripted(delay=1.0, body={})  # past -o timeout: given up after it was sent
    return Scripted(401, error_body("Incorrect API key provided", kind="invalid_api_key"))


def test_an_attempt_abandoned_before_a_401_stop_counts_in_the_stop_line_the_run_and_study_status(tmp_path):
    ws = many_cases(tmp_path / "ws", 6)
    with ChatServer(answers_two_then_times_out_then_refuses_the_key) as chat:
        result = run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                          "--base-url", chat.url, *FAST, "-o", "timeout=0.3", *PRICES, "--max-cost", "100", "-j", "1"])
        assert chat.count == 4
    assert result.exit_code == 2
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert "wants a key (HTTP 401" in line  # (no key was sent to this server)
    assert "This invocation spent $0.24 before it stopped; 1 abandoned attempt may be billed on top: up to ~$0.12" \
        in line
    [listed] = json.loads(run_cli(["-w", str(ws), "runs", "list", "--json"]).stdout)
    shown = run_cli(["-w", str(ws), "runs", "show", listed["id"]]).stdout
    assert "$0.24; 1 abandoned attempt may be billed on top: up to ~$0.12" in " ".join(shown.split())
    record = json.loads(run_cli(["-w", str(ws), "runs", "show", listed["id"], "--json"]).stdout)["run"]
    assert record["notes"]["abandoned_attempts"] == 1

    # The same run, as a study sees it.
    study = ws / "s.toml"
    study.write_text(f"[models.m]\nmodel='openai:test-model'\nendpoint='{chat.url}'\n"
                     "options={price_in=1000, price_out=1000, max_retries=2, backoff=0.01, timeout=0.3}\n"
                     "[suites.contextcanvas]\n")
    status = run_cli(["-w", str(ws), "study", "status", str(study)])
    row = next(x for x in status.stdout.splitlines() if listed["id"] in x)
    assert "$0.24 + up to ~$0.12 abandoned" in row, row
    [state] = json.loads(run_cli(["-w", str(ws), "study", "status", str(study), "--json"]).stdout)
    assert (state["run_id"], state["abandoned_attempts"], state["abandoned_usd"]) == (listed["id"], 1,
                                                                                  pytest.approx(0.12))
