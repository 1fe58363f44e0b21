"""The interactive review screen: the view, a message line and the key bar, fitted to the terminal.

:class:`ReviewScreen` fills at most the console's height less one line (the
last line stays free for the cursor and for the note a reject asks for), so
the first line — the spec id — never scrolls away, and the key bar
(:class:`cfkit.terminal.keybar.KeyBar`) always fits on one line: it drops the
keys' descriptions to shorter ones, then to the keys alone, rather than wrap
mid-word. The help wraps each key's description at a word.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from cfkit.review.view import TEXT_LINES, EditView, ViewData
from cfkit.terminal.keybar import Key, KeyBar

__all__ = ["HELP", "Key", "KeyBar", "ReviewScreen", "ViewState", "key_items"]

HELP = """\
a     accept this edit: it becomes the spec's selected edit
r     reject it: say why (Enter alone rejects nothing); the next undecided candidate follows
s     skip for now: the spec stays pending
[ ]   previous / next candidate of this spec (the arrow keys too)
g     regenerate: another candidate with this edit's engine, model, options
G     regenerate with another engine (asked; Enter takes cfkit.toml's)
z     zoom to the mask's bounding box, then to each region, then back
f     flip the panel beside the original when only two fit
d     difference view: heat map / leaks over a faded original
v     edited image: composite / raw
?     this help; any key closes it (and does nothing else)
q     quit; every decision so far is saved"""


#: The most lines a message (a failed regenerate, a hint) takes above the key bar.
MESSAGE_LINES = 3


@dataclass
class ViewState:
    """What the reviewer toggled: kept from one edit to the next."""

    diff_mode: str = "heat"
    variant: str = "composite"
    zoom: int = 0  # 0: the whole image; k: the k-th box of cfkit.review.panels.zoom_boxes
    flip: int = 0
    help: bool = False


def key_items(*, candidates: bool, flip: bool) -> list[Key]:
    """The keys the bar shows; ``[ ]`` only with several candidates, ``f`` only when a panel is hidden."""
    items = [Key("a", "accept", "acc"), Key("r", "reject", "rej"), Key("s", "skip", "skip"),
             Key("g", "regenerate", "regen")]
    if candidates:
        items.append(Key("[ ]", "candidate", "cand"))
    items.append(Key("z", "zoom", "zoom"))
    if flip:
        items.append(Key("f", "flip panel", "flip"))
    items += [Key("d", "diff/leaks", "diff"), Key("v", "raw/composite", "raw"), Key("?", "help", "help"),
              Key("q", "quit", "quit")]
    return items


class ReviewScreen:
    """One frame of the interactive review, at most ``height - 1`` lines of the console."""

    def __init__(self, data: ViewData, state: ViewState, message: Text | None = None):
        self.data = data
        self.state = state
        self.message = message

    def view(self, max_height: int | None) -> EditView:
        return EditView(self.data, diff_mode=self.state.diff_mode, zoom=self.state.zoom, flip=self.state.flip,
                        max_height=max_height)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        height = options.height or options.max_height or console.height
        frame = max(8, height - 1)
        message: list[Text] = []
        if self.message is not None:
            # Up to MESSAGE_LINES lines (an error's fix is worth reading whole); the pictures give way first.
            most = max(1, min(MESSAGE_LINES, frame - 1 - (TEXT_LINES + 2)))  # the view keeps its smallest size
            message = self.message.wrap(console, width, overflow="ellipsis")[:most]
            if len(self.message.wrap(console, width)) > most:
                message[-1].truncate(width - 1)
                message[-1].append("…")
        view = self.view(frame - 1 - len(message))
        if self.state.help:
            yield from _help_lines(self.data, width, frame - 1 - len(message))
        else:
            yield view
        yield from message
        shown = view.layout(width).panels
        yield KeyBar(key_items(candidates=len(self.data.candidates) > 1, flip=len(shown) < 3)).text(width)


#: Where a key's description starts on a line of :data:`HELP`; its wrapped lines start there too.
HELP_INDENT = 6


def _help_lines(data: ViewData, width: int, height: int) -> list[Text]:
    """The help in at most ``height`` lines: each description wrapped at a word, its lines under its first, as
    long as the keys after it still have a line each; a description with no room to wrap is shortened, so that
    every key stays on screen."""
    console = Console(width=max(1, width - HELP_INDENT), no_color=True)
    lines = [Text(f"{data.spec_id} · keys", style="bold cyan")]
    keys = HELP.splitlines()
    for k, line in enumerate(keys):
        key, description = line[:HELP_INDENT], line[HELP_INDENT:]
        parts = Text(description).wrap(console, max(1, width - HELP_INDENT))
        room = height - len(lines) - (len(keys) - k - 1)  # lines left for this key, one kept for each after it
        if width > HELP_INDENT and len(parts) <= room:
            for n, part in enumerate(parts):
                part.rstrip()
                lines.append(Text(key if n == 0 else " " * HELP_INDENT) + part)
        else:
            text = Text(line)
            text.truncate(width, overflow="ellipsis")
            lines.append(text)
    return lines[:height]
