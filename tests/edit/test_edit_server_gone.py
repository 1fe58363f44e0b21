"""``cfkit edit --all`` against an images API server that accepts connections but never answers: the batch stops
after the specs in a row a probe run stops after (cfkit.probe.stopping.StopPolicy), in one line, exit 1, every edit
received kept; attempts given up after they were sent are counted as possibly billed; ``--json`` carries the
spending. (A port nothing listens on stops it before anything is sent: test_edit_no_answer.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("openai", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.images_api_server import ImagesAPI, SilentServer, serve
from support.store_sql import table_rows
from support.workspace import run_cli

SPECS = ("TX01", "TX02", "TX03", "TX04", "TX05")


def _five(ws: Path, url: str, *, timeout: float = 0.3) -> Path:
    """TX01 … TX05: the same edit of case T001 with the openai engine at ``url``: 1 retry, no wait between, short
    attempts."""
    spec = (ws / "interventions" / "TX01.yaml").read_text()
    for spec_id in SPECS[1:]:
        (ws / "interventions" / f"{spec_id}.yaml").write_text(spec.replace("id: TX01", f"id: {spec_id}"))
    config = ws / "cfkit.toml"
    config.write_text(config.read_text() + f'\n[edit]\nengine = "openai"\n\n[edit.engines.openai]\nbackoff = 0\n'
                                           f'max_retries = 1\ntimeout = {timeout}\nbase_url = "{url}"\n')
    return ws


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def api():
    state = ImagesAPI()
    url, server = serve(state)
    state.url = url
    yield state
    server.shutdown()
    server.server_close()


def _rows(ws: Path) -> list[tuple]:
    if not (ws / ".cfkit").exists():
        return []
    return [tuple(r.values()) for r in table_rows(ws, "edits", "spec_id, status", order_by="id")]


def test_a_server_that_never_answers_stops_the_batch_and_counts_the_attempts_it_gave_up(tiny_ws):
    with SilentServer() as server:
        ws = _five(tiny_ws, server.url)
        result = run_cli(["edit", "--all", "-w", str(ws)])
    assert result.exit_code == 1, result.output
    # 3 specs, each the check's connection (it opens: the server is there) and 2 attempts; TX04, TX05 not asked
    assert server.connections == 3 + 6
    assert "5 specs: 3 failed, 2 not asked." in result.stderr
    assert ("spent: 3 calls to openai (0 answered; 3 ended with an error; 6 abandoned attempts (given up once sent) "
            "may be billed on top: no answered call to estimate them by)") in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "3 requests in a row could not reach" in last and "timed out after 0.3 s" in last, last


def test_timeouts_after_an_edit_was_made_keep_it_and_bound_what_they_may_cost(tiny_ws, api):
    ws = _five(tiny_ws, api.url)
    api.script = [None] + [2.0] * 6  # TX01 answered; then every attempt outlasts the 0.3 s timeout
    result = run_cli(["edit", "--all", "-w", str(ws)])
    assert result.exit_code == 1, result.output
    assert len(api.requests) == 7
    assert _rows(ws) == [("TX01", "ok"), ("TX02", "failed"), ("TX03", "failed"), ("TX04", "failed")]
    assert (ws / ".cfkit" / "edits" / "TX01" / "1-composite.png").is_file()
    assert "5 specs: 1 made, 3 failed, 1 not asked." in result.stderr
    assert ("spent: 4 calls to openai (1 answered: 1 image, 4,050 tokens reported; 3 ended with an error; "
            "6 abandoned attempts (given up once sent) may be billed on top: up to ~24,300 tokens)") in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "1 of 5 specs done, every edit received is saved." in last and "Not edited: TX02, TX03, TX04 failed (recorded); TX05 not asked" in last


def test_a_reply_between_failures_resets_the_count(tiny_ws, api):
    ws = _five(tiny_ws, api.url)
    # TX01 times out, TX02 answered, TX03 and TX04 time out, TX05 answered: never 3 in a row
    api.script = [2.0, 2.0, None, 2.0, 2.0, 2.0, 2.0, None]
    result = run_cli(["edit", "--all", "-w", str(ws)])
    assert result.exit_code == 1, result.output
    assert len(api.requests) == 8
    assert "5 specs: 2 made, 3 failed." in result.stderr
    assert "the edits stopped" not in result.stderr


def test_json_carries_the_spending_and_why_it_stopped(tiny_ws, api):
    ws = _five(tiny_ws, api.url)
    api.script = [None] + [2.0] * 6
    result = run_cli(["edit", "--all", "--json", "-w", str(ws)])
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert [(d["spec"], d["status"]) for d in data["specs"]] == [
        ("TX01", "made"), ("TX02", "failed"), ("TX03", "failed"), ("TX04", "failed"), ("TX05", "not asked")]
    assert data["spent"] == {"engines": ["openai"], "calls": 4, "answered": 1, "images": 1, "tokens": 4050,
                             "answers_without_usage": 0, "ended_with_error": 3, "abandoned_attempts": 6,
                             "in_flight": 0, "stopped_between_attempts": 0, "may_be_billed_tokens_up_to": 6 * 4050}
    assert data["stopped"].startswith("the edits stopped: 3 requests in a row could not reach")


def test_one_edit_answered_after_a_timeout_counts_the_attempt_given_up(tiny_ws, api):
    ws = _five(tiny_ws, api.url)
    api.script = [2.0, None]
    result = run_cli(["edit", "TX01", "-w", str(ws)])
    assert result.exit_code == 0, result.output
    assert ("spent: 1 call to openai (1 answered: 1 image, 4,050 tokens reported; 1 abandoned attempt (given up once "
            "sent) may be billed on top: up to ~4,050 tokens)") in result.stderr
