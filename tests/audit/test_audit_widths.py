"""The annotation screen at 50, 80 and 120 columns: its header, label line and help shorten or wrap between
phrases, never inside one ("link:" on one line and its "?" on the next)."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from rich.console import Console

from cfkit.audit.guideline import GUIDELINE, HELP
from cfkit.audit.items import BlindItem
from cfkit.audit.labelling import LabelState
from cfkit.audit.view import AuditView, Screen
from cfkit.store.audit_labels import Judgement

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _screen(**kw) -> Screen:
    item = BlindItem("7f3a9c21", "MX01", "A café prints a menu card for its matcha-latte special. Is this photo "
                     "suitable for the card?", (("A", "Yes"), ("B", "No")), "B", "A",
                     "The cup holds a brown espresso; a matcha latte is green.", (("coffee.jpg", "0" * 64),), "A",
                     "The photo shows a cup with latte art on a saucer; warm light suits a café menu.")
    picture = np.zeros((64, 96, 3), np.uint8)
    picture[:, 48:] = (40, 40, 200)
    base = dict(item=item, images=(picture,), position="3 of 40", person="you: alice",
                progress="12 of 40 labelled", state=LabelState(Judgement(False, True, None)), focus="link")
    return Screen(**{**base, **kw})


def _render(view: AuditView, width: int, height: int) -> str:
    console = Console(record=True, width=width, height=height, force_terminal=True, color_system="truecolor",
                      file=io.StringIO())
    console.print(view)
    return console.export_text(styles=True)

WIDTHS = (50, 80, 120)
NOTE = "the cue is the colour of the drink, which the response never mentions at all"
STATES = {
    "plain": {},
    "unsure with a note": dict(state=LabelState(Judgement(False, True, None), unsure=True, note=NOTE)),
    "adjudication": dict(others=(("Annotator 1", LabelState(Judgement(True, True, False))),
                                 ("Annotator 2", LabelState(Judgement(True, False, False))))),
}
#: A flag shown with its name: "answer correct: no", "▶ link: ?", "cue: yes".
FLAG = re.compile(r"(answer correct|answer|cue|link): (yes|no|\?)")


def _lines(width: int, **kw) -> list[str]:
    lines = ANSI.sub("", _render(AuditView(_screen(**kw), height=23), width, 24)).splitlines()
    assert len(lines) == 23 and all(len(line) <= width for line in lines), (width, lines)
    return [line.rstrip() for line in lines]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("case", list(STATES))
def test_the_label_line_keeps_each_flag_with_its_name(width, case):
    lines = _lines(width, **STATES[case])
    label = [n for n, line in enumerate(lines) if line.startswith("answer")]
    assert len(label) == 1, lines
    status = lines[label[0]:label[0] + 2]
    flags = [match.group(1) for line in status for match in FLAG.finditer(line)]
    assert flags[-2:] == ["cue", "link"] and flags[0].startswith("answer"), status
    assert "▶ link: ?" in " ".join(status) or "▶ link: " in status[0], status  # the marker beside its name
    assert not any(line.endswith((":", "▶")) for line in status), status  # no name parted from its flag
    if case == "unsure with a note":
        joined = " ".join(" ".join(status).split())
        assert "unsure" in joined and "note: the cue is" in joined
        assert NOTE in joined or joined.endswith("…")  # cut only where it must be, and then it says so
    if width >= 80:  # the long words where they fit
        assert status[0].startswith("answer correct: ")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_header_shortens_its_counts_before_it_cuts_them(width):
    header = _lines(width)[0]
    assert "…" not in header and "7f3a9c21" in header and "MX01" in header, header
    assert ("3 of 40" in header and "12 of 40 labelled" in header) or ("3/40" in header and "12/40 labelled" in header)
    if width >= 80:
        assert header.startswith("item 7f3a9c21 · case MX01 · 3 of 40") and "you: alice" in header


@pytest.mark.parametrize("width", WIDTHS)
def test_the_help_wraps_each_description_under_itself(width):
    lines = _lines(width, overlay=HELP)
    keys = [line.split(None, 1)[0] for line in HELP.splitlines() if line.startswith("  ") and line.strip()]
    body = lines[1:lines.index(next(line for line in lines if line.startswith("answer")))]
    for line in body:
        if line and not line.startswith(("Keys", "In the guideline", "lines ", "this help")):
            # a key's line or a description's next line: never a description back at the left margin
            assert line.startswith("  "), (width, line)
    shown = [line.split(None, 1)[0] for line in body if line.startswith("  ") and line[2] != " "]
    assert shown == keys[:len(shown)] and len(shown) >= 8, (shown, keys)
    assert any(line.startswith("  ?         this help") for line in body) or "lines " in body[-1]


@pytest.mark.parametrize("width", WIDTHS)
def test_the_guideline_keeps_its_terms_beside_their_descriptions(width):
    lines = _lines(width, overlay=GUIDELINE)
    term = next(n for n, line in enumerate(lines) if line.startswith("Answer correct"))
    assert lines[term].startswith("Answer correct   Does the response")
    following = lines[term + 1]
    assert following.startswith(" " * 17) or following.startswith("Cue identified"), following
