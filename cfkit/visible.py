"""External text made safe where it is shown: terminals and spreadsheets.

Model replies, server messages, case text, model names and file names are data;
printed raw, an ESC or OSC sequence in them would drive the user's terminal
(move the cursor, retitle the window, hide text). :func:`visible` replaces
every C0 and C1 control character (newline and tab excepted) and the Unicode
bidirectional overrides with a visible stand-in, so the text is still
readable and nothing in it is obeyed. The CLI applies it to everything it
prints (:mod:`cfkit.cli.console`); other renderers (the contact sheet's HTML
and PNG) call it where they draw text.

:func:`spreadsheet_cell` does the same for CSV exports: a cell a spreadsheet
would run as a formula (``=HYPERLINK(…)`` in a model name) gets a leading
``'`` and is shown as text; :func:`from_spreadsheet_cell` undoes it on import.
"""

from __future__ import annotations

import re

#: Characters shown as themselves although they are controls.
_KEPT = {"\n", "\t"}
#: Bidirectional embeddings, overrides and isolates: they reorder what a reader sees.
_BIDI = {chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + "".join(sorted(_BIDI)) + "]")


def _stand_in(char: str) -> str:
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␀ … ␛ … ␟
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"<U+{code:04X}>"


def visible(text: str) -> str:
    """``text`` with every control character (but newline and tab) replaced by a visible stand-in."""
    return _UNSAFE.sub(lambda m: _stand_in(m.group(0)), text)


def is_visible(text: str) -> bool:
    """Whether ``text`` would print unchanged through :func:`visible`."""
    return _UNSAFE.search(text) is None


#: What a spreadsheet reads as the start of a formula (or a DDE command) in a cell.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(text: str) -> str:
    """A CSV cell a spreadsheet shows as text: a leading ``'`` before anything it would run as a formula."""
    return "'" + text if text.startswith(FORMULA_START) else text


def from_spreadsheet_cell(text: str) -> str:
    """Undo :func:`spreadsheet_cell`."""
    return text[1:] if text.startswith("'") and text[1:].startswith(FORMULA_START) else text
