"""``cfkit runs list`` and ``cfkit runs show`` say which run ``cfkit report`` reads for each model and suite, and
mark a run whose answers are stale now (its case, gold labels or caption changed since), as the report counts
them: the same choice and the same checks (cfkit.report.standing), never a rule of their own."""

from __future__ import annotations

import json
from pathlib import Path

from support.workspace import run_cli


def _probe(ws: Path, model: str, suite: str = "contextcanvas", *more: str) -> str:
    result = run_cli(["probe", "run", "-m", model, "-s", suite, "-w", str(ws), *more])
    assert result.exit_code == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def _edit_case(ws: Path, case_id: str, **values) -> None:
    path = ws / "data" / "cases.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for record in records:
        if record["id"] == case_id:
            record.update(values)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _listed(ws: Path) -> dict[str, dict]:
    result = run_cli(["runs", "list", "--json", "-w", str(ws)])
    assert result.exit_code == 0, result.stderr
    return {r["id"]: r for r in json.loads(result.stdout)}


def _report(ws: Path) -> dict:
    result = run_cli(["report", "--format", "json", "-w", str(ws)])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_runs_list_and_show_name_the_run_the_report_reads_among_several_of_one_model(tiny_ws):
    full = _probe(tiny_ws, "baseline:always-yes")
    smoke = _probe(tiny_ws, "baseline:always-yes", "contextcanvas", "--limit", "1")  # newer, part of the suite
    other = _probe(tiny_ws, "baseline:always-no")
    read_by_report = {(r["model"], r["suite"]): r["run"] for r in _report(tiny_ws)["runs_read"]}
    assert read_by_report[("baseline:always-yes", "contextcanvas")] == full

    listed = _listed(tiny_ws)
    assert {run for run, r in listed.items() if r["report"]["read"]} == set(read_by_report.values()) == {full, other}
    assert listed[smoke]["report"]["reads"] == full
    assert listed[smoke]["report"]["why"].startswith("left out: newer than the run read, but asked only part")

    text = run_cli(["runs", "list", "-w", str(tiny_ws)], env={"COLUMNS": "300"})
    rows = {line.split("│")[1].strip(): line for line in text.stdout.splitlines() if line.startswith("│")}
    assert rows[full].rstrip(" │").endswith("read") and rows[smoke].rstrip(" │").endswith("left out")
    assert "'read' marks the run 'cfkit report' reads" in text.stderr
    narrow = run_cli(["runs", "list", "-w", str(tiny_ws)], env={"COLUMNS": "60"}).stdout
    assert narrow.split(full, 1)[1].splitlines()[1].endswith("report: read")

    shown = run_cli(["runs", "show", smoke, "-w", str(tiny_ws)], env={"COLUMNS": "400"}).stdout
    report_line = next(line for line in shown.splitlines() if line.startswith("report"))
    assert "not read (left out: newer than the run read" in report_line and f"the report reads {full}" in report_line
    assert f"'cfkit report --run {smoke}' reads this one" in report_line
    shown = json.loads(run_cli(["runs", "show", full, "--json", "-w", str(tiny_ws)]).stdout)
    assert shown["report"]["read"] is True and shown["report"]["stale"] == {"answers": 0, "why": None}


def test_a_case_changed_since_a_run_marks_its_answers_stale_in_runs_list_and_show_as_the_report_counts_them(tiny_ws):
    run_id = _probe(tiny_ws, "baseline:always-yes")
    smoke = _probe(tiny_ws, "baseline:always-yes", "contextcanvas", "--limit", "2")  # not read, checked alike
    assert _listed(tiny_ws)[run_id]["report"]["stale"] == {"answers": 0, "why": None}
    quiet = run_cli(["runs", "list", "-w", str(tiny_ws)])
    assert "stale" not in quiet.stdout + quiet.stderr

    _edit_case(tiny_ws, "T002", question="Is this picture suitable for a summer card?")
    stale_in_report = [m for m in _report(tiny_ws)["missing"] if m["reason"] == "stale"]
    assert [(m["run"], m["case"]) for m in stale_in_report] == [(run_id, "T002")]

    listed = _listed(tiny_ws)
    assert listed[run_id]["report"]["stale"]["answers"] == len(stale_in_report) == 1
    assert listed[run_id]["report"]["stale"]["why"] == f"case T002: {stale_in_report[0]['detail']}"
    assert listed[smoke]["report"]["stale"]["answers"] == 1  # (as 'cfkit report --run' would count it)
    text = run_cli(["runs", "list", "-w", str(tiny_ws)], env={"COLUMNS": "300"})
    row = next(line for line in text.stdout.splitlines() if run_id in line)
    assert "(1 stale)" in row
    assert "2 runs have answers stale now" in text.stderr and "'cfkit runs show RUN' says" in text.stderr

    shown = run_cli(["runs", "show", run_id, "-w", str(tiny_ws)], env={"COLUMNS": "2000"}).stdout
    line = next(line for line in shown.splitlines() if line.startswith("stale "))
    assert "1 answer stale now (a report counts it wrong)" in line and "earlier version of case T002" in line
    assert "run the contextcanvas suite again" in line


def test_a_majority_run_whose_gold_labels_moved_is_stale_in_runs_list_as_in_the_report(tiny_ws):
    run_id = _probe(tiny_ws, "baseline:majority")
    _edit_case(tiny_ws, "T001", gold="A")  # the majority turns from No to Yes: every Yes/No answer is stale
    in_report = [m for m in _report(tiny_ws)["missing"] if m["reason"] == "stale" and m["run"] == run_id]
    assert len(in_report) == 2
    stale = _listed(tiny_ws)[run_id]["report"]["stale"]
    assert stale["answers"] == len(in_report)
    assert "'cfkit probe run -m baseline:majority -s contextcanvas'" in stale["why"]


def test_a_cases_file_that_cannot_be_read_leaves_staleness_unchecked_and_says_so(tiny_ws):
    run_id = _probe(tiny_ws, "baseline:always-yes")
    (tiny_ws / "data" / "cases.jsonl").write_text("{not json\n")
    result = run_cli(["runs", "list", "-w", str(tiny_ws)], env={"COLUMNS": "300"})
    assert result.exit_code == 0 and run_id in result.stdout  # the runs are still listed
    assert "(stale?)" in result.stdout
    said = " ".join(result.stderr.split())  # said for the run, as 'runs show' and the view say it
    assert f"{run_id}: whether its answers are stale was not checked" in said and "cases.jsonl" in said
    listed = _listed(tiny_ws)
    assert listed[run_id]["report"]["stale"]["answers"] is None
