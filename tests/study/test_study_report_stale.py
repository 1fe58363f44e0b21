"""A study whose every run is stale (its inputs changed since it ran) is not reported, and ``study report`` says
so, with the state ``study status`` gives each run: not "no run has replies yet" of runs that have every reply,
which ``cfkit report`` reports (their stale answers counted wrong and said)."""

from __future__ import annotations

import json

from support.workspace import run_cli


def test_a_study_whose_runs_are_all_stale_says_so_not_that_it_has_no_replies(tiny_ws):
    ws = tiny_ws
    path = ws / "study.toml"
    path.write_text("[models.y]\nmodel = 'baseline:always-yes'\n[suites.contextcanvas]\n[report]\nresamples = 200\n")
    assert run_cli(["-w", str(ws), "study", "run", str(path)]).exit_code == 0
    cases_file = ws / "data" / "cases.jsonl"
    cases = [json.loads(line) for line in cases_file.read_text().splitlines()]
    cases[0]["question"] += " (reworded)"
    cases_file.write_text("".join(json.dumps(c) + "\n" for c in cases))
    status = json.loads(run_cli(["-w", str(ws), "study", "status", str(path), "--json"]).stdout)
    assert [s["state"] for s in status] == ["stale"]
    shown = run_cli(["-w", str(ws), "study", "report", str(path)], env={"COLUMNS": "400"})
    assert shown.exit_code != 0 and shown.stdout == ""
    said = shown.stderr.strip().splitlines()[-1]
    assert "has replies yet" not in said  # before: 'no run of study study has replies yet'
    assert (f"no run of study study can be reported from its current inputs (y contextcanvas: stale "
            f"(its inputs changed since run {status[0]['run_id']}") in said
    assert f"run 'cfkit study run {path}'" in said
    # The run has its replies: 'cfkit report' reports it, the changed case's answer counted wrong as stale.
    single = json.loads(run_cli(["-w", str(ws), "report", "--format", "json", "--resamples", "200"]).stdout)
    assert [m["case"] for m in single["missing"] if m["reason"] == "stale"] == [cases[0]["id"]]
