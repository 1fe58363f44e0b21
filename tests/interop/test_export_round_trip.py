"""A run exported in full and read back says what the run said: for every suite, a report over the export
(``report --predictions``) and over the run imported into a fresh workspace with the same cases gives the same
numbers and the same notes and marks (incomplete, cut off, failed, skipped, stale, older templates, unreviewed
captions) as the report over the run itself.

The runs are real: the CLI against a loopback Chat Completions server that cuts one reply off at the token limit
and fails one request; the counterfactual run skips a pair without an edit, the swap run a three-option case, the
modality run asks part of its suite, one of whose captions is a model's draft no person has reviewed; a second
modality run is left as a cfkit that kept no caption digests recorded it (its unreviewed cases alone). After the
runs, a case is reworded and the probe templates changed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.chat_api_server import Scripted, answer_json, completion, error_body, user_text
from support.probe_runs import _accepted_edit, add_modality, openai_run
from support.store_sql import table_rows, update_rows
from support.workspace import REPO, run_cli, write_workspace

SUITES = ("contextcanvas", "modality", "counterfactual", "swap")
#: The modality run recorded as before cfkit kept caption digests: its notes name its unreviewed cases alone.
OLDER = "openai:older-model"


def _script(body, n) -> Scripted:
    text, model = user_text(body), body.get("model")
    if "winter card" in text:  # T002: cut off at the token limit, its answer still read
        return Scripted(body=completion('{"answer": "A", "rea', model=model, finish_reason="length"))
    if "Which event" in text:  # T003: the request fails
        return Scripted(400, error_body("the image could not be decoded"))
    return Scripted(body=completion(answer_json("A"), model=model))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(workspace, run id and export folder per suite) after the runs, with the workspace changed since."""
    pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")
    from support.chat_api_server import ChatServer

    root = tmp_path_factory.mktemp("round-trip")
    ws = write_workspace(root / "ws")
    add_modality(ws)
    drafted = ws / "captions" / "T001.yaml"  # a model's draft no person has reviewed, asked as it is
    drafted.write_text(drafted.read_text().replace("author: human\nreviewed: true",
                                                   "author: openai:drafter\nreviewed: false"))
    _accepted_edit(ws)  # TX01 has an accepted edit; TX02 (below) has none and is skipped
    spec = (ws / "interventions" / "TX01.yaml").read_text()
    (ws / "interventions" / "TX02.yaml").write_text(spec.replace("TX01", "TX02").replace("case: T001", "case: T002"))
    shutil.copy(ws / "interventions" / "masks" / "TX01.png", ws / "interventions" / "masks" / "TX02.png")
    (root / "part.txt").write_text("T001\n")
    ids = {}
    with ChatServer(_script) as server:
        for suite in SUITES:
            extra = ["--cases", str(root / "part.txt")] if suite == "modality" else []
            openai_run(ws, server.url, suite, *extra)
        openai_run(ws, server.url, "modality", "--cases", str(root / "part.txt"), model=OLDER)
    for run in json.loads(run_cli(["runs", "list", "-w", str(ws), "--json"]).stdout):
        name = "older" if run["model"] == OLDER else run["suite"]
        ids[name] = run["id"]
        if name == "older":
            _without_caption_digests(ws, run["id"])
        for fmt, suffix in (("jsonl", ".jsonl"), ("csv", ".csv"), ("predictions", ".predictions.jsonl")):
            target = root / f"{name}{suffix}"
            done = run_cli(["runs", "export", run["id"], "-w", str(ws), "--format", fmt, "--output", str(target)])
            assert done.exit_code == 0, done.stderr
    # After the runs: T002 reworded, the system template changed.
    cases = ws / "data" / "cases.jsonl"
    cases.write_text(cases.read_text().replace("a winter card?", "a winter greeting card?"))
    (ws / "probes" / "templates").mkdir()
    system = (REPO / "cfkit" / "templates" / "system.txt").read_text()
    (ws / "probes" / "templates" / "system.txt").write_text(system + "\nAnswer briefly.\n")
    return ws, ids, root


def _without_caption_digests(ws: Path, run_id: str) -> None:
    """The run's notes as a cfkit that kept no caption digests left them: its unreviewed cases alone."""
    [row] = [r for r in table_rows(ws, "runs") if r["id"] == run_id]
    notes = json.loads(row["notes"])
    assert notes.pop("captions") and notes["unreviewed"] == ["T001"]
    update_rows(ws, "runs", {"notes": json.dumps(notes)}, {"id": run_id})


def _report(ws: Path, *args: str) -> dict:
    result = run_cli(["report", "-w", str(ws), "--format", "json", "--resamples", "100", *args])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def _said(report: dict, suite: str) -> dict:
    """What a report says of ``suite``: its rows, units, missing units with why, notes and reply problems (their
    counts: the advice for replies read from a file is another)."""
    return {"rows": report.get(suite), "units": [u for u in report["units"] if u["suite"] == suite],
            "missing": [m for m in report["missing"] if m["suite"] == suite],
            "notes": [n for n in report["notes"] if n.startswith(f"{suite}: ")],
            "problems": [{k: v for k, v in p.items() if k != "message"} for p in report["reply_problems"]
                         if p["suite"] == suite]}


def _fresh(ws: Path, target: Path) -> Path:
    """A copy of the workspace (the same cases, edits and templates) without its runs."""
    shutil.copytree(ws, target)
    for run in json.loads(run_cli(["runs", "list", "-w", str(target), "--json"]).stdout):
        assert run_cli(["runs", "rm", run["id"], "-w", str(target)]).exit_code == 0
    return target


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize("suite", SUITES)
def test_a_full_export_read_back_says_what_the_run_said(exported, tmp_path, suite, fmt):
    ws, ids, root = exported
    original = _said(_report(ws, "--run", ids[suite], "--only-named"), suite)
    kinds = {m["reason"] for m in original["missing"]} | {"cut off" for p in original["problems"] if p["truncated"]}
    expected = {"contextcanvas": {"transport", "stale", "cut off"}, "modality": {"absent"},
                "counterfactual": {"skipped"}, "swap": {"stale", "cut off"}}[suite]
    assert expected <= kinds  # the run has something of each to say
    # Every answer was rendered from the system template changed since: stale, with the file named.
    assert any("probes/templates/system.txt has another text" in (m["detail"] or "") for m in original["missing"])
    if suite == "modality":  # T001 was asked with a model's draft caption: the row is marked, a note names it
        _assert_unreviewed(original)
    export = root / f"{suite}.{fmt}"

    assert _said(_report(ws, "--predictions", str(export)), suite) == original

    fresh = _fresh(ws, tmp_path / "fresh")
    imported = run_cli(["runs", "import", str(export), "-w", str(fresh)])
    assert imported.exit_code == 0, imported.stderr
    # The same words, the workspace's own paths (its cases file, its templates folder) aside.
    assert json.loads(json.dumps(_said(_report(fresh), suite)).replace(str(fresh), str(ws))) == original


def _assert_unreviewed(said: dict) -> None:
    [row] = said["rows"]
    assert row["unreviewed"] == 1, row
    assert any("with a caption a model drafted and no person has reviewed (T001)" in n for n in said["notes"])


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_run_that_recorded_only_its_unreviewed_captions_keeps_them_read_back(exported, tmp_path, fmt):
    """A modality run that recorded no caption digests names its cases asked with a draft caption in its notes
    (``unreviewed``) alone: its export carries them (``run_unreviewed``), so the marks and the note stay."""
    ws, ids, root = exported
    original = _said(_report(ws, "--run", ids["older"], "--only-named"), "modality")
    _assert_unreviewed(original)
    export = root / f"older.{fmt}"

    assert _said(_report(ws, "--predictions", str(export)), "modality") == original

    fresh = _fresh(ws, tmp_path / "fresh")
    imported = run_cli(["runs", "import", str(export), "-w", str(fresh)])
    assert imported.exit_code == 0, imported.stderr
    assert json.loads(json.dumps(_said(_report(fresh), "modality")).replace(str(fresh), str(ws))) == original
    [run] = table_rows(fresh, "runs")
    assert json.loads(run["notes"])["unreviewed"] == ["T001"]
    shown = run_cli(["report", "-w", str(fresh), "--resamples", "100"])
    scores = shown.stdout.split("Runs read", 1)[0]  # the tables of numbers (the last one names the runs read)
    named = [line.split("│")[1].strip() for line in scores.splitlines() if line.startswith(f"│ {OLDER}")]
    assert named and all(name.endswith("(unreviewed captions)") for name in named), shown.stdout

    # A file made before cfkit wrote the column reads as before: nothing recorded of unreviewed captions.
    if fmt == "jsonl":
        before = tmp_path / "before.jsonl"
        before.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "run_unreviewed"}) + "\n"
                                  for line in export.read_text().splitlines()))
        assert _said(_report(ws, "--predictions", str(before)), "modality")["rows"][0]["unreviewed"] == 0
