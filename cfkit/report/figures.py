"""The data of each figure ``cfkit report --plot`` draws, taken from the report's JSON numbers.

A figure is drawn from a :class:`FigureData`, and the same object is written
beside it as CSV, so the CSV holds exactly the numbers plotted — the JSON's,
at full precision. Nothing here needs matplotlib; :mod:`cfkit.report.plots`
draws.

=================  =============================================================
``compare``        base → other comparisons (Fig. 4a): both accuracies, Δ with its
                   interval, and whether the Bonferroni-adjusted p is below 0.05
``ncu``            NCU per model with its interval and the directional counts
``modality``       accuracy per condition and model, with intervals (Table S9)
``contextcanvas``  accuracy and Macro-F1 with intervals; the Yes rate with its
                   interval against the gold Yes rate (Tables 2 and S4)
=================  =============================================================

Each row carries its model's marks, as the tables do (``incomplete``,
``not_clean``, and ``unreviewed`` in the modality figure; a comparison its two
ContextCanvas rows' ``base_…`` and ``other_…``), and the figure names the model
with them (:func:`shown`), so that a figure pasted on its own still says what
its points rest on.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any

from cfkit.report.groups import group_label, group_rank
from cfkit.report.rows import Report
from cfkit.report.tables import marked_name
from cfkit.visible import spreadsheet_cell

#: A comparison is marked significant when its Bonferroni-adjusted p is below this (Fig. 4a's asterisk).
SIGNIFICANCE = 0.05


@dataclass(frozen=True)
class FigureData:
    """One figure's numbers: a title, its CSV columns and rows (in the order drawn)."""

    name: str
    title: str
    columns: tuple[str, ...]
    rows: list[dict[str, Any]]

    def to_csv(self) -> str:
        """The rows as CSV: floats exactly (``repr``), booleans ``true``/``false``, text safe for spreadsheets."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(self.columns)
        for row in self.rows:
            writer.writerow([_cell(row[c]) for c in self.columns])
        return buffer.getvalue()


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(float(value))
    if isinstance(value, str):
        return spreadsheet_cell(value)
    return str(value)


def _ordered(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records in the tables' order: by group (the paper's first), then as the report lists them."""
    rank = group_rank(r["group"] for r in records)
    return sorted(records, key=lambda r: rank[r["group"]])


def _marks(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A row's marks (its ContextCanvas row's, for a comparison's ``base`` or ``other``: ``prefix``)."""
    return {f"{prefix}incomplete": bool(record.get("incomplete")), f"{prefix}not_clean": bool(record.get("not_clean"))}


def shown(row: dict[str, Any], side: str | None = None) -> str:
    """The name a figure gives a row's model (``side``: a comparison's ``base`` or ``other``), its marks appended
    as the tables append them: ``GPT-5.2 (incomplete)``."""
    if side is None:
        return marked_name(row)
    return marked_name({"model": row[side], "incomplete": row[f"{side}_incomplete"],
                        "not_clean": row[f"{side}_not_clean"]})


def _low_high(values: list[float] | None) -> tuple[float | None, float | None]:
    return (None, None) if values is None else (values[0], values[1])


def figure_data(report: Report) -> list[FigureData]:
    """The data of every figure the report has sections for, in drawing order."""
    data = report.to_dict()
    canvas = {r["model"]: r for r in data["contextcanvas"]}  # a comparison's accuracies are these rows'
    figures = []
    if data["compare"]:
        rows = []
        for r in data["compare"]:
            low, high = _low_high(r["ci"])
            rows.append({"base": r["base"], "other": r["other"], "n": r["n"], "base_acc": r["base_acc"],
                         "other_acc": r["other_acc"], "delta": r["delta"], "ci_low": low, "ci_high": high,
                         "b": r["b"], "c": r["c"], "p": r["p"], "p_adj": r["p_adj"],
                         "significant": r["p_adj"] < SIGNIFICANCE, **_marks(canvas.get(r["base"], {}), "base_"),
                         **_marks(canvas.get(r["other"], {}), "other_")})
        figures.append(FigureData("compare", "Base → other on ContextCanvas", tuple(rows[0]), rows))
    if data["counterfactual"]:
        rows = []
        for r in _ordered(data["counterfactual"]):
            low, high = _low_high(r["ncu_ci"])
            rows.append({"model": r["model"], "group": r["group"], "group_label": group_label(r["group"]),
                         "n_pairs": r["n_pairs"], "ncu": r["ncu"], "ci_low": low, "ci_high": high,
                         "correct": r["correct"], "reverse": r["reverse"], "stuck_original": r["stuck_original"],
                         "stuck_edit": r["stuck_edit"], "invalid": r["invalid"], **_marks(r)})
        figures.append(FigureData("ncu", "Net Correct Update", tuple(rows[0]), rows))
    if data["modality"]:
        rows = []
        for r in _ordered(data["modality"]):
            for condition, accuracy in r["accuracy"].items():
                low, high = _low_high(r["accuracy_ci"][condition])
                rows.append({"model": r["model"], "group": r["group"], "group_label": group_label(r["group"]),
                             "n": r["n"], "condition": condition, "accuracy": accuracy, "ci_low": low,
                             "ci_high": high, **_marks(r), "unreviewed": r["unreviewed"]})
        figures.append(FigureData("modality", "Accuracy by condition", tuple(rows[0]), rows))
    if data["contextcanvas"]:
        rows = []
        for r in _ordered(data["contextcanvas"]):
            row = {"model": r["model"], "group": r["group"], "group_label": group_label(r["group"]), "n": r["n"],
                   "n_binary": r["n_binary"]}
            for metric in ("accuracy", "macro_f1", "yes_rate"):
                low, high = _low_high(r[f"{metric}_ci"])
                row |= {metric: r[metric], f"{metric}_low": low, f"{metric}_high": high}
            rows.append(row | {"gold_yes_rate": r["gold_yes_rate"], **_marks(r)})
        figures.append(FigureData("contextcanvas", "ContextCanvas", tuple(rows[0]), rows))
    return figures
