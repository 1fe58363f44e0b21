"""The runs a report's numbers come from: one per model and suite, with what each asked and how many other runs of
its model and suite the report does not read.

Every output says it: the table "Runs read" after the others (terminal,
Markdown, LaTeX, the browser view), ``runs_read`` in the JSON and rows of
section ``runs_read`` in the CSV. The runs left out are said beside it, each
with why (:mod:`cfkit.report.choice`): the table's caption names them, the
JSON's ``set_aside`` and the CSV's rows of section ``set_aside`` hold the
lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cfkit.plural import plural
from cfkit.vocabulary import SUITES

if TYPE_CHECKING:
    from cfkit.report.rows import Report
    from cfkit.report.sources import Sources


@dataclass(frozen=True)
class RunRead:
    """A run a report reads, for one model and suite."""

    model: str
    suite: str
    run: str
    replies: int  # the replies it holds
    requests: int  # the requests it planned
    asked: str  # "the whole suite", or how it chose part of it (--limit 5, --cases FILE)
    status: str  # done, interrupted, running, …
    newer: int  # runs of its model and suite newer than it that the report does not read (each said in a line)
    older: int  # runs of its model and suite older than it that the report does not read (superseded)
    imported: str | None = None  # the file an imported run was read from

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "suite": self.suite, "run": self.run, "replies": self.replies,
                "requests": self.requests, "asked": self.asked, "status": self.status,
                "newer_not_read": self.newer, "older_not_read": self.older, "imported": self.imported}


def runs_read(sources: Sources) -> list[RunRead]:
    """The runs ``sources`` read (none for plain predictions files): a model's together, in the order the report
    met the models, its suites in their usual order."""
    from cfkit.report.choice import selection_flags

    models = list(dict.fromkeys(model for model, _ in sources.runs))
    keys = sorted(sources.runs, key=lambda k: (models.index(k[0]), SUITES.index(k[1]) if k[1] in SUITES else 99))
    return [RunRead(model, suite, run.id, run.n_done, run.n_requests,
                    selection_flags(run.selection) if run.subset else "the whole suite", run.status,
                    *sources.others.get(run.id, (0, 0)), run.imported)
            for model, suite in keys for run in (sources.runs[(model, suite)],)]


def _not_read(run: RunRead) -> str:
    parts = ([f"{run.newer} newer"] if run.newer else []) + ([f"{run.older} older"] if run.older else [])
    return ", ".join(parts) or "—"


#: The columns of the table of the runs read (under a heading per model).
COLUMNS = ["Model / suite", "Run", "Replies", "Not read"]


def _replies(run: RunRead) -> str:
    """Replies stored of the requests planned, then how the run chose part of its suite and its state, where
    either is not the usual."""
    return ", ".join([f"{run.replies}/{run.requests}", *([run.asked] if run.asked != "the whole suite" else []),
                      *([run.status] if run.status != "done" else [])])


def runs_table(report: Report) -> tuple[list[list[str]], list[str], str] | None:
    """The rows, their model headings and the caption of the table of the runs read (:data:`COLUMNS`; the caption
    names the runs left out and why); None without stored runs."""
    if not report.read:
        return None
    rows = [[r.suite, r.run, _replies(r), _not_read(r)] for r in report.read]
    caption = ("The run each row of the tables above comes from, one per model and suite. Replies: replies stored "
               "of the requests it planned, then how it chose part of the suite (--limit, --cases) and its state "
               "where it is not done. Not read: other runs of the same model and suite that no number comes from: "
               "newer ones are each named under Left out with why, older ones were superseded by the newer run "
               "read ('cfkit runs list' shows every run; 'cfkit report --run RUN' reads another).")
    left = [(run, a.why or a.message) for a in report.set_aside for run in a.runs
            if not any(run == r.run for r in report.read)]
    if left:
        caption += (f" Left out ({plural(len(left), 'run')}): "
                    + "; ".join(f"{run} ({why})" for run, why in left) + ".")
    read = {r.run for r in report.read}
    for aside in (a for a in report.set_aside if a.runs and set(a.runs) <= read):  # runs read, with a caveat
        caption += f" {aside.message}"
    return rows, [r.model for r in report.read], caption
