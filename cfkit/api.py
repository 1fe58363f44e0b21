"""cfkit from Python: a workspace, its runs, its report, and both as pandas DataFrames (docs/api.md).

The stable surface is :data:`__all__`, re-exported as ``cfkit.Workspace`` and
``cfkit.Report``. pandas is imported only by the methods that return a
DataFrame (the ``interop`` extra).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cfkit.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from cfkit import report as report_lib
    from cfkit.interop.importing import ImportedRun

__all__ = ["SECTIONS", "TABLES", "Report", "Workspace"]

#: Sections :meth:`Report.frame` returns, one row per model × unit × condition.
SECTIONS = ("contextcanvas", "counterfactual", "modality", "swap")
#: The paper's tables :meth:`Report.table` returns (S8 needs ``ega=True``).
TABLES = ("2", "S4", "S7", "S8", "S9", "S10")

Section = Literal["contextcanvas", "counterfactual", "modality", "swap"]
TableName = Literal["2", "S4", "S7", "S8", "S9", "S10"]

#: What a measured row rests on, as the report's table marks say it: "(incomplete)", "(not clean)".
_MARKS = ("incomplete", "not_clean")
#: Each table: the report section it comes from and its columns (``X_ci`` becomes ``X_lo`` and ``X_hi``).
_TABLE_COLUMNS: dict[str, tuple[str, tuple[str, ...]]] = {
    "2": ("contextcanvas", ("model", "group", "n", "accuracy", "accuracy_ci", "macro_f1", "macro_f1_ci",
                            "yes_rate", "yes_rate_ci", "invalid", *_MARKS)),
    "S4": ("contextcanvas", ("model", "group", "yes_f1", "yes_f1_ci", "no_f1", "no_f1_ci", "yes_rate", *_MARKS)),
    "S7": ("counterfactual", ("model", "group", "n_pairs", "orig_acc", "edit_acc", "pair_acc", "correct", "reverse",
                              "stuck_original", "stuck_edit", "invalid", "ncu", "ncu_ci", *_MARKS)),
    "S8": ("ega", ("model", "n", "accuracy", "accuracy_ci", "ega", "ega_ci", "unsupported", "unsupported_ci")),
    "S10": ("compare", ("base", "other", "n", "base_acc", "other_acc", "delta", "ci", "b", "c", "p", "p_adj")),
}


def _pandas():
    try:
        import pandas as pd
    except ImportError:
        from cfkit.errors import ConfigError
        from cfkit.hints import install_hint

        raise ConfigError(f"DataFrames need pandas: {install_hint('interop')}.") from None
    return pd


def _is_ci(column: str) -> bool:
    return column == "ci" or column.endswith("_ci")


def _base(column: str) -> str:
    """``accuracy_ci`` -> ``accuracy``; Table S10's ``ci`` is the interval of ``delta``."""
    return "delta" if column == "ci" else column[: -len("_ci")]


class Report:
    """A computed report: the sections of docs/report-schema.md, as a dict or as DataFrames."""

    def __init__(self, result: "report_lib.Report", reading: Sequence[str] = ()):
        self.result = result  #: the :class:`cfkit.report.Report` behind it
        self._reading = list(reading)

    @property
    def notes(self) -> list[str]:
        """What the numbers cover and how the files were read: a line per other harness's file (how many of
        cfkit's readings differ from its own), then what ``cfkit report`` says with its tables (runs left out,
        units counted wrong for want of an answer, replies that are not answers, what it covers)."""
        return self._reading + self.result.said(every_note=True)

    def to_dict(self) -> dict[str, Any]:
        """The report object of docs/report-schema.md (what ``cfkit report --format json`` prints)."""
        return self.result.to_dict()

    @property
    def models(self) -> list[str]:
        """Every model the report holds, in the order of its rows."""
        return list(dict.fromkeys(u.model for u in self.result.units))

    def frame(self, section: Section) -> "pd.DataFrame":
        """Per-unit outcomes of one suite, long: one row per model × unit × condition.

        Columns: ``model, suite, case, pair, condition, answer, gold, correct,
        category, missing`` (``category`` only for counterfactual pairs;
        ``missing`` why a unit has no usable answer).
        """
        from cfkit.report import flat_rows
        from cfkit.report.units import FLAT_COLUMNS

        if section not in SECTIONS:
            raise UsageError(f"unknown section '{section}'; one of {', '.join(SECTIONS)}.")
        pd = _pandas()
        rows = [r for r in flat_rows(self.result.units) if r["suite"] == section]
        return pd.DataFrame.from_records(rows, columns=list(FLAT_COLUMNS))

    def table(self, name: TableName) -> "pd.DataFrame":
        """One of the paper's tables as computed here, one row per model (per comparison for S10).

        Percentages at full precision; each interval is two columns,
        ``…_lo`` and ``…_hi``. Table S9 is long: one row per model and
        condition.
        """
        pd = _pandas()
        data = self.to_dict()
        if name == "S9":
            rows = [{"model": r["model"], "group": r["group"], "n": r["n"], "condition": c,
                     "accuracy": r["accuracy"][c], "accuracy_lo": r["accuracy_ci"][c][0],
                     "accuracy_hi": r["accuracy_ci"][c][1], **{m: r[m] for m in _MARKS}}
                    for r in data["modality"] for c in r["accuracy"]]
            return pd.DataFrame.from_records(rows, columns=["model", "group", "n", "condition", "accuracy",
                                                            "accuracy_lo", "accuracy_hi", *_MARKS])
        if name not in _TABLE_COLUMNS:
            raise UsageError(f"unknown table '{name}'; one of {', '.join(TABLES)}.")
        section, columns = _TABLE_COLUMNS[name]
        if section == "ega" and "ega" not in data:
            raise UsageError("Table S8 is the EGA section; make the report with ega=True.")
        out_columns = [part for c in columns for part in ((f"{_base(c)}_lo", f"{_base(c)}_hi") if _is_ci(c) else (c,))]
        rows = []
        for record in data[section]:
            row: dict[str, Any] = {}
            for c in columns:
                if _is_ci(c):
                    low, high = record.get(c) or (None, None)
                    row[f"{_base(c)}_lo"], row[f"{_base(c)}_hi"] = low, high
                else:
                    row[c] = record.get(c)
            rows.append(row)
        return pd.DataFrame.from_records(rows, columns=out_columns)


class Workspace:
    """A cfkit workspace (the folder holding ``cfkit.toml``): its runs and its reports."""

    def __init__(self, path: str | os.PathLike[str] = "."):
        from cfkit.workspace import load_workspace

        self._ws = load_workspace(Path(path))

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    @property
    def root(self) -> Path:
        """The workspace's folder."""
        return self._ws.root

    def runs(self) -> "pd.DataFrame":
        """The stored runs, newest first: one row per run (``id, model, suite, status, n_requests, n_done,
        n_errors, cost_usd, started_at, finished_at``, and the rest of what ``cfkit runs list --json`` gives)."""
        pd = _pandas()
        records: list = []
        if self._ws.db_path.is_file():
            from cfkit.store import open_store
            from cfkit.store.leases import statuses
            from cfkit.store.runs import list_runs

            with open_store(self._ws.db_path) as store:
                records = list_runs(store)
                shown = statuses(store, records)
        rows = [asdict(r) | {"shown_status": shown[r.id]} for r in records]
        first = ["id", "model", "suite", "status", "n_requests", "n_done", "n_errors", "cost_usd", "started_at",
                 "finished_at"]
        frame = pd.DataFrame.from_records(rows) if rows else pd.DataFrame(columns=first)
        return frame[first + [c for c in frame.columns if c not in first]]

    def replies(self, run: str) -> "pd.DataFrame":
        """Every stored field of one run's replies (as ``cfkit runs export --format jsonl``), one row per reply."""
        from cfkit.interop.records import COLUMNS, run_rows
        from cfkit.store import open_store
        from cfkit.store.runs import find_run

        pd = _pandas()
        with open_store(self._ws.db_path) as store:
            rows = run_rows(store, find_run(store, run).id)
        return pd.DataFrame.from_records([r.to_dict() for r in rows], columns=list(COLUMNS))

    def import_results(self, path: str | os.PathLike[str], *, fmt: str = "auto", map_path: str | None = None,
                       label: str | None = None, epoch: int | None = None) -> list[str]:
        """Store a results file (a 'runs export', predictions, inspect_ai, lmms-eval, VLMEvalKit) as runs;
        returns their ids. ``epoch`` chooses the epoch of an inspect_ai log that holds several."""
        from cfkit.interop.exporting import import_file

        _, stored = import_file(self._ws, str(path), fmt=fmt, map_path=map_path, label=label, epoch=epoch)
        return [r.run_id for r in stored]

    def report(self, predictions: Sequence[str | os.PathLike[str]] = (), *, runs: Sequence[str] = (),
               compare: Sequence[str] = (), resamples: int = 10_000, seed: int = 0, ega: bool = False,
               audit: str | None = None, groups: Mapping[str, str] | None = None,
               predictions_format: str = "auto", label: str | None = None,
               map_path: str | None = None, epoch: int | None = None) -> Report:
        """The report of ``cfkit report``: from ``predictions`` files (any supported format), the ``runs``
        named, or by default the newest stored run of each model and suite. ``compare`` holds ``BASE=OTHER``."""
        from cfkit import report as lib
        from cfkit.interop.reporting import predictions_files

        pairs = [lib.parse_compare(spec) for spec in compare]
        with predictions_files(self._ws, [str(p) for p in predictions], fmt=predictions_format, map_path=map_path,
                               label=label, epoch=epoch) as (paths, reading, file_runs, details):
            result = lib.make_report(self._ws, paths, run_refs=list(runs), compare=pairs, n_resamples=resamples,
                                     seed=seed, ega=ega, audit=audit, groups=groups, file_runs=file_runs,
                                     file_details=details)
        return Report(result, reading)

    def frame(self, section: Section, **report_options: Any) -> "pd.DataFrame":
        """``self.report(**report_options).frame(section)``."""
        return self.report(**report_options).frame(section)
