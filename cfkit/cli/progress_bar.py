"""The progress bar of ``cfkit probe run`` on stderr."""

from __future__ import annotations

import time

from cfkit.cli.console import err
from cfkit.money import usd


class ProgressBar:
    """A Rich progress bar on stderr: done/total, rate, ETA, requests in flight, errors and cost so far."""

    def __init__(self, suite: str):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn(f"[bold]{suite}[/]"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"), TimeRemainingColumn(), TextColumn("{task.fields[extra]}"),
            console=err, transient=False,
        )
        self.task = None
        self.started = time.perf_counter()

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.task is not None:
            self.progress.stop()

    def update(self, p) -> None:
        if self.task is None:
            # Started on the first report, so a run refused at start-up prints its one error line only.
            self.progress.start()
            self.task = self.progress.add_task("run", total=p.total, completed=p.done, rate="", extra="")
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        rate = f"{p.sent / elapsed:.1f} req/s" if p.sent else ""
        extra = f"{p.concurrency} at once" if p.concurrency else ""  # lower while the server is overloaded
        if p.errors:
            extra += f"  errors {p.errors}"
        if p.elsewhere:
            extra += f"  {p.elsewhere} by another process"
        if p.priced:
            extra += f"  {usd(p.cost_usd)}"
        self.progress.update(self.task, completed=p.done + p.errors, rate=rate, extra=extra.strip())
