"""A run taken out with ``cfkit runs export`` and brought back with ``cfkit runs import``, or its export given to
``cfkit report --predictions``, is reported as it was: an answer about a case (or caption) changed since the run
asked it is still stale, and counted wrong.

The workspace is the demo's (real probe runs of the baseline models, a real store, the caption files); a case's
question and a caption text are changed after the runs, as a person editing the cases would.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.workspace import run_cli

CC = "contextcanvas-baseline-always-yes"
MODALITY = "modality-baseline-always-yes"


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    ws = tmp_path_factory.mktemp("stale") / "demo"
    assert run_cli(["demo", "--output", str(ws)]).exit_code == 0
    cases = ws / "cases.jsonl"
    cases.write_text(cases.read_text().replace("A film school is making a poster",
                                               "A film school is making a large poster"))
    caption = ws / "captions" / "MX01.yaml"
    caption.write_text(caption.read_text().replace("Nothing in the cup is green.", "Nothing in the cup is green!"))
    return ws


def run_ids(ws: Path) -> list[str]:
    listed = json.loads(run_cli(["runs", "list", "-w", str(ws), "--json"]).stdout)
    return [r["id"] for r in listed if r["id"].startswith((CC, MODALITY))]


def report(ws: Path, ids: list[str], files: list[Path] = ()) -> tuple[dict, list]:
    """The report of the runs ``ids``, stored, or of their export ``files`` given to --predictions."""
    args = [a for path in files for a in ("--predictions", str(path))] or [
        *(a for run_id in ids for a in ("--run", run_id)), "--only-named"]
    result = run_cli(["report", "-w", str(ws), *args, "--format", "json", "--resamples", "100"])
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    numbers = {suite: got[suite][0]["accuracy"] for suite in ("contextcanvas", "modality")}
    stale = sorted((m["model"], m["case"], m["condition"]) for m in got["missing"] if m["reason"] == "stale")
    return numbers, stale


@pytest.mark.parametrize(("fmt", "suffix"), [("jsonl", ".jsonl"), ("csv", ".csv"), ("parquet", ".parquet"),
                                             ("inspect", ".eval")])
def test_a_run_exported_reported_and_imported_keeps_its_stale_answers(demo, tmp_path, fmt, suffix):
    ws = tmp_path / "ws"
    shutil.copytree(demo, ws)
    ids = run_ids(ws)
    before = report(ws, ids)
    # the changed case is stale in both suites; the changed evidence text makes MX01's evidence answer stale
    assert {(case, condition) for _, case, condition in before[1]} >= {("MX06", "image"), ("MX06", "text"),
                                                                        ("MX01", "evidence")}
    assert ("MX01", "neutral") not in {(case, condition) for _, case, condition in before[1]}
    targets = [tmp_path / f"{run_id}{suffix}" for run_id in ids]
    for run_id, target in zip(ids, targets):
        assert run_cli(["runs", "export", run_id, "-w", str(ws), "--format", fmt, "--output", str(target)]
                       ).exit_code == 0
    assert report(ws, ids, targets) == before  # the export files, read as the runs they record
    for run_id, target in zip(ids, targets):
        assert run_cli(["runs", "rm", run_id, "-w", str(ws)]).exit_code == 0
        imported = run_cli(["runs", "import", str(target), "-w", str(ws)])
        assert imported.exit_code == 0, imported.output
    assert report(ws, ids) == before
