"""Reports: the paper's tables computed from predictions, and their exports.

:func:`make_report` reads gold answers from the workspace (cases, and for the
counterfactual pairs the specs' labels mapped through each case's Yes option;
:mod:`~cfkit.report.gold`), reads predictions from files or from the store, and
computes these sections (:mod:`~cfkit.report.build`):

``contextcanvas``   accuracy, per-class F1, Macro-F1 and Yes rate with intervals (Tables 2 and S4)
``counterfactual``  pair accuracy, directional updates and NCU (Table S7)
``modality``        accuracy per condition and the four paired deltas (Table S9)
``compare``         paired base-vs-other accuracy tests (Table S10)
``swap``            position bias: both option orders of each two-option case (:mod:`~cfkit.report.swap`)

A case or pair a model gave no usable answer for is counted wrong and listed
in ``Report.missing`` with the reason; rows from incomplete runs are marked;
stored runs are chosen by :mod:`~cfkit.report.sources`, which refuses to merge
runs of one model with different settings. Display formats print the same cells, produced once by
:func:`~cfkit.report.tables.display_tables`; JSON follows docs/report-schema.md.
"""

from __future__ import annotations

from cfkit.report.build import MODALITY_DELTAS, build_report, make_report, parse_compare
from cfkit.report.exports import (FORMATS, latex_escape, latex_tables, markdown_escape, markdown_tables, to_csv, to_json,
                                  to_latex, to_markdown, units_csv, units_json)
from cfkit.report.gold import Gold, PairGold, load_gold
from cfkit.report.reference import load_reference, reference_label
from cfkit.report.rows import (COVERAGE_END, MISSING_REASONS, CompareRow, ContextCanvasRow, CounterfactualRow, Delta, Missing,
                               ModalityRow, Report)
from cfkit.report.choice import choose_runs
from cfkit.report.sources import Sources
from cfkit.report.swap import SwapRow, swap_rows
from cfkit.report.groups import group_label, load_groups, paper_groups, resolve_groups
from cfkit.report.tables import (INCOMPLETE_MARK, NOT_CLEAN_MARK, PAPER_MARK, UNREVIEWED_MARK, DisplayTable,
                                 ReportView, TablesView, display_tables, fmt, fmt_ci, fmt_delta, fmt_opt_ci, fmt_p,
                                 units_table)
from cfkit.report.units import PAIR_CATEGORIES, ModelUnits, UnitOutcome, flat_rows, pair_category

__all__ = [
    "COVERAGE_END", "FORMATS", "INCOMPLETE_MARK", "MISSING_REASONS", "MODALITY_DELTAS", "NOT_CLEAN_MARK", "PAPER_MARK",
    "UNREVIEWED_MARK", "Sources", "choose_runs", "CompareRow", "ContextCanvasRow", "CounterfactualRow", "Delta",
    "DisplayTable", "Gold", "Missing", "ModalityRow", "PairGold", "Report", "ReportView", "build_report",
    "display_tables", "fmt", "fmt_ci", "fmt_delta", "fmt_opt_ci", "fmt_p", "group_label", "latex_escape",
    "load_groups", "markdown_escape", "paper_groups", "resolve_groups", "load_gold", "load_reference", "make_report",
    "parse_compare", "reference_label", "to_csv", "to_json", "to_latex", "to_markdown",
    "PAIR_CATEGORIES", "ModelUnits", "TablesView", "UnitOutcome", "flat_rows", "latex_tables", "markdown_tables",
    "pair_category", "units_csv", "units_json", "units_table", "SwapRow", "swap_rows",
]
