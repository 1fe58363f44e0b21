"""``cfkit review`` on a real terminal of 80×24: the spec id on the first line, the key bar whole, a redraw on resize."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from cfkit.review.screen import KeyBar, key_items
from cfkit.workspace import load_workspace
from support.edits import add_edit, inside_change, tiny_original
from support.store_sql import table_rows
from support.workspace import REPO

CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture
def two_candidates(tiny_ws: Path) -> Path:
    original = tiny_original(tiny_ws)
    for seed in (1, 2):
        add_edit(tiny_ws, "TX01", inside_change(original, seed=seed), raw=original)
    return tiny_ws


def screens(output: bytes) -> list[list[str]]:
    """Each frame the command drew (it clears the screen before each), as the lines a person sees."""
    text = output.decode("utf-8", errors="replace").replace("\r", "")
    return [CSI.sub("", frame).split("\n") for frame in text.split("\x1b[2J")[1:]]


def decisions(ws_root: Path) -> list[tuple[int, str]]:
    return [(r["edit_id"], r["decision"]) for r in table_rows(load_workspace(ws_root).db_path, "reviews",
                                                               "edit_id, decision")]


def test_at_80x24_the_first_line_is_the_spec_and_the_key_bar_is_whole_and_a_resize_redraws(two_candidates: Path):
    import fcntl
    import pty
    import select
    import struct
    import termios

    pid, fd = pty.fork()
    if pid == 0:  # the child: a terminal of 80x24, as a default xterm
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        # COLUMNS and LINES may still be exported (GNU readline, which pytest loads, puts them in the C
        # environment): the review must follow the terminal's own size all the same.
        os.environ["TERM"] = "xterm-256color"
        os.execv(sys.executable, [sys.executable, "-m", "cfkit", "review", "TX01", "-w", str(two_candidates)])
    output = b""

    def read_until(done, timeout: float = 60) -> None:
        nonlocal output
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, CSI.sub("", output.decode(errors="replace"))[-600:]
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                output += chunk

    def waiting_for_a_key() -> bool:
        return not termios.tcgetattr(fd)[3] & termios.ICANON and bool(screens(output))

    def frame_with(text: str):
        return lambda: any(text in line for frame in screens(output) for line in frame) and waiting_for_a_key()

    try:
        short_bar = KeyBar(key_items(candidates=True, flip=True)).text(80).plain
        read_until(frame_with(short_bar))
        frame = [line for line in screens(output)[-1] if line.strip()]
        assert frame[0].startswith("TX01 · Test edit") and "#1 composite" in frame[0]
        assert frame[-1] == short_bar and len(frame[-1]) <= 80
        assert len(screens(output)[-1]) <= 24 and all(len(line) <= 80 for line in frame)
        # The terminal grows: the screen is drawn again at once, side by side in three, with the long key bar.
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
        long_bar = KeyBar(key_items(candidates=True, flip=False)).text(160).plain
        read_until(frame_with(long_bar))
        wide = [line for line in screens(output)[-1] if line.strip()]
        assert wide[0].startswith("TX01") and wide[-1] == long_bar and "difference (heat)" in "\n".join(wide)
        os.write(fd, b"]")
        read_until(frame_with("#2 composite"))
        os.write(fd, b"a")
        read_until(lambda: b"1 decision saved" in output)
        _, status = os.waitpid(pid, 0)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    assert decisions(two_candidates) == [(2, "accept")]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_in_tmux_at_80x24_and_160x50(two_candidates: Path):
    """The same, through tmux's own screen (capture-pane), as a person would see it."""
    socket = f"cfkit-test-{uuid.uuid4().hex[:8]}"
    tmux = ["tmux", "-L", socket, "-f", os.devnull]
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}
    command = f"cd {REPO} && {sys.executable} -m cfkit review TX01 -w {two_candidates}; sleep 30"
    subprocess.run(tmux + ["new-session", "-d", "-x", "80", "-y", "24", command], check=True, env=env)

    def pane(contains: str, timeout: float = 60) -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            shown = subprocess.run(tmux + ["capture-pane", "-p", "-e"], capture_output=True, text=True).stdout
            lines = CSI.sub("", shown).rstrip("\n").split("\n")
            if any(contains in line for line in lines) or time.monotonic() > deadline:
                return lines
            time.sleep(0.2)

    try:
        bar = KeyBar(key_items(candidates=True, flip=True)).text(80).plain
        lines = pane(bar)
        assert lines[0].startswith("TX01 · Test edit"), lines[:2]
        assert bar in [line.rstrip() for line in lines]
        subprocess.run(tmux + ["resize-window", "-x", "160", "-y", "50"], check=True)
        long_bar = KeyBar(key_items(candidates=True, flip=False)).text(160).plain
        lines = pane(long_bar)
        assert lines[0].startswith("TX01") and long_bar in [line.rstrip() for line in lines]
        subprocess.run(tmux + ["send-keys", "a"], check=True)
        deadline = time.monotonic() + 30
        while not decisions(two_candidates) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)
    assert decisions(two_candidates) == [(1, "accept")]


@pytest.mark.parametrize("size", [(50, 12), (60, 20), (160, 50)])
def test_after_a_resize_the_frame_fits_the_new_size_and_starts_with_the_spec(two_candidates: Path, size):
    """As the audit session's test: the frame after a resize is sized by the terminal as it is now."""
    from rich.cells import cell_len

    from cfkit.review.loop import review_loop
    from cfkit.store import Store
    from support.pty_console import ResizableTerminal, ScriptedKeys

    columns, lines = size
    ws = load_workspace(two_candidates)
    with Store(ws.db_path) as store, ResizableTerminal(80, 24) as term:
        review_loop(ws, store, ["TX01"], ScriptedKeys(term, [size]), term.console)
        first, resized = term.frames()
    assert first[0].startswith("TX01 · Test edit") and len(first) <= 23
    assert resized[0].startswith("TX01") and len(resized) <= lines - 1
    assert all(cell_len(line.rstrip()) <= columns for line in resized)
    assert resized[-1].rstrip() == KeyBar(key_items(candidates=True, flip=columns < 92)).text(columns).plain


@pytest.mark.parametrize("size", [(30, 24), (80, 11), (20, 5)])
def test_too_small_a_terminal_shows_one_line_and_decides_nothing_until_it_is_enlarged(two_candidates: Path, size):
    from cfkit.review.loop import review_loop
    from cfkit.store import Store
    from support.pty_console import ResizableTerminal, ScriptedKeys

    columns, lines = size
    ws = load_workspace(two_candidates)
    with Store(ws.db_path) as store, ResizableTerminal(*size) as term:
        keys = ScriptedKeys(term, ["a", "r", "s", "]", (80, 24), "a"])
        summary = review_loop(ws, store, ["TX01"], keys, term.console)
        frames = term.frames()
    small = [" ".join(line.strip() for line in frame if line.strip()) for frame in frames[:-1]]
    assert small == [f"Terminal {columns}×{lines} is too small for the review (at least 40×12): enlarge it, or q "
                     "quits."] * 5  # the first frame and one per key but the resize
    assert frames[-1][0].startswith("TX01 · Test edit  #1 composite")  # enlarged: the edit it opened on
    assert [(d.edit_id, d.decision) for d in summary.decisions] == [(1, "accept")]
    assert decisions(two_candidates) == [(1, "accept")]
