"""The live display of ``cfkit study run``: one line per run, fitted to the terminal (readable at 80×24).

Lines are ordered by what needs a look: runs sending, then waiting, failed,
incomplete, and done last. When there are more runs than rows, the done runs
fold into one line, then the rest past the last row into "… N more". A run's cost is its total, every
invocation's, as ``study status`` and ``cfkit runs show`` give it (the summary says what this one spent).
The headline counts the requests of the runs begun so far and says so while others wait (see :func:`headline`).
"""

from __future__ import annotations

from cfkit.plural import plural

ORDER = {"sending": 0, "planning": 1, "waiting": 2, "failed": 3, "skipped": 3, "interrupted": 4, "incomplete": 5,
         "not planned": 6, "not started": 7, "submitted": 8, "done": 9}


def _cell(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + "…"


def _numbers(run) -> tuple[str, int, str]:
    """(done/total, failed requests, the run's total cost) of a run as far as known."""
    p, summary = run.progress, run.summary
    cost = run.cost.shown(short=True)
    if summary is not None:  # the run as this invocation left it, as 'cfkit runs show' counts it
        return f"{summary.total - summary.missing}/{summary.total}", summary.failed, cost
    if p is not None:
        return f"{p.done}/{p.total}", p.errors, cost
    return "", 0, cost


def run_line(run, width: int, *, failures: bool = True, costs: bool = True, error: bool = True) -> str:
    """``display suite  done/total  N failed  $cost  state`` in ``width`` columns; the failures and cost
    columns only when asked (when some run has them), the error after the state only with ``error``."""
    counts, failed, cost = _numbers(run)
    tail = f"{counts:>11}"
    if failures:
        tail += f"  {(str(failed) + ' failed') if failed else '':>10}"
    if costs:
        tail += f"  {cost:>8}"
    state = f"{run.state}: {run.error}" if run.error and error else run.state
    name_w = max(8, min(30, width - len(tail) - 15 - 2 - 12))
    head = f"{_cell(run.display, name_w):<{name_w}} {_cell(run.suite, 14):<14}"
    return _cell(f"{head}{tail}  {state}", width)


def columns(runs) -> dict[str, bool]:
    """Which optional columns the runs need: failures where some run has one, cost where some run is priced."""
    numbers = [_numbers(r) for r in runs]
    return {"failures": any(n[1] for n in numbers), "costs": any(n[2] for n in numbers)}


def display_lines(runs, width: int = 80, height: int = 24) -> list[str]:
    """The lines to show for ``runs`` in a ``width`` × ``height`` terminal (one row kept for the cursor)."""
    rows = max(height - 2, 3)
    ordered = sorted(runs, key=lambda r: ORDER.get(r.state, 9))
    done = [r for r in ordered if r.state == "done"]
    shown = columns(runs)
    lines = [run_line(r, width, **shown) for r in ordered]
    if len(lines) > rows and done:
        others = [run_line(r, width, **shown) for r in ordered if r.state != "done"]
        lines = others + [f"{plural(len(done), 'run')} done"]
    if len(lines) > rows:
        lines = lines[:rows - 1] + [f"… {len(lines) - rows + 1} more"]
    return [_cell(headline(runs), width)] + lines


def headline(runs) -> str:
    """``study: 4/12 runs done, 63/65 requests of the 5 runs started``: the requests of the runs that have begun
    (or were found finished); a run waiting its turn has no count of its replies yet, so it is left out, and
    the line says so, until every run is counted."""
    counted = [r.progress for r in runs if r.progress is not None]
    head = f"study: {sum(r.state == 'done' for r in runs)}/{plural(len(runs), 'run')} done"
    if not counted:
        return head
    requests = f"{sum(p.done for p in counted)}/{plural(sum(p.total for p in counted), 'request')}"
    if len(counted) == len(runs):
        return f"{head}, {requests}"
    return f"{head}, {requests} of the {plural(len(counted), 'run')} started"


class LiveDisplay:
    """A Rich Live view of :func:`display_lines` on stderr, refreshed a few times a second; nothing in a pipe.
    It goes when the study ends, and the summary (the same lines, every run) takes its place."""

    def __init__(self, console):
        self.console = console
        self.runs: list = []
        self.live = None

    def __enter__(self) -> "LiveDisplay":
        if self.console.is_terminal:
            from rich.live import Live

            self.live = Live(get_renderable=self._render, console=self.console, refresh_per_second=4,
                             transient=True, redirect_stdout=False, redirect_stderr=False)
            self.live.start()
        return self

    def _render(self):
        from rich.text import Text

        size = self.console.size
        return Text("\n".join(display_lines(self.runs, size.width, size.height)), no_wrap=True, overflow="crop")

    def update(self, runs) -> None:
        self.runs = runs  # read at the next refresh

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()
