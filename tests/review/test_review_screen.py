"""The review screen fits the terminal: 80×24 and 160×50 in colour, candidates, zoom, the outline beside tiny masks."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from rich.console import Console

from cfkit.review.loop import load_view_data, review_loop
from cfkit.review.panels import OUTLINE_RGB, Pictures, mask_pixels, panel, ring, zoom_boxes
from cfkit.review.screen import KeyBar, ReviewScreen, ViewState, key_items
from cfkit.review.view import EditView, ViewData
from cfkit.store import Store
from cfkit.workspace import load_workspace
from support.edits import add_edit, inside_change, tiny_original
from support.review_edits import image_rows
from support.store_sql import table_rows
from support.workspace import run_cli

SIZES = [(80, 24), (160, 50)]


def console(width: int, height: int) -> Console:
    return Console(file=io.StringIO(), record=True, width=width, height=height, color_system="truecolor",
                   force_terminal=True)


CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def plain(text: str) -> str:
    """The text as a person reads it: no colours, no cursor moves or screen clears."""
    return CSI.sub("", text)


def photo_like(width: int = 384, height: int = 256) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width]
    return np.stack([x * 255 // width, y * 255 // height, (x + y) % 200], axis=-1).astype(np.uint8)


def view_data(mask: np.ndarray, **extra) -> ViewData:
    original = photo_like(mask.shape[1], mask.shape[0])
    edited = original.copy()
    edited[mask > 0] = (0, 200, 0)
    fields = dict(spec_id="CF18", title="Isolation to inclusion", cue="a distressing letter",
                  replacement="an open lesson book", edit_id=14, engine="openai", model="gpt-image-2",
                  variant="composite", original=original, edited=edited, mask=mask,
                  leaks=np.zeros(mask.shape, bool), check=None, candidates=(12, 14, 17), selected_id=12,
                  candidate_states=("pass, accept", "pass", "fail"))
    return ViewData(**(fields | extra))


def box_mask(width: int = 384, height: int = 256) -> np.ndarray:
    mask = np.zeros((height, width), np.uint8)
    mask[60:140, 100:220] = 255
    return mask


@pytest.mark.parametrize("width, height", SIZES)
def test_the_screen_keeps_header_pictures_and_key_bar_on_screen(width, height):
    out = console(width, height)
    out.print(ReviewScreen(view_data(box_mask()), ViewState()), soft_wrap=False)
    styled = out.export_text(styles=True)
    lines = plain(styled).splitlines()
    assert len(lines) <= height - 1  # the last line stays free: nothing scrolls
    assert all(len(line) <= width for line in lines)
    assert lines[0].startswith("CF18 · ") and "#14 composite" in lines[0] and "cand 2/3" in lines[0]
    assert "not selected (#12 is)" in lines[0]
    bar = KeyBar(key_items(candidates=True, flip=width < 92)).text(width).plain
    assert lines[-1] == bar  # the whole key bar, on the last line
    for key in ("a ", "r ", "s ", "[ ]", "z ", "d ", "v ", "? ", "q "):
        assert key in bar
    # In colour: the spec id bold cyan, the pictures in 24-bit colour.
    assert "\x1b[1;36mCF18" in styled and "\x1b[38;2;" in styled
    pictures = image_rows(styled)
    expected = ("original", "edited") if width == 80 else ("original", "edited", "difference")
    layout = EditView(view_data(box_mask()), max_height=height - 2).layout(width)
    assert layout.panels == expected
    assert all(sum(c[0] == "▀" for c in row) == len(expected) * layout.cols for row in pictures)
    assert "candidates: #12 pass, accept (selected) · ▸#14 pass · #17 fail" in plain(styled)


@pytest.mark.parametrize("width, height", [(40, 12), (60, 15), (100, 30), (200, 60)])
def test_the_screen_fits_other_sizes_with_a_long_message(width, height):
    from rich.text import Text

    out = console(width, height)
    message = Text("regenerate failed: " + "the service said something long. " * 30, style="red")
    out.print(ReviewScreen(view_data(box_mask()), ViewState(), message), soft_wrap=False)
    lines = plain(out.export_text()).splitlines()
    assert len(lines) <= height - 1 and all(len(line) <= width for line in lines)
    assert lines[0].startswith("CF18") and any(line.startswith("regenerate failed") for line in lines)
    assert lines[-2].endswith("…")  # the message, cut short above the key bar


def test_the_key_bar_never_wraps_and_keeps_every_key():
    for width in range(30, 200, 7):
        for candidates in (False, True):
            for flip in (False, True):
                items = key_items(candidates=candidates, flip=flip)
                text = KeyBar(items).text(width)
                assert text.cell_len <= width
                if width >= 40:
                    assert all(item.keys in text.plain for item in items), (width, text.plain)


def test_the_outline_is_drawn_beside_a_tiny_mask_not_over_it():
    # Two small stars, 0.4 % of a 512x446 image, as in examples/mini's EX03.
    height, width = 446, 512
    mask = np.zeros((height, width), np.uint8)
    yy, xx = np.mgrid[0:height, 0:width]
    mask[(yy - 120) ** 2 + (xx - 90) ** 2 <= 9 ** 2] = 255
    mask[(yy - 300) ** 2 + (xx - 380) ** 2 <= 13 ** 2] = 255
    assert 0.003 < (mask > 0).mean() < 0.005
    pictures = Pictures.of(photo_like(width, height), photo_like(width, height), mask, np.zeros(mask.shape, bool))
    for cols, rows in ((37, 16), (52, 23)):  # the original's panel at 80×24 and at 160×50
        drawn = panel(pictures, "original", cols, 2 * rows)
        plain_panel = panel(Pictures.of(photo_like(width, height), photo_like(width, height),
                                        np.zeros_like(mask), np.zeros(mask.shape, bool)), "original", cols, 2 * rows)
        inside = mask_pixels(mask, cols, 2 * rows)
        assert inside.any()
        assert np.array_equal(drawn[inside], plain_panel[inside])  # the stars' own pixels are untouched
        outline = np.all(drawn == OUTLINE_RGB, axis=-1)
        assert outline.any() and not (outline & inside).any()
        assert np.array_equal(outline, ring(inside))  # exactly the ring around them


def test_zoom_fills_the_panel_with_the_mask_and_steps_through_far_apart_regions():
    mask = np.zeros((256, 384), np.uint8)
    mask[20:40, 30:54] = 255  # one small region top left …
    mask[200:230, 330:370] = 255  # … another bottom right
    boxes = zoom_boxes(mask)
    assert len(boxes) == 2  # the whole mask's box is nearly the image, so each region gets its own
    assert all(abs(b.width / b.height - 384 / 256) < 0.02 for b in boxes)  # the image's aspect: the same panel
    data = view_data(mask)
    cols, rows = 39, 13
    whole = mask_pixels(data.mask, cols, 2 * rows).mean()
    first = Pictures.of(data.original, data.edited, data.mask, data.leaks, zoom=1)
    zoomed = mask_pixels(first.mask, cols, 2 * rows).mean()
    assert first.zoom > 4 and first.region == "1/2"
    assert zoomed > 8 * whole
    assert Pictures.of(data.original, data.edited, data.mask, data.leaks, zoom=2).region == "2/2"
    out = console(80, 24)
    out.print(EditView(data, zoom=2, max_height=20), soft_wrap=False)
    drawn = plain(out.export_text())
    assert "zoom ×" in drawn and "(2/2)" in drawn


# ── scripted keys through the loop ─────────────────────────────────────────


class FrameKeys:
    """Scripted keys; before each key the frame on screen is kept (text with styles)."""

    def __init__(self, out: Console, keys: list[str]):
        self.out = out
        self.keys = list(keys)
        self.frames: list[str] = []

    def key(self) -> str:
        self.frames.append(self.out.export_text(styles=True, clear=True))
        return self.keys.pop(0) if self.keys else "q"

    def line(self, prompt: str) -> str:
        return self.keys.pop(0) if self.keys else ""


@pytest.fixture
def three_candidates(tiny_ws: Path) -> Path:
    original = tiny_original(tiny_ws)
    for seed in (1, 2, 3):
        add_edit(tiny_ws, "TX01", inside_change(original, seed=seed), raw=original)
    return tiny_ws


@pytest.mark.parametrize("width, height", SIZES)
def test_stepping_candidates_zooming_and_accepting_with_scripted_keys(three_candidates: Path, width, height):
    ws = load_workspace(three_candidates)
    out = console(width, height)
    keys = FrameKeys(out, ["]", "z", "]", "[", "[", "[", "z", "a"])
    with Store(ws.db_path) as store:
        summary = review_loop(ws, store, ["TX01"], keys, out)
        [decision] = table_rows(store.path, "reviews", "edit_id, decision")
    assert (decision["edit_id"], decision["decision"]) == (1, "accept") and not summary.quit_early
    heads = [plain(frame).splitlines()[0] for frame in keys.frames]
    shown = [re.search(r"#(\d) composite.*  cand (\d)/3", h).groups() for h in heads]
    # Before each key: #1, then ] #2, z (zoomed) #2, ] #3, [ #2, [ #1, [ (already the first) #1, z (back) #1, a
    assert shown == [("1", "1"), ("2", "2"), ("2", "2"), ("3", "3"), ("2", "2"), ("1", "1"), ("1", "1"), ("1", "1")]
    assert "this is the first" in plain(keys.frames[6])
    assert all("zoom ×" in plain(frame) for frame in keys.frames[2:7])
    assert "zoom ×" not in plain(keys.frames[7]) and "zoom ×" not in plain(keys.frames[1])
    for frame in keys.frames:
        lines = plain(frame).splitlines()
        assert len(lines) <= height - 1 and lines[0].startswith("TX01")
        assert lines[-1] == KeyBar(key_items(candidates=True, flip=width < 92)).text(width).plain
        assert "\x1b[38;2;" in frame  # drawn in colour


def test_an_accepted_older_candidate_is_the_selected_edit_in_every_view(three_candidates: Path, tmp_path: Path):
    ws = str(three_candidates)
    result = run_cli(["review", "TX01", "--edit", "1", "--accept", "-w", ws])
    assert result.exit_code == 0 and "TX01: edit #1 accepted" in result.stderr
    [row] = json.loads(run_cli(["specs", "list", "--json", "-w", ws]).stdout)["specs"]
    assert (row["edit_id"], row["selected"], row["review"], row["candidates"]) == (1, True, "accept", 3)
    assert "#1 selected (of 3)" in run_cli(["specs", "list", "-w", ws]).stdout
    listed = json.loads(run_cli(["edits", "list", "--json", "-w", ws]).stdout)
    assert [(e["id"], e["selected"]) for e in listed] == [(1, True), (2, False), (3, False)]
    assert "✓ selected" in run_cli(["edits", "list", "-w", ws]).stdout
    shown = json.loads(run_cli(["review", "TX01", "--edit", "1", "--json", "-w", ws]).stdout)[0]
    assert (shown["edit_id"], shown["selected"], shown["selected_edit"]) == (1, True, 1)
    assert shown["candidates"] == [1, 2, 3] and shown["review"]["decision"] == "accept"
    other = json.loads(run_cli(["review", "TX01", "--edit", "3", "--json", "-w", ws]).stdout)[0]
    assert (other["selected"], other["selected_edit"]) == (False, 1)
    sheet = tmp_path / "sheet.html"
    assert run_cli(["sheet", "--output", str(sheet), "-w", ws]).exit_code == 0
    assert "edit #1 (selected)" in sheet.read_text()
    with Store(three_candidates / ".cfkit" / "cfkit.db") as store:
        from cfkit.review.sheet import collect_pairs

        [pair], _ = collect_pairs(load_workspace(three_candidates), store, ["TX01"])
        view = load_view_data(load_workspace(three_candidates), store, "TX01", edit_id=1)
    assert (pair.edit_id, pair.selected) == (1, True)
    assert view.selected and "  selected" in view_header(view)
    # A reject of one candidate needs a note, and an edit of another spec is refused.
    assert run_cli(["review", "TX01", "--edit", "2", "--reject", "-w", ws]).exit_code == 2
    wrong = run_cli(["review", "TX02", "--edit", "1", "--accept", "-w", ws])
    assert wrong.exit_code == 2
    several = run_cli(["review", "TX01", "TX02", "--edit", "1", "--accept", "-w", ws])
    assert several.exit_code == 2 and "--edit 1 names one edit" in several.stderr


def view_header(view: ViewData) -> str:
    from cfkit.review.view import header_line

    return header_line(view, 120).plain


def test_show_writes_the_side_by_side_view_as_a_png_and_keeps_colour_in_a_pipe(three_candidates: Path, tmp_path):
    ws = str(three_candidates)
    target = tmp_path / "view.png"
    result = run_cli(["review", "TX01", "--show", "--output", str(target), "-w", ws])
    assert result.exit_code == 0, result.stderr
    picture = np.asarray(Image.open(target).convert("RGB"))
    assert picture.shape[1] > 3 * 480  # three panels side by side
    assert (np.all(picture == OUTLINE_RGB, axis=-1)).any()  # the mask's outline
    assert run_cli(["review", "TX01", "--show", "--output", str(target), "-w", ws]).exit_code == 2  # kept
    assert run_cli(["review", "TX01", "--show", "--output", str(target), "--force", "-w", ws]).exit_code == 0
    coloured = run_cli(["review", "TX01", "--show", "--color", "always", "-w", ws])
    assert "\x1b[38;2;" in coloured.stdout and "▀" in coloured.stdout
    bare = run_cli(["review", "TX01", "--show", "--color", "never", "-w", ws])
    assert "\x1b[" not in bare.stdout
    assert run_cli(["review", "TX01", "--output", str(target), "-w", ws]).exit_code == 2  # --output needs --show


@pytest.mark.parametrize("width, height", [(80, 24), (60, 20)])
def test_the_help_wraps_each_description_at_a_word_under_its_first_line(width, height):
    from cfkit.review.screen import HELP, HELP_INDENT

    out = console(width, height)
    out.print(ReviewScreen(view_data(box_mask()), ViewState(help=True)), soft_wrap=False)
    lines = plain(out.export_text()).splitlines()
    assert len(lines) <= height - 1 and all(len(line) <= width for line in lines)
    keys = [line[:HELP_INDENT].strip() for line in HELP.splitlines()]
    shown = [line[:HELP_INDENT].strip() for line in lines[1:-1] if line[:HELP_INDENT].strip()]
    assert shown == keys  # every key, in order, each once
    if width == 80:  # room for every description whole: none is cut, and each word is on screen
        assert not any(line.endswith("…") for line in lines)
        assert " ".join(" ".join(line[HELP_INDENT:].split()) for line in lines[1:-1]) == " ".join(
            " ".join(line[HELP_INDENT:].split()) for line in HELP.splitlines())
    assert "      candidate follows" in lines or "      next undecided candidate follows" in lines


@pytest.mark.parametrize("made", [dict(no_color=True, force_terminal=True, color_system="truecolor"),
                                  dict(color_system=None)], ids=["NO_COLOR", "pipe"])
def test_without_colour_the_pictures_are_drawn_in_shades_of_their_brightness(made):
    from cfkit.terminal.halfblocks import SHADES, HalfBlockImage

    image = np.zeros((8, 8, 3), np.uint8)
    image[:, 4:] = 255  # black | white
    image[4:, :4] = 128  # the lower left grey
    out = Console(file=io.StringIO(), record=True, width=20, **made)
    out.print(HalfBlockImage(image, max_cols=8))
    rows = out.export_text().splitlines()
    assert rows == ["    ████"] * 2 + [f"{SHADES[2] * 4}████"] * 2
    # A whole view without colour: its pictures show the edit's shapes, not one block repeated.
    out = Console(file=io.StringIO(), record=True, width=80, height=24, **made)
    out.print(EditView(view_data(box_mask()), max_height=22), soft_wrap=False)
    pictures = [line for line in out.export_text().splitlines()[1:] if set(line) <= set(SHADES) and line.strip()]
    assert len(pictures) > 5 and len({c for line in pictures for c in line}) >= 4 and "▀" not in out.export_text()
