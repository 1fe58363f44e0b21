"""Shared terminal output: data to stdout, status and errors to stderr."""

from __future__ import annotations

import functools
import json
import sys
from typing import Any, Callable

import click
from rich.console import Console
from rich.markup import escape

out = Console(soft_wrap=True, highlight=False)
err = Console(stderr=True, soft_wrap=True, highlight=False)


def error(message: str) -> None:
    err.print(f"[bold red]error:[/] {escape(message)}")


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(message)}")


def status(message: str) -> None:
    err.print(escape(message), style="dim")


def print_json(data: Any) -> None:
    """JSON to stdout, plain (no colour), one document."""
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
