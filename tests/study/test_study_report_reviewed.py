"""``cfkit study report`` over draft captions: ``--reviewed-only`` gives the modality rows over the cases whose
captions a person wrote or reviewed, as ``cfkit report --reviewed-only`` gives them for the same runs; and a study
that asked only those cases (``[suites.modality] reviewed_only``) is reported over them, not with the cases it
never asked counted wrong."""

from __future__ import annotations

import json

import pytest

from support.caption_workspace import write_caption
from support.probe_runs import add_modality
from support.workspace import run_cli

TEXTS = {"T001": ("A grey field with a darker band.", "The band is dark grey."),
         "T002": ("A pale gradient from corner to corner.", "The corner is almost white."),
         "T003": ("A smooth field of colour.", "The colour shifts evenly.")}


def _study(ws, *, reviewed_only: bool):
    add_modality(ws, ids=tuple(TEXTS))
    for case, (neutral, evidence) in TEXTS.items():  # T001's caption is a model's draft no person has reviewed
        write_caption(ws, case, neutral=neutral, evidence=evidence,
                      **({"author": "openai:drafter", "reviewed": False} if case == "T001" else {}))
    path = ws / "study.toml"
    path.write_text("[models.r]\nmodel = 'baseline:random'\n[models.y]\nmodel = 'baseline:always-yes'\n"
                    f"[suites.modality]\n{'reviewed_only = true' if reviewed_only else ''}\n"
                    "[report]\nresamples = 200\n")
    ran = run_cli(["-w", str(ws), "study", "run", str(path)])
    assert ran.exit_code == 0, ran.output
    return path


def _rows(result) -> dict:
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    return {r["model"]: (r["n"], r["unreviewed"], r["incomplete"], r["accuracy"], r["deltas"]) for r in data["modality"]}


def test_study_report_reviewed_only_gives_the_rows_report_reviewed_only_gives(tiny_ws):
    ws = tiny_ws
    path = _study(ws, reviewed_only=False)
    drafts = _rows(run_cli(["-w", str(ws), "study", "report", str(path), "--format", "json"]))
    assert {n for n, *_ in drafts.values()} == {3} and {u for _, u, *_ in drafts.values()} == {1}
    shown = run_cli(["-w", str(ws), "study", "report", str(path), "--format", "json", "--reviewed-only"])
    reviewed = _rows(shown)
    assert {(n, u, inc) for n, u, inc, *_ in reviewed.values()} == {(2, 0, False)}
    assert "1 case whose caption is still a model's draft no person has reviewed is left out (T001)" in shown.stderr
    single = _rows(run_cli(["-w", str(ws), "report", "--format", "json", "--resamples", "200", "--reviewed-only"]))
    assert reviewed == single


def test_a_study_that_asked_only_reviewed_captions_is_reported_over_them(tiny_ws):
    from cfkit.study import load_study
    from cfkit.study.reporting import study_report
    from cfkit.workspace import load_workspace

    ws = tiny_ws
    path = _study(ws, reviewed_only=True)
    shown = run_cli(["-w", str(ws), "study", "report", str(path), "--format", "json"])
    rows = _rows(shown)
    # Before: n 3, T001 (never asked) counted wrong and every row marked incomplete.
    assert {(n, u, inc) for n, u, inc, *_ in rows.values()} == {(2, 0, False)}
    assert not any(m["case"] == "T001" for m in json.loads(shown.stdout)["missing"])
    # The library's study report says the same.
    from cfkit.report.exports import to_json

    made = study_report(load_workspace(ws), load_study(path))
    assert json.loads(to_json(made.report))["modality"] == json.loads(shown.stdout)["modality"]
