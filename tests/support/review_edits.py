"""Edits to review, and keys scripted as a user would press them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.edits import add_edit, inside_change, tiny_original


ANSI = re.compile(r"\x1b\[([0-9;]*)m")


class ScriptedKeys:
    """Keys from a list; the item after a key that asks for a line is that line."""

    def __init__(self, keys: list[str]):
        self._keys = list(keys)

    def key(self) -> str:
        if not self._keys:
            return "q"
        return self._keys.pop(0)

    def line(self, prompt: str) -> str:
        return self._keys.pop(0) if self._keys else ""


def cells(line: str) -> list[tuple[str, tuple | None, tuple | None]]:
    """Each printed character of an ANSI line with its 24-bit foreground and background."""
    fg = bg = None
    out = []
    pos = 0
    for match in ANSI.finditer(line + "\x1b[m"):
        for ch in line[pos:match.start()]:
            out.append((ch, fg, bg))
        codes = [int(c) for c in match.group(1).split(";") if c] or [0]
        i = 0
        while i < len(codes):
            if codes[i] == 0:
                fg = bg = None
            elif codes[i] in (38, 48) and codes[i + 1] == 2:
                rgb = tuple(codes[i + 2: i + 5])
                fg, bg = (rgb, bg) if codes[i] == 38 else (fg, rgb)
                i += 4
            i += 1
        pos = match.end()
    return out


def image_rows(text: str) -> list[list[tuple]]:
    return [c for c in (cells(line) for line in text.splitlines()) if c and c[0][0] == "▀"]


def add_second_spec(ws_root: Path) -> None:
    (ws_root / "interventions" / "TX02.yaml").write_text(
        "id: TX02\ncase: T001\ntitle: Second test edit\ncue: a corner\nreplacement: another corner\n"
        "prompt: Change the corner.\nregions: [{box: [0.5, 0.5, 0.75, 0.75]}]\n"
    )


@pytest.fixture
def two_edits(tiny_ws):
    add_second_spec(tiny_ws)
    original = tiny_original(tiny_ws)
    add_edit(tiny_ws, "TX01", inside_change(original), raw=original)
    edited = original.copy()
    edited[32:48, 48:72] = 255 - edited[32:48, 48:72]
    add_edit(tiny_ws, "TX02", edited)
    return tiny_ws
