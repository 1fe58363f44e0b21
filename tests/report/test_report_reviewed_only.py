"""``cfkit report --reviewed-only``: the modality table over the cases whose captions a person wrote or reviewed.

A modality run asked with a caption that is still a model's draft says so in a
note; the note's advice is this view, which needs no new run (a full run has
answered the reviewed cases too). A run made with ``probe run --reviewed-only``
is read by this view as a run of the whole suite; the default report, which
reads the model's full run, names it and says what shows it.
"""

from __future__ import annotations

import json

from support.caption_workspace import write_caption
from support.probe_runs import add_modality
from support.workspace import run_cli

TEXTS = {"T001": ("A grey field with a darker band.", "The band is dark grey."),
         "T002": ("A pale gradient from corner to corner.", "The corner is almost white."),
         "T003": ("A smooth field of colour.", "The colour shifts evenly.")}


def _workspace(ws):
    add_modality(ws, ids=tuple(TEXTS))
    for case, (neutral, evidence) in TEXTS.items():
        write_caption(ws, case, neutral=neutral, evidence=evidence,
                      **({"author": "openai:drafter", "reviewed": False} if case == "T001" else {}))
    return ws


def _probe(ws, *extra):
    result = run_cli(["-w", str(ws), "probe", "run", "-m", "baseline:random", "-s", "modality", "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["run_id"]


def _report(ws, *extra):
    result = run_cli(["-w", str(ws), "report", "--resamples", "50", "--format", "json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def test_the_note_on_drafts_leads_to_a_table_over_the_reviewed_cases(tiny_ws):
    ws = _workspace(tiny_ws)
    full = _probe(ws)
    data, _ = _report(ws)
    row = data["modality"][0]
    assert row["n"] == 3 and row["unreviewed"] == 1
    [note] = [n for n in data["notes"] if "no person has reviewed" in n]
    assert "(T001)" in note and note.endswith("or leave those cases out of the rows with 'cfkit report "
                                              "--reviewed-only'.")
    # What the note says, typed as it says it: the full run's answers about the reviewed cases, no new run.
    data, stderr = _report(ws, "--reviewed-only")
    row = data["modality"][0]
    assert (row["n"], row["unreviewed"], row["incomplete"], row["runs"]) == (2, 0, False, [full])
    assert not data["missing"] and not data["set_aside"]
    assert [n for n in data["notes"] if "modality" in n] == [
        "modality: --reviewed-only: the rows are over the 2 subset cases whose captions a person wrote or reviewed; "
        "1 case whose caption is still a model's draft no person has reviewed is left out (T001): read each and "
        "set 'reviewed: true' to count it."]
    assert [u["case"] for u in data["units"][0]["units"]] == ["T002", "T003"]
    assert "(T001)" in stderr  # the note is said where the table is shown
    table = run_cli(["-w", str(ws), "report", "--resamples", "50", "--reviewed-only"])
    assert table.exit_code == 0 and "unreviewed captions" not in table.stdout
    # Once a person has reviewed the draft, the view counts it.
    write_caption(ws, "T001", neutral=TEXTS["T001"][0], evidence=TEXTS["T001"][1], author="openai:drafter")
    assert _report(ws, "--reviewed-only")[0]["modality"][0]["n"] == 3


def test_a_reviewed_only_run_is_named_by_the_default_report_and_stands_in_the_view_without_a_full_run(tiny_ws):
    ws = _workspace(tiny_ws)
    full = _probe(ws)
    reviewed = _probe(ws, "--reviewed-only")
    assert reviewed != full
    # The default report reads the full run, and says what shows the reviewed cases alone.
    data, stderr = _report(ws)
    assert data["modality"][0]["runs"] == [full]
    [aside] = data["set_aside"]
    assert aside["runs"] == [reviewed] and not aside["refused"]
    line = (f"baseline:random: its newest modality run {reviewed} asked only the cases whose captions a person "
            f"wrote or reviewed (--reviewed-only); the rows read its run of the whole suite, {full}, which answered "
            "those cases too: 'cfkit report --reviewed-only' reports them alone.")
    assert aside["message"] == line and line in " ".join(stderr.split())
    data, _ = _report(ws, "--reviewed-only")  # the full run answered every case the view counts
    assert (data["modality"][0]["runs"], data["modality"][0]["n"]) == ([full], 2)
    assert not data["missing"]
    # … and the newer run it does not read is named, with why and what reads it (never silently passed over).
    [aside] = data["set_aside"]
    assert aside["runs"] == [reviewed] and not aside["refused"]
    assert aside["message"].startswith(f"baseline:random: a newer modality run, {reviewed} (")
    assert ("was left out: it asked only the cases whose captions a person wrote or reviewed, which the run of the "
            f"whole suite read answered too; the rows read {full}") in aside["message"]
    assert f"'cfkit report --run {reviewed}'" in aside["message"]
    # Without a full run, the view reads the reviewed-only run as the whole suite it counts.
    assert run_cli(["-w", str(ws), "runs", "rm", full]).exit_code == 0
    data, _ = _report(ws, "--reviewed-only")
    row = data["modality"][0]
    assert (row["runs"], row["n"], row["incomplete"]) == ([reviewed], 2, False) and not data["missing"]
    # The default report counts the case it left out wrong, and the reason leads to the view.
    data, _ = _report(ws)
    assert data["modality"][0]["incomplete"]
    assert {(m["case"], m["detail"]) for m in data["missing"]} == {
        ("T001", f"not asked: run {reviewed} asked only part of the suite (--reviewed-only); 'cfkit report "
                 "--reviewed-only' reports the cases whose captions a person wrote or reviewed alone")}
    # A draft reviewed since the run is counted by the view, and the run did not ask it: the line says what does.
    write_caption(ws, "T001", neutral=TEXTS["T001"][0], evidence=TEXTS["T001"][1], author="openai:drafter")
    data, _ = _report(ws, "--reviewed-only")
    assert data["modality"][0]["n"] == 3 and data["modality"][0]["incomplete"]
    [detail] = {m["detail"] for m in data["missing"]}
    assert detail.startswith(f"not asked: run {reviewed} asked only the cases whose captions were reviewed then "
                             f"(--reviewed-only), and this case's caption was reviewed since; run the command that "
                             f"made run {reviewed} again")
    again = _probe(ws, "--reviewed-only")
    data, _ = _report(ws, "--reviewed-only")
    assert data["modality"][0]["runs"] == [again] != [reviewed] and not data["missing"]
