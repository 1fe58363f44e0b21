"""A labelled paragraph wrapped at words, for text a reader must see whole (a spec's cue, its replacement).

:func:`labelled_lines` puts ``label`` (bold) and the text on as many lines of
``width`` cells as it takes, each line after the first under a hanging indent
of :data:`INDENT`, so a reader sees where one field ends and the next begins.
A line breaks between two words; a word wider than a line is folded. When the
lines may be at most ``most``, the last one kept ends in "…" and a note saying
where the whole text is (a shorter one on a narrow line), so nothing is left
out without saying so. :func:`wrapped_lines` wraps a line already styled (a
check's verdict and note) the same way, and :func:`packed_lines` puts pieces
that must not be split (a figure and its label) on as few lines as they fit.
"""

from __future__ import annotations

import re

from rich.cells import cell_len
from rich.text import Text

__all__ = ["INDENT", "labelled_lines", "packed_lines", "wrapped_lines"]

#: The indent of every line after a paragraph's first.
INDENT = 2
#: The fewest cells of text a cut line keeps beside its note, when a shorter note allows it.
MIN_CUT_CELLS = 12


def _words(text: str, width: int) -> list[str]:
    """The text's words (whitespace runs are one space), a word wider than ``width`` folded into pieces."""
    pieces: list[str] = []
    for word in text.split():
        while cell_len(word) > width:
            cut = next(k for k in range(len(word), 0, -1) if cell_len(word[:k]) <= width)
            pieces.append(word[:cut])
            word = word[cut:]
        pieces.append(word)
    return pieces


def _wrapped(label: str, text: str, width: int) -> list[Text]:
    width = max(width, INDENT + 1)
    lines = [Text(label, style="bold")]
    for word in _words(text, width - INDENT):
        line = lines[-1]
        gap = " " if line.plain.strip() and not line.plain.endswith(" ") else ""
        if line.cell_len + len(gap) + cell_len(word) > width:
            lines.append(Text(" " * INDENT))
            line, gap = lines[-1], ""
        line.append(gap + word)
    return lines


def labelled_lines(label: str, text: str, width: int, *, most: int | None = None,
                   cut_notes: tuple[str, ...] = ()) -> list[Text]:
    """``label`` and ``text`` wrapped at words in ``width`` cells; with ``most`` (at least 1), at most that many
    lines, the last ending in "…" and a note (dim) when some of the text does not fit: the first of
    ``cut_notes`` (longest first) that leaves :data:`MIN_CUT_CELLS` of text on the line, else the last."""
    lines = _wrapped(label, text, width)
    if most is None or len(lines) <= most:
        return lines
    kept = lines[:max(1, most)]
    last = kept[-1]
    start = cell_len(label) if len(kept) == 1 else INDENT
    note = next((note for note in cut_notes if width - start - 2 - cell_len(note) >= MIN_CUT_CELLS),
                cut_notes[-1] if cut_notes else "")
    ending = Text("…")
    if note:
        ending.append(" " + note, style="dim")
    last.truncate(max(0, width - ending.cell_len))
    last.rstrip()
    last.append_text(ending)
    last.truncate(width, overflow="ellipsis")
    return kept


def wrapped_lines(text: Text, width: int) -> list[Text]:
    """A styled ``text`` on as many lines of ``width`` cells as it takes, broken between words (the spaces between
    two words on a line kept as they are; a word wider than a line folded), each line after the first under a
    hanging indent of :data:`INDENT`; nothing is left out."""
    width = max(width, INDENT + 1)
    lead = len(text.plain) - len(text.plain.lstrip())
    lines = [text[:lead] if lead < width else Text()]  # a line's own indent (a bullet's) is kept
    fresh = True  # the last line holds no word yet
    previous = 0  # where the last word placed ends
    for match in re.finditer(r"\S+", text.plain):
        start, end = match.span()
        while start < end:
            gap = Text() if fresh else text[previous:start]
            word = text[start:end]
            room = width - lines[-1].cell_len - gap.cell_len
            if word.cell_len > room and not fresh:  # the word starts the next line
                lines.append(Text(" " * INDENT))
                fresh = True
                continue
            if word.cell_len > room:  # wider than a line: folded
                cut = next((k for k in range(end - start, 0, -1) if text[start:start + k].cell_len <= room), 1)
                word = text[start:start + cut]
            lines[-1].append_text(gap)
            lines[-1].append_text(word)
            fresh, start = False, start + len(word.plain)
            previous = start
            if start < end:
                lines.append(Text(" " * INDENT))
                fresh = True
    return lines


def packed_lines(pieces: list[Text], width: int, separator: str = "  ") -> list[Text]:
    """``pieces`` joined by ``separator`` on as many lines of ``width`` cells as it takes, a line breaking only
    between two pieces (each line after the first under a hanging indent of :data:`INDENT`); a piece wider than
    a line is wrapped at its words."""
    lines: list[Text] = []
    for piece in pieces:
        if lines and lines[-1].cell_len + cell_len(separator) + piece.cell_len <= width:
            lines[-1].append(separator)
            lines[-1].append_text(piece)
            continue
        parts = wrapped_lines(piece, width - (INDENT if lines else 0))
        for k, part in enumerate(parts):
            if lines or k:
                part = Text(" " * INDENT) + (part[INDENT:] if k else part)
            lines.append(part)
    return lines or [Text()]
