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
from cfkit.terminal.keys import RESIZE
from cfkit.workspace import load_workspace
from support.pty_console import ResizableTerminal


@pytest.fixture
def audited(source, tmp_path):
    root, run_ids = source
    shutil.copytree(root, tmp_path / "ws")
    ws = load_workspace(tmp_path / "ws")
    with Store(ws.db_path) as store:
        plan_audit(ws, store, list(run_ids.values()))
    return ws


class ResizingKeys:
    """Each key resizes the terminal to the next size and reports the resize, as SIGWINCH does; then q."""

    def __init__(self, term: ResizableTerminal, sizes: list[tuple[int, int]]):
        self.term, self.sizes = term, list(sizes)

    def key(self) -> str:
        if not self.sizes:
            return "q"
        self.term.resize(*self.sizes.pop(0))
        return RESIZE

    def line(self, prompt: str) -> str:
        return ""


@pytest.mark.parametrize("size", [(50, 12), (60, 16), (120, 40)])
def test_after_a_resize_the_frame_has_the_new_size_and_starts_with_the_item(audited, size):
    columns, lines = size
    with Store(audited.db_path) as store, ResizableTerminal(80, 24) as term:
        summary = annotate(audited, store, load_audit(store), "alice", ResizingKeys(term, [size]), term.console)
        first, resized = term.frames()
    assert summary.decisions == 0
    assert len(first) == 23 and first[0].startswith("item ")
    assert len(resized) == lines - 1, resized  # the last line stays free for the cursor
    assert resized[0].startswith("item ") and all(cell_len(line.rstrip()) <= columns for line in resized)
    assert "y/n answer" in "\n".join(resized[-3:])  # the keys at the foot of the new frame


class KeysAndSizes:
    """Keys as listed; a (columns, lines) entry resizes the terminal and reports it, as SIGWINCH does."""

    def __init__(self, term: ResizableTerminal, script: list):
        self.term, self.script = term, list(script)

    def key(self) -> str:
        if not self.script:
            return "q"
        step = self.script.pop(0)
        if isinstance(step, tuple):
            self.term.resize(*step)
            return RESIZE
        return step

    def line(self, prompt: str) -> str:
        return "typed unseen"


@pytest.mark.parametrize("size", [(30, 24), (80, 11), (20, 5)])
def test_too_small_a_terminal_shows_one_line_and_labels_nothing_until_it_is_enlarged(audited, size):
    columns, lines = size
    with Store(audited.db_path) as store, ResizableTerminal(*size) as term:
        audit = load_audit(store)
        summary = annotate(audited, store, audit, "alice", KeysAndSizes(term, ["y", "n", "m", "a", (80, 24), "y"]),
                           term.console)
        frames = term.frames()
        labels = audit_labels.labels_by(store, audit.id, "alice")
    small = [" ".join(line.strip() for line in frame if line.strip()) for frame in frames[:5]]
    assert small == [f"Terminal {columns}×{lines} is too small for the audit (at least 40×12): enlarge it, or q "
                     "quits."] * 5  # the first frame and one per key but the resize
    assert frames[5][0].startswith("item ") and len(frames[5]) == 23  # enlarged: the item again
    assert summary.decisions == 1 and [(l.judgement.cue, l.note) for l in labels.values()] == [(True, None)]
