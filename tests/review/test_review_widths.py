"""The review screen's header at 50, 80 and 120 columns: its status (candidate, selection, position) is
shortened before it is cut, never cut mid-phrase ("not selected (#12 …")."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from rich.console import Console
from rich.text import Text

from cfkit.review.screen import ReviewScreen, ViewState
from cfkit.review.view import ViewData

CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
LONG = {"not selected (#12 is)", "cand 2/3", "[12 of 340]"}
SHORT = {"#12 is selected", "2/3", "[12/340]"}


def _data(**extra) -> ViewData:
    mask = np.zeros((128, 192), np.uint8)
    mask[40:90, 60:130] = 255
    y, x = np.mgrid[0:128, 0:192]
    original = np.stack([x, y, (x + y) % 200], axis=-1).astype(np.uint8)
    edited = original.copy()
    edited[mask > 0] = (0, 200, 0)
    fields = dict(spec_id="CF18", title="Isolation to inclusion", cue="a distressing letter",
                  replacement="an open lesson book", edit_id=14, engine="openai", model="gpt-image-2",
                  variant="composite", original=original, edited=edited, mask=mask,
                  leaks=np.zeros(mask.shape, bool), check=None, candidates=(12, 14, 17), selected_id=12,
                  candidate_states=("pass, accept", "pass", "fail"), position="12 of 340")
    return ViewData(**(fields | extra))


def _header(width: int, **extra) -> str:
    console = Console(file=io.StringIO(), record=True, width=width, height=24, color_system="truecolor",
                      force_terminal=True)
    console.print(ReviewScreen(_data(**extra), ViewState(), Text("a message")))
    lines = CSI.sub("", console.export_text()).splitlines()
    assert all(len(line) <= width for line in lines)
    return lines[0].rstrip()


@pytest.mark.parametrize("width", [50, 80, 120])
def test_the_header_status_is_whole_in_long_or_short_words(width):
    header = _header(width)
    assert header.startswith("CF18") and "#14" in header
    assert all(part in header for part in LONG) or all(part in header for part in SHORT), header
    assert not header.endswith("…"), header
    if width >= 80:
        assert all(part in header for part in LONG), header


@pytest.mark.parametrize("width", [50, 80])
def test_the_other_selection_states_fit_too(width):
    for extra, said in ((dict(selected_id=14), "selected"), (dict(selected_id=None), "none selected")):
        header = _header(width, **extra)
        assert header.endswith(f"{said}  [12 of 340]") or header.endswith(f"{said}  [12/340]"), header
