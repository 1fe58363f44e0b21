"""Shared terminal output: data to stdout, status and errors to stderr.

Both consoles show control characters in anything they print as visible
symbols (:func:`cfkit.visible.visible`): external text never reaches the
terminal as an escape sequence, whichever command prints it. Rich's own
styling and cursor control are untouched.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any, Callable

import click
from rich.console import Console, ConsoleOptions, RenderableType, RenderHook, RenderResult
from rich.markup import escape
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


def _console(**options: Any) -> Console:
    console = Console(soft_wrap=True, highlight=False, emoji=False, **options)
    console.push_render_hook(ShowControls())
    return console


out = _console()
err = _console(stderr=True)


def data_console(width: int | None = None) -> Console:
    """The console for data on stdout; with ``width``, one of that width (wider than Rich's 80 for a pipe)."""
    return out if width is None else _console(width=width)


def error(message: str) -> None:
    err.print(f"[bold red]error:[/] {escape(message)}")


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(message)}")


def status(message: str) -> None:
    err.print(escape(message), style="dim")


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
