"""An answer about a case's image as it was before the file changed is stale, not credited to the file now.

Every stored reply records the SHA-256 of the image it was about. A case image
replaced after a model's run (a re-export, a copy from another machine) would
otherwise leave that model's answers counted as answers about the new picture,
and set beside models that saw the new one as if both had seen one input.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
from PIL import Image

from support.workspace import run_cli


def _probe(ws: Path, model: str, suite: str = "contextcanvas") -> str:
    result = run_cli(["probe", "run", "-m", model, "-s", suite, "-w", str(ws)])
    assert result.exit_code == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def _replace_image(ws: Path, name: str = "T002.png", folder: str = "data/images") -> str:
    """Another picture under the case image's name; the digest it had."""
    path = ws / folder / name
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    image = np.asarray(Image.open(path).convert("RGB")).copy()
    image[:10, :10] = 255 - image[:10, :10]
    Image.fromarray(image).save(path)
    return before


def _stale(ws: Path) -> tuple[list[dict], dict, str]:
    """(the stale units, the report's JSON, what the table view said)."""
    as_json = run_cli(["report", "-w", str(ws), "--format", "json"])
    assert as_json.exit_code == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    table = run_cli(["report", "-w", str(ws)])
    return [m for m in report["missing"] if m["reason"] == "stale"], report, table.stderr


def test_a_case_image_changed_after_one_models_run_makes_its_answers_stale_only(tiny_ws):
    older = _probe(tiny_ws, "baseline:always-yes")
    before = _replace_image(tiny_ws)
    _probe(tiny_ws, "baseline:always-no")

    stale, report, said = _stale(tiny_ws)

    [unit] = stale
    assert (unit["model"], unit["case"], unit["condition"], unit["run"]) == ("baseline:always-yes", "T002", "image", older)
    assert "answered an earlier file of case T002's image" in unit["detail"] and before[:12] in unit["detail"]
    rows = {r["model"]: r for r in report["contextcanvas"]}
    assert rows["baseline:always-yes"]["incomplete"] and not rows["baseline:always-no"]["incomplete"]
    assert "stale" in said and "T002" in said


def test_every_suite_that_showed_the_earlier_file_is_stale_until_asked_again(tiny_ws):
    _probe(tiny_ws, "baseline:always-yes", "contextcanvas")
    _probe(tiny_ws, "baseline:always-yes", "swap")
    _replace_image(tiny_ws, "T001.png")

    stale, _, _ = _stale(tiny_ws)
    assert {(u["suite"], u["case"]) for u in stale} == {("contextcanvas", "T001"), ("swap", "T001")}

    _probe(tiny_ws, "baseline:always-yes", "contextcanvas")  # asked again: only the swap run is behind
    stale, _, _ = _stale(tiny_ws)
    assert {(u["suite"], u["case"]) for u in stale} == {("swap", "T001")}


def test_a_file_rewritten_with_the_same_bytes_is_the_same_image(tiny_ws):
    _probe(tiny_ws, "baseline:always-yes")
    path = tiny_ws / "data" / "images" / "T002.png"
    path.write_bytes(path.read_bytes())  # a new mtime (the digest table no longer holds it): read and compared

    stale, report, said = _stale(tiny_ws)
    assert not stale and not report["contextcanvas"][0]["incomplete"] and "stale" not in said


def test_answers_without_an_image_are_not_about_the_file(mini_ws):
    """Text, Neutral and Evidence prompts show no image: a changed file leaves them standing."""
    _probe(mini_ws, "baseline:random", "modality")
    _replace_image(mini_ws, "coffee.jpg", "images")  # case MX01's

    stale, _, _ = _stale(mini_ws)
    assert {(u["case"], u["condition"]) for u in stale} == {("MX01", "image")}


def test_a_report_reads_no_image_the_digest_table_still_holds(tiny_ws, monkeypatch):
    """The comparison costs one stat per image: a file is read only where the run's digest no longer holds."""
    import hashlib as hashing
    import os

    for path in (tiny_ws / "data" / "images").iterdir():  # written long enough before the run to be trusted by mtime
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns - 5 * 10**9))
    _probe(tiny_ws, "baseline:always-yes")
    read = []
    real = hashing.file_digest
    monkeypatch.setattr(hashing, "file_digest", lambda fh, name: read.append(fh.name) or real(fh, name))

    assert not _stale(tiny_ws)[0] and read == []
    _replace_image(tiny_ws)
    read.clear()
    assert _stale(tiny_ws)[0] and {Path(p).name for p in read} == {"T002.png"}
