"""Progress on stderr while an engine works: a spinner with the engine, the model and the time elapsed.

Shown only when stderr is a terminal; in a pipe or a log nothing is drawn, so
the output stays the data and the one-line status messages.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.markup import escape

from cfkit.cli.console import err


@contextmanager
def engine_spinner(what: str, engine: str, model: str | None) -> Iterator[None]:
    """A transient spinner ``⠋ EX01 openai gpt-image-2 working … 0:00:12`` while the block runs.

    Its signature is :data:`cfkit.edit.EngineCall`'s: ``what`` is the spec id.
    """
    if not err.is_terminal:
        yield
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    label = " ".join(part for part in (what, engine, model or "") if part)
    with Progress(SpinnerColumn(), TextColumn(f"{escape(label)} working …"), TimeElapsedColumn(),
                  console=err, transient=True) as progress:
        progress.add_task(label, total=None)
        yield
