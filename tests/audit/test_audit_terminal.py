"""The audit session on a terminal that is resized while it waits for a key: the next frame is drawn at the
terminal's new size, its first line the item's header."""

from __future__ import annotations

import shutil

import pytest
from rich.cells import cell_len

from cfkit.audit.items import load_audit
from cfkit.audit.loop import annotate
from cfkit.audit.plan import plan_audit
from cfkit.store import Store, audit_labels
from cfkit.workspace import load_workspace
from support.pty_console import ResizableTerminal, ScriptedKeys



@pytest.fixture
def ws(audited):
    """The planned audit's workspace (tests/audit/conftest.py)."""
    return audited[0]



@pytest.mark.parametrize("size", [(50, 12), (60, 16), (120, 40)])
def test_after_a_resize_the_frame_has_the_new_size_and_starts_with_the_item(ws, size):
    columns, lines = size
    with Store(ws.db_path) as store, ResizableTerminal(80, 24) as term:
        summary = annotate(ws, store, load_audit(store), "alice", ScriptedKeys(term, [size]), term.console)
        first, resized = term.frames()
    assert summary.decisions == 0
    assert len(first) == 23 and first[0].startswith("item ")
    assert len(resized) == lines - 1, resized  # the last line stays free for the cursor
    item_id = first[0].split()[1]  # a narrow frame's header drops the word "item" before it cuts anything
    assert resized[0].startswith((f"item {item_id} ", f"{item_id} "))
    assert all(cell_len(line.rstrip()) <= columns for line in resized)
    assert "y/n answer" in "\n".join(resized[-3:])  # the keys at the foot of the new frame


@pytest.mark.parametrize("size", [(30, 24), (80, 11), (20, 5)])
def test_too_small_a_terminal_shows_one_line_and_labels_nothing_until_it_is_enlarged(ws, size):
    columns, lines = size
    with Store(ws.db_path) as store, ResizableTerminal(*size) as term:
        audit = load_audit(store)
        keys = ScriptedKeys(term, ["y", "n", "m", "a", (80, 24), "y"], typed="typed unseen")
        summary = annotate(ws, store, audit, "alice", keys, term.console)
        frames = term.frames()
        labels = audit_labels.labels_by(store, audit.id, "alice")
    small = [" ".join(line.strip() for line in frame if line.strip()) for frame in frames[:5]]
    assert small == [f"Terminal {columns}×{lines} is too small for the audit (at least 40×12): enlarge it, or q "
                     "quits."] * 5  # the first frame and one per key but the resize
    assert frames[5][0].startswith("item ") and len(frames[5]) == 23  # enlarged: the item again
    assert summary.decisions == 1 and [(l.judgement.cue, l.note) for l in labels.values()] == [(True, None)]
