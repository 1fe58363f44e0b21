"""The modality section against the caption files as they are now.

A modality run's Neutral and Evidence answers are answers to the caption texts
it was asked with. When a caption is edited, redrafted or removed after the
run, those answers are stale: counted wrong, listed under ``missing`` with
reason ``stale``, the row marked incomplete, until the suite is run again. A
caption that is still a model's draft no person reviewed is named in a note;
reviewing it (same text) clears the note without a rerun.
"""

from __future__ import annotations

import json

import pytest

from support.caption_workspace import write_caption
from support.workspace import run_cli

TEXTS = {"T001": ("A grey field with a darker band.", "The band is dark grey."),
         "T002": ("A pale gradient from corner to corner.", "The corner is almost white."),
         "T003": ("A smooth field of colour.", "The colour shifts evenly.")}


def _probe(ws, model="baseline:random"):
    result = run_cli(["-w", str(ws), "probe", "run", "-m", model, "-s", "modality", "--all-cases"])
    assert result.exit_code == 0, result.output
    return result


def _report(ws, *extra):
    result = run_cli(["-w", str(ws), "report", "--all-cases", "--resamples", "50", *extra])
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def asked(tiny_ws):
    for case, (neutral, evidence) in TEXTS.items():
        write_caption(tiny_ws, case, neutral=neutral, evidence=evidence)
    _probe(tiny_ws)
    return tiny_ws


def test_an_answer_to_a_caption_edited_or_removed_since_the_run_is_stale_not_credited(asked):
    before = json.loads(_report(asked, "--format", "json").stdout)
    assert not before["missing"] and not before["modality"][0]["incomplete"]
    neutral, evidence = TEXTS["T001"]
    write_caption(asked, "T001", neutral=neutral, evidence="The band is nearly black.")  # evidence only
    write_caption(asked, "T002", neutral="A pale gradient, lighter at the top.", evidence=TEXTS["T002"][1])
    (asked / "captions" / "T003.yaml").unlink()
    data = json.loads(_report(asked, "--format", "json").stdout)
    stale = {(m["case"], m["condition"]): m["detail"] for m in data["missing"] if m["reason"] == "stale"}
    # The evidence text of T001 changed: its Evidence answer alone; T002's neutral text is in both prompts; T003's
    # file is gone. Text and Image answers do not show a caption and stand.
    assert sorted(stale) == [("T001", "evidence"), ("T002", "evidence"), ("T002", "neutral"),
                             ("T003", "evidence"), ("T003", "neutral")]
    assert "captions/T001.yaml has another evidence text than when run modality-" in stale[("T001", "evidence")]
    assert "captions/T003.yaml does not exist now" in stale[("T003", "neutral")]
    row = data["modality"][0]
    assert row["incomplete"] and row["invalid"] == {"text": 0, "neutral": 2, "evidence": 3, "image": 0}
    units = {u["case"]: u for u in data["units"][0]["units"]}
    assert units["T002"]["answers"]["neutral"] is None and units["T002"]["missing"]["neutral"] == "stale"
    assert units["T002"]["answers"]["text"] == before["units"][0]["units"][1]["answers"]["text"]
    # Every view says so: the mark on the row, the line on stderr.
    table = _report(asked, "--label", "baseline:random=Rand")
    assert "Rand (incomplete)" in table.stdout
    assert "5 units without a usable answer, counted wrong (stale; modality 5)" in table.stderr
    assert "| baseline:random (incomplete) |" in _report(asked, "--format", "md").stdout
    # The suite run again on the captions as they are now: nothing stale.
    write_caption(asked, "T003", neutral="A smooth field of colour.", evidence="The colour shifts evenly.")
    _probe(asked)
    again = json.loads(_report(asked, "--format", "json").stdout)
    assert not again["missing"] and not again["modality"][0]["incomplete"]


def test_reviewing_a_draft_or_changing_its_author_alone_leaves_the_answers_standing(asked):
    neutral, evidence = TEXTS["T002"]
    write_caption(asked, "T002", neutral=neutral, evidence=evidence, author="openai:drafter", reviewed=False)
    data = json.loads(_report(asked, "--format", "json").stdout)
    assert not data["missing"]  # the model read the same text
    notes = [n for n in data["notes"] if "no person has reviewed" in n]
    assert len(notes) == 1 and notes[0].startswith("modality: baseline:random was asked 1 case with a caption")
    assert "(T002)" in notes[0]
    assert "no person has reviewed (T002)" in _report(asked).stderr
    write_caption(asked, "T002", neutral=neutral, evidence=evidence, author="openai:drafter", reviewed=True)
    data = json.loads(_report(asked, "--format", "json").stdout)
    assert not data["missing"] and not any("reviewed" in n for n in data["notes"])


def test_a_draft_asked_unreviewed_is_named_from_the_run_and_the_file_now(tiny_ws):
    for case, (neutral, evidence) in TEXTS.items():
        write_caption(tiny_ws, case, neutral=neutral, evidence=evidence,
                      **({"author": "openai:drafter", "reviewed": False} if case != "T002" else {}))
    result = _probe(tiny_ws)
    assert "2 of 3 cases have a caption a model drafted" in result.stderr
    notes = [n for n in json.loads(_report(tiny_ws, "--format", "json").stdout)["notes"] if "reviewed" in n]
    assert len(notes) == 1 and "was asked 2 cases with a caption" in notes[0] and "(T001, T003)" in notes[0]


def test_runs_asked_with_other_templates_than_those_now_have_their_answers_marked_stale(asked):
    """The system template is part of every prompt: each answer of both suites' runs is stale once it changes,
    and stands again when it is restored (tests/report/test_report_templates_stale.py: only the answers whose
    prompts use a changed template)."""
    assert run_cli(["-w", str(asked), "probe", "run", "-m", "baseline:majority", "-s", "contextcanvas"]).exit_code == 0
    assert not json.loads(_report(asked, "--format", "json").stdout)["missing"]
    templates = asked / "probes" / "templates"
    templates.mkdir(parents=True, exist_ok=True)
    (templates / "system.txt").write_text("You judge pictures. Answer with care.\n")
    data = json.loads(_report(asked, "--format", "json").stdout)
    assert {(m["suite"], m["reason"]) for m in data["missing"]} == {("contextcanvas", "stale"), ("modality", "stale")}
    assert len(data["missing"]) == 3 + 3 * 4 and all("system.txt has another text" in m["detail"]
                                                     for m in data["missing"])
    assert not [n for n in data["notes"] if "templates" in n]
    (templates / "system.txt").unlink()
    assert not json.loads(_report(asked, "--format", "json").stdout)["missing"]


def test_a_row_resting_on_unreviewed_drafts_is_marked_wherever_it_is_shown(tiny_ws, tmp_path):
    """The note on stderr is not enough: a table saved on its own, or the CSV, must say which rows count answers to
    captions no person has read. The count is over the row's cases (the subset), not every case the run asked."""
    for case, (neutral, evidence) in TEXTS.items():
        write_caption(tiny_ws, case, neutral=neutral, evidence=evidence,
                      **({"author": "openai:drafter", "reviewed": False} if case != "T002" else {}))
    _probe(tiny_ws)
    subset = tmp_path / "two.txt"
    subset.write_text("T001\nT002\n")  # T003, the other draft, is outside the rows
    result = run_cli(["-w", str(tiny_ws), "report", "--subset", str(subset), "--resamples", "50", "--format", "json"])
    row = json.loads(result.stdout)["modality"][0]
    assert row["n"] == 2 and row["unreviewed"] == 1 and not row["incomplete"]
    assert json.loads(_report(tiny_ws, "--format", "json").stdout)["modality"][0]["unreviewed"] == 2
    table = _report(tiny_ws, "--label", "baseline:random=Rand").stdout
    assert table.count("Rand (unreviewed captions)") == 5  # the conditions' row and the four changes
    markdown = _report(tiny_ws, "--format", "md").stdout
    assert "| baseline:random (unreviewed captions) |" in markdown
    assert "Rows marked (unreviewed captions) count Neutral and Evidence answers to captions a model" in markdown
    assert "modality,baseline:random,unreviewed,2,measured" in _report(tiny_ws, "--format", "csv").stdout.splitlines()
    # Reviewed as they stand: the same answers, no mark.
    for case in ("T001", "T003"):
        write_caption(tiny_ws, case, neutral=TEXTS[case][0], evidence=TEXTS[case][1], author="openai:drafter")
    data = json.loads(_report(tiny_ws, "--format", "json").stdout)
    assert data["modality"][0]["unreviewed"] == 0
    assert "unreviewed captions" not in _report(tiny_ws).stdout
