"""The live display of ``cfkit study run``: one line per run, fitted to the terminal (readable at 80×24).

Lines are ordered by what needs a look: runs sending, then waiting, failed,
incomplete, and done last. When there are more runs than rows, the done runs
fold into one line, then the rest past the last row into "… N more".
"""

from __future__ import annotations

from cfkit.money import usd

ORDER = {"sending": 0, "planning": 1, "waiting": 2, "failed": 3, "interrupted": 4, "incomplete": 5,
         "submitted": 6, "done": 7}


def _cell(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + "…"


def run_line(run, width: int) -> str:
    """``display suite  done/total  N failed  $cost  state`` in ``width`` columns."""
    p = run.progress
    summary = run.summary
    if p is not None:
        counts = f"{p.done}/{p.total}"
        failed = p.errors
        cost = usd(p.cost_usd) if p.priced else ""
    elif summary is not None:
        counts = f"{summary.total - summary.missing}/{summary.total}"
        failed = summary.failed
        cost = usd(summary.cost_usd) if summary.cost_usd is not None else ""
    else:
        counts, failed, cost = "", 0, ""
    state = run.state if not run.error else f"{run.state}: {run.error}"
    tail = f"{counts:>11}  {(str(failed) + ' failed') if failed else '':>9}  {cost:>7}  "
    name_w = max(12, min(34, width - len(tail) - 12))
    head = f"{_cell(run.display, name_w - 15):<{name_w - 15}} {_cell(run.suite, 14):<14}"
    return _cell(head + tail + state, width)


def display_lines(runs, width: int = 80, height: int = 24) -> list[str]:
    """The lines to show for ``runs`` in a ``width`` × ``height`` terminal (one row kept for the cursor)."""
    rows = max(height - 2, 3)
    ordered = sorted(runs, key=lambda r: ORDER.get(r.state, 9))
    done = [r for r in ordered if r.state == "done"]
    lines = [run_line(r, width) for r in ordered]
    if len(lines) > rows and done:
        others = [run_line(r, width) for r in ordered if r.state != "done"]
        lines = others + [f"{len(done)} run(s) done"]
    if len(lines) > rows:
        lines = lines[:rows - 1] + [f"… {len(lines) - rows + 1} more"]
    total = sum(r.progress.total for r in runs if r.progress is not None)
    finished = sum(r.progress.done for r in runs if r.progress is not None)
    head = f"study: {sum(r.state == 'done' for r in runs)}/{len(runs)} runs done, {finished}/{total} requests"
    return [_cell(head, width)] + lines


class LiveDisplay:
    """A Rich Live view of :func:`display_lines` on stderr, refreshed a few times a second; nothing in a pipe."""

    def __init__(self, console):
        self.console = console
        self.runs: list = []
        self.live = None

    def __enter__(self) -> "LiveDisplay":
        if self.console.is_terminal:
            from rich.live import Live

            self.live = Live(get_renderable=self._render, console=self.console, refresh_per_second=4,
                             transient=False, redirect_stdout=False, redirect_stderr=False)
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
