"""Every figure of a check, its verdict, note and reasons stay on screen at 80×24: broken between figures and at
words, never cut; and the PNG of ``--show --output`` draws a long cue whole, wrapped at words."""

from __future__ import annotations

import io
import math
import re

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont
from rich.cells import cell_len
from rich.console import Console

from cfkit.review.picture import _LINE, PANEL_PX, render_view_png
from cfkit.review.screen import ReviewScreen, ViewState
from cfkit.review.view import ViewData

CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

#: A failed check with wide figures: a million leaked pixels, every metric measured.
CHECK = {"verdict": "fail", "lpips_measured": True,
         "reasons": ["leaks 12.35% of the keep region (over 0.50%)", "LPIPS outside 0.231 over 0.050"],
         "metrics": {"ssim_out": 0.812345, "psnr_out": 28.21, "mse_out": 3.0, "lpips_out": 0.2311,
                     "lpips_in": 0.4123, "leak_share": 0.12345, "leak_count": 1234567, "mad_in": 0.1834}}
FIGURES = ["SSIM 0.8123", "PSNR 28.2 dB", "LPIPS out 0.231 in 0.412", "leaks 12.35% (1234567)", "Δ in 0.183"]
NOTE = "the table's left edge is smeared and a shadow under the cup went missing, see the top right corner too"
LONG_CUE = ("two bright points with cross-shaped diffraction spikes, the mark of nearby foreground stars in our own "
            "galaxy rather than distant galaxies, one right of centre below the middle and a smaller one in the upper "
            "left, each with four thin spokes and a soft round glow that a vision model may well read as stars")


def data(**extra) -> ViewData:
    y, x = np.mgrid[0:256, 0:384]
    original = np.stack([x * 255 // 384, y * 255 // 256, (x + y) % 200], axis=-1).astype(np.uint8)
    mask = np.zeros((256, 384), np.uint8)
    mask[60:140, 100:220] = 255
    fields = dict(spec_id="CF18", title="Isolation to inclusion", cue="a distressing letter",
                  replacement="an open lesson book", edit_id=14, engine="openai", model="gpt-image-2",
                  variant="composite", original=original, edited=original.copy(), mask=mask,
                  leaks=np.zeros(mask.shape, bool), check=CHECK, decision="reject", note=NOTE)
    return ViewData(**(fields | extra))


def screen_lines(view: ViewData, width: int, height: int) -> list[str]:
    console = Console(file=io.StringIO(), record=True, width=width, height=height, color_system="truecolor",
                      force_terminal=True)
    console.print(ReviewScreen(view, ViewState()), soft_wrap=False)
    return [CSI.sub("", line).rstrip() for line in console.export_text().splitlines()]


def words(lines: list[str]) -> str:
    return " ".join(" ".join(lines).split())


@pytest.mark.parametrize("width, height", [(80, 24), (120, 40), (60, 20)])
def test_every_figure_the_verdict_the_note_and_the_reasons_are_on_screen_whole(width, height):
    lines = screen_lines(data(), width, height)
    assert len(lines) <= height - 1 and all(cell_len(line) <= width for line in lines)
    assert not any("…" in line for line in lines[2:-1]), lines  # nothing below the pictures is cut
    text = words(lines)
    for figure in FIGURES:  # each whole, on one line: a line breaks between two figures only
        assert any(figure in line for line in lines), (figure, lines)
    assert "check: fail review: reject — " + NOTE in text
    for reason in CHECK["reasons"]:
        assert "• " + reason in text


def test_a_terminal_too_short_for_every_line_says_how_many_are_left_out():
    lines = screen_lines(data(candidates=(12, 14), candidate_states=("pass", "fail"), selected_id=12), 80, 16)
    assert len(lines) <= 15 and all(cell_len(line) <= 80 for line in lines)
    for figure in FIGURES:
        assert any(figure in line for line in lines)
    assert re.fullmatch(r"… \d+ more lines?: a taller terminal shows them", lines[-2]), lines


def test_the_png_draws_a_long_cue_whole_wrapped_at_words():
    long = data(cue=LONG_CUE + " " + LONG_CUE, check=None, note=None, decision=None)
    short = data(cue="a distressing letter", check=None, note=None, decision=None)
    tall, low = render_view_png(long), render_view_png(short)
    assert tall.width == low.width
    font = ImageFont.load_default(size=14)
    measure = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    room = tall.width - 20
    needed = math.ceil(measure.textlength("cue: " + long.cue, font=font) / room)
    assert needed >= 3
    # The picture is taller by a line for each line the cue takes beyond the short cue's one …
    assert tall.height - low.height >= (needed - 1) * _LINE
    # … and those lines are drawn: ink on each of them, none past the picture's right edge.
    pixels = np.asarray(tall.convert("L"))
    bottom = pixels[-(needed + 3) * _LINE - 10:]
    inked = [row for row in range(0, bottom.shape[0] - _LINE, _LINE) if (bottom[row:row + _LINE] < 128).any()]
    assert len(inked) >= needed + 2
    assert tall.width == 3 * PANEL_PX + 40 and (pixels[:, -8:] > 200).all()  # the right margin stays blank
