"""A run exported in full and read back says what the run said: for every suite, a report over the export
(``report --predictions``) and over the run imported into a fresh workspace with the same cases gives the same
numbers and the same notes (incomplete, cut off, failed, skipped, stale, older templates) as the report over the
run itself.

The runs are real: the CLI against a loopback Chat Completions server that cuts one reply off at the token limit
and fails one request; the counterfactual run skips a pair without an edit, the swap run a three-option case, the
modality run asks part of its suite. After the runs, a case is reworded and the probe templates changed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.chat_api_server import Scripted, answer_json, completion, error_body, user_text
from support.probe_runs import _accepted_edit, add_modality, openai_run
from support.workspace import REPO, run_cli, write_workspace

SUITES = ("contextcanvas", "modality", "counterfactual", "swap")


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
    for run in json.loads(run_cli(["runs", "list", "-w", str(ws), "--json"]).stdout):
        ids[run["suite"]] = run["id"]
        for fmt, suffix in (("jsonl", ".jsonl"), ("csv", ".csv"), ("predictions", ".predictions.jsonl")):
            target = root / f"{run['suite']}{suffix}"
            done = run_cli(["runs", "export", run["id"], "-w", str(ws), "--format", fmt, "--output", str(target)])
            assert done.exit_code == 0, done.stderr
    # After the runs: T002 reworded, the system template changed.
    cases = ws / "data" / "cases.jsonl"
    cases.write_text(cases.read_text().replace("a winter card?", "a winter greeting card?"))
    (ws / "probes" / "templates").mkdir()
    system = (REPO / "cfkit" / "templates" / "system.txt").read_text()
    (ws / "probes" / "templates" / "system.txt").write_text(system + "\nAnswer briefly.\n")
    return ws, ids, root


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
    original = _said(_report(ws, "--run", ids[suite]), suite)
    kinds = {m["reason"] for m in original["missing"]} | {"cut off" for p in original["problems"] if p["truncated"]}
    expected = {"contextcanvas": {"transport", "stale", "cut off"}, "modality": {"absent"},
                "counterfactual": {"skipped"}, "swap": {"stale", "cut off"}}[suite]
    assert expected <= kinds  # the run has something of each to say
    assert any("other probe templates" in n for n in original["notes"])
    export = root / f"{suite}.{fmt}"

    assert _said(_report(ws, "--predictions", str(export)), suite) == original

    fresh = _fresh(ws, tmp_path / "fresh")
    imported = run_cli(["runs", "import", str(export), "-w", str(fresh)])
    assert imported.exit_code == 0, imported.stderr
    # The same words, the workspace's own paths (its cases file, its templates folder) aside.
    assert json.loads(json.dumps(_said(_report(fresh), suite)).replace(str(fresh), str(ws))) == original
