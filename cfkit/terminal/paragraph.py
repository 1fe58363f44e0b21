"""A labelled paragraph wrapped at words, for text a reader must see whole (a spec's cue, its replacement).

:func:`labelled_lines` puts ``label`` (bold) and the text on as many lines of
``width`` cells as it takes, each line after the first under a hanging indent
of :data:`INDENT`, so a reader sees where one field ends and the next begins.
A line breaks between two words; a word wider than a line is folded. When the
lines may be at most ``most``, the last one kept ends in "…" and a note saying
where the whole text is (a shorter one on a narrow line), so nothing is left
out without saying so.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text

__all__ = ["INDENT", "labelled_lines"]

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
