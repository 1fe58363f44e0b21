"""Masks derived from an edit: the region found against the true change, the spec's mask file and its review flag."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from cfkit.errors import SpecError
from cfkit.mask_derive import derive_mask
from support.edits import add_maskless_spec
from support.workspace import gradient_image, run_cli, tree_snapshot


def iou(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a > 0, b > 0
    return float((a & b).sum() / (a | b).sum())


def textured(width: int, height: int, seed: int = 0) -> np.ndarray:
    """A photograph-like test image: smooth gradients, a few shapes and fine noise."""
    image = Image.fromarray(gradient_image(width, height, seed))
    draw = ImageDraw.Draw(image)
    rng = np.random.default_rng(seed)
    for _ in range(12):
        x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
        r = int(rng.integers(4, 18))
        draw.ellipse([x - r, y - r, x + r, y + r], fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
    noisy = np.asarray(image).astype(np.float64) + rng.normal(0, 3, (height, width, 3))
    return np.clip(noisy, 0, 255).astype(np.uint8)


def jpeg(image: np.ndarray, quality: int) -> np.ndarray:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=quality)
    return np.asarray(Image.open(buffer).convert("RGB"))


def synthetic_edit(width: int = 256, height: int = 192) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(original, edited, true change region): an object recoloured, another replaced, the whole edit re-encoded."""
    original = textured(width, height)
    truth = Image.new("L", (width, height), 0)
    draw = ImageDraw.Draw(truth)
    draw.ellipse([40, 50, 110, 110], fill=255)  # a recoloured object
    draw.rectangle([160, 120, 205, 170], fill=255)  # a replaced one
    region = np.asarray(truth) > 0
    edited = original.astype(np.float64)
    ellipse = np.zeros_like(region)
    ellipse[:, :130] = region[:, :130]
    edited[ellipse] = edited[ellipse] * 0.3 + np.array([40.0, 170.0, 60.0]) * 0.7
    box = region & ~ellipse
    stripes = (np.indices((height, width))[1] // 4) % 2
    edited[box] = np.where(stripes[box, None] == 1, [230.0, 220.0, 40.0], [30.0, 30.0, 140.0])
    # What comes back from an editor elsewhere: the whole image re-encoded, so every pixel differs a little.
    return original, jpeg(np.clip(edited, 0, 255).astype(np.uint8), 88), region


def test_derived_mask_covers_the_change_and_little_else():
    original, edited, truth = synthetic_edit()
    derived = derive_mask(original, edited)
    # The acceptance bar: IoU against the true change region of at least 0.8.
    assert iou(derived.array, truth) >= 0.8, iou(derived.array, truth)
    mask = derived.array > 0
    assert mask[truth].mean() >= 0.97  # the change is covered …
    from scipy.ndimage import binary_dilation

    near = binary_dilation(truth, iterations=derived.margin_px + 2)
    # … and little away from it, despite the re-encoding noise everywhere (a neighbouring disc's JPEG
    # fringe joins the recoloured object here: about 200 of 5745 pixels).
    assert mask[~near].sum() <= 0.05 * truth.sum()
    assert derived.regions == 2 and derived.threshold >= 6.0


def test_holes_inside_a_changed_object_are_filled_and_specks_dropped():
    original = textured(200, 150, seed=3)
    edited = original.copy()
    edited[40:90, 50:110] = (250, 250, 250)
    edited[60:64, 78:82] = original[60:64, 78:82]  # a few pixels inside happen to stay the same
    edited[130, 10] = (0, 0, 0)  # one stray pixel far away
    derived = derive_mask(original, edited)
    assert derived.array[62, 80] == 255
    assert derived.array[130, 10] == 0
    assert derived.regions == 1


def test_an_unchanged_image_has_no_mask_to_derive():
    original = textured(120, 90)
    noisy = np.clip(original + np.random.default_rng(1).normal(0, 2, original.shape), 0, 255).astype(np.uint8)
    with pytest.raises(SpecError, match="no change to derive a mask from"):
        derive_mask(original, noisy)


def test_another_picture_is_named_as_such_not_as_an_unchanged_one(tiny_ws: Path, tmp_path: Path):
    """A wrong file (another photograph of the same shape) differs everywhere; saying it differs nowhere would
    send the researcher looking for an edit that is not there."""
    original = textured(120, 90, seed=0)
    with pytest.raises(SpecError, match="differs from its source almost everywhere") as raised:
        derive_mask(original, textured(120, 90, seed=5)[:, ::-1].copy())
    assert "nowhere" not in str(raised.value)
    add_maskless_spec(tiny_ws)
    other = tmp_path / "other.png"
    Image.fromarray(255 - gradient_image(96, 64, 7)).save(other)
    before = tree_snapshot(tiny_ws)
    result = run_cli(["specs", "mask", "TX03", "--from-edit", str(other), "-w", str(tiny_ws)])
    assert result.exit_code == 2 and "almost everywhere" in result.stderr and "Traceback" not in result.stderr
    assert tree_snapshot(tiny_ws) == before


def test_explicit_threshold_and_margin_are_used():
    original, edited, truth = synthetic_edit()
    tight = derive_mask(original, edited, margin_px=0)
    wide = derive_mask(original, edited, margin_px=6)
    assert tight.margin_px == 0 and wide.margin_px == 6
    assert wide.coverage > tight.coverage
    assert derive_mask(original, edited, threshold=9.0).threshold == 9.0


# ── the command ────────────────────────────────────────────────────────────


def edited_copy(ws_root: Path, path: Path) -> np.ndarray:
    original = np.asarray(Image.open(ws_root / "data" / "images" / "T001.png").convert("RGB"))
    edited = original.copy()
    edited[20:44, 30:60] = (250, 250, 40)
    Image.fromarray(edited).save(path)
    return edited


def test_specs_mask_from_a_file_writes_the_mask_and_flags_it(tiny_ws: Path, tmp_path: Path):
    add_maskless_spec(tiny_ws)
    edited = tmp_path / "TX03-edited.png"
    edited_copy(tiny_ws, edited)
    listing = json.loads(run_cli(["specs", "list", "--json", "-w", str(tiny_ws)]).stdout)
    assert listing["without_mask"] == ["TX03"]
    plain = run_cli(["specs", "list", "-w", str(tiny_ws)])
    assert "without a mask" in plain.stdout and "cfkit specs mask TX03 --from-edit" in plain.stdout

    result = run_cli(["specs", "mask", "TX03", "--from-edit", str(edited), "-w", str(tiny_ws)])
    assert result.exit_code == 0, result.stderr
    mask_path = tiny_ws / "interventions" / "masks" / "TX03.png"
    assert mask_path.is_file() and "flagged for review" in result.stderr
    assert "mask: masks/TX03.png" in (tiny_ws / "interventions" / "TX03.yaml").read_text()
    assert "# the mask line comes from" in (tiny_ws / "interventions" / "TX03.yaml").read_text()  # comments kept
    mask = np.asarray(Image.open(mask_path)) > 0
    truth = np.zeros_like(mask)
    truth[20:44, 30:60] = True
    assert mask[truth].all() and mask.sum() <= 1.5 * truth.sum()  # a 1 px margin around a 30x24 patch
    provenance = json.loads(Image.open(mask_path).text["cfkit-derived-mask"])
    assert provenance["source"].startswith("TX03-edited.png")

    listing = json.loads(run_cli(["specs", "list", "--json", "-w", str(tiny_ws)]).stdout)
    row = next(r for r in listing["specs"] if r["id"] == "TX03")
    assert row["mask_derived"].endswith("not reviewed") and listing["derived_mask_unreviewed"] == ["TX03"]
    report = json.loads(run_cli(["specs", "validate", "TX03", "--json", "-w", str(tiny_ws)]).stdout)[0]
    assert report["ok"] and any("not reviewed" in f["message"] for f in report["findings"])

    # An existing mask is kept without --force.
    before = tree_snapshot(tiny_ws)
    again = run_cli(["specs", "mask", "TX03", "--from-edit", str(edited), "-w", str(tiny_ws)])
    assert again.exit_code == 2 and "--force" in again.stderr and "kept" in again.stderr
    assert tree_snapshot(tiny_ws) == before
    assert run_cli(["specs", "mask", "TX03", "--from-edit", str(edited), "--force", "-w", str(tiny_ws)]).exit_code == 0


def test_a_derived_mask_counts_as_reviewed_once_an_edit_made_with_it_is_accepted(tiny_ws: Path, tmp_path: Path):
    add_maskless_spec(tiny_ws)
    edited = tmp_path / "TX03.png"
    edited_copy(tiny_ws, edited)
    ws = str(tiny_ws)
    assert run_cli(["specs", "mask", "TX03", "--from-edit", str(edited), "-w", ws]).exit_code == 0
    assert run_cli(["edit", "TX03", "--engine", "file", "--input", str(edited), "-w", ws]).exit_code in (0, 1)
    # The edit can also give a mask: derived again from the recorded edit, over the first one.
    from_edit = run_cli(["specs", "mask", "TX03", "--from-edit", "1", "--force", "-w", ws])
    assert from_edit.exit_code == 0, from_edit.stderr
    assert "derived from edit #1" in from_edit.stdout
    assert run_cli(["edit", "TX03", "--engine", "file", "--input", str(edited), "-w", ws]).exit_code in (0, 1)
    assert run_cli(["review", "TX03", "--edit", "2", "--accept", "-w", ws]).exit_code == 0
    row = next(r for r in json.loads(run_cli(["specs", "list", "--json", "-w", ws]).stdout)["specs"]
               if r["id"] == "TX03")
    assert row["mask_derived"] == "derived from edit #1"


def test_a_mask_derived_from_a_recorded_edit_says_how_to_remake_that_edit_with_it(tiny_ws: Path, tmp_path: Path):
    """The recorded edit keeps the earlier mask's region, so the next step is a new edit of the same image made
    with the derived mask; following it gives an edit the check measures and whose acceptance clears the flag."""
    ws = str(tiny_ws)
    add_maskless_spec(tiny_ws)
    edited = tmp_path / "TX03.png"
    edited_copy(tiny_ws, edited)
    assert run_cli(["specs", "mask", "TX03", "--from-edit", str(edited), "-w", ws]).exit_code == 0
    assert run_cli(["edit", "TX03", "--engine", "file", "--input", str(edited), "-w", ws]).exit_code in (0, 1)

    derived = run_cli(["specs", "mask", "TX03", "--from-edit", "1", "--force", "--margin", "3", "-w", ws])
    assert derived.exit_code == 0, derived.stderr
    hint = derived.stderr.split("Next: ", 1)[1].split(",")[0].split()
    assert hint[:6] == ["cfkit", "edit", "TX03", "--engine", "file", "--input"], derived.stderr
    assert Path(hint[6]).name == "1-raw.png"
    assert run_cli(["check", "TX03", "-w", ws]).exit_code == 2  # edit #1 was made with the earlier mask

    remade = run_cli(hint[1:] + ["-w", ws])
    assert remade.exit_code in (0, 1), remade.stderr
    assert run_cli(["check", "TX03", "-w", ws]).exit_code in (0, 1)  # measured: edit #2 has this very mask
    assert run_cli(["review", "TX03", "--edit", "2", "--accept", "-w", ws]).exit_code == 0
    row = next(r for r in json.loads(run_cli(["specs", "list", "--json", "-w", ws]).stdout)["specs"]
               if r["id"] == "TX03")
    assert row["mask_derived"] == "derived from edit #1"


def test_specs_mask_refuses_a_spec_with_regions_and_an_edit_of_another_spec(tiny_ws: Path, tmp_path: Path):
    (tiny_ws / "interventions" / "TX02.yaml").write_text(
        "id: TX02\ncase: T001\ntitle: Boxes\ncue: a corner\nreplacement: another\nprompt: p\n"
        "regions: [{box: [0.5, 0.5, 0.75, 0.75]}]\n")
    edited = tmp_path / "e.png"
    edited_copy(tiny_ws, edited)
    result = run_cli(["specs", "mask", "TX02", "--from-edit", str(edited), "-w", str(tiny_ws)])
    assert result.exit_code == 2 and "regions" in result.stderr
    wrong_size = tmp_path / "small.png"
    Image.fromarray(np.zeros((10, 40, 3), np.uint8)).save(wrong_size)
    add_maskless_spec(tiny_ws)
    result = run_cli(["specs", "mask", "TX03", "--from-edit", str(wrong_size), "-w", str(tiny_ws)])
    assert result.exit_code == 2 and "aspect ratio" in result.stderr
