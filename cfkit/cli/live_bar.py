"""Rich's live progress bar, kept two columns narrower than the terminal it is drawn on.

Ctrl-C makes the terminal echo ``^C`` where the cursor stands: at the end of
the bar. A bar filling every column leaves no room for it, the echo wraps
onto a new line, and the bar's last redraw (which goes back to the start of
the line it is on) lands there: the bar is on the screen twice. With two
columns free the echo stays on the bar's line and the redraw overwrites it.
A stream that is not a terminal echoes nothing and gets the full width.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.progress import Progress

#: Columns left free at the right of a terminal: room for the echoed ``^C``.
ECHO_ROOM = 2


class LeaveRoom:
    """``renderable`` laid out :data:`ECHO_ROOM` columns narrower when drawn on a terminal."""

    def __init__(self, renderable: RenderableType):
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if console.is_terminal:
            options = options.update_width(max(options.max_width - ECHO_ROOM, 1))
        yield from console.render(self.renderable, options)


class NarrowProgress(Progress):
    """:class:`rich.progress.Progress` whose bar leaves the terminal's last :data:`ECHO_ROOM` columns free."""

    def get_renderable(self) -> RenderableType:
        return LeaveRoom(super().get_renderable())
