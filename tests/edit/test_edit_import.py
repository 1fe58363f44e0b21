"""``cfkit edits import DIR``: one edit per file, candidates by name, masks derived where a spec has none."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from support.edits import add_maskless_spec
from support.store_sql import table_rows
from support.workspace import run_cli, tree_snapshot


def source(ws_root: Path) -> np.ndarray:
    return np.asarray(Image.open(ws_root / "data" / "images" / "T001.png").convert("RGB"))


def painted(ws_root: Path, box: tuple[int, int, int, int], colour: tuple[int, int, int]) -> np.ndarray:
    y0, y1, x0, x1 = box
    image = source(ws_root).copy()
    image[y0:y1, x0:x1] = colour
    return image


def save(image: np.ndarray, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(image).save(path)
    return path


def rows(ws_root: Path) -> list[dict]:
    return table_rows(ws_root, "edits", "id, spec_id, engine, status, params", order_by="id")


@pytest.fixture
def folder(tiny_ws: Path, tmp_path: Path) -> Path:
    """TX01.png and TX01-2.png (two candidates in TX01's box), TX03.png (a spec without a mask), a note."""
    add_maskless_spec(tiny_ws)
    edits = tmp_path / "from-photoshop"
    save(painted(tiny_ws, (16, 32, 24, 48), (30, 160, 60)), edits / "TX01.png")
    save(painted(tiny_ws, (16, 32, 24, 48), (40, 90, 200)), edits / "TX01-2.png")
    save(painted(tiny_ws, (20, 44, 50, 80), (250, 250, 40)), edits / "TX03.png")
    (edits / "notes.txt").write_text("made in an image editor")
    return edits


def test_a_spec_without_a_mask_refuses_the_import_unless_masks_are_derived(tiny_ws: Path, folder: Path,
                                                                            no_torch):
    before = tree_snapshot(tiny_ws)
    refused = run_cli(["edits", "import", str(folder), "-w", str(tiny_ws)])
    assert refused.exit_code == 2
    assert "spec TX03 has no mask yet; pass --derive-masks" in refused.stderr and "Nothing was imported" in refused.stderr
    assert tree_snapshot(tiny_ws) == before


def test_import_records_one_edit_per_file_with_candidates_and_derives_a_missing_mask(tiny_ws: Path, folder: Path,
                                                                                    no_torch):
    result = run_cli(["edits", "import", str(folder), "--derive-masks", "-w", str(tiny_ws)])
    assert result.exit_code == 0, result.stderr
    recorded = rows(tiny_ws)
    assert [(r["spec_id"], r["engine"], r["status"]) for r in recorded] == [
        ("TX01", "file", "ok"), ("TX01", "file", "ok"), ("TX03", "file", "ok")]
    inputs = [json.loads(r["params"])["input"] for r in recorded]
    assert inputs == ["TX01.png", "TX01-2.png", "TX03.png"]
    assert "[1/3] TX01.png → TX01 imported #1" in result.stderr and "[2/3] TX01-2.png → TX01 imported #2" in result.stderr
    assert "left alone (not an image): notes.txt" in result.stderr
    # Each candidate is its own edit with its own files, composited inside TX01's mask.
    for edit_id, colour in ((1, (30, 160, 60)), (2, (40, 90, 200))):
        composite = np.asarray(Image.open(tiny_ws / ".cfkit" / "edits" / "TX01" / f"{edit_id}-composite.png"))
        assert tuple(composite[24, 36]) == colour
    # TX03's mask was derived from its file, written beside the others and flagged for review.
    mask = np.asarray(Image.open(tiny_ws / "interventions" / "masks" / "TX03.png")) > 0
    truth = np.zeros_like(mask)
    truth[20:44, 50:80] = True
    assert mask[truth].all() and mask.sum() <= 1.5 * truth.sum()
    assert "flagged for review" in result.stderr
    listing = json.loads(run_cli(["specs", "list", "--json", "-w", str(tiny_ws)]).stdout)
    assert listing["derived_mask_unreviewed"] == ["TX03"]
    # The JSON export names every file; importing the same folder again adds nothing.
    again = run_cli(["edits", "import", str(folder), "--derive-masks", "--json", "-w", str(tiny_ws)])
    assert again.exit_code == 0, again.stderr
    data = json.loads(again.stdout)
    assert [(f["file"], f["status"], f["existing"]) for f in data["files"]] == [
        ("TX01.png", "already imported", 1), ("TX01-2.png", "already imported", 2), ("TX03.png", "already imported", 3)]
    assert data["masks"] == [] and len(rows(tiny_ws)) == 3


def test_files_that_match_no_spec_or_another_shape_refuse_the_whole_import(tiny_ws: Path, folder: Path):
    save(painted(tiny_ws, (0, 8, 0, 8), (0, 0, 0)), folder / "CF99.png")
    # A name that is not even a spec id was one line about the id alone ("'TX01 v2' is not a spec id"), naming
    # neither the file nor the folder's other problems; it is listed with them.
    save(painted(tiny_ws, (0, 8, 0, 8), (0, 0, 0)), folder / "TX01 v2.png")
    Image.fromarray(np.zeros((64, 64, 3), np.uint8)).save(folder / "TX01-3.png")  # square, the source is 96x64
    before = tree_snapshot(tiny_ws)
    result = run_cli(["edits", "import", str(folder), "--derive-masks", "-w", str(tiny_ws)])
    assert result.exit_code == 2
    assert "nothing was imported" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "CF99.png: no spec 'CF99'" in result.stderr and "TX01-3.png is 64x64" in result.stderr
    assert "TX01 v2.png: no spec 'TX01 v2'" in result.stderr
    assert tree_snapshot(tiny_ws) == before


def test_an_edit_at_another_scale_is_resized_and_an_accepted_spec_is_kept(tiny_ws: Path, tmp_path: Path, no_torch):
    edits = tmp_path / "edits"
    big = np.asarray(Image.fromarray(painted(tiny_ws, (16, 32, 24, 48), (30, 160, 60))).resize((192, 128)))
    save(big, edits / "TX01.png")
    result = run_cli(["edits", "import", str(edits), "-w", str(tiny_ws)])
    assert result.exit_code == 0, result.stderr
    raw = np.asarray(Image.open(tiny_ws / ".cfkit" / "edits" / "TX01" / "1-raw.png"))
    assert raw.shape == (64, 96, 3)
    assert json.loads(rows(tiny_ws)[0]["params"])["notes"] == ["--input resized from 192x128 to 96x64"]
    assert run_cli(["review", "TX01", "--accept", "-w", str(tiny_ws)]).exit_code == 0
    save(painted(tiny_ws, (16, 32, 24, 48), (200, 30, 30)), edits / "TX01-2.png")
    kept = run_cli(["edits", "import", str(edits), "-w", str(tiny_ws)])
    assert kept.exit_code == 0 and "accepted edit #1 stays" in kept.stderr and len(rows(tiny_ws)) == 1
    more = run_cli(["edits", "import", str(edits), "--again", "-w", str(tiny_ws)])
    assert more.exit_code == 0 and [r["id"] for r in rows(tiny_ws)] == [1, 2]  # TX01.png was imported already


def test_a_failed_check_is_listed_and_exits_1(tiny_ws: Path, tmp_path: Path, no_torch):
    edits = tmp_path / "edits"
    save(source(tiny_ws), edits / "TX01.png")  # no change at all: the check's change-inside test fails
    result = run_cli(["edits", "import", str(edits), "-w", str(tiny_ws)])
    assert result.exit_code == 1
    assert "TX01.png → TX01 check failed" in result.stderr and "1 of 1 file" in result.stderr
    assert [r["status"] for r in rows(tiny_ws)] == ["ok"]  # recorded all the same


def test_an_empty_or_missing_folder_says_so(tiny_ws: Path, tmp_path: Path):
    (tmp_path / "empty").mkdir()
    empty = run_cli(["edits", "import", str(tmp_path / "empty"), "-w", str(tiny_ws)])
    assert empty.exit_code == 2 and "holds no edited images" in empty.stderr
    missing = run_cli(["edits", "import", str(tmp_path / "nope"), "-w", str(tiny_ws)])
    assert missing.exit_code == 2 and "is not a folder" in missing.stderr


@pytest.fixture
def no_torch(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "no-torch-cache"))
    monkeypatch.delenv("CFKIT_LPIPS_BACKBONE", raising=False)


def test_identical_files_of_a_spec_are_imported_once(tiny_ws: Path, tmp_path: Path, no_torch):
    """A folder of 2,000 copies of one edit (hard links: no disk, but each read and hashed) makes one edit."""
    import os

    edits = tmp_path / "copies"
    first = save(painted(tiny_ws, (16, 32, 24, 48), (30, 160, 60)), edits / "TX01.png")
    for n in range(2, 2_001):
        os.link(first, edits / f"TX01-{n}.png")
    save(painted(tiny_ws, (16, 32, 24, 48), (40, 90, 200)), edits / "TX01-2001.png")
    result = run_cli(["edits", "import", str(edits), "--json", "-w", str(tiny_ws)])
    assert result.exit_code == 0, result.stderr
    files = json.loads(result.stdout)["files"]
    assert [(f["file"], f["status"]) for f in files if f["status"] != "same file"] == [
        ("TX01.png", "imported"), ("TX01-2001.png", "imported")]
    copies = [f for f in files if f["status"] == "same file"]
    assert len(copies) == 1_999 and {f["copy_of"] for f in copies} == {"TX01.png"}
    assert [json.loads(r["params"])["input"] for r in rows(tiny_ws)] == ["TX01.png", "TX01-2001.png"]
    assert "TX01-7.png → TX01 same file: the same bytes as TX01.png, imported once" in result.stderr


def test_more_different_files_of_a_spec_than_candidates_refuse_the_import(tiny_ws: Path, tmp_path: Path):
    edits = tmp_path / "many"
    for n in range(1, 102):
        save(painted(tiny_ws, (16, 32, 24, 48), (n, 160, 60)), edits / (f"TX01-{n}.png" if n > 1 else "TX01.png"))
    before = tree_snapshot(tiny_ws)
    result = run_cli(["edits", "import", str(edits), "-w", str(tiny_ws)])
    assert result.exit_code == 2
    assert "spec TX01 has 101 different files" in result.stderr and "at most 100" in result.stderr
    assert tree_snapshot(tiny_ws) == before
