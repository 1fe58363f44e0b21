"""What ``probe run`` warns of a run's plan ``study run`` says of each of its runs too: the cases asked with a
caption no person reviewed, and the cases (or pairs) a run left out, each with why."""

from __future__ import annotations

from support.caption_workspace import write_caption
from support.probe_runs import add_modality
from support.workspace import run_cli


def test_study_run_names_unreviewed_captions_and_skipped_cases_as_probe_run_does(tiny_ws):
    ws = tiny_ws
    add_modality(ws, ids=("T001", "T002"))
    write_caption(ws, "T001", neutral="A grey field.", evidence="The band is dark.", author="openai:drafter",
                  reviewed=False)
    path = ws / "study.toml"
    path.write_text("[models.m]\nmodel = 'baseline:majority'\n[suites.modality]\n[suites.swap]\n")
    ran = run_cli(["-w", str(ws), "study", "run", str(path)], env={"COLUMNS": "200"})
    assert ran.exit_code == 0, ran.output
    said = " ".join(ran.stderr.split())
    # probe run says these of the same plans (the reference).
    probed = " ".join(run_cli(["-w", str(ws), "probe", "run", "-m", "baseline:random", "-s", "modality"]).stderr.split()
                      + run_cli(["-w", str(ws), "probe", "run", "-m", "baseline:random", "-s", "swap"]).stderr.split())
    assert ("1 of 2 cases has a caption a model drafted and no person has reviewed: T001. Read it and set "
            "'reviewed: true', or leave it out with --reviewed-only.") in probed
    assert "T003: 3 options; the swap suite asks two-option cases only" in probed
    assert ("m modality: asked 1 case with a caption a model drafted and no person has reviewed: T001; read it and "
            "set 'reviewed: true', or leave it out: of the report") in said
    assert f"of the report with 'cfkit -w {ws} study report {path} --reviewed-only'" in said  # one that works
    assert "m swap: 1 case skipped: T003 (3 options; the swap suite asks two-option cases only" in said
