"""Shared terminal output: data to stdout, status and errors to stderr.

Both consoles show control characters in anything they print as visible
symbols (:func:`cfkit.visible.visible`): external text never reaches the
terminal as an escape sequence, whichever command prints it. Rich's own
styling and cursor control are untouched.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any, Callable

import click

#: Made on first use (Rich is imported then): a command that draws nothing, such as ``report --format json`` with
#: nothing to warn about, never loads Rich. ``out`` (data, stdout), ``err`` (status and errors, stderr) and
#: ``ShowControls`` are this module's names all the same (see :func:`__getattr__`).
_MADE: dict[str, Any] = {}
#: The environment when this module was imported: ``out`` and ``err`` are set up from it (COLUMNS, NO_COLOR, TERM …)
#: whenever they are first used, as they were when they were made at import.
_STARTED_WITH = os.environ.copy()


def __getattr__(name: str) -> Any:
    if name == "ShowControls":
        return _drawing()[0]
    if name in ("out", "err"):
        if name not in _MADE:
            made = _console(stderr=name == "err", _environ=_STARTED_WITH)
            made._environ = os.environ  # what Rich reads while printing (COLUMNS in a pipe) stays live, as before
            _MADE[name] = made
        return _MADE[name]
    raise AttributeError(f"module 'cfkit.cli.console' has no attribute {name!r}")


@functools.cache
def _drawing() -> tuple[type, type]:
    """``(ShowControls, _Visible)``: the render hook every console here carries, and what it wraps each renderable
    in, defined when Rich is first needed."""
    from rich.console import Console, ConsoleOptions, RenderableType, RenderHook, RenderResult
    from rich.segment import Segment

    from cfkit.visible import is_visible, visible

    class _Visible:
        """A renderable drawn with the control characters of its text made visible."""

        def __init__(self, renderable: RenderableType):
            self.renderable = renderable

        def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
            for segment in console.render(self.renderable, options):
                if segment.control or is_visible(segment.text):
                    yield segment  # Rich's own cursor moves and clears pass as they are
                else:
                    yield Segment(visible(segment.text), segment.style)

    class ShowControls(RenderHook):
        """Every renderable a console prints goes through :class:`_Visible`."""

        def process_renderables(self, renderables: list) -> list:
            return [_Visible(r) for r in renderables]

    ShowControls.__module__ = _Visible.__module__ = __name__
    return ShowControls, _Visible


def _console(**options: Any):
    from rich.console import Console

    console = Console(soft_wrap=True, highlight=False, emoji=False, **options)
    console.push_render_hook(_drawing()[0]())
    return console


def data_console(width: int | None = None):
    """The console for data on stdout; with ``width``, one of that width (wider than Rich's 80 for a pipe)."""
    return __getattr__("out") if width is None else _console(width=width)


def _escape(message: str) -> str:
    from rich.markup import escape

    return escape(message)


def error(message: str) -> None:
    __getattr__("err").print(f"[bold red]error:[/] {_escape(message)}")


def warn(message: str) -> None:
    __getattr__("err").print(f"[yellow]warning:[/] {_escape(message)}")


def note(message: str) -> None:
    """Information, good news included (a replica back in use): ``note: ...``, dimmed, as 'cfkit edit' says its
    notes; not a warning."""
    __getattr__("err").print(f"note: {_escape(message)}", style="dim")


def status(message: str) -> None:
    __getattr__("err").print(_escape(message), style="dim")


def print_json(data: Any) -> None:
    """JSON to stdout, plain (no colour), one document (JSON escapes every control character itself)."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def workspace_option(func: Callable) -> Callable:
    """Add ``-w/--workspace`` to a command and pass the resolved workspace as ``ws``."""

    @click.option("-w", "--workspace", "workspace_dir", metavar="DIR", default=None,
                  help="Workspace folder (default: $CFKIT_WORKSPACE, or the nearest folder with cfkit.toml).")
    @functools.wraps(func)
    def wrapper(*args: Any, workspace_dir: str | None, **kwargs: Any) -> Any:
        from cfkit.workspace import find_workspace

        ctx = click.get_current_context()
        root = ctx.find_root().obj or {}
        ws = find_workspace(workspace_dir or root.get("workspace"))
        return func(*args, ws=ws, **kwargs)

    return wrapper
