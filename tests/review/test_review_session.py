"""A review session reads each edit's files once, however many keys it takes (zoom, help, resize, next)."""

from __future__ import annotations

from rich.console import Console

from cfkit.review.loop import EditPictures, review_loop
from cfkit.review.terminal import RESIZE
from cfkit.store import Store
from cfkit.workspace import load_workspace
from support.counters import cases_reads, counted  # noqa: F401  (the decode, store-open and cases-read counters)
from support.review_edits import ScriptedKeys, add_second_spec, two_edits  # noqa: F401

#: 24 keys on the first spec's edit, the skip to the next, 24 on the second, its skip: 50 keys in all.
VIEW_ONLY = ["z", "z", "?", "x", RESIZE, "d", "d", "f", "v", "v", "z", RESIZE, "?", "?", "f", "d", "]", "[",
             "z", "v", "d", RESIZE, "f", "z"]
SESSION = VIEW_ONLY + ["s"] + VIEW_ONLY + ["s"]


def test_fifty_keys_read_each_edit_once(two_edits, counted, cases_reads):  # noqa: F811
    assert len(SESSION) == 50
    decodes, _ = counted
    ws = load_workspace(two_edits)
    with Store(ws.db_path) as store:
        for edit_id in (1, 2):  # what showing each edit once reads
            EditPictures.read(ws, store, edit_id)
        once = dict(decodes)
        decodes.clear(), cases_reads.clear()
        keys = ScriptedKeys(list(SESSION))
        console = Console(record=True, width=100, color_system="truecolor", force_terminal=True)
        summary = review_loop(ws, store, ["TX01", "TX02"], keys, console)
    assert [d.decision for d in summary.decisions] == ["skip", "skip"] and not summary.quit_early
    assert keys._keys == []  # every key was read
    assert once and dict(decodes) == once, (once, dict(decodes))
    assert cases_reads == [ws.cases_path]  # once for the session, not once per edit shown
    text = console.export_text()
    assert "edited (raw)" in text and "zoom" in text  # the view keys did change the view
