"""The audit session on a terminal that is resized while it waits for a key: the next frame is drawn at the
terminal's new size, its first line the item's header."""

from __future__ import annotations

import shutil

import pytest
from rich.cells import cell_len

from cfkit.audit.items import load_audit
from cfkit.audit.loop import annotate
from cfkit.audit.plan import plan_audit
from cfkit.store import Store
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
