"""A reject needs a note saying why, in the interactive review as on the command line: a blank answer rejects
nothing, says so, and keeps the edit on screen; no other way records a reject without one either."""

from __future__ import annotations

import pytest
from rich.console import Console

from cfkit.errors import UsageError
from cfkit.review.loop import pending_specs, record_decision, review_loop
from cfkit.store import Store
from cfkit.workspace import load_workspace
from support.review_edits import ScriptedKeys, two_edits  # noqa: F401
from support.store_sql import table_rows
from support.workspace import run_cli


def reviews(ws_root) -> list[tuple[str, int, str, str | None]]:
    rows = table_rows(load_workspace(ws_root).db_path, "reviews", "spec_id, edit_id, decision, note", order_by="id")
    return [(r["spec_id"], r["edit_id"], r["decision"], r["note"]) for r in rows]


@pytest.mark.parametrize("blank", ["", "   ", "\t"])
def test_a_blank_note_rejects_nothing_says_so_and_the_edit_stays_on_screen(two_edits, blank):  # noqa: F811
    ws = load_workspace(two_edits)
    console = Console(record=True, width=120, height=40)
    # r with a blank note, twice; then a reject with a note, on the same edit; then the next spec is shown
    keys = ScriptedKeys(["r", blank, "r", blank, "r", "  the wall moved ", "q"])
    with Store(ws.db_path) as store:
        summary = review_loop(ws, store, ["TX01", "TX02"], keys, console)
        assert pending_specs(store) == ["TX02"]
    assert reviews(two_edits) == [("TX01", 1, "reject", "the wall moved")]
    assert [(d.edit_id, d.decision) for d in summary.decisions] == [(1, "reject")] and summary.quit_early
    text = console.export_text()
    assert text.count("a reject needs a note saying why; #1 is not rejected (press r again to give one).") == 2
    assert "Second test edit" not in text.rsplit("is not rejected", 1)[0]  # still TX01 after each blank answer
    assert "Second test edit" in text  # the reject with a note went on to the next spec


def test_quitting_after_a_blank_note_leaves_the_edit_pending(two_edits):  # noqa: F811
    ws = load_workspace(two_edits)
    with Store(ws.db_path) as store:
        summary = review_loop(ws, store, ["TX01", "TX02"], ScriptedKeys(["r", "", "q"]), Console(record=True))
        assert pending_specs(store) == ["TX01", "TX02"]
    assert summary.decisions == [] and reviews(two_edits) == []


@pytest.mark.parametrize("note", [None, "", "  "])
def test_a_reject_is_never_recorded_without_a_note(two_edits, note):  # noqa: F811
    ws = str(two_edits)
    given = [] if note is None else ["--note", note]
    for args in (["TX01", "--reject", *given], ["--pending", "--reject", "--yes", *given]):
        result = run_cli(["review", *args, "-w", ws])
        assert result.exit_code == 2, result.stderr
        assert result.stderr.startswith("error: --reject needs --note saying why") and result.stderr.count("\n") == 1
    with Store(load_workspace(two_edits).db_path) as store:
        with pytest.raises(UsageError, match="a reject of TX01 needs a note saying why"):
            record_decision(store, "TX01", 1, "reject", note)
        record_decision(store, "TX01", 1, "skip", note)  # a skip needs no reason
    assert reviews(two_edits) == [("TX01", 1, "skip", None)]
