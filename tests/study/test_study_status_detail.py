"""What 'study status' says of a run that is not done: every reason the report will mark its rows for."""

from __future__ import annotations

import json

import pytest

from support.chat_api_server import ChatServer, Scripted, completion, error_body, user_text
from support.probe_runs import scripted_answer
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(300)


def flaky(body, n) -> Scripted:
    """A server that answers 500 to the spring fair poster (T001) and cuts the winter card (T002) off at the
    token limit; the three-option case (T003) is answered."""
    text, model = user_text(body), body.get("model", "test-model")
    if "spring fair poster" in text:
        return Scripted(500, error_body("overloaded", kind="server_error"))
    if "winter card" in text:
        return Scripted(body=completion('{"answer": "', model=model, finish_reason="length"))
    return scripted_answer(body, n)


def test_an_incomplete_run_whose_replies_were_cut_off_says_both(tiny_ws):
    with ChatServer(flaky) as server:
        path = tiny_ws / "study.toml"
        path.write_text(f"[models.flaky]\nmodel = 'openai:test-model'\nendpoint = '{server.url}'\n"
                        "options = { max_retries = 0 }\n[suites.contextcanvas]\n")
        assert run_cli(["-w", str(tiny_ws), "study", "run", str(path)]).exit_code == 1
    status = run_cli(["-w", str(tiny_ws), "study", "status", str(path), "--json"])
    assert status.exit_code == 1
    [row] = json.loads(status.stdout)
    assert (row["state"], row["done"], row["total"], row["failed"]) == ("incomplete", 2, 3, 1)
    # Before: only "1 request failed; …", while the report marked the row (not clean) for the reply cut off.
    assert row["detail"].startswith("1 request failed; the first: HTTP 500")
    assert row["detail"].endswith("; not clean either: 1 of 2 replies cut off at the token limit")
    shown = run_cli(["-w", str(tiny_ws), "report", "--format", "md", "--resamples", "50"])
    assert "| openai:test-model (incomplete) (not clean) |" in shown.stdout
