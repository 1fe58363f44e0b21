"""The probe run's progress bar where stderr is not a terminal: the one line Rich would print, without Rich.

Rich draws nothing in a pipe while the run goes and prints the bar once when
it stops; cfkit.cli.progress_bar writes that line itself. Each test drives the
bar and Rich's own Progress (built as the bar was before it learnt this, the
reference below) through the same reports at the same clock readings, and
compares the bytes each writes.
"""

from __future__ import annotations

import io
import random

import pytest
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from cfkit.cli import console as console_module
from cfkit.cli import progress_bar
from cfkit.cli.progress_bar import ProgressBar, bar_fields
from cfkit.probe.progress import RunProgress


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Pipe(io.StringIO):
    """A stream that is not a terminal, in UTF-8, as a pipe or a log file is."""

    encoding = "utf-8"

    def isatty(self) -> bool:
        return False


class RichReference:
    """The bar as Rich drew it in every case before (Rich imported, its Progress fed every report)."""

    def __init__(self, suite: str, console: Console, clock: Clock):
        self.progress = Progress(
            TextColumn(f"[bold]{suite}[/]"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"), TimeRemainingColumn(), TextColumn("{task.fields[extra]}"),
            console=console, transient=False, get_time=clock)
        self.clock = clock
        self.task = None
        self.started = clock()

    def update(self, p: RunProgress) -> None:
        if self.task is None:
            self.progress.start()
            self.task = self.progress.add_task("run", total=p.total, completed=p.done, rate="", extra="")
        completed, rate, extra = bar_fields(p, self.clock() - self.started)
        self.progress.update(self.task, completed=completed, rate=rate, extra=extra)

    def stop(self) -> None:
        if self.task is not None:
            self.progress.stop()


def _reports(rng: random.Random) -> tuple[str, list[tuple[float, RunProgress]]]:
    """A run's reports as (seconds after the last one, report): some kept from before, replies and failures
    coming in, at times that give the speed estimate something to read (and to forget after 30 s)."""
    suite = rng.choice(["contextcanvas", "modality", "swap", "counterfactual"])
    total = rng.choice([1, 3, 10, 36, 301, 1204, 4816, 12040])
    kept = rng.choice([0, 0, total, rng.randint(0, total)])
    priced = rng.random() < 0.3
    p = RunProgress(total=total, done=kept, priced=priced, concurrency=rng.choice([None, 4, 16, 64]))
    reports = [(0.0, RunProgress(**vars(p)))]
    for _ in range(rng.choice([0, 1, 5, 40, 300])):
        if p.done + p.errors >= total:
            break
        if rng.random() < 0.1:
            p.errors += 1
        else:
            p.done += 1
        p.sent += 1
        p.cost_usd += 0.0123 if priced else 0.0
        if rng.random() < 0.05:
            p.elsewhere += rng.randint(1, 3)
        if rng.random() < 0.05 and p.concurrency:
            p.concurrency = max(1, p.concurrency // 2)
        reports.append((rng.choice([0.0, 0.01, 0.05, 0.3, 2.0, 31.0]), RunProgress(**vars(p))))
    return suite, reports


def _drive(bar, reports: list[tuple[float, RunProgress]], clock: Clock) -> None:
    for wait, report in reports:
        clock.now += wait
        bar.update(report)


def test_the_bar_says_completed_rate_in_flight_errors_other_process_and_cost():
    p = RunProgress(total=50, done=12, sent=10, errors=2, cost_usd=0.5, priced=True, concurrency=8, elsewhere=3)
    assert bar_fields(p, 4.0) == (14, "2.5 req/s", "8 at once  errors 2  3 by another process  $0.50")
    assert bar_fields(RunProgress(total=5, done=5), 0.0) == (5, "", "")  # a rerun: nothing sent, nothing to add


@pytest.mark.parametrize("seed", range(60))
def test_the_line_in_a_pipe_is_rich_s_byte_for_byte(seed, monkeypatch):
    rng = random.Random(seed)
    suite, reports = _reports(rng)
    width = rng.choice([80, 80, 80, 100, 120, 40, 60, 70, 75, 76, 77, 78, 79])
    ours_clock, rich_clock = Clock(), Clock()
    rich_out = Pipe()
    reference = RichReference(suite, Console(file=rich_out, width=width, soft_wrap=True, highlight=False,
                                             emoji=False), rich_clock)
    _drive(reference, reports, rich_clock)
    reference.stop()

    ours_out = Pipe()
    monkeypatch.setattr("sys.stderr", ours_out)
    monkeypatch.setattr(console_module, "err", console_module._console(file=ours_out, width=width))
    with ProgressBar(suite, clock=ours_clock) as bar:
        _drive(bar, reports, ours_clock)
    assert ours_out.getvalue() == rich_out.getvalue()


def test_a_finished_run_in_a_pipe_writes_its_line_without_making_a_console(monkeypatch):
    """The rerun's case: one report, everything kept; nothing made the stderr console, so none is made."""
    monkeypatch.setattr(console_module, "_MADE", {})
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(console_module, "_STARTED_WITH", {})
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("os.get_terminal_size", _no_terminal)
    ours = Pipe()
    monkeypatch.setattr("sys.stderr", ours)
    with ProgressBar("contextcanvas") as bar:
        bar.update(RunProgress(total=1204, done=1204))
    assert console_module._MADE == {}  # no Rich console was made to write it
    rich_out = Pipe()
    reference = RichReference("contextcanvas", Console(file=rich_out, width=80, soft_wrap=True, highlight=False,
                                                       emoji=False), Clock())
    reference.update(RunProgress(total=1204, done=1204))
    reference.stop()
    assert ours.getvalue() == rich_out.getvalue()
    assert ours.getvalue() == "contextcanvas " + "━" * 40 + " 1204/1204  0:00:00  \n"


def _no_terminal(fd: int = 1):
    raise OSError("not a terminal")


@pytest.mark.parametrize("variable", ["FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"])
def test_where_the_environment_makes_rich_decide_rich_draws(variable, monkeypatch):
    monkeypatch.setenv(variable, "1")
    assert progress_bar.quiet_width() is None


def test_a_terminal_gets_rich_s_live_bar(monkeypatch):
    screen = Pipe()
    monkeypatch.setattr(console_module, "err", Console(file=screen, force_terminal=True, width=100))
    with ProgressBar("swap") as bar:
        bar.update(RunProgress(total=4, done=1, sent=1))
        assert bar.progress is not None and bar.quiet is None  # Rich draws it live
        bar.update(RunProgress(total=4, done=4, sent=4))
    assert "4/4" in screen.getvalue() and "\x1b[" in screen.getvalue()  # drawn with the terminal's controls


def test_a_run_refused_before_its_first_report_writes_no_bar(monkeypatch):
    ours = Pipe()
    monkeypatch.setattr("sys.stderr", ours)
    with pytest.raises(RuntimeError):
        with ProgressBar("contextcanvas"):
            raise RuntimeError("refused at start-up")
    assert ours.getvalue() == ""


@pytest.mark.parametrize("width", [88, 90, 92])
def test_a_line_too_wide_for_the_console_is_handed_to_rich_with_the_samples_so_far(width, monkeypatch):
    """A run stopped half way whose line outgrew the console (the rate came, then errors): Rich lays it out from
    then on, its time remaining read from the same samples Rich would have kept (the last 30 s of them)."""
    reports = [(0.0, RunProgress(total=1204, done=0, concurrency=16))]
    for i in range(1, 311):  # it stops soon after an error made its line too wide, within 30 s of samples
        reports.append((40.0 if i % 50 == 25 else 0.05, RunProgress(total=1204, done=i, sent=i, concurrency=16,
                                                               errors=i // 300)))
    rich_clock, ours_clock = Clock(), Clock()
    rich_out, ours_out = Pipe(), Pipe()
    reference = RichReference("swap", Console(file=rich_out, width=width, soft_wrap=True, highlight=False,
                                              emoji=False), rich_clock)
    _drive(reference, reports, rich_clock)
    reference.stop()
    monkeypatch.setattr("sys.stderr", ours_out)
    monkeypatch.setattr(console_module, "err", console_module._console(file=ours_out, width=width))
    with ProgressBar("swap", clock=ours_clock) as bar:
        _drive(bar, reports, ours_clock)
        assert bar.quiet is None and bar.progress is not None  # handed over
    assert "0:00:" in rich_out.getvalue()  # a time remaining from the samples, not dashes
    assert ours_out.getvalue() == rich_out.getvalue()


def _drawn_lines(screen: str) -> list[str]:
    """The lines a live bar drew on a terminal, its control sequences taken out."""
    from support.pty_console import CSI

    return [line for line in CSI.sub("", screen).replace("\r", "\n").split("\n") if line.strip()]


@pytest.mark.parametrize("width", [80, 120])
def test_a_live_bar_leaves_the_terminal_s_last_two_columns_for_the_echoed_ctrl_c(width, monkeypatch):
    """A bar filling every column made the ^C a terminal echoes on Ctrl-C wrap onto a new line, where the bar's
    last redraw landed: the bar twice on the screen. Rich's own bar fills 80 columns with this run (its bar
    shrunk to fit); at 120 it has room to spare, and is drawn as before."""
    reports = [(0.0, RunProgress(total=60, done=0, priced=True, concurrency=2)),
               (2.0, RunProgress(total=60, done=10, sent=10, cost_usd=0.0014, priced=True, concurrency=2))]
    rich_screen, ours_screen = Pipe(), Pipe()
    rich_clock, ours_clock = Clock(), Clock()
    reference = RichReference("swap", Console(file=rich_screen, force_terminal=True, width=width), rich_clock)
    _drive(reference, reports, rich_clock)
    reference.stop()
    monkeypatch.setattr(console_module, "err", Console(file=ours_screen, force_terminal=True, width=width))
    with ProgressBar("swap", clock=ours_clock) as bar:
        _drive(bar, reports, ours_clock)
    before, ours = _drawn_lines(rich_screen.getvalue()), _drawn_lines(ours_screen.getvalue())
    assert ours and all("/60" in line for line in ours)
    assert max(len(line) for line in ours) <= width - 2
    if width == 80:
        assert max(len(line) for line in before) == 80  # the case seen: Rich fills the terminal's width
    else:
        assert ours == before
