"""External text made safe where it is shown: terminals and spreadsheets.

Model replies, server messages, case text, model names and file names are data;
printed raw, an ESC or OSC sequence in them would drive the user's terminal
(move the cursor, retitle the window, hide text). :func:`visible` replaces
every C0 and C1 control character (newline and tab excepted) and the Unicode
bidirectional controls and the zero-width characters that hide inside a word
(U+200B, U+2060–U+2064, U+FEFF) with a visible stand-in, so the text is still
readable and nothing in it is obeyed or hidden. The zero-width joiners
(U+200C, U+200D) are kept: scripts and emoji need them.
:func:`invisible_in` names every character a reader cannot see, for messages
about an id that looks right but is not. The CLI applies it to everything it
prints (:mod:`cfkit.cli.console`); other renderers (the contact sheet's HTML
and PNG) call it where they draw text.

:func:`spreadsheet_cell` does the same for CSV exports: a cell a spreadsheet
would run as a formula (``=HYPERLINK(…)`` in a model name) gets a leading
``'`` and is shown as text; :func:`from_spreadsheet_cell` undoes it on import.
"""

from __future__ import annotations

import re
import unicodedata

#: Bidirectional marks, embeddings, overrides and isolates: they reorder what a reader sees.
_BIDI = {chr(c) for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))}
#: Zero-width characters with no business in text a person reads: they make two equal-looking words differ.
_ZERO_WIDTH = {chr(c) for c in (0x180E, 0x200B, *range(0x2060, 0x2065), 0xFEFF)}
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + "".join(sorted(_BIDI | _ZERO_WIDTH)) + "]")


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


def invisible_in(text: str) -> list[str]:
    """The characters of ``text`` a reader cannot see (format and control characters, spaces other than
    U+0020), once each, as ``U+200B``-style names."""
    found = [c for c in text if unicodedata.category(c) in ("Cf", "Cc", "Zl", "Zp")
             or (unicodedata.category(c) == "Zs" and c != " ")]
    return [f"U+{ord(c):04X}" for c in dict.fromkeys(found)]


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
