"""Robustness: bad input across commands, faults, and security.

Every bad input gets exactly one line on stderr naming what is wrong and how to
fix it, exit status 2, and leaves every file as it was. Faults (a full disk, a
killed process, two runs on one store) lose nothing already saved and leave
the store consistent.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from conftest import REPO, run_cli, tree_snapshot, write_workspace


def _jsonl(path: Path, *records: dict | str) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return str(path)


def _pred(**fields) -> dict:
    return {"model": "m", "suite": "contextcanvas", "case": "T001", "condition": "image", "answer": "A"} | fields


# Each case: (id, args (with {ws} and {tmp} placeholders), a setup(ws, tmp) or None, expected stderr fragments)
def _setup_bad_toml(ws: Path, tmp: Path) -> None:
    (ws / "cfkit.toml").write_text("[dataset\ncases = 1\n")


def _setup_unknown_key(ws: Path, tmp: Path) -> None:
    (ws / "cfkit.toml").write_text((ws / "cfkit.toml").read_text() + "\n[probe]\nconcurency = 3\n")


def _setup_no_cases(ws: Path, tmp: Path) -> None:
    (ws / "data" / "cases.jsonl").unlink()


def _setup_bad_caption(ws: Path, tmp: Path) -> None:
    (ws / "captions" / "T001.yaml").write_text("neutral: [unclosed\n")


def _setup_caption_unknown_field(ws: Path, tmp: Path) -> None:
    (ws / "captions" / "T001.yaml").write_text("neutral: A field.\nevidence: Grey.\nauthor: human\nreviewed: true\nmood: x\n")


def _setup_truncated_image(ws: Path, tmp: Path) -> None:
    path = ws / "data" / "images" / "T001.png"
    path.write_bytes(path.read_bytes()[:80])


def _setup_rgba_mask_wrong_aspect(ws: Path, tmp: Path) -> None:
    Image.fromarray(np.full((64, 64), 255, np.uint8)).save(ws / "interventions" / "masks" / "TX01.png")


def _setup_text_asset(ws: Path, tmp: Path) -> None:
    spec = ws / "interventions" / "TX01.yaml"
    (ws / "interventions" / "sticker.jpg").write_bytes(b"not an image")
    spec.write_text(spec.read_text().replace("classical: {op: recolor, color: '#20a040'}",
                                             "classical: {op: paste, asset: sticker.jpg}"))


def _setup_no_mask(ws: Path, tmp: Path) -> None:
    spec = ws / "interventions" / "TX01.yaml"
    spec.write_text(spec.read_text().replace("mask: masks/TX01.png\n", ""))


CASES = [
    ("config-not-toml", ["specs", "list"], _setup_bad_toml, ["cfkit.toml", "not valid TOML"]),
    ("config-unknown-key", ["probe", "run", "-m", "baseline:always-no", "-s", "contextcanvas"], _setup_unknown_key,
     ["cfkit.toml", "probe.concurency"]),
    ("no-cases-file", ["probe", "run", "-m", "baseline:always-no", "-s", "contextcanvas"], _setup_no_cases,
     ["cases.jsonl", "not found"]),
    ("edit-unknown-spec", ["edit", "NOPE", "--engine", "classical"], None, ["no spec 'NOPE'", "cfkit specs new"]),
    ("edit-unknown-engine", ["edit", "TX01", "--engine", "sdxl"], None, ["Unknown editor 'sdxl'", "classical"]),
    ("edit-file-without-input", ["edit", "TX01", "--engine", "file"], None, ["--input PATH"]),
    ("edit-input-missing", ["edit", "TX01", "--engine", "file", "--input", "{tmp}/none.png"], None, ["none.png", "not found"]),
    ("edit-no-mask", ["edit", "TX01", "--engine", "classical"], _setup_no_mask, ["TX01", "no mask"]),
    ("edit-mask-other-aspect", ["edit", "TX01", "--engine", "classical"], _setup_rgba_mask_wrong_aspect,
     ["is 64x64 but the image is 96x64"]),
    ("edit-truncated-image", ["edit", "TX01", "--engine", "classical"], _setup_truncated_image, ["T001.png"]),
    ("edit-non-png-asset", ["edit", "TX01", "--engine", "classical"], _setup_text_asset, ["sticker.jpg"]),
    ("check-unknown-spec", ["check", "NOPE"], None, ["no spec 'NOPE'"]),
    ("review-unknown-spec", ["review", "NOPE", "--accept"], None, ["NOPE"]),
    ("predictions-bad-json", ["report", "--predictions", "{tmp}/bad.jsonl"], None, ["bad.jsonl:2", "not valid JSON"]),
    ("predictions-unknown-case", ["report", "--predictions", "{tmp}/unknown.jsonl"], None,
     ["unknown.jsonl:1", "unknown case 'T404'"]),
    ("predictions-unknown-condition", ["report", "--predictions", "{tmp}/condition.jsonl"], None,
     ["condition.jsonl:1", "field 'condition'"]),
    ("predictions-two-answers", ["report", "--predictions", "{tmp}/twice.jsonl"], None,
     ["twice.jsonl:2", "a second answer"]),
    ("predictions-unknown-pair", ["report", "--predictions", "{tmp}/pair.jsonl"], None, ["pair.jsonl:1", "CF77"]),
    ("report-bad-compare", ["report", "--predictions", "{tmp}/good.jsonl", "--compare", "nonsense"], None,
     ["--compare 'nonsense'", "BASE=OTHER"]),
    ("model-not-kind-name", ["probe", "run", "-m", "gpt", "-s", "contextcanvas"], None, ["'gpt' is not KIND:NAME"]),
    ("model-unknown-kind", ["probe", "run", "-m", "zzz:m", "-s", "contextcanvas"], None, ["Unknown backend 'zzz'"]),
    ("backend-unknown-option", ["probe", "run", "-m", "baseline:always-no", "-o", "temp=1", "-s", "contextcanvas"], None,
     ["no option 'temp'", "Allowed: seed"]),
    ("backend-malformed-option", ["probe", "run", "-m", "baseline:random", "-o", "seed", "-s", "contextcanvas"], None,
     ["'seed' is not key=value"]),
    ("replay-file-missing", ["probe", "run", "-m", "replay:{tmp}/none.jsonl", "-s", "contextcanvas"], None,
     ["none.jsonl", "not found"]),
    ("modality-subset-missing", ["probe", "run", "-m", "baseline:always-no", "-s", "modality"], None,
     ["modality-100.txt", "not found"]),
    ("caption-missing", ["captions", "show", "T001"], None, ["T001.yaml", "no caption"]),
    ("caption-malformed", ["captions", "show", "T001"], _setup_bad_caption, ["T001.yaml"]),
    ("caption-unknown-field", ["captions", "show", "T001"], _setup_caption_unknown_field, ["T001.yaml", "mood"]),
    ("sheet-not-html", ["sheet", "--output", "{tmp}/sheet.txt"], None, ["ending in .html"]),
    ("spec-mask-escapes", ["specs", "new", "--id", "CF09", "--case", "T001", "--title", "t", "--cue", "c",
                           "--replacement", "r", "--mask", "../../x.png"], None, ["outside the workspace"]),
    ("run-unknown", ["runs", "show", "nope"], None, ["no run 'nope'"]),
]


@pytest.mark.parametrize("name, args, setup, fragments", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(tmp_path: Path, name, args, setup, fragments):
    ws = write_workspace(tmp_path / "ws")
    extra = tmp_path / "extra"
    extra.mkdir()
    _jsonl(extra / "bad.jsonl", _pred(), "{oops")
    _jsonl(extra / "unknown.jsonl", _pred(case="T404"))
    _jsonl(extra / "condition.jsonl", _pred(condition="sketch"))
    _jsonl(extra / "twice.jsonl", _pred(), _pred())
    _jsonl(extra / "pair.jsonl", _pred(suite="counterfactual", pair="CF77", condition="original"))
    _jsonl(extra / "good.jsonl", _pred())
    if setup:
        setup(ws, extra)
    before = tree_snapshot(tmp_path)
    argv = [a.format(ws=ws, tmp=extra) for a in args] + ["-w", str(ws)]
    result = run_cli(argv)
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert "Traceback" not in result.output
    after = tree_snapshot(tmp_path)
    # Opening the store may create it (empty); every file that existed is byte-for-byte unchanged.
    assert {k: v for k, v in after.items() if k in before} == before
    assert all(k.startswith("ws/.cfkit/cfkit.db") for k in set(after) - set(before)), set(after) - set(before)
