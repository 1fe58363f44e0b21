"""``cfkit edit`` and ``cfkit edits``: outputs, provenance, bad input, accepted edits, selection."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cfkit.composite import composite_region
from cfkit.store.edits import EditRecord
from cfkit.store.edits import selected as _selected


def select_edit(ws, store, spec_id, *, require_accepted=False):
    return _selected(store, spec_id, require_accepted=require_accepted)
from cfkit.store import Store
from cfkit.workspace import load_workspace
from support.workspace import REPO, gradient_image, run_cli, tree_snapshot
from cfkit.store import checks, reviews
from support.store_sql import table_rows


def _edit(ws: Path, *args: str):
    return run_cli(["edit", "TX01", "-w", str(ws), *args])


def _rows(ws: Path) -> list[dict]:
    return table_rows(ws, "edits", order_by="id")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_classical_edit_writes_raw_and_composite_with_provenance(tiny_ws: Path):
    result = _edit(tiny_ws, "--engine", "classical")
    assert result.exit_code == 0, result.output
    assert "TX01 #1  classical" in result.stdout
    raw_path = tiny_ws / ".cfkit" / "edits" / "TX01" / "1-raw.png"
    comp_path = tiny_ws / ".cfkit" / "edits" / "TX01" / "1-composite.png"
    source = np.asarray(Image.open(tiny_ws / "data" / "images" / "T001.png"))
    mask = np.asarray(Image.open(tiny_ws / "interventions" / "masks" / "TX01.png"))
    raw, comp = np.asarray(Image.open(raw_path)), np.asarray(Image.open(comp_path))
    assert raw.shape == comp.shape == source.shape
    outside = ~composite_region(mask)
    assert np.array_equal(comp[outside], source[outside])
    assert not np.array_equal(comp[mask > 0], source[mask > 0])  # the block was recoloured
    assert Image.open(comp_path).text["Description"] == (
        "synthetic counterfactual diagnostic: cfkit edit #1 of spec TX01, engine classical, composite")

    (row,) = _rows(tiny_ws)
    assert row["spec_id"] == "TX01" and row["engine"] == "classical" and row["status"] == "ok"
    assert row["spec_sha256"] == _sha(tiny_ws / "interventions" / "TX01.yaml")
    assert row["source_sha256"] == _sha(tiny_ws / "data" / "images" / "T001.png")
    assert row["raw_path"] == "edits/TX01/1-raw.png" and row["raw_sha256"] == _sha(raw_path)
    assert row["composite_path"] == "edits/TX01/1-composite.png" and row["composite_sha256"] == _sha(comp_path)
    assert len(row["mask_sha256"]) == 64
    assert row["prompt"] == "Make the block green."
    assert row["label"] == "synthetic counterfactual diagnostic"
    assert row["started_at"] and row["finished_at"] and row["error"] is None and row["fallback"] is None
    params = json.loads(row["params"])
    assert params["op"] == "recolor" and params["color"] == "#20a040"
    assert params["composite"] == {"dilate_px": 4, "feather_px": 2}


def test_example_workspace_edits_offline(mini_ws: Path):
    if not (mini_ws / "interventions" / "EX01.yaml").is_file():
        pytest.skip("examples/mini has no EX01 spec yet")
    result = run_cli(["edit", "EX01", "-w", str(mini_ws), "--engine", "classical"])
    assert result.exit_code == 0, result.output
    assert (mini_ws / ".cfkit" / "edits" / "EX01").is_dir()


def test_dry_run_prints_the_plan_and_writes_nothing(tiny_ws: Path):
    before = tree_snapshot(tiny_ws)
    result = _edit(tiny_ws, "--engine", "auto", "--dry-run")
    assert result.exit_code == 0, result.output
    shown = " ".join(result.stdout.split())  # the table wraps at the terminal's width
    for text in ("Make the block green.", "(96x64)", "coverage 6.2%", "openai then diffusers", "size 992x672",
                 "size 512x344"):
        assert text in shown
    assert "nothing was sent and nothing was written" in result.stderr
    assert tree_snapshot(tiny_ws) == before


def test_auto_without_key_or_weights_says_what_it_tried(tiny_ws: Path):
    with open(tiny_ws / "cfkit.toml", "a") as handle:
        handle.write('\n[edit.engines.diffusers]\nmodel = "cfkit-tests/absent-inpainting-model"\n')
    before = tree_snapshot(tiny_ws)
    result = _edit(tiny_ws, "--engine", "auto")
    assert result.exit_code == 2
    message = result.stderr.strip()
    assert message.count("\n") == 0 and "Traceback" not in result.output
    assert "auto: no engine could run here" in message
    assert "(1) openai: OPENAI_API_KEY is not set" in message
    assert "(2) diffusers: model 'cfkit-tests/absent-inpainting-model' is not in the local Hugging Face cache" in message
    assert "hf download cfkit-tests/absent-inpainting-model" in message
    assert tree_snapshot(tiny_ws) == before


def _spec(ws: Path, text: str) -> None:
    (ws / "interventions" / "TX01.yaml").write_text(
        "id: TX01\ncase: T001\ntitle: Test edit\ncue: a grey block\nreplacement: a green block\n"
        "prompt: Make the block green.\nlabels: {original: 'No', edit: 'Yes'}\n" + text)


def _no_mask(ws: Path) -> None:
    _spec(ws, "classical: {op: remove}\n")


def _other_aspect_mask(ws: Path) -> None:
    Image.fromarray(np.full((64, 64), 255, np.uint8)).save(ws / "interventions" / "masks" / "TX01.png")


def _unreadable_image(ws: Path) -> None:
    (ws / "data" / "images" / "T001.png").write_bytes(b"this is not a png")


def _jpeg_asset(ws: Path) -> None:
    Image.fromarray(gradient_image(16, 16)).save(ws / "interventions" / "flower.jpg", format="JPEG")
    _spec(ws, "mask: masks/TX01.png\nclassical: {op: paste, asset: flower.jpg}\n")


@pytest.mark.parametrize("setup, args, expected", [
    (None, ["edit", "CF99", "--engine", "classical"], "no spec 'CF99' in"),
    (_no_mask, ["edit", "TX01", "--engine", "classical"], "spec TX01: no mask; add 'mask: masks/TX01.png'"),
    (_other_aspect_mask, ["edit", "TX01", "--engine", "classical"], "is 64x64 but the image is 96x64"),
    (_unreadable_image, ["edit", "TX01", "--engine", "classical"], "T001.png: not a readable image file"),
    (_jpeg_asset, ["edit", "TX01", "--engine", "classical"], "flower.jpg is a JPEG file; paste assets must be PNG"),
    (None, ["edit", "TX01", "--engine", "sdxl"], "Unknown editor 'sdxl'. Installed: classical, diffusers, file, openai"),
    (None, ["edit", "TX01", "--engine", "classical", "-n", "2"], "-n 2: engine 'classical' makes one image per call"),
    (None, ["edit", "TX01", "--engine", "file"], "give the image with --input PATH"),
], ids=["unknown-spec", "no-mask", "mask-size", "unreadable-image", "non-png-asset", "unknown-engine",
        "classical-n", "file-without-input"])
def test_bad_input_is_one_clear_line_and_writes_nothing(tiny_ws: Path, setup, args, expected):
    if setup is not None:
        setup(tiny_ws)
    before = tree_snapshot(tiny_ws)
    result = run_cli([args[0], args[1], "-w", str(tiny_ws), *args[2:]])
    assert result.exit_code == 2, result.output
    assert expected in result.stderr
    assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.output
    assert result.stdout == ""
    assert tree_snapshot(tiny_ws) == before


def test_file_engine_imports_same_size_and_same_aspect(tiny_ws: Path, tmp_path: Path):
    # Inverted pictures: a change inside the mask large enough for the edit's own check to pass.
    same = tmp_path / "same.png"
    Image.fromarray(255 - gradient_image(96, 64, 9)).save(same)
    assert _edit(tiny_ws, "--engine", "file", "--input", str(same)).exit_code == 0
    half = tmp_path / "half.png"
    Image.fromarray(255 - gradient_image(48, 32, 9)).save(half)
    result = _edit(tiny_ws, "--engine", "file", "--input", str(half))
    assert result.exit_code == 0, result.output
    assert "--input resized from 48x32 to 96x64" in result.stderr
    rows = _rows(tiny_ws)
    assert [r["engine"] for r in rows] == ["file", "file"]
    assert json.loads(rows[0]["params"])["input_sha256"] == _sha(same)
    assert np.array_equal(np.asarray(Image.open(tiny_ws / ".cfkit" / rows[0]["raw_path"])),
                          np.asarray(Image.open(same)))
    square = tmp_path / "square.png"
    Image.fromarray(gradient_image(64, 64, 9)).save(square)
    before = tree_snapshot(tiny_ws)
    bad = _edit(tiny_ws, "--engine", "file", "--input", str(square))
    assert bad.exit_code == 2 and "is 64x64 but the source image is 96x64" in bad.stderr
    assert tree_snapshot(tiny_ws) == before


def test_an_edit_that_fails_its_own_check_exits_1_without_pointing_to_review_as_if_all_were_well(tiny_ws: Path):
    # A no-op edit: the file engine given the source image itself changes nothing inside the mask.
    source = tiny_ws / "data" / "images" / "T001.png"
    result = _edit(tiny_ws, "--engine", "file", "--input", str(source))
    assert result.exit_code == 1, result.output
    assert "TX01 #1  file" in result.stdout and "check: fail" in result.stdout  # the edit is saved and shown
    assert "did not pass the preservation check (#1: too little change inside the mask" in result.stderr
    assert "Next: cfkit review" not in result.stderr and "Traceback" not in result.stderr
    (row,) = _rows(tiny_ws)
    assert row["status"] == "ok"  # nothing is lost: the edit stays recorded for a person to look at
    as_json = _edit(tiny_ws, "--engine", "file", "--input", str(source), "--json")
    assert as_json.exit_code == 1
    (edit,) = json.loads(as_json.stdout)["edits"]
    assert edit["check_failed"] is True and "too little change" in edit["check_reasons"][0]
    # An edit that passes still exits 0 and names the next step.
    passed = _edit(tiny_ws, "--engine", "classical")
    assert passed.exit_code == 0 and "Next: cfkit review TX01" in passed.stderr


def test_an_edit_whose_check_cannot_run_exits_1(tiny_ws: Path):
    result = run_cli(["edit", "TX01", "-w", str(tiny_ws), "--engine", "classical"],
                     env={"CFKIT_LPIPS_BACKBONE": str(tiny_ws / "missing-alexnet.pth")})
    assert result.exit_code == 1, result.output
    assert "check: not checked" in result.stdout
    assert "saved but not checked" in result.stderr and "cfkit check TX01" in result.stderr
    assert result.stderr.count("error:") == 1


def _review(ws: Path, edit_id: int, decision: str) -> None:
    with Store(ws / ".cfkit" / "cfkit.db") as store:
        reviews.record(store, "TX01", edit_id, decision)


def test_an_accepted_edit_is_never_replaced(tiny_ws: Path):
    assert _edit(tiny_ws, "--engine", "classical").exit_code == 0
    _review(tiny_ws, 1, "accept")
    first = tree_snapshot(tiny_ws / ".cfkit" / "edits")
    refused = _edit(tiny_ws, "--engine", "classical")
    assert refused.exit_code == 2 and "already has an accepted edit (#1)" in refused.stderr
    again = _edit(tiny_ws, "--engine", "classical", "--again")
    assert again.exit_code == 0, again.output
    assert "TX01 #2" in again.stdout
    after = tree_snapshot(tiny_ws / ".cfkit" / "edits")
    assert {k: after[k] for k in first} == first  # edit #1's files untouched
    ws = load_workspace(tiny_ws)
    with Store(ws.db_path) as store:
        assert select_edit(ws, store, "TX01").id == 1


def _check(store: Store, edit_id: int, verdict: str) -> None:
    checks.insert(store, edit_id, "TX01", [checks.NewCheck("composite", {}, verdict, [], lpips_measured=False)])


def test_select_edit_prefers_accepted_then_newest_passing(tiny_ws: Path):
    for _ in range(3):
        assert _edit(tiny_ws, "--engine", "classical", "--again").exit_code == 0
    ws = load_workspace(tiny_ws)
    with Store(ws.db_path) as store:
        for edit_id, verdict in ((1, "pass"), (2, "pass"), (3, "fail")):
            _check(store, edit_id, verdict)  # newer rows than the command's own checks
        best = select_edit(ws, store, "TX01")
        assert isinstance(best, EditRecord) and best.id == 2  # #3 failed its check
        assert best.composite_path == tiny_ws / ".cfkit" / "edits" / "TX01" / "2-composite.png"
        assert select_edit(ws, store, "TX01", require_accepted=True) is None
    _review(tiny_ws, 2, "reject")
    with Store(ws.db_path) as store:
        assert select_edit(ws, store, "TX01").id == 1  # a rejected edit is not chosen
    _review(tiny_ws, 3, "accept")
    with Store(ws.db_path) as store:
        assert select_edit(ws, store, "TX01", require_accepted=True).id == 3  # a person's accept wins
        assert select_edit(ws, store, "NOPE") is None


def test_edits_list_and_show(tiny_ws: Path):
    empty = run_cli(["edits", "list", "-w", str(tiny_ws)])
    assert empty.exit_code == 0 and "no edits recorded yet" in empty.stderr
    assert not (tiny_ws / ".cfkit").exists()
    assert _edit(tiny_ws, "--engine", "classical").exit_code == 0
    listed = json.loads(run_cli(["edits", "list", "TX01", "--json", "-w", str(tiny_ws)]).stdout)
    assert [(e["id"], e["spec_id"], e["engine"], e["status"]) for e in listed] == [(1, "TX01", "classical", "ok")]
    assert json.loads(run_cli(["edits", "list", "CF01", "--json", "-w", str(tiny_ws)]).stdout) == []
    shown = run_cli(["edits", "show", "TX01", "-w", str(tiny_ws)])
    assert shown.exit_code == 0, shown.output
    for text in ("TX01 edit #1", "synthetic counterfactual diagnostic", "spec sha256", "edits/TX01/1-raw.png"):
        assert text in shown.stdout
    data = json.loads(run_cli(["edits", "show", "1", "--json", "-w", str(tiny_ws)]).stdout)
    assert data[0]["id"] == 1 and data[0]["label"] == "synthetic counterfactual diagnostic"
    missing = run_cli(["edits", "show", "CF02", "-w", str(tiny_ws)])
    assert missing.exit_code == 2 and "no edits recorded for 'CF02'" in missing.stderr


def test_the_edit_command_imports_no_heavy_library():
    code = ("import sys, cfkit.cli, cfkit.cli.edit, cfkit.edit; "
            "print([m for m in ('torch', 'diffusers', 'transformers', 'openai', 'lpips') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"
