"""A run's cost in a study means one thing everywhere: the run's total, every invocation's, in ``study run`` (text,
JSON, the live display), ``study status``, ``runs list`` and ``runs show``; what one ``study run`` spent is said
apart. A priced run that cost nothing shows $0.00, an unpriced one no cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cfkit.cli.study_display import display_lines
from cfkit.money import Cost
from cfkit.probe import RunProgress
from cfkit.study.jobs import StudyRun
from support.chat_api_server import ChatServer, Scripted, error_body, first_option
from support.probe_runs import many_cases
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(300)

# $0.03 a request: 100 tokens in at $100 a million, 20 out at $1000 a million.
PRICED = "options={price_in=100, price_out=1000, max_retries=0, backoff=0.01}"


def _failing_every_third(failing: dict):
    def script(body, n):
        if failing["on"] and n % 3 == 0:
            return Scripted(400, error_body("scripted failure"))
        return first_option(body, n)
    return script


def _costs(ws: Path, path: Path) -> tuple[dict, dict, dict, dict]:
    """(study run --json's row, study status --json's row, runs list --json's row, runs show --json) of the run."""
    ran = run_cli(["-w", str(ws), "study", "run", str(path), "--json"])
    [row] = json.loads(ran.stdout)
    [state] = json.loads(run_cli(["-w", str(ws), "study", "status", str(path), "--json"]).stdout)
    [listed] = json.loads(run_cli(["-w", str(ws), "runs", "list", "--json"]).stdout)
    shown = json.loads(run_cli(["-w", str(ws), "runs", "show", row["run_id"], "--json"]).stdout)
    return row, state, listed, shown


def test_study_run_shows_the_runs_total_cost_on_a_resume_and_a_rerun_and_says_what_it_spent_apart(tmp_path):
    ws = many_cases(tmp_path / "ws", 6)
    failing = {"on": True}
    with ChatServer(_failing_every_third(failing)) as chat:
        path = ws / "s.toml"
        path.write_text(f"[models.m]\nmodel='openai:test-model'\nendpoint='{chat.url}'\n{PRICED}\n"
                        "[suites.contextcanvas]\n")
        first, *_ = _costs(ws, path)
        assert first["state"] == "incomplete" and first["cost_usd"] == pytest.approx(0.12)
        failing["on"] = False
        resumed, state, listed, shown = _costs(ws, path)  # the two failed requests sent again: $0.06
        assert resumed["state"] == "done"
        assert resumed["cost_usd"] == pytest.approx(0.18) == state["cost_usd"] == listed["cost_usd"]
        assert shown["run"]["cost_usd"] == pytest.approx(0.18)
        assert resumed["spent_now_usd"] == pytest.approx(0.06)
        again, state, *_ = _costs(ws, path)  # nothing asked
        assert again["cost_usd"] == pytest.approx(0.18) == state["cost_usd"] and again["spent_now_usd"] == 0.0
        text = run_cli(["-w", str(ws), "study", "run", str(path)])
    assert text.exit_code == 0, text.output
    assert "$0.18" in text.stdout and "$0.060" not in text.stdout
    assert ("study 's': this invocation spent $0.00; the cost column is each run's total, as 'cfkit study status' "
            "and 'cfkit runs show' give it.") in text.stderr


def test_study_status_shows_zero_dollars_for_a_priced_run_all_from_cache_and_nothing_for_an_unpriced_one(tmp_path):
    ws = many_cases(tmp_path / "ws", 4)
    with ChatServer() as chat:
        path = ws / "s.toml"
        path.write_text(f"[models.m]\nmodel='openai:test-model'\nendpoint='{chat.url}'\n{PRICED}\n"
                        "[models.no]\nmodel='baseline:always-no'\n[suites.contextcanvas]\n")
        ran = run_cli(["-w", str(ws), "study", "run", str(path), "--json"])
        priced = next(r["run_id"] for r in json.loads(ran.stdout) if r["model"] == "m")
        assert run_cli(["-w", str(ws), "runs", "rm", priced]).exit_code == 0  # its cached responses stay
        asked = chat.count
        rebuilt = run_cli(["-w", str(ws), "study", "run", str(path)])
        assert rebuilt.exit_code == 0, rebuilt.output and chat.count == asked  # every reply from the cache
    status = run_cli(["-w", str(ws), "study", "status", str(path)])
    assert status.exit_code == 0, status.output
    lines = {line.split()[0]: line for line in status.stdout.splitlines()}
    assert "$0.00" in lines["m"]
    assert "$" not in lines["no"] and "—" not in lines["no"]
    assert [line.split()[-2] for line in rebuilt.stdout.splitlines() if line.startswith("m ")] == ["$0.00"]


def test_the_live_display_shows_the_runs_total_while_it_sends_not_only_this_invocations_part():
    run = StudyRun("m", "contextcanvas", "m", "x")
    run.state = "sending"
    run.progress = RunProgress(total=10, done=8, sent=2, cost_usd=0.1, priced=True, earlier=Cost(0.2))
    [_, line] = display_lines([run], 80, 24)
    assert "$0.30" in line and len(line) <= 80
    run.progress = RunProgress(total=10, done=8, sent=2, cost_usd=0.1, unpriced=1, priced=True, earlier=Cost(0.2, 2))
    [_, line] = display_lines([run], 80, 24)
    assert "at least $0.30" in line
