"""``cfkit runs list`` says the runs stale for one reason in one line, as the view does: a case reworded under
five runs gives one line naming the reason once, the runs counted and the first three named; before, the list
said only that five runs were stale, and no reason at all."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from support.workspace import run_cli

pytestmark = pytest.mark.timeout(120)


def _probe(ws: Path, model: str, *options: str) -> str:
    result = run_cli(["-w", str(ws), "probe", "run", "-m", model, "-s", "contextcanvas", *options, "--json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["run_id"]


def test_runs_list_says_one_line_per_reason_with_the_runs_counted_and_the_first_named(tiny_ws):
    runs = [_probe(tiny_ws, "baseline:always-yes"), _probe(tiny_ws, "baseline:always-no")]
    runs += [_probe(tiny_ws, "baseline:random", "-o", f"seed={seed}") for seed in (1, 2, 3)]
    path = tiny_ws / "data" / "cases.jsonl"  # T002's question reworded: every run's answer to it is stale
    path.write_text(path.read_text().replace("a winter card", "a summer card"))
    shown = run_cli(["-w", str(tiny_ws), "runs", "show", runs[0]], env={"COLUMNS": "2000"}).stdout
    why = re.search(r"e\.g\. (.*)\.$", next(line for line in shown.splitlines() if line.startswith("stale "))).group(1)
    reason = why.replace(f"run {runs[0]}", "each run")

    listed = run_cli(["-w", str(tiny_ws), "runs", "list"], env={"COLUMNS": "300"})
    assert listed.exit_code == 0
    err = " ".join(listed.stderr.split())
    assert "5 runs have answers stale now" in err and "'cfkit runs show RUN' says" in err
    lines = [" ".join(line.split()) for line in listed.stderr.split("warning: ") if "stale now in each" in line]
    assert len(lines) == 1, listed.stderr
    line = lines[0]
    named = re.match(r"5 runs \((.*?), (.*?), (.*?) and 2 more\): 1 answer stale now in each \(a report counts "
                     r"them wrong\); e\.g\. (.*)\.$", line)
    assert named is not None, line
    assert set(named.groups()[:3]) < set(runs) and named.group(4) == reason, line
    assert "changed since each run asked it" in reason


def test_runs_list_says_a_single_stale_run_as_runs_show_does(tiny_ws):
    run_id = _probe(tiny_ws, "baseline:always-yes")
    path = tiny_ws / "data" / "cases.jsonl"
    path.write_text(path.read_text().replace("a winter card", "a summer card"))
    listed = run_cli(["-w", str(tiny_ws), "runs", "list"], env={"COLUMNS": "300"})
    err = " ".join(listed.stderr.split())
    assert f"{run_id}: 1 answer stale now (a report counts it wrong); e.g. case T002" in err
    assert "have answers stale now" not in err


def test_a_group_line_of_one_run_agrees_with_its_counts(tiny_ws):
    """Both callers say a group of one run as 'runs show' does; the group's own line, asked for one, still agrees."""
    from cfkit.report.standing import StaleGroup
    from cfkit.store import Store
    from cfkit.store.runs import get_run

    run_id = _probe(tiny_ws, "baseline:always-yes")
    with Store(tiny_ws / ".cfkit" / "cfkit.db") as store:
        record = get_run(store, run_id)
    assert StaleGroup("case T002 changed", True, (record,), (1,)).line() == (
        f"1 run ({run_id}): 1 answer stale now (a report counts it wrong); e.g. case T002 changed.")
    assert StaleGroup("it was never run", False, (record,), (0,)).line() == (
        f"1 run ({run_id}): whether its answers are stale was not checked: it was never run")
    assert StaleGroup("case T002 changed", True, (record, record), (1, 1)).line() == (
        f"2 runs ({run_id}, {run_id}): 1 answer stale now in each (a report counts them wrong); e.g. case T002 "
        "changed.")
