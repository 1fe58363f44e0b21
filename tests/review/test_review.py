"""The terminal review: the view in colour at fixed widths, the key loop, decisions that survive a kill."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console

from cfkit.review.loop import (
    load_view_data,
    pending_specs,
    record_decision,
    review_loop,
    terminal_problem,
)
from cfkit.review.view import OUTLINE_RGB, EditView, ViewData
from cfkit.store import Store
from cfkit.workspace import load_workspace
from support.edits import add_edit, inside_change, tiny_original
from support.review_edits import ANSI, ScriptedKeys, image_rows, two_edits
from support.store_sql import table_rows
from support.workspace import run_cli

RED, BLUE, GREEN = (200, 0, 0), (0, 0, 200), (0, 180, 0)


def synthetic_view() -> ViewData:
    """96x64: red top half, blue bottom half; the edit paints the mask (rows 16..31, cols 24..47) green."""
    original = np.zeros((64, 96, 3), np.uint8)
    original[:32] = RED
    original[32:] = BLUE
    mask = np.zeros((64, 96), np.uint8)
    mask[16:32, 24:48] = 255
    edited = original.copy()
    edited[mask > 0] = GREEN
    leaks = np.zeros((64, 96), bool)
    check = {"metrics": {"ssim_out": 1.0, "mse_out": 0.0, "psnr_out": None, "lpips_out": None, "lpips_in": None,
                         "mad_in": 0.4, "leak_share": 0.0, "leak_count": 0},
             "verdict": "pass", "reasons": [], "lpips_measured": False}
    return ViewData(spec_id="CF18", title="Isolation to inclusion", cue="a <b>distressing</b> letter",
                    replacement="an open lesson book", edit_id=7, engine="classical", variant="composite",
                    original=original, edited=edited, mask=mask, leaks=leaks, check=check)


def render(view, width: int, color_system: str = "truecolor") -> str:
    console = Console(record=True, width=width, color_system=color_system, force_terminal=True)
    console.print(view)
    return console.export_text(styles=True)


def test_wide_view_puts_three_panels_side_by_side_in_truecolor():
    view = EditView(synthetic_view())
    text = render(view, 160)
    layout = view.layout(160)
    cols, rows = layout.cols, layout.rows
    assert layout.panels == ("original", "edited", "difference") and cols == 52 and rows == 17
    lines = image_rows(text)
    assert len(lines) == rows
    for line in lines:
        assert sum(ch == "▀" for ch, _, _ in line) == 3 * cols
    # Row 2 (pixels 4-5) is above the mask: every panel is red there, the difference black.
    row = [c for c in lines[2] if c[0] == "▀"]
    assert row[10][1] == row[10][2] == RED  # original
    assert row[cols + 10][1] == RED  # edited
    assert row[2 * cols + 10][1] == (0, 0, 0)  # difference: no change
    # Row 6 (pixels 12-13; the mask spans pixel rows 16..31 → 11..21 at this scale): inside the mask.
    row = [c for c in lines[6] if c[0] == "▀"]
    x = 20  # pixel column 20 · 96/52 ≈ 37, inside the mask's columns 24..47
    assert row[x][1] == RED and row[cols + x][1] == GREEN
    assert row[2 * cols + x][1] not in ((0, 0, 0), None)  # the heat map lights up where the edit is
    # The mask outline is drawn on the original only, beside the mask (cell columns 13..25 hold it).
    outlined = [i for i, c in enumerate(row[:cols]) if c[1] == OUTLINE_RGB]
    assert outlined == [12, 26]
    assert all(c[1] != OUTLINE_RGB for c in row[cols: 2 * cols])
    # The cue is printed as text, markup-free.
    assert "a <b>distressing</b> letter" in text
    assert "check: pass (without LPIPS)" in re.sub(ANSI, "", text)


def test_at_80_columns_two_panels_sit_side_by_side_and_f_flips_the_second():
    view = EditView(synthetic_view())
    text = render(view, 80)
    layout = view.layout(80)
    assert layout.panels == ("original", "edited") and layout.cols == 39
    lines = image_rows(text)
    assert len(lines) == layout.rows
    assert all(sum(ch == "▀" for ch, _, _ in line) == 2 * layout.cols for line in lines)
    plain = re.sub(ANSI, "", text)
    assert all(len(line) <= 80 for line in plain.splitlines())
    # The second panel is the edit (green inside the mask) …
    inside = [c for c in lines[6] if c[0] == "▀"]
    assert inside[layout.cols + 15][1] == GREEN
    # … and flipped, the difference (its untouched top is black).
    flipped = EditView(synthetic_view(), flip=1)
    assert flipped.layout(80).panels == ("original", "difference")
    assert image_rows(render(flipped, 80))[1][layout.cols + 10][1] == (0, 0, 0)
    # Narrower than two panels of 16 columns: one, and f cycles through the three.
    assert [EditView(synthetic_view(), flip=k).layout(32).panels for k in range(3)] == [
        ("original",), ("edited",), ("difference",)]


def test_leak_mode_and_256_colour_fallback():
    data = synthetic_view()
    leaks = np.zeros((64, 96), bool)
    leaks[50:56, 70:80] = True
    data = ViewData(**{**data.__dict__, "leaks": leaks})
    text = render(EditView(data, diff_mode="leaks"), 160)
    assert "leaks over faded original" in text
    lines = image_rows(text)
    cols = EditView(data).layout(160).cols
    leak_row = [c for c in lines[13] if c[0] == "▀"]  # pixels 26-27 at scale → rows 48..55 of the image
    reds = [i - 2 * cols for i, c in enumerate(leak_row) if i >= 2 * cols and (c[1] == (255, 32, 32) or c[2] == (255, 32, 32))]
    assert reds and min(reds) >= 36 and max(reds) <= 44  # columns 70..79 · 52/96
    fallback = render(EditView(data), 160, color_system="256")
    assert "38;5;" in fallback and "38;2;" not in fallback


def test_view_renders_inside_a_table():
    from rich.table import Table

    table = Table.grid()
    table.add_row(EditView(synthetic_view()))
    assert "▀" in render(table, 100)


# ── the key loop ───────────────────────────────────────────────────────────


def test_scripted_keys_decide_toggle_and_help(two_edits):
    ws = load_workspace(two_edits)
    console = Console(record=True, width=120, color_system="truecolor", force_terminal=True)
    keys = ScriptedKeys(["?", "a", "d", "v", "x", "r", "the wall changed", "a"])  # the a closing the help does nothing
    with Store(ws.db_path) as store:
        summary = review_loop(ws, store, ["TX01", "TX02"], keys, console)
        rows = table_rows(store.path, "reviews", "spec_id, edit_id, decision, note", order_by="id")
    text = console.export_text()
    assert "regenerate: another candidate with this edit's engine" in text  # help
    assert "leaks over faded original" in text  # d
    assert "edited (raw)" in text  # v
    assert "unknown key 'x'" in text
    assert [(r["spec_id"], r["decision"], r["note"]) for r in rows] == [
        ("TX01", "reject", "the wall changed"), ("TX02", "accept", None)]
    assert [r["edit_id"] for r in rows] == [1, 2]
    assert not summary.quit_early and len(summary.decisions) == 2


def test_quit_and_resume_pending(two_edits):
    ws = load_workspace(two_edits)
    console = Console(record=True, width=100)
    with Store(ws.db_path) as store:
        assert pending_specs(store) == ["TX01", "TX02"]
        summary = review_loop(ws, store, ["TX01", "TX02"], ScriptedKeys(["s", "q"]), console)
        assert summary.quit_early and [d.decision for d in summary.decisions] == ["skip"]
        assert pending_specs(store) == ["TX01", "TX02"]  # a skip stays pending
        review_loop(ws, store, pending_specs(store), ScriptedKeys(["a"]), console)
        assert pending_specs(store) == ["TX02"]
        # A newer edit of an accepted spec is pending again.
        add_edit(two_edits, "TX01", inside_change(tiny_original(two_edits), seed=3))
        assert pending_specs(store) == ["TX01", "TX02"]


def test_regenerate_makes_a_new_edit_and_shows_it(two_edits):
    ws = load_workspace(two_edits)
    console = Console(record=True, width=100)
    made = []

    def regenerate(record, engine) -> None:
        assert engine is None  # g: like the edit on screen
        made.append(add_edit(two_edits, record.spec_id, inside_change(tiny_original(two_edits), seed=11)))

    with Store(ws.db_path) as store:
        review_loop(ws, store, ["TX01"], ScriptedKeys(["g", "a"]), console, regenerate=regenerate)
        rows = table_rows(store.path, "reviews", "edit_id, decision")
    assert made == [3]
    assert [(r["edit_id"], r["decision"]) for r in rows] == [(3, "accept")]
    assert "#3 composite" in console.export_text()
    without = Console(record=True, width=100)
    with Store(ws.db_path) as store:
        review_loop(ws, store, ["TX02"], ScriptedKeys(["g", "q"]), without)
    assert "regenerate is not available here" in without.export_text()


KILL_SCRIPT = """
import sys, time
from pathlib import Path
from rich.console import Console
from cfkit.review.loop import review_loop
from cfkit.store import Store
from cfkit.workspace import load_workspace

class KeysThenHang:
    calls = 0
    def key(self):
        self.calls += 1
        if self.calls == 1:
            return "a"
        Path(sys.argv[2]).write_text("waiting")
        time.sleep(120)
    def line(self, prompt):
        return ""

ws = load_workspace(Path(sys.argv[1]))
with Store(ws.db_path) as store:
    review_loop(ws, store, ["TX01", "TX02"], KeysThenHang(), Console(file=open("/dev/null", "w")))
"""


def test_a_decision_survives_a_kill_between_two_decisions(two_edits, tmp_path):
    marker = tmp_path / "waiting"
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(two_edits), str(marker)],
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the review loop never reached its second key"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    ws = load_workspace(two_edits)
    with Store(ws.db_path) as store:
        assert store.integrity_ok()
        rows = table_rows(store.path, "reviews", "spec_id, decision")
        assert [(r["spec_id"], r["decision"]) for r in rows] == [("TX01", "accept")]
        assert pending_specs(store) == ["TX02"]


# ── the command ────────────────────────────────────────────────────────────


def test_review_without_a_terminal_refuses_and_points_to_flags(two_edits):
    result = run_cli(["review", "TX01", "-w", str(two_edits)])
    assert result.exit_code == 2
    assert "--accept" in result.stderr and "--reject --note" in result.stderr and "--json" in result.stderr
    assert "Traceback" not in result.stderr
    assert terminal_problem({"TERM": "dumb"}) == "TERM is 'dumb'"


def test_review_flags_record_and_json_reports(two_edits):
    ws = str(two_edits)
    assert run_cli(["review", "TX01", "--reject", "-w", ws]).exit_code == 2  # a reject needs a note
    result = run_cli(["review", "TX01", "--reject", "--note", "faces changed", "-w", ws])
    assert result.exit_code == 0, result.stderr
    assert run_cli(["review", "TX02", "--accept", "-w", ws]).exit_code == 0
    report = json.loads(run_cli(["review", "TX01", "TX02", "--json", "-w", ws]).stdout)
    assert [r["review"]["decision"] for r in report] == ["reject", "accept"]
    assert report[0]["review"]["note"] == "faces changed"
    assert "Nothing pending" in run_cli(["review", "--pending", "--json", "-w", ws]).stderr  # both decided
    listing = json.loads(run_cli(["specs", "list", "--json", "-w", ws]).stdout)["specs"]
    assert {r["id"]: r["review"] for r in listing} == {"TX01": "reject", "TX02": "accept"}
    shown = run_cli(["review", "TX02", "--show", "-w", ws])
    # Without a terminal, no colour: the pictures in shades of their brightness (cfkit.terminal.halfblocks).
    assert shown.exit_code == 0 and "another corner" in shown.stdout
    assert "▀" not in shown.stdout and len(set("░▒▓█") & set(shown.stdout)) >= 2


def test_two_decisions_at_once_conflict_and_nothing_is_recorded(two_edits):
    result = run_cli(["review", "TX01", "--accept", "--reject", "--note", "x", "-w", str(two_edits)])
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --accept and --reject conflict; give one decision."
    with Store(load_workspace(two_edits).db_path) as store:
        assert len(table_rows(store.path, "reviews")) == 0


def test_deciding_every_pending_edit_unseen_needs_yes_or_a_confirmation(two_edits):
    ws = str(two_edits)
    refused = run_cli(["review", "--pending", "--accept", "-w", ws])
    assert refused.exit_code == 2 and "add --yes" in refused.stderr and "TX01, TX02" in refused.stderr
    with Store(load_workspace(two_edits).db_path) as store:
        assert pending_specs(store) == ["TX01", "TX02"]
    done = run_cli(["review", "--pending", "--accept", "--yes", "-w", ws])
    assert done.exit_code == 0, done.stderr
    with Store(load_workspace(two_edits).db_path) as store:
        assert pending_specs(store) == []


def test_at_a_terminal_the_pending_decision_is_asked_and_no_keeps_everything_pending(two_edits):
    import os
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: cfkit at a terminal, answering nothing but what the parent types
        os.execvp(sys.executable, [sys.executable, "-m", "cfkit", "review", "--pending", "--skip",
                                   "-w", str(two_edits)])
    import select

    seen, deadline = b"", time.monotonic() + 60
    while b"[y/N]" not in seen:
        assert time.monotonic() < deadline, seen
        if select.select([fd], [], [], 1)[0]:
            seen += os.read(fd, 1024)
    os.write(fd, b"n\n")
    rest = b""
    try:
        while chunk := os.read(fd, 1024):
            rest += chunk
    except OSError:  # the child closed the terminal
        pass
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 1
    assert b"Skip the pending edit of 2 specs (TX01, TX02) without looking at them?" in seen
    assert b"nothing decided" in rest
    with Store(load_workspace(two_edits).db_path) as store:
        assert len(table_rows(store.path, "reviews")) == 0


def test_view_data_reads_check_and_decision(two_edits, tmp_path, monkeypatch):
    from cfkit.edit_files import check_edit

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "no-cache"))
    monkeypatch.delenv("CFKIT_LPIPS_BACKBONE", raising=False)
    ws = load_workspace(two_edits)
    with Store(ws.db_path) as store:
        record_decision(store, "TX01", 1, "skip")
        assert load_view_data(ws, store, "TX01").check is None
        check_edit(ws, store, 1)
        data = load_view_data(ws, store, "TX01", "raw")
    assert data.variant == "raw" and data.decision == "skip"
    assert data.check["variant"] == "raw" and data.check["verdict"] == "fail"  # the raw output is a no-op
    assert data.original.shape == data.edited.shape == (64, 96, 3)


def test_regenerate_through_cfkit_edit_uses_the_engine_and_options_of_the_edit_on_screen(tiny_ws, tmp_path,
                                                                                          monkeypatch):
    """g makes another candidate like the edit shown (engine, options); G asks, and Enter means cfkit.toml's engine."""
    from cfkit.cli.review import _regenerate

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "no-cache"))
    ws_root = tiny_ws
    assert run_cli(["edit", "TX01", "--engine", "classical", "-o", "color=#203040", "-w", str(ws_root)]).exit_code == 0
    config = ws_root / "cfkit.toml"
    config.write_text(config.read_text() + '\n[edit]\nengine = "classical"\n[edit.engines.classical]\n'
                                           'color = "#ff0000"\n')
    ws = load_workspace(ws_root)
    console = Console(record=True, width=100, height=40)
    with Store(ws.db_path) as store:
        review_loop(ws, store, ["TX01"], ScriptedKeys(["g", "G", "", "a"]), console, regenerate=_regenerate(ws))
        made = [r for r in table_rows(store.path, "edits", "id, spec_id, engine, params", order_by="id")
                if r["spec_id"] == "TX01"]
        checks = [r for r in table_rows(store.path, "checks", "edit_id, variant") if r["edit_id"] == made[1]["id"]]
        [review] = table_rows(store.path, "reviews", "edit_id, decision")
    assert [m["engine"] for m in made] == ["classical"] * 3
    colours = [json.loads(m["params"])["color"] for m in made]
    # g kept #1's -o colour; G + Enter made an edit as 'cfkit edit' would: the spec's colour over cfkit.toml's.
    assert colours == ["#203040", "#203040", "#20a040"]
    assert {c["variant"] for c in checks} == {"raw", "composite"}
    assert (review["edit_id"], review["decision"]) == (3, "accept")
    text = console.export_text()
    assert "regenerating TX01 like #1 (classical classical-recolor)" in text and "made #2" in text
    assert "#3 composite · classical" in text


def test_interactive_review_in_a_pseudo_terminal(two_edits):
    """The command itself, on a real pty: draws the view, takes single key presses, saves decisions."""
    import os
    import pty
    import select
    import termios

    pid, fd = pty.fork()
    if pid == 0:  # the child: cfkit review on the pty
        os.environ.update({"TERM": "xterm-256color", "COLUMNS": "120", "LINES": "60"})
        os.execv(sys.executable, [sys.executable, "-m", "cfkit", "review", "TX01", "TX02", "-w", str(two_edits)])
    output = b""
    seen = 0  # tokens are looked for only in output that arrived after the previous match

    def read_more(timeout: float) -> bool:
        nonlocal output
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        output += chunk
        return bool(chunk)

    def expect(token: bytes, timeout: float = 60) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while token not in output[seen:]:
            assert time.monotonic() < deadline, output[-300:]
            assert read_more(0.2), f"the command ended before printing {token!r}: {output[-300:]!r}"
        seen = output.index(token, seen) + len(token)

    def press(key: bytes, timeout: float = 60) -> None:
        """Send a key once the command waits for one: click switches the terminal to raw mode
        and flushes pending input as it does, so a key sent earlier would be lost."""
        deadline = time.monotonic() + timeout
        while termios.tcgetattr(fd)[3] & termios.ICANON:
            assert time.monotonic() < deadline, output[-300:]
            read_more(0.05)
        os.write(fd, key)

    try:
        expect(b"Test edit")
        press(b"r")
        expect(b"note (why rejected)")
        os.write(fd, b"\r")  # Enter alone: no reject, and the same edit stays on screen
        expect(b"a reject needs a note saying why; #1 is not rejected")
        press(b"r")
        expect(b"note (why rejected)")
        os.write(fd, b"colours drifted\r")
        expect(b"Second test edit")
        press(b"a")
        expect(b"2 decisions saved")
        deadline = time.monotonic() + 30
        while read_more(0.2) and time.monotonic() < deadline:  # drain until the child closes the pty
            pass
        _, status = os.waitpid(pid, 0)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    assert b"\x1b[38;2;" in output or b"\x1b[38;5;" in output  # drawn in colour
    ws = load_workspace(two_edits)
    with Store(ws.db_path) as store:
        rows = table_rows(store.path, "reviews", "spec_id, decision, note", order_by="id")
    assert [(r["spec_id"], r["decision"], r["note"]) for r in rows] == [
        ("TX01", "reject", "colours drifted"), ("TX02", "accept", None)]


def test_toggle_to_raw_says_when_there_is_none(two_edits):
    ws = load_workspace(two_edits)
    console = Console(record=True, width=100)
    with Store(ws.db_path) as store:
        review_loop(ws, store, ["TX02"], ScriptedKeys(["v", "q"]), console)
    text = console.export_text()
    assert "edit #2 has only its composite image." in text and "edited (raw)" not in text


def test_every_view_shows_the_decision_of_the_edit_it_displays(tiny_ws: Path):
    # Edit #1 is accepted; edit #2 is made later and nobody has decided it yet.
    import json

    assert run_cli(["edit", "TX01", "--engine", "classical", "-w", str(tiny_ws)]).exit_code == 0
    assert run_cli(["review", "TX01", "--accept", "-w", str(tiny_ws)]).exit_code == 0
    assert run_cli(["edit", "TX01", "--engine", "classical", "--again", "-w", str(tiny_ws)]).exit_code == 0

    shown = json.loads(run_cli(["review", "TX01", "--json", "-w", str(tiny_ws)]).stdout)[0]
    assert shown["edit_id"] == 2 and shown["review"] is None  # not edit #1's accept

    [row] = json.loads(run_cli(["specs", "list", "--json", "-w", str(tiny_ws)]).stdout)["specs"]
    assert (row["edit_id"], row["selected"], row["review"], row["candidates"]) == (1, True, "accept", 2)

    listed = {e["id"]: e for e in json.loads(run_cli(["edits", "list", "--json", "-w", str(tiny_ws)]).stdout)}
    assert (listed[1]["review"], listed[1]["selected"]) == ("accept", True)
    assert (listed[2]["review"], listed[2]["selected"]) == (None, False)

    with Store(tiny_ws / ".cfkit" / "cfkit.db") as store:
        view = load_view_data(load_workspace(tiny_ws), store, "TX01")
    assert (view.edit_id, view.decision) == (2, None)
