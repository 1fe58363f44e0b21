"""An edit the review cannot show (its file replaced, deleted or unreadable since it was made) stops neither the
spec's other candidates nor the other specs: it is said on screen, passed over, and named at the end."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from rich.console import Console

from cfkit.cli.review import unshown_line
from cfkit.review.loop import review_loop
from cfkit.store import Store
from cfkit.workspace import load_workspace
from support.edits import add_edit, inside_change, tiny_original
from support.review_edits import ScriptedKeys, two_edits  # noqa: F401
from support.store_sql import table_rows, update_rows
from support.workspace import run_cli


def _replaced(path: Path) -> None:
    Image.fromarray(np.full((64, 96, 3), 7, np.uint8)).save(path)


def _deleted(path: Path) -> None:
    path.unlink()


def _unreadable(path: Path) -> None:
    path.write_bytes(b"not a png at all")


BREAKS = {"replaced": _replaced, "deleted": _deleted, "unreadable": _unreadable}


def break_composite(ws_root: Path, edit_id: int, how: str) -> None:
    """Record the composite's SHA-256 as an editor does, then change the file behind the store's back."""
    ws = load_workspace(ws_root)
    [row] = [r for r in table_rows(ws.db_path, "edits", "id, composite_path") if r["id"] == edit_id]
    path = ws.store_dir / row["composite_path"]
    update_rows(ws.db_path, "edits", {"composite_sha256": hashlib.sha256(path.read_bytes()).hexdigest()},
                {"id": edit_id})
    BREAKS[how](path)


def decisions(ws_root: Path) -> list[tuple[str, int, str]]:
    rows = table_rows(load_workspace(ws_root).db_path, "reviews", "spec_id, edit_id, decision", order_by="id")
    return [(r["spec_id"], r["edit_id"], r["decision"]) for r in rows]


@pytest.mark.parametrize("how", sorted(BREAKS))
def test_a_spec_whose_only_edit_cannot_be_shown_is_left_out_and_the_next_spec_is_reviewed(two_edits, how):  # noqa: F811
    break_composite(two_edits, 1, how)  # TX01's only edit
    ws = load_workspace(two_edits)
    console = Console(record=True, width=100, height=40)
    with Store(ws.db_path) as store:
        summary = review_loop(ws, store, ["TX01", "TX02"], ScriptedKeys(["a"]), console, unshown=unshown_line)
    assert decisions(two_edits) == [("TX02", 2, "accept")]
    assert [spec for spec, _ in summary.left_out] == ["TX01"] and "edit 1" in str(summary.left_out[0][1])
    text = console.export_text()
    assert "TX01 left out:" in text and "Second test edit" in text


@pytest.mark.parametrize("how", sorted(BREAKS))
def test_a_candidate_that_cannot_be_shown_is_passed_over_for_the_next(two_edits, how):  # noqa: F811
    newer = add_edit(two_edits, "TX01", inside_change(tiny_original(two_edits), seed=9))
    break_composite(two_edits, 1, how)  # the first waiting candidate of TX01
    ws = load_workspace(two_edits)
    console = Console(record=True, width=100, height=40)
    # ] and [ step onto the broken candidate: it is said again, and the view stays on the one that shows
    keys = ScriptedKeys(["[", "]", "a", "a"])
    with Store(ws.db_path) as store:
        summary = review_loop(ws, store, ["TX01", "TX02"], keys, console, unshown=unshown_line)
    assert not summary.left_out
    assert decisions(two_edits) == [("TX01", newer, "accept"), ("TX02", 2, "accept")]
    text = console.export_text()
    assert text.count("#1 cannot be shown") >= 2 and f"#{newer} composite" in text


def test_the_command_reviews_the_rest_then_names_the_spec_left_out_and_exits_1(two_edits, monkeypatch):  # noqa: F811
    break_composite(two_edits, 1, "replaced")
    monkeypatch.setattr("cfkit.review.terminal.require_terminal", lambda hint: None)
    monkeypatch.setattr("cfkit.review.terminal.TerminalKeys", lambda console: _Keys(["a"]))
    result = run_cli(["review", "--pending", "-w", str(two_edits)])
    assert result.exit_code == 1, result.stderr  # not everything asked was decided; what was is saved
    assert "1 decision saved." in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and lines[0].startswith("error: TX01 was not reviewed: edit 1's composite image")
    assert "cfkit edit TX01" in lines[0]
    assert "Traceback" not in result.stderr
    assert decisions(two_edits) == [("TX02", 2, "accept")]


def test_a_review_of_one_spec_that_cannot_be_shown_ends_with_its_own_error(two_edits, monkeypatch):  # noqa: F811
    break_composite(two_edits, 1, "replaced")
    monkeypatch.setattr("cfkit.review.terminal.require_terminal", lambda hint: None)
    monkeypatch.setattr("cfkit.review.terminal.TerminalKeys", lambda console: _Keys(["a"]))
    result = run_cli(["review", "TX01", "-w", str(two_edits)])
    assert result.exit_code == 2, result.stderr  # the one spec asked for: its file is the input to fix
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and lines[0].startswith("error: TX01: edit 1's composite image")
    assert decisions(two_edits) == []


# ── the forms without the interactive view ─────────────────────────────────

#: (arguments after 'cfkit review --pending', the word for what was not done to TX01, the decisions then stored)
ONE_SHOT = {
    "json": (["--json"], "shown", []),
    "show": (["--show"], "shown", []),
    "accept": (["--accept", "--yes"], "accepted", [("TX02", 2, "accept")]),
    "accept-json": (["--accept", "--yes", "--json"], "accepted", [("TX02", 2, "accept")]),
    # a reject needs only the store, so TX01's is recorded; it is its view that cannot be given
    "reject-json": (["--reject", "--note", "file replaced", "--yes", "--json"], "shown",
                    [("TX01", 1, "reject"), ("TX02", 2, "reject")]),
    "skip-show": (["--skip", "--yes", "--show"], "shown", [("TX01", 1, "skip"), ("TX02", 2, "skip")]),
}


@pytest.mark.parametrize("form", sorted(ONE_SHOT))
def test_every_one_shot_form_goes_on_past_an_edit_it_cannot_show_names_it_and_exits_1(two_edits, form):  # noqa: F811
    args, verb, stored = ONE_SHOT[form]
    break_composite(two_edits, 1, "replaced")  # the first pending spec's only edit
    result = run_cli(["review", "--pending", *args, "-w", str(two_edits)])
    assert result.exit_code == 1, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 2, result.stderr
    assert errors[0].startswith(f"error: TX01 was not {verb}: edit 1's composite image") and "cfkit edit TX01" in errors[0]
    assert errors[1] == (f"error: 1 of 2 specs was not {verb} (TX01); each is named above with how to fix it; "
                         "the others were done and are saved.")
    assert decisions(two_edits) == stored
    if "--json" in args:
        assert [r["spec"] for r in json.loads(result.stdout)] == ["TX02"]
    if "--show" in args:
        assert "Second test edit" in result.stdout and "Test edit ·" not in result.stdout


@pytest.mark.parametrize("how", sorted(BREAKS))
def test_an_accept_unseen_passes_over_every_edit_whose_file_changed(two_edits, how):  # noqa: F811
    """Accepting makes the edit the one probes use: an edit that is not what it made any more is never accepted."""
    other = add_edit(two_edits, "TX01", inside_change(tiny_original(two_edits), seed=5))
    break_composite(two_edits, 2, how)  # TX02's only edit; TX01's first waiting candidate is #1
    break_composite(two_edits, 1, how)
    result = run_cli(["review", "TX02", "TX01", "--accept", "-w", str(two_edits)])
    assert result.exit_code == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert [e.split(":")[1].strip() for e in errors[:2]] == ["TX02 was not accepted", "TX01 was not accepted"]
    assert errors[2].startswith("error: 2 of 2 specs were not accepted (TX02, TX01); each is named above")
    assert decisions(two_edits) == []
    # the spec's other candidate can be accepted by its id, and the broken one rejected: each needs no more
    assert run_cli(["review", "TX01", "--edit", str(other), "--accept", "-w", str(two_edits)]).exit_code == 0
    assert run_cli(["review", "TX02", "--reject", "--note", "file gone", "-w", str(two_edits)]).exit_code == 0
    alone = run_cli(["review", "TX01", "--edit", "1", "--accept", "-w", str(two_edits)])
    assert alone.exit_code == 2 and alone.stderr.count("error:") == 1 and "edit 1" in alone.stderr
    assert decisions(two_edits) == [("TX01", other, "accept"), ("TX02", 2, "reject")]


def test_with_nothing_to_read_a_skip_or_reject_of_every_pending_edit_is_all_done(two_edits):  # noqa: F811
    break_composite(two_edits, 1, "deleted")
    result = run_cli(["review", "--pending", "--skip", "--yes", "-w", str(two_edits)])
    assert result.exit_code == 0, result.stderr
    assert "error" not in result.stderr
    assert decisions(two_edits) == [("TX01", 1, "skip"), ("TX02", 2, "skip")]


class _Keys(ScriptedKeys):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None
