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
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from support.workspace import REPO, run_cli, tree_snapshot, write_workspace


def _jsonl(path: Path, *records: dict | str) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return str(path)


def _pred(**fields) -> dict:
    return {"model": "m", "suite": "contextcanvas", "case": "T001", "condition": "image", "answer": "A"} | fields


DEEP_JSON = "[" * 100_000 + "]" * 100_000


def _setup_deep_toml(ws: Path, tmp: Path) -> None:
    (ws / "cfkit.toml").write_text((ws / "cfkit.toml").read_text() + "\n[check]\nmargin = " + DEEP_JSON + "\n")


def _setup_deep_files(ws: Path, tmp: Path) -> None:
    (tmp / "deep.jsonl").write_text(json.dumps(_pred())[:-1] + ', "raw": ' + DEEP_JSON + "}\n")
    (tmp / "deep-groups.yaml").write_text("m: " + "[" * 20_000 + "]" * 20_000 + "\n")
    (tmp / "deep-specs.yaml").write_text("- id: CF09\n  regions: " + "[" * 20_000 + "]" * 20_000 + "\n")
    (tmp / "deep-specs.csv").write_text("id,case,title,cue,replacement,regions\n"
                                         "CF09,T001,t,c,r,\"" + "[" * 50_000 + "]" * 50_000 + "\"\n")
    (tmp / "unclosed.csv").write_text("id,case,title,cue,replacement\nCF09,T001,\"t,c,r\n" + "x" * 140_000 + "\n")


def _add_toml(text: str):
    def setup(ws: Path, tmp: Path) -> None:
        (ws / "cfkit.toml").write_text((ws / "cfkit.toml").read_text() + "\n" + text + "\n")
    return setup


def _edit_toml(old: str, new: str):
    def setup(ws: Path, tmp: Path) -> None:
        assert old in (ws / "cfkit.toml").read_text()
        (ws / "cfkit.toml").write_text((ws / "cfkit.toml").read_text().replace(old, new))
    return setup


def _edit_spec(old: str, new: str):
    def setup(ws: Path, tmp: Path) -> None:
        spec = ws / "interventions" / "TX01.yaml"
        assert old in spec.read_text()
        spec.write_text(spec.read_text().replace(old, new))
    return setup


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


def _setup_image_cut_in_its_data(ws: Path, tmp: Path) -> None:
    """T001's image as a photo-like PNG cut two thirds of the way through its image data."""
    path = ws / "data" / "images" / "T001.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3])


def _setup_image_over_the_pixel_limit(ws: Path, tmp: Path) -> None:
    Image.new("1", (9_600, 9_600)).save(ws / "data" / "images" / "T001.png")  # 92 M pixels in a small file


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


def _spec_text(ws: Path) -> str:
    return (ws / "interventions" / "TX01.yaml").read_text()


def _setup_spec_duplicate_key(ws: Path, tmp: Path) -> None:
    (ws / "interventions" / "TX01.yaml").write_text(_spec_text(ws) + "title: A second title\n")


def _setup_spec_deep_nesting(ws: Path, tmp: Path) -> None:
    (ws / "interventions" / "TX01.yaml").write_text(_spec_text(ws) + "notes: " + "[" * 20000 + "\n")


def _setup_spec_not_utf8(ws: Path, tmp: Path) -> None:
    (ws / "interventions" / "TX01.yaml").write_bytes(_spec_text(ws).encode() + b"notes: caf\xe9\n")


def _setup_spec_folder(ws: Path, tmp: Path) -> None:
    (ws / "interventions" / "TX02.yaml").mkdir()


def _setup_mask_folder(ws: Path, tmp: Path) -> None:
    (ws / "interventions" / "masks" / "TX01.png").unlink()
    (ws / "interventions" / "masks" / "TX01.png").mkdir()


def _setup_flat_polygon(ws: Path, tmp: Path) -> None:
    (ws / "interventions" / "TX01.yaml").write_text(_spec_text(ws).replace(
        "mask: masks/TX01.png\n", "regions: [{polygon: [[0.1, 0.1], [0.5, 0.5], [0.9, 0.9]]}]\n"))


def _setup_caption_duplicate_key(ws: Path, tmp: Path) -> None:
    (ws / "captions" / "T001.yaml").write_text("neutral: A field.\nneutral: Another field.\nevidence: Grey.\n")


def _setup_config_not_utf8(ws: Path, tmp: Path) -> None:
    (ws / "cfkit.toml").write_bytes((ws / "cfkit.toml").read_bytes() + b"# caf\xe9\n")


def _setup_config_folder(ws: Path, tmp: Path) -> None:
    (ws / "cfkit.toml").unlink()
    (ws / "cfkit.toml").mkdir()


def _setup_huge_imports(ws: Path, tmp: Path) -> None:
    """Import sources that are too large or oddly made, written in pieces (none is built in memory)."""
    header = "id,image,question,option_A,option_B,gold\n"
    with (tmp / "huge-cell.csv").open("w") as handle:  # one cell of 12 million characters
        handle.write(header + 'T1,a.png,"')
        for _ in range(12):
            handle.write("x" * 1_000_000)
        handle.write('",Yes,No,A\n')
    (tmp / "utf16.csv").write_bytes((header + "T1,a.png,Fit?,Yes,No,A\n").encode("utf-16"))
    (tmp / "nul.csv").write_text(header + "T1,a.png,Fit\x00?,Yes,No,A\n")
    long_json = {"id": "T1", "images": ["a.png"], "question": "Q" * 2_000, "options": ["Yes", "No"], "gold": "A"}
    (tmp / "long.jsonl").write_text(json.dumps(long_json) + "\n")


CASES = [
    ("spec-id-traversal", ["specs", "show", "../../evil"], None, ["'../../evil' is not a spec id"]),
    ("spec-id-traversal-edit", ["edit", "../x", "--engine", "classical"], None, ["is not a spec id"]),
    ("case-id-traversal-caption", ["captions", "show", "../../x"], None, ["../../x"]),
    ("spec-duplicate-key", ["specs", "show", "TX01"], _setup_spec_duplicate_key,
     ["TX01.yaml:", "key 'title' is given twice"]),
    ("spec-deep-nesting", ["specs", "show", "TX01"], _setup_spec_deep_nesting, ["TX01.yaml"]),
    ("spec-not-utf8", ["specs", "show", "TX01"], _setup_spec_not_utf8, ["TX01.yaml", "not UTF-8"]),
    ("spec-file-is-folder", ["specs", "show", "TX02"], _setup_spec_folder, ["TX02.yaml is a folder"]),
    ("mask-is-folder", ["edit", "TX01", "--engine", "classical"], _setup_mask_folder, ["TX01.png is a folder"]),
    ("polygon-without-area", ["specs", "show", "TX01"], _setup_flat_polygon, ["the polygon has no area"]),
    ("caption-duplicate-key", ["captions", "show", "T001"], _setup_caption_duplicate_key,
     ["T001.yaml:", "key 'neutral' is given twice"]),
    ("config-not-utf8", ["specs", "list"], _setup_config_not_utf8, ["cfkit.toml", "not UTF-8"]),
    ("config-is-folder", ["specs", "list"], _setup_config_folder, ["cfkit.toml is a folder"]),
    ("edit-id-too-large", ["check", "--edit", "99999999999999999999"], None, ["no edit #99999999999999999999"]),
    ("edit-id-too-large-show", ["edits", "show", "99999999999999999999"], None, ["no edits recorded"]),
    ("config-not-toml", ["specs", "list"], _setup_bad_toml, ["cfkit.toml", "not valid TOML"]),
    ("config-unknown-key", ["probe", "run", "-m", "baseline:always-no", "-s", "contextcanvas"], _setup_unknown_key,
     ["cfkit.toml", "probe.concurency"]),
    ("no-cases-file", ["probe", "run", "-m", "baseline:always-no", "-s", "contextcanvas"], _setup_no_cases,
     ["cases.jsonl", "not found"]),
    ("edit-unknown-spec", ["edit", "NOPE", "--engine", "classical"], None, ["no spec 'NOPE'", "cfkit specs new"]),
    ("edit-unknown-engine", ["edit", "TX01", "--engine", "sdxl"], None, ["--engine sdxl", "Unknown editor 'sdxl'", "classical"]),
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
     ["'seed' is not KEY=VALUE"]),
    ("replay-file-missing", ["probe", "run", "-m", "replay:{tmp}/none.jsonl", "-s", "contextcanvas"], None,
     ["none.jsonl", "not found"]),
    ("modality-subset-missing", ["probe", "run", "-m", "baseline:always-no", "-s", "modality"], None,
     ["modality-100.txt", "does not exist", "--subset FILE or --all-cases"]),
    ("caption-missing", ["captions", "show", "T001"], None, ["T001.yaml", "no caption"]),
    ("caption-malformed", ["captions", "show", "T001"], _setup_bad_caption, ["T001.yaml"]),
    ("caption-unknown-field", ["captions", "show", "T001"], _setup_caption_unknown_field, ["T001.yaml", "mood"]),
    ("sheet-not-html", ["sheet", "--output", "{tmp}/sheet.txt"], None, ["ending in .html"]),
    ("spec-mask-escapes", ["specs", "new", "--id", "CF09", "--case", "T001", "--title", "t", "--cue", "c",
                           "--replacement", "r", "--mask", "../../x.png"], None, ["outside the workspace"]),
    ("run-unknown", ["runs", "show", "nope"], None, ["no run 'nope'"]),
    ("toml-nested-too-deeply", ["cases", "validate"], _setup_deep_toml, ["cfkit.toml", "nested too deeply"]),
    ("predictions-nested-too-deeply", ["report", "--predictions", "{tmp}/deep.jsonl"], _setup_deep_files,
     ["deep.jsonl:1", "nested too deeply"]),
    ("groups-nested-too-deeply", ["report", "--predictions", "{tmp}/good.jsonl", "--groups", "{tmp}/deep-groups.yaml"],
     _setup_deep_files, ["deep-groups.yaml", "nested too deeply"]),
    ("spec-list-nested-too-deeply", ["specs", "new", "--from", "{tmp}/deep-specs.yaml"], _setup_deep_files,
     ["deep-specs.yaml", "nested too deeply"]),
    ("spec-csv-cell-nested-too-deeply", ["specs", "new", "--from", "{tmp}/deep-specs.csv"], _setup_deep_files,
     ["deep-specs.csv", "regions", "nested too deeply"]),
    ("spec-csv-unclosed-quote", ["specs", "new", "--from", "{tmp}/unclosed.csv"], _setup_deep_files,
     ["unclosed.csv", "never closed"]),
    ("toml-margin-nan", ["cases", "validate"], _add_toml("[check]\nmargin = nan"), ["check.margin", "finite"]),
    ("toml-concurrency-unbounded", ["cases", "validate"], _add_toml("[probe]\nconcurrency = 100000"),
     ["probe.concurrency", "256"]),
    ("toml-pairs-unbounded", ["cases", "validate"], _edit_toml("pairs = 3", "pairs = 100000000000000"),
     ["workspace.pairs", "10000"]),
    ("spec-checks-margin-unbounded", ["edit", "TX01", "--engine", "classical"],
     _edit_spec("labels:", "checks: {margin: 100000000}\nlabels:"), ["TX01.yaml", "checks.margin", "512"]),
    ("spec-checks-threshold-nan", ["edit", "TX01", "--engine", "classical"],
     _edit_spec("labels:", "checks: {ssim_out_min: .nan}\nlabels:"), ["TX01.yaml", "checks.ssim_out_min", "finite"]),
    ("spec-region-nan", ["edit", "TX01", "--engine", "classical"],
     _edit_spec("mask: masks/TX01.png", "regions: [{box: [.nan, 0.1, 0.5, 0.5]}]"), ["TX01.yaml", "regions.0.box"]),
    ("engine-option-nan", ["edit", "TX01", "--engine", "classical", "-o", "feather=nan"], None,
     ["feather=nan", "finite"]),
    ("flag-seed-negative", ["report", "--predictions", "{tmp}/good.jsonl", "--seed", "-1"], None,
     ["--seed", "4294967295"]),
    ("flag-resamples-unbounded", ["report", "--predictions", "{tmp}/good.jsonl", "--resamples", "100000000000"], None,
     ["--resamples", "1000000"]),
    ("flag-non-ascii-digits", ["check", "--edit", "\u0661\u0662"], None, ["--edit", "digits 0-9"]),
    ("flag-candidates-unbounded", ["edit", "TX01", "--engine", "classical", "-n", "1000"], None, ["--candidates", "100"]),
    ("flag-threshold-nan", ["specs", "mask", "TX01", "--from-edit", "1", "--threshold", "nan"], None,
     ["--threshold", "'nan'"]),
    ("subset-invisible-character", ["captions", "lint"],
     lambda ws, tmp: (ws / "probes" / "modality-100.txt").write_text("T001\u200b\nT002\n"),
     ["modality-100.txt:1", "'T001<U+200B>'", "invisible character (U+200B)"]),
    ("config-engine-unknown", ["edit", "TX01"], _add_toml('[edit]\nengine = "sdxl"'),
     ["cfkit.toml [edit] engine sdxl", "Unknown editor 'sdxl'"]),
    ("config-candidates-too-many", ["edit", "TX01", "--engine", "classical"], _add_toml("[edit]\ncandidates = 3"),
     ["cfkit.toml [edit] candidates 3", "one image per call"]),
    ("flag-candidates-too-many", ["edit", "TX01", "--engine", "classical", "-n", "3"],
     _add_toml("[edit]\ncandidates = 1"), ["-n 3", "one image per call"]),
    ("rich-emoji-code-in-a-name", ["captions", "draft", "-m", "zzz:x:", "T001"], None,
     ["--model zzz:x:", "Unknown backend 'zzz'"]),
    ("flag-concurrency-unbounded", ["probe", "run", "-m", "baseline:majority", "-s", "contextcanvas", "-j", "257"],
     None, ["--concurrency", "1<=x<=256"]),
    ("flag-max-cost-negative", ["probe", "run", "-m", "baseline:majority", "-s", "contextcanvas", "--max-cost", "-5"],
     None, ["--max-cost", "x>=0"]),
    ("flag-max-cost-nan", ["probe", "run", "-m", "baseline:majority", "-s", "contextcanvas", "--max-cost", "nan"],
     None, ["--max-cost", "'nan'"]),
    ("config-probe-model-unknown", ["probe", "run", "-s", "contextcanvas"], _add_toml('[probe]\nmodel = "zzz:x"'),
     ["cfkit.toml [probe] model zzz:x", "Unknown backend 'zzz'"]),
    ("flag-model-unknown", ["probe", "run", "-s", "contextcanvas", "-m", "zzz:x"], None,
     ["--model zzz:x", "Unknown backend 'zzz'"]),
    ("probe-image-cut-short", ["probe", "run", "-m", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "-s",
                               "contextcanvas"], _setup_image_cut_in_its_data, ["T001.png", "cut short"]),
    ("probe-image-over-pixel-limit", ["probe", "run", "-m", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "-s",
                                      "contextcanvas"], _setup_image_over_the_pixel_limit,
     ["T001.png", "more than 89,478,485 pixels"]),
    ("validate-image-cut-short", ["cases", "validate"], _setup_image_cut_in_its_data, ["T001.png"]),
    ("import-cell-over-the-bound", ["cases", "import", "{tmp}/huge-cell.csv", "--to", "{tmp}/out.jsonl"],
     _setup_huge_imports, ["huge-cell.csv:2", "longer than 10,000,000 characters", "--max-cell"]),
    ("import-value-over-max-cell", ["cases", "import", "{tmp}/long.jsonl", "--to", "{tmp}/out.jsonl", "--max-cell",
                                    "1000"], _setup_huge_imports, ["long.jsonl:1", "2,000 characters", "--max-cell 2000"]),
    ("import-utf16", ["cases", "import", "{tmp}/utf16.csv", "--to", "{tmp}/out.jsonl"], _setup_huge_imports,
     ["utf16.csv", "is UTF-16", "iconv -f UTF-16 -t UTF-8"]),
    ("import-nul-in-question", ["cases", "import", "{tmp}/nul.csv", "--to", "{tmp}/out.jsonl"], _setup_huge_imports,
     ["nul.csv row 1", "'question'", "U+0000"]),
    ("run-id-misspelt", ["runs", "show", "contextcanvas-baselin-majority"],
     lambda ws, tmp: run_cli(["probe", "run", "-m", "baseline:majority", "-s", "contextcanvas", "-w", str(ws)]),
     ["no run 'contextcanvas-baselin-majority'", "Did you mean 'contextcanvas-baseline-majority-"]),
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


def test_a_csv_with_an_unclosed_quote_is_one_line_wherever_it_is_read(tmp_path: Path):
    # Python's csv module stops at a 131,072-character cell, which is what an unclosed quote makes of a file.
    _setup_deep_files(tmp_path, tmp_path)
    result = run_cli(["cases", "import", str(tmp_path / "unclosed.csv"), "--to", str(tmp_path / "cases.jsonl")])
    assert result.exit_code == 2, result.output
    assert "unclosed.csv" in result.stderr and "never closed" in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "cases.jsonl").exists()


# ── faults ─────────────────────────────────────────────────────────────────

import shutil  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402

from support.workspace import MINI  # noqa: E402
from support.store_sql import integrity_ok, table_rows


def _cli(args: list[str], *, env: dict[str, str] | None = None, limit_bytes: int | None = None,
         wait: bool = True) -> subprocess.CompletedProcess | subprocess.Popen:
    """cfkit in its own process (so it can be killed or starved of disk)."""

    def starve() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    full_env = dict(os.environ, **(env or {}))
    kwargs = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env, cwd=REPO,
                  preexec_fn=starve if limit_bytes else None)
    if not wait:
        return subprocess.Popen([sys.executable, "-m", "cfkit", *args], **kwargs)
    return subprocess.run([sys.executable, "-m", "cfkit", *args], timeout=120, **kwargs)


def _consistent(ws: Path) -> None:
    """The store passes integrity_check and every recorded output file exists with its hash."""
    import hashlib

    assert integrity_ok(ws)
    rows = [r for r in table_rows(ws, "edits", "status, raw_path, raw_sha256, composite_path, composite_sha256")
            if r.pop("status") == "ok"]
    for raw, raw_sha, comp, comp_sha in (r.values() for r in rows):
        for rel, sha in ((raw, raw_sha), (comp, comp_sha)):
            data = (ws / ".cfkit" / rel).read_bytes()
            assert hashlib.sha256(data).hexdigest() == sha


@pytest.fixture
def mini(tmp_path: Path) -> Path:
    dest = tmp_path / "mini"
    shutil.copytree(MINI, dest, ignore=shutil.ignore_patterns(".cfkit"))
    return dest


def test_disk_full_during_an_edit_loses_nothing(mini: Path):
    first = _cli(["edit", "EX01", "--engine", "classical", "-w", str(mini)])
    assert first.returncode == 0, first.stderr
    saved = tree_snapshot(mini / ".cfkit" / "edits")
    # The next edit's PNGs are larger than the limit: the write fails mid-way.
    starved = _cli(["edit", "EX02", "--engine", "classical", "-w", str(mini)], limit_bytes=150_000)
    assert starved.returncode in (1, 2), starved.stderr
    lines = [l for l in starved.stderr.strip().splitlines() if l.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in starved.stderr, starved.stderr
    after = tree_snapshot(mini / ".cfkit" / "edits")
    assert {k: v for k, v in after.items() if k in saved} == saved  # the first edit is intact
    assert not [k for k in after if ".tmp" in k]  # no half-written files left behind
    _consistent(mini)
    # Starved harder, the store itself cannot be written: one line that points at disk space, not at damage.
    store_starved = _cli(["edit", "EX02", "--engine", "classical", "-w", str(mini)], limit_bytes=4_000)
    assert store_starved.returncode == 1
    assert "Check free disk space" in store_starved.stderr and "move it aside" not in store_starved.stderr
    _consistent(mini)
    again = _cli(["edit", "EX02", "--engine", "classical", "-w", str(mini)])
    assert again.returncode == 0, again.stderr
    _consistent(mini)
    modes = {p.stat().st_mode & 0o777 for p in (mini / ".cfkit" / "edits").rglob("*.png")}
    assert modes == {0o666 & ~_umask()}  # written atomically, yet with ordinary permissions


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_kill_during_an_edit_leaves_the_store_consistent(mini: Path):
    # A remove over a large region keeps biharmonic inpainting busy for seconds: time enough to kill it.
    mask_path = mini / "interventions" / "masks" / "EX03.png"
    with Image.open(mask_path) as m:
        big = np.zeros((m.size[1], m.size[0]), np.uint8)
    big[: big.shape[0] // 2, : big.shape[1] // 2] = 255
    Image.fromarray(big).save(mask_path)
    started = time.perf_counter()
    done = _cli(["edit", "EX03", "--engine", "classical", "-w", str(mini)])
    assert done.returncode == 0, done.stderr
    took = time.perf_counter() - started
    saved = tree_snapshot(mini / ".cfkit" / "edits")
    # Past start-up (about a quarter of an edit), inside the inpainting (until about three quarters);
    # the check after it is short now that a machine without LPIPS weights imports no torch for it.
    # A warm rerun can be quicker than the first edit: when one finishes first, the next waits half as long.
    delay = took * 0.5
    for _ in range(5):
        proc = _cli(["edit", "EX03", "--engine", "classical", "-w", str(mini)], wait=False)
        time.sleep(delay)
        if proc.poll() is None:
            break
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
        delay /= 2
    else:
        pytest.fail("every edit finished before it could be killed")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    _consistent(mini)
    after = tree_snapshot(mini / ".cfkit" / "edits")
    assert {k: v for k, v in after.items() if k in saved} == saved
    rows = [(r["status"], r["error"], int(r["composite_path"] is None))
            for r in table_rows(mini, "edits", "spec_id, status, error, composite_path") if r["spec_id"] == "EX03"]
    # The killed attempt is absent, complete (killed during its check), or, killed while writing its
    # files, recorded as interrupted with no files; never half-recorded.
    done, interrupted = ("ok", None, 0), ("failed", "interrupted before its files were written", 1)
    assert rows[0] == done and set(rows) <= {done, interrupted}, rows
    assert interrupted not in rows[:-1], rows  # only the killed attempt, the last one, can be interrupted
    recheck = _cli(["check", "--all", "-w", str(mini)])
    assert recheck.returncode in (0, 1) and "Traceback" not in recheck.stderr, recheck.stderr
    again = _cli(["edit", "EX03", "--engine", "classical", "-w", str(mini)])
    assert again.returncode == 0, again.stderr
    _consistent(mini)


def test_two_runs_on_one_store_at_once(mini: Path):
    procs = [_cli(["probe", "run", "-m", model, "-s", "modality", "-w", str(mini)], wait=False)
             for model in ("baseline:always-no", "baseline:random")]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert integrity_ok(mini)
    done = [(r["model"], r["n_done"], r["n_requests"])
            for r in table_rows(mini, "runs", "status, model, n_done, n_requests", order_by="model")
            if r["status"] == "done"]
    assert [d[0] for d in done] == ["baseline:always-no", "baseline:random"]
    assert all(d[1] == d[2] > 0 for d in done)


class FaultyChat:
    """A Chat Completions server; its k-th request meets ``faults[k-1]``, later ones are answered normally."""

    def __init__(self, faults: list[str], slow_s: float):
        self.faults = faults
        self.count = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers["content-length"]))
                with server.lock:
                    server.count += 1
                    n = server.count
                fault = server.faults[n - 1] if n <= len(server.faults) else None
                if fault == "reset":  # close with RST and no response at all
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                    self.connection.close()
                    self.close_connection = True
                    return
                if fault == "timeout":
                    time.sleep(slow_s)
                content = json.dumps({"answer": "A", "reason": "ok", "confidence": "high"})
                if fault == "junk":  # a reply that must be stored as text, never run
                    content = "__import__('os').remove('canary')  # or {{7*7}} ${7*7}"
                status, payload = 200, {
                    "id": "x", "object": "chat.completion", "created": 0, "model": "m",
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
                if fault == "429":
                    status, payload = 429, {"error": {"message": "slow down", "type": "rate_limit"}}
                elif fault == "500":
                    status, payload = 500, {"error": {"message": "boom", "type": "server_error"}}
                data = b"<html>this is not JSON" if fault == "not-json" else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


SECRET = "sk-test-NEVER-WRITE-THIS-0123456789"


def test_server_faults_lose_nothing_and_replies_are_never_run(mini: Path):
    """429, 500, a timeout, a reset connection, a non-JSON body and a hostile reply in one run."""
    canary = mini / "canary"
    canary.write_text("still here")
    faults = ["429", "500", "timeout", "reset", "not-json", "500", "500", "500", "500", "junk"]
    server = FaultyChat(faults, slow_s=3.0)
    env = {"MY_SERVER_KEY": SECRET, "OPENAI_API_KEY": SECRET + "-openai"}
    args = ["probe", "run", "-m", "openai:test-model", "--base-url", server.url, "--api-key-env", "MY_SERVER_KEY",
            "-o", "timeout=1", "-o", "max_retries=1", "-o", "backoff=0.01", "-j", "1",
            "-s", "contextcanvas", "-w", str(mini)]
    runs = []
    try:
        while len(runs) < 3 and not (runs and runs[-1].stderr.lstrip().splitlines()[-1:] and "done:" in runs[-1].stderr):
            runs.append(_cli(args, env=env))
            # 1 while requests are left without a reply, 0 once every one has one.
            expected = 0 if "done:" in runs[-1].stderr else 1
            assert runs[-1].returncode == expected and "Traceback" not in runs[-1].stderr, runs[-1].stderr
    finally:
        server.close()
    assert "is incomplete:" in runs[0].stderr  # some faults outlasted the retries and were kept for later
    assert runs[0].returncode == 1 and "resume with: cfkit" in runs[0].stderr
    assert "done:" in runs[-1].stderr and runs[-1].returncode == 0, [r.stderr for r in runs]
    cases = [json.loads(line)["id"] for line in (mini / "cases.jsonl").read_text().splitlines() if line.strip()]
    assert integrity_ok(mini)
    replies = [tuple(r.values()) for r in table_rows(mini, "replies", "case_id, answer, error, raw")]
    by_case = {r[0]: r for r in replies}
    assert sorted(by_case) == sorted(cases)  # every case answered in the end
    assert not [r for r in replies if r[2] == "transport"]  # transport failures were retried away
    hostile = [r for r in replies if r[3] and "__import__" in r[3]]
    assert len(hostile) == 1 and hostile[0][1] is None and hostile[0][2] == "unparseable"
    assert canary.read_text() == "still here"
    # No key in any file cfkit wrote: the store, its WAL, edits, exports.
    export = _cli(["runs", "list", "--json", "-w", str(mini)])
    assert export.returncode == 0
    for path in (mini / ".cfkit").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert SECRET.encode() not in data, path


def test_rich_markup_in_data_is_shown_as_written_and_never_breaks_a_command(tmp_path):
    """'[/]' closes a style that is not open and '[bold' is half a tag: Rich raises MarkupError on both when
    they reach it as markup. In a question, an option, a spec title, a model name and a typed id they are data."""
    ws = write_workspace(tmp_path / "ws")
    markup = "[/] [bold]x[/bold] [link=http://e.invalid]y"
    cases_file = ws / "data" / "cases.jsonl"
    cases = [json.loads(line) for line in cases_file.read_text().splitlines()]
    cases[0]["question"] = f"Fit {markup}?"
    cases[0]["options"][0]["text"] = f"Yes {markup}"
    cases_file.write_text("".join(json.dumps(c) + "\n" for c in cases))
    spec = ws / "interventions" / "TX01.yaml"
    spec.write_text(spec.read_text().replace("title: Test edit", f"title: {json.dumps('Edit ' + markup)}"))
    predictions = ws / "p.jsonl"
    predictions.write_text(json.dumps({"model": f"m{markup}", "suite": "contextcanvas", "case": "T001",
                                       "condition": "image", "answer": "A"}) + "\n")
    for args, shown in ((["specs", "show", "TX01"], "Edit [/] [bold]x[/bold]"), (["specs", "list"], "Edit [/]"),
                        (["report", "--predictions", str(predictions), "--resamples", "20"], "m[/] [bold]x"),
                        (["cases", "validate"], "cases"), (["runs", "show", f"no{markup}"], f"no{markup}")):
        result = run_cli(["-w", str(ws), *args], env={"COLUMNS": "200"})
        assert "Traceback" not in result.output and "MarkupError" not in result.output, (args, result.output)
        assert result.exit_code in (0, 1, 2) and shown in result.output, (args, result.output)


def test_an_option_id_that_is_rich_markup_is_shown_as_written_by_runs_show(tmp_path):
    """An option id '[/]' is data: the answer counts of 'runs show' print it as written, never as markup."""
    ws = write_workspace(tmp_path / "ws")
    cases_file = ws / "data" / "cases.jsonl"
    cases = [json.loads(line) for line in cases_file.read_text().splitlines()]
    for case in cases:
        old = case["options"][0]["id"]
        case["options"][0]["id"] = "[/]"
        case["gold"] = "[/]" if case["gold"] == old else case["gold"]
        if case.get("yes_option") == old:
            case["yes_option"] = "[/]"
    cases_file.write_text("".join(json.dumps(c) + "\n" for c in cases))
    run = run_cli(["-w", str(ws), "probe", "run", "-m", "baseline:always-yes", "-s", "contextcanvas", "--json"])
    assert run.exit_code == 0, run.output
    run_id = json.loads(run.stdout)["run_id"]
    for args in (["runs", "show", run_id], ["runs", "show", run_id, "--all"], ["runs", "list"]):
        result = run_cli(["-w", str(ws), *args], env={"COLUMNS": "200"})
        assert result.exit_code == 0 and "Traceback" not in result.output, (args, result.output)
    assert "[/]: 2" in run_cli(["-w", str(ws), "runs", "show", run_id], env={"COLUMNS": "200"}).output
