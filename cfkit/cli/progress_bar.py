"""The progress bar of ``cfkit probe run`` on stderr.

On a terminal it is Rich's live bar. Where stderr is not a terminal (a pipe,
a log file, a job scheduler's output) Rich draws nothing while the run goes
and prints the bar once, as it stands, when the run ends. That one line is
written here without Rich (:class:`QuietBar`), byte for byte as Rich would
print it, so a run in a pipe, a fully cached rerun above all, does not import
Rich to draw a single line, and no refresh thread lays out a bar nobody sees
ten times a second. Whenever that line would not be Rich's (a console too
narrow for it, an environment that makes Rich treat the stream as a
terminal, a stream that cannot encode the bar), the state so far is handed to
Rich, which draws it as it always did.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections import deque
from typing import Any, Callable

from cfkit.money import spent

#: What Rich's bar keeps for its speed estimate: samples of the last 30 seconds, at most 1,000.
SPEED_PERIOD_S = 30.0
SAMPLES = 1000
BAR_WIDTH = 40
#: Environment variables that make Rich treat a stream as a terminal, or as a notebook: Rich then decides.
_RICH_DECIDES = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS", "JUPYTER_LINES")


def _made_err() -> Any:
    """The stderr console when something already made it (or a test put one in its place), else None."""
    from cfkit.cli import console

    return console.__dict__.get("err") or console._MADE.get("err")


def quiet_width() -> int | None:
    """The width Rich's stderr console has, when that stream is not a terminal and Rich would draw nothing on it
    until the end; None when Rich draws there (or this cannot be told without Rich)."""
    import builtins

    if sys.platform == "win32" or any(name in os.environ for name in _RICH_DECIDES) or hasattr(builtins,
                                                                                               "get_ipython"):
        return None
    made = _made_err()
    if made is not None:  # Rich is loaded already: ask it
        if made.is_terminal or made.is_jupyter or made.legacy_windows or not made.encoding.startswith("utf"):
            return None
        return made.width
    if getattr(sys.stdin, "__module__", "").startswith("idlelib"):
        return None
    stream = sys.stderr
    try:
        if stream is None or stream.isatty():
            return None
    except ValueError:  # closed: Rich takes it for no terminal either
        pass
    if not (getattr(stream, "encoding", "utf-8") or "utf-8").lower().startswith("utf"):
        return None
    from cfkit.cli.console import _STARTED_WITH  # what the console is made from (its fixed width, COLUMNS)

    started = _STARTED_WITH.get("COLUMNS")
    if started is not None and started.isdigit():
        return int(started)
    width = None
    for fd in (0, 1, 2):  # as Rich sizes a console: the first standard stream that is a terminal
        try:
            width = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):
            continue
        break
    columns = os.environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        width = int(columns)
    return width or 80


def bar_fields(p, elapsed: float) -> tuple[float, str, str]:
    """What the bar shows of a run's progress ``p`` after ``elapsed`` seconds: (completed, rate, extra)."""
    rate = f"{p.sent / max(elapsed, 1e-9):.1f} req/s" if p.sent else ""
    extra = f"{p.concurrency} at once" if p.concurrency else ""  # lower while the server is overloaded
    if p.errors:
        extra += f"  errors {p.errors}"
    if p.elsewhere:
        extra += f"  {p.elsewhere} by another process"
    if p.priced:
        extra += f"  {spent(p.cost_usd, p.unpriced, short=True)}"
    return p.done + p.errors, rate, extra.strip()


class QuietBar:
    """The bar's state while nothing is drawn, kept as Rich's task keeps it, and the line Rich prints at the end."""

    def __init__(self, suite: str, total: int, completed: float, now: float):
        self.suite, self.total, self.completed = suite, total, completed
        self.first = completed
        self.began = now
        self.samples: deque[tuple[float, float]] = deque(maxlen=SAMPLES)  # (time, completed since the last)
        self.stepped = 0.0  # the sum of the samples' steps
        self.finished = False
        self.rate = self.extra = ""
        self.last = now

    def update(self, completed: float, rate: str, extra: str, now: float) -> None:
        step = completed - self.completed
        self.completed, self.rate, self.extra, self.last = completed, rate, extra, now
        while self.samples and self.samples[0][0] < now - SPEED_PERIOD_S:
            self.stepped -= self.samples.popleft()[1]
        if step > 0:
            if len(self.samples) == SAMPLES:
                self.stepped -= self.samples[0][1]  # the one the append pushes out
            self.samples.append((now, step))
            self.stepped += step
        if completed >= self.total:
            self.finished = True

    def remaining(self) -> str:
        """Rich's time-remaining column: 0 once finished, from the samples' speed, or dashes without one."""
        if self.finished:
            seconds: float | None = 0.0
        else:
            seconds = None
            if self.samples and (span := self.samples[-1][0] - self.samples[0][0]):
                speed = (self.stepped - self.samples[0][1]) / span  # Rich leaves the first sample's step out
                if speed:
                    seconds = math.ceil((self.total - self.completed) / speed)
        if seconds is None:
            return "-:--:--"
        minutes, secs = divmod(int(seconds), 60)
        hours, minutes = divmod(minutes, 60)
        return f"{hours:d}:{minutes:02d}:{secs:02d}"

    def line(self) -> str:
        done = min(self.total, max(0, self.completed))
        halves = int(BAR_WIDTH * 2 * done / self.total) if self.total else BAR_WIDTH * 2
        bar = ("━" * (halves // 2) + "╸" * (halves % 2)).ljust(BAR_WIDTH)  # the rest is blank without colour
        count = f"{int(self.completed):{len(str(int(self.total)))}d}/{int(self.total)}"
        cells = [self.suite, bar, count, self.rate, self.remaining(), self.extra]
        return " ".join(cells) + ("" if self.extra else " ")

    def drawable(self, width: int) -> bool:
        """Whether :meth:`line` is what Rich prints: it fits the width, and nothing in it is markup or a control
        character (the suite, the counts and the figures never are; checked all the same)."""
        text = self.suite + self.rate + self.extra
        return len(self.line()) <= width and "[" not in text and text.isprintable()


class ProgressBar:
    """The bar on stderr: done/total, rate, ETA, requests in flight, errors and cost so far."""

    def __init__(self, suite: str, clock: Callable[[], float] = time.monotonic):
        self.suite = suite
        self.clock = clock  # for the rate, and Rich's own clock for its bar's samples
        self.progress: Any = None  # Rich's Progress, once it draws
        self.task = None
        self.quiet: QuietBar | None = None
        self.width: int | None = None
        self._replaying: float | None = None  # the time Rich's bar is told while it is given the quiet one's state
        self.started = clock()
        self.said: set[str] = set()  # the waiting lines said (each once)

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc: object) -> None:
        quiet = self.quiet
        if quiet is not None:
            if quiet.drawable(self.width or 0):
                sys.stderr.write(quiet.line() + "\n")
                sys.stderr.flush()
                return
            self._hand_to_rich()
        if self.task is not None:
            self.progress.stop()

    def update(self, p) -> None:
        for line, warning in ((p.waiting, True), (p.news, False)):  # each said once, above the bar
            if line is not None and line not in self.said:
                from cfkit.cli.console import note, warn

                self.said.add(line)
                (warn if warning else note)(line)  # what the run waits for warns; good news is a note
        completed, rate, extra = bar_fields(p, self.clock() - self.started)
        if self.task is None and self.quiet is None:
            # Started on the first report, so a run refused at start-up prints its one error line only.
            self.width = quiet_width()
            if self.width is not None:
                self.quiet = QuietBar(self.suite, p.total, p.done, self.clock())
            else:
                self._start_rich(p.total, p.done)
        if self.quiet is not None:
            self.quiet.update(completed, rate, extra, self.clock())
            if self.quiet.drawable(self.width or 0):
                return
            self._hand_to_rich()  # it no longer fits: Rich lays it out (and draws it at the end) from here on
            return
        self.progress.update(self.task, completed=completed, rate=rate, extra=extra)

    def _start_rich(self, total: int, completed: float) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

        from cfkit.cli.console import err
        from cfkit.cli.live_bar import NarrowProgress

        self.progress = NarrowProgress(
            TextColumn(f"[bold]{self.suite}[/]"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"), TimeRemainingColumn(), TextColumn("{task.fields[extra]}"),
            console=err, transient=False, get_time=self._now,
        )
        self.progress.start()
        self.task = self.progress.add_task("run", total=total, completed=completed, rate="", extra="")

    def _now(self) -> float:
        return self.clock() if self._replaying is None else self._replaying

    def _hand_to_rich(self) -> None:
        """Rich's bar in the state the quiet one reached: the same samples at the same times."""
        quiet, self.quiet = self.quiet, None
        assert quiet is not None
        reached = quiet.completed - quiet.stepped
        self._replaying = quiet.began
        try:
            self._start_rich(quiet.total, reached)
            for at, step in quiet.samples:
                self._replaying = at
                reached += step
                self.progress.update(self.task, completed=reached)
            self._replaying = quiet.last
            self.progress.update(self.task, completed=quiet.completed, rate=quiet.rate, extra=quiet.extra)
        finally:
            self._replaying = None  # the live clock from here on
