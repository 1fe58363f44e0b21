"""An edit's output file deleted after it was written (not replaced: gone).

The check, the review and the contact sheet (and so the browser's pairs page)
read an edit back from its files. A deleted output gets one line naming the
file and both ways out, the same two the line for a replaced file gives: make
the edit again, or put the file back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cfkit.store import Store, checks, edits
from cfkit.workspace import load_workspace
from support.workspace import run_cli

VARIANTS = ["raw", "composite"]


def _edited_then_deleted(ws_root: Path, variant: str) -> tuple[edits.EditRecord, Path]:
    made = run_cli(["edit", "TX01", "--engine", "classical", "-w", str(ws_root)])
    assert made.exit_code == 0, made.stderr
    with Store(load_workspace(ws_root).db_path) as store:
        record = edits.newest_ok(store, "TX01")
    path = record.image_path(variant)
    assert path is not None and path.is_file()
    path.unlink()
    return record, path


def _says_both_ways_out(line: str, variant: str, path: Path) -> None:
    assert f"{variant} image {path}" in line and "deleted" in line, line
    assert "cfkit edit TX01" in line and "put the file back" in line, line


@pytest.mark.parametrize("variant", VARIANTS)
def test_check_names_the_deleted_file_and_both_ways_out(tiny_ws, variant):
    record, path = _edited_then_deleted(tiny_ws, variant)
    with Store(load_workspace(tiny_ws).db_path) as store:
        before = checks.latest(store, record.id, variant)

    result = run_cli(["check", "TX01", "-w", str(tiny_ws)])

    assert result.exit_code == 2, result.stdout + result.stderr
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    _says_both_ways_out(line, variant, path)
    with Store(load_workspace(tiny_ws).db_path) as store:
        assert checks.latest(store, record.id, variant) == before  # the stored check stands


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_sheet_says_it_on_the_pair(tiny_ws, tmp_path, variant):
    from cfkit.review.sheet import collect_pairs

    _, path = _edited_then_deleted(tiny_ws, variant)
    ws = load_workspace(tiny_ws)
    with Store(ws.db_path) as store:
        [pair], _ = collect_pairs(ws, store, ["TX01"])
    _says_both_ways_out(pair.problem, variant, path)
    assert not pair.pictures
    result = run_cli(["sheet", "-w", str(tiny_ws), "--output", str(tmp_path / "sheet.html")])
    assert result.exit_code == 0, result.stderr
    assert "put the file back" in (tmp_path / "sheet.html").read_text()


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_review_names_the_deleted_file_and_both_ways_out(tiny_ws, variant):
    record, path = _edited_then_deleted(tiny_ws, variant)

    shown = run_cli(["review", "TX01", "--edit", str(record.id), "--json", "-w", str(tiny_ws)])

    assert shown.exit_code == 2, shown.stdout + shown.stderr
    [line] = [ln for ln in shown.stderr.splitlines() if ln.startswith("error:")]
    _says_both_ways_out(line, variant, path)


def test_the_counterfactual_probe_skips_the_pair_with_both_ways_out(tiny_ws):
    _, path = _edited_then_deleted(tiny_ws, "composite")

    result = run_cli(["probe", "run", "-m", "baseline:always-no", "-s", "counterfactual", "--json", "-w", str(tiny_ws)])

    said = [ln for ln in result.stderr.splitlines() if "TX01" in ln and "deleted" in ln]
    assert len(said) == 1, result.stderr
    _says_both_ways_out(said[0], "composite", path)
