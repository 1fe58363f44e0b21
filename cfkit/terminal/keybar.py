"""The keys a session's footer shows, fitted to the terminal without ever parting a key from its label.

:class:`KeyBar` lays its keys out on at most ``rows`` lines of a given width:
with their long labels, else their short ones, else the keys alone, and a
line breaks only between two keys. A key is never cut off the end of the bar
while a shorter form would keep it (``q`` quit above all).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

#: The forms tried, in order: (which label, the gap between two keys).
FORMS = (("long", "  "), ("short", "  "), ("short", " "), (None, " "))


@dataclass(frozen=True)
class Key:
    keys: str
    long: str
    short: str


class KeyBar:
    """The keys on at most ``rows`` lines (one by default): long labels, else short ones, else the keys alone."""

    def __init__(self, items: list[Key] | tuple[Key, ...], *, key_style: str = "bold cyan",
                 label_style: str = "", rows: int = 1):
        self.items = tuple(items)
        self.key_style = key_style
        self.label_style = label_style
        self.rows = rows

    def _entry(self, item: Key, form: str | None) -> Text:
        entry = Text(item.keys, style=self.key_style)
        if form is not None:
            entry.append(" " + getattr(item, form), style=self.label_style)
        return entry

    def _packed(self, form: str | None, gap: str, width: int) -> list[Text]:
        """The keys in this form, as many to a line as fit; a line breaks only between two keys."""
        lines = [Text()]
        for item in self.items:
            entry = self._entry(item, form)
            line = lines[-1]
            if line and line.cell_len + len(gap) + entry.cell_len > width:
                lines.append(Text())
                line = lines[-1]
            if line:
                line.append(gap)
            line.append_text(entry)
        return lines

    def lines(self, width: int) -> list[Text]:
        """At most :attr:`rows` lines, none wider than ``width``."""
        for form, gap in FORMS:
            packed = self._packed(form, gap, width)
            if len(packed) <= self.rows and all(line.cell_len <= width for line in packed):
                return packed
        packed = packed[:self.rows]  # not even the keys alone fit: cut the last line short
        for line in packed:
            line.truncate(width)
        return packed

    def text(self, width: int) -> Text:
        """The bar as one line (at most ``rows`` lines joined)."""
        return Text("\n").join(self.lines(width))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.lines(options.max_width)
