"""The cue and the replacement — what an edit is judged against — are on screen whole, wrapped at words.

The pictures give up rows for them down to ``MIN_PANEL_ROWS``; below that the text is cut and says where it is
whole. The one-shot ``--show`` wraps them as the interactive screen does, and a resize rewraps them.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from rich.cells import cell_len
from rich.console import Console

from cfkit.review.screen import ReviewScreen, ViewState
from cfkit.review.view import MIN_PANEL_ROWS, EditView, ViewData, metrics_lines
from cfkit.specs import load_spec_file
from cfkit.terminal.paragraph import INDENT, labelled_lines
from support.edits import add_edit, inside_change, tiny_original
from support.review_edits import image_rows
from support.workspace import MINI

#: 300 characters, as a spec's cue may well be.
LONG_CUE = ("two bright points with cross-shaped diffraction spikes, the mark of nearby foreground stars in our own "
            "galaxy rather than distant galaxies, one right of centre below the middle and a smaller one in the upper "
            "left, each with four thin spokes and a soft round glow that a vision model may well read as stars")

CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def demo_spec(spec_id: str = "EX03"):
    path = MINI / "interventions" / f"{spec_id}.yaml"
    if not path.is_file():
        pytest.skip("examples/mini is not in this checkout")
    return load_spec_file(path).spec


def view_data(cue: str, replacement: str) -> ViewData:
    """An edit of a picture the demo's EX03 size (512×446)."""
    y, x = np.mgrid[0:446, 0:512]
    original = np.stack([x // 2, y // 2, (x + y) % 200], axis=-1).astype(np.uint8)
    mask = np.zeros((446, 512), np.uint8)
    mask[100:200, 150:300] = 255
    return ViewData(spec_id="CF18", title="Foreground stars removed", cue=cue, replacement=replacement, edit_id=3,
                    engine="classical", variant="composite", original=original, edited=original.copy(), mask=mask,
                    leaks=np.zeros(mask.shape, bool), check=None)


def drawn(renderable, width: int, height: int | None = None) -> str:
    console = Console(file=io.StringIO(), record=True, width=width, height=height or 200, color_system="truecolor",
                      force_terminal=True)
    console.print(renderable, soft_wrap=False)
    return console.export_text(styles=True)


def plain_lines(styled: str) -> list[str]:
    """The lines as a person reads them: no colours, no trailing blanks."""
    return [CSI.sub("", line).rstrip() for line in styled.splitlines()]


def field_lines(lines: list[str], label: str) -> list[str]:
    """The line that starts with ``label`` and the indented lines under it."""
    start = next(k for k, line in enumerate(lines) if line.startswith(label))
    end = start + 1
    while end < len(lines) and lines[end].startswith(" " * INDENT) and lines[end].strip():
        end += 1
    return lines[start:end]


def field(lines: list[str], label: str) -> str:
    return " ".join(" ".join(field_lines(lines, label)).removeprefix(label).split())


@pytest.mark.parametrize("width, height", [(80, 24), (120, 40), (60, 20)])
@pytest.mark.parametrize("long", [False, True], ids=["demo", "300 characters"])
def test_the_cue_and_the_replacement_are_on_screen_whole_broken_between_words(width, height, long):
    spec = demo_spec()
    cue = LONG_CUE if long else spec.cue
    styled = drawn(ReviewScreen(view_data(cue, spec.replacement), ViewState()), width, height)
    lines = plain_lines(styled)
    assert len(lines) <= height - 1 and all(cell_len(line) <= width for line in lines)
    assert lines[0].startswith("CF18 · ")
    assert field(lines, "cue: ") == cue  # every word, none split across two lines
    assert field(lines, "replacement: ") == spec.replacement
    assert not any("…" in line for line in field_lines(lines, "cue: ") + field_lines(lines, "replacement: "))
    assert len(image_rows(styled)) >= MIN_PANEL_ROWS


def test_at_80x24_the_pictures_give_up_the_rows_the_text_takes():
    spec = demo_spec()
    rows, shown = [], []
    for cue in ("a short cue", spec.cue, LONG_CUE):
        styled = drawn(ReviewScreen(view_data(cue, spec.replacement), ViewState()), 80, 24)
        lines = plain_lines(styled)
        assert len(lines) == 23  # the frame as tall as before: nothing scrolls, nothing is left blank
        rows.append(len(image_rows(styled)))
        shown.append(len(field_lines(lines, "cue: ")) + len(field_lines(lines, "replacement: ")))
    assert shown == [3, 4, 6]
    assert rows == [16 - 1, 16 - 2, 16 - 4]


@pytest.mark.parametrize("width, height, note", [(80, 16, "… (full cue: cfkit specs show CF18)"),
                                                 (60, 14, "… (full cue: cfkit specs show CF18)"),
                                                 (40, 12, "… (cfkit specs show CF18)")])
def test_where_the_pictures_cannot_give_more_the_cue_is_cut_and_says_where_it_is_whole(width, height, note):
    spec = demo_spec()
    styled = drawn(ReviewScreen(view_data(LONG_CUE, spec.replacement), ViewState()), width, height)
    lines = plain_lines(styled)
    assert len(lines) <= height - 1 and all(cell_len(line) <= width for line in lines)
    # As tall as the pictures may stay beside the header, the labels, a line of the cue and one of the replacement,
    # the key bar, the free last line and the metrics and the check whole (at 40 columns 'not checked: …' takes 2).
    always = len(metrics_lines(None, width)) + 1
    assert len(image_rows(styled)) == min(MIN_PANEL_ROWS, height - 2 - 4 - always)
    assert " ".join(line.strip() for line in lines).count("not checked: run 'cfkit check' (or press g to regenerate)")
    cue = field_lines(lines, "cue: ")
    assert cue[-1].endswith(note)
    shown = field(cue, "cue: ").removesuffix(note.removeprefix("…").strip()).strip().removesuffix("…")
    assert LONG_CUE.startswith(shown) and len(shown) > 5
    replacement = field_lines(lines, "replacement: ")
    assert field(lines, "replacement: ") == spec.replacement or replacement[-1].endswith("cfkit specs show CF18)")


@pytest.mark.parametrize("width", [80, 60])
def test_show_wraps_the_cue_and_the_replacement_as_the_interactive_screen_does(width):
    spec = demo_spec()
    data = view_data(LONG_CUE, spec.replacement)
    once = plain_lines(drawn(EditView(data), width))  # 'cfkit review --show': no height limit
    screen = plain_lines(drawn(ReviewScreen(data, ViewState()), width, 24))
    for label in ("cue: ", "replacement: "):
        assert field_lines(once, label) == field_lines(screen, label)
    assert field(once, "cue: ") == LONG_CUE


def test_after_a_resize_the_cue_is_rewrapped_whole_at_the_new_width(tiny_ws: Path):
    from cfkit.review.loop import review_loop
    from cfkit.store import Store
    from cfkit.workspace import load_workspace
    from support.pty_console import ResizableTerminal, ScriptedKeys

    spec = tiny_ws / "interventions" / "TX01.yaml"
    spec.write_text(spec.read_text().replace("cue: a grey block", f"cue: {LONG_CUE}"))
    add_edit(tiny_ws, "TX01", inside_change(tiny_original(tiny_ws), seed=1))
    ws = load_workspace(tiny_ws)
    sizes = [(80, 24), (60, 20), (120, 40)]
    with Store(ws.db_path) as store, ResizableTerminal(*sizes[0]) as term:
        review_loop(ws, store, ["TX01"], ScriptedKeys(term, sizes[1:]), term.console)
        frames = term.frames()
    assert len(frames) == len(sizes)
    for (width, height), frame in zip(sizes, frames):
        assert len(frame) <= height - 1 and all(cell_len(line.rstrip()) <= width for line in frame)
        assert field([line.rstrip() for line in frame], "cue: ") == LONG_CUE


def test_a_paragraph_never_passes_its_width_and_folds_only_a_word_wider_than_a_line():
    text = "a  cue\twith   odd spacing and a word " + "x" * 50 + " inside"
    for width in range(8, 90):
        lines = labelled_lines("cue: ", text, width)
        assert all(line.cell_len <= width for line in lines)
        assert all(line.plain.startswith(" " * INDENT) for line in lines[1:])
        words = "".join(line.plain.strip() + " " for line in lines).split()
        assert "".join(words) == "".join(("cue: " + text).split())  # only the long word is folded
    wrapped = [line.plain for line in labelled_lines("cue: ", text, 31)]
    assert wrapped[0] == "cue: a cue with odd spacing and"
    cut = labelled_lines("cue: ", LONG_CUE, 40, most=1, cut_notes=("(full cue: cfkit specs show CF18)",
                                                                     "(cfkit specs show CF18)"))
    assert [line.plain for line in cut] == ["cue: two bright… (cfkit specs show CF18)"]
