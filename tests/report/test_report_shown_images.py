"""The report says when the models it sets side by side were shown different files as one case's image."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
from PIL import Image

from support.workspace import run_cli


def _probe(ws: Path, model: str, suite: str = "contextcanvas") -> None:
    result = run_cli(["probe", "run", "-m", model, "-s", suite, "-w", str(ws)])
    assert result.exit_code == 0, result.stderr


def _replace_image(ws: Path, name: str = "T002.png") -> tuple[str, str]:
    """Another picture under the case image's name; (digest before, digest after)."""
    path = ws / "data" / "images" / name
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    image = np.asarray(Image.open(path).convert("RGB")).copy()
    image[:10, :10] = 255 - image[:10, :10]
    Image.fromarray(image).save(path)
    return before, hashlib.sha256(path.read_bytes()).hexdigest()


def _notes(ws: Path) -> tuple[list[str], str]:
    as_json = run_cli(["report", "-w", str(ws), "--format", "json"])
    assert as_json.exit_code == 0, as_json.stderr
    table = run_cli(["report", "-w", str(ws)])
    return json.loads(as_json.stdout)["notes"], table.stderr


def test_a_case_image_changed_between_two_models_runs_is_named_with_who_saw_which(tiny_ws):
    _probe(tiny_ws, "baseline:always-yes")
    before, after = _replace_image(tiny_ws)
    _probe(tiny_ws, "baseline:always-no")

    notes, said = _notes(tiny_ws)

    [note] = [n for n in notes if "different image files" in n]
    assert "1 case was shown" in note and "T002" in note and "T001" not in note, note
    assert f"baseline:always-yes saw {before[:12]}…;" in note or f"baseline:always-yes saw {before[:12]}…)" in note, note
    assert f"baseline:always-no saw {after[:12]}… (the file now)" in note, note
    # The same line goes with the tables on stderr (and so on the browser's report page).
    assert note.replace("\n", " ") in " ".join(said.split()).replace("warning: ", ""), said


def test_one_models_runs_of_two_suites_are_told_apart_by_suite(tiny_ws):
    _probe(tiny_ws, "baseline:always-yes", "contextcanvas")
    _replace_image(tiny_ws, "T001.png")
    _probe(tiny_ws, "baseline:always-yes", "swap")

    notes, _ = _notes(tiny_ws)

    [note] = [n for n in notes if "different image files" in n]
    assert "baseline:always-yes (contextcanvas) saw" in note and "baseline:always-yes (swap) saw" in note, note


def test_models_shown_the_same_files_get_no_such_note(tiny_ws):
    _probe(tiny_ws, "baseline:always-yes")
    _probe(tiny_ws, "baseline:always-no")
    # Rewriting a file with the same bytes changes its mtime (a new run id) but not what the models saw.
    path = tiny_ws / "data" / "images" / "T002.png"
    path.write_bytes(path.read_bytes())
    _probe(tiny_ws, "baseline:random")

    notes, said = _notes(tiny_ws)

    assert not [n for n in notes if "different image files" in n] and "different image files" not in said
