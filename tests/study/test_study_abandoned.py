"""Attempts given up after they were sent (a timeout), which a provider may bill, are said wherever a study's
cost is shown, as ``cfkit runs show`` says them: ``study run``'s lines, summary and JSON, ``study status`` and its
JSON, and the view's runs page."""

from __future__ import annotations

import json
import threading

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.chat_api_server import ChatServer, first_option, listing, user_text
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(120)

#: 100 prompt and 20 completion tokens at $1,000 a million: $0.12 a reply.
NOTE = "3 abandoned attempts may be billed on top: up to ~$0.36"


def _slow_first_attempts(body, n, asked=set(), lock=threading.Lock()):
    """Every question's first attempt answered after the client's 1 s timeout: each is sent twice."""
    reply = first_option(body, n)
    with lock:
        first = user_text(body) not in asked
        asked.add(user_text(body))
    reply.delay = 2.0 if first else 0.0
    return reply


def test_abandoned_attempts_are_said_by_study_run_status_and_the_view_as_runs_show_says_them(tiny_ws, tmp_path):
    ws = tiny_ws
    with ChatServer(_slow_first_attempts) as chat:
        chat.models = listing("priced")
        path = ws / "study.toml"
        path.write_text(f"[models.p]\nmodel = 'openai:priced'\nendpoint = '{chat.url}'\n"
                        "options = { timeout = 1, backoff = 0.01, price_in = 1000, price_out = 1000 }\n"
                        "[suites.contextcanvas]\n")
        env = {"OPENAI_API_KEY": "sk-test", "COLUMNS": "200"}
        ran = run_cli(["-w", str(ws), "study", "run", str(path)], env=env)
        assert chat.count == 6  # three questions, each asked twice
    assert ran.exit_code == 0, ran.output
    assert "$0.36 + up to ~$0.36 abandoned" in ran.stdout  # the run's line (before: "$0.36" alone)
    assert f"this invocation spent $0.36; {NOTE}" in ran.stderr  # the summary
    # What 'runs show' says of the run is the reference.
    run_id = json.loads(run_cli(["-w", str(ws), "study", "status", str(path), "--json"]).stdout)[0]["run_id"]
    shown = run_cli(["-w", str(ws), "runs", "show", run_id])
    assert f"$0.36; {NOTE}" in " ".join(shown.stdout.split())

    again = run_cli(["-w", str(ws), "study", "run", str(path), "--json"], env=env)  # finished: nothing sent
    assert again.exit_code == 0, again.output
    (row,) = json.loads(again.stdout)
    assert (row["cost_usd"], row["abandoned_attempts"]) == (pytest.approx(0.36), 3)
    assert row["abandoned_usd"] == pytest.approx(0.36) and row["spent_now_abandoned_attempts"] == 0

    status = run_cli(["-w", str(ws), "study", "status", str(path)], env=env)
    assert status.exit_code == 0 and "$0.36 + up to ~$0.36 abandoned" in status.stdout
    (state,) = json.loads(run_cli(["-w", str(ws), "study", "status", str(path), "--json"]).stdout)
    assert state["abandoned_attempts"] == 3 and state["abandoned_usd"] == pytest.approx(0.36)

    pytest.importorskip("jinja2", reason="the view extra is not installed")
    site = tmp_path / "site"
    assert run_cli(["-w", str(ws), "view", "--export", str(site)]).exit_code == 0
    assert NOTE in (site / "index.html").read_text()
