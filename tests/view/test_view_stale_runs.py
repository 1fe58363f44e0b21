"""The view's runs page marks a run whose answers are stale now (its case, caption or gold labels changed since),
as ``cfkit runs list`` and ``cfkit runs show`` say it and the report counts it: the run's status says how many,
and a line says why and what asks them again; a run nothing changed for is not marked."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from support.workspace import run_cli


def _probe(ws: Path, model: str) -> str:
    result = run_cli(["-w", str(ws), "probe", "run", "-m", model, "-s", "contextcanvas", "--json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["run_id"]


def _row(page: str, run_id: str) -> str:
    return re.search(rf"<tr[^>]*>\s*<td[^>]*><code>{run_id}</code>.*?</tr>", page, re.S).group(0)


def test_the_runs_page_marks_the_runs_whose_answers_a_changed_case_made_stale(tiny_ws, tmp_path):
    yes, no = _probe(tiny_ws, "baseline:always-yes"), _probe(tiny_ws, "baseline:majority")
    site = tmp_path / "before"
    assert run_cli(["-w", str(tiny_ws), "view", "--export", str(site)]).exit_code == 0
    page = (site / "index.html").read_text()
    assert "stale" not in _row(page, yes) and "Answers stale now" not in page

    path = tiny_ws / "data" / "cases.jsonl"  # T002's question reworded: the answers to it are about another one
    path.write_text(path.read_text().replace("a winter card", "a summer card"))
    missing = json.loads(run_cli(["-w", str(tiny_ws), "report", "--format", "json"]).stdout)["missing"]
    stale = {m["run"]: m for m in missing if m["reason"] == "stale"}
    assert set(stale) == {yes, no}
    site = tmp_path / "after"
    assert run_cli(["-w", str(tiny_ws), "view", "--export", str(site)]).exit_code == 0
    page = html.unescape((site / "index.html").read_text())
    # Both runs are stale for the one reason: one line says it (tests/view/test_view_stale_grouped.py), each run
    # listed under it.
    said = " ".join(re.search(r'<li class="problem stale-group">(.*?)<details>', page, re.S).group(1).split())
    for run_id in (yes, no):
        assert f'<a class="problem" href="#stale-{run_id}">1 answer stale</a>' in _row(page, run_id)
        assert f'<li id="stale-{run_id}">' in page
        shown = run_cli(["-w", str(tiny_ws), "runs", "show", run_id], env={"COLUMNS": "2000"}).stdout
        line = next(line for line in shown.splitlines() if line.startswith("stale "))
        reason = line.split("e.g. ", 1)[1].replace(f"run {run_id}", "each run")
        assert reason in said  # the reason 'cfkit runs show' says, its run said as each run
        assert stale[run_id]["detail"].replace(f"run {run_id}", "each run") in said
        assert "run the contextcanvas suite again" in said
