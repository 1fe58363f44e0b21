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

The package names its rooms' objects lazily (a module ``__getattr__``), so a
command that needs one room (``cfkit runs list`` reads
:mod:`~cfkit.report.standing`) does not load numpy and the statistics.
"""

from __future__ import annotations

from typing import Any

_LAZY = {"MODALITY_DELTAS": "sections", "build_report": "build", "make_report": "build", "parse_compare": "build",
         "choose_runs": "choice", "FORMATS": "exports", "latex_escape": "exports", "latex_tables": "exports",
         "markdown_escape": "exports", "markdown_tables": "exports", "to_csv": "exports", "to_json": "exports",
         "to_latex": "exports", "to_markdown": "exports", "units_csv": "exports", "units_json": "exports",
         "Gold": "gold", "PairGold": "gold", "load_gold": "gold", "group_label": "groups", "load_groups": "groups",
         "paper_groups": "groups", "resolve_groups": "groups", "load_reference": "reference",
         "reference_label": "reference", "COVERAGE_END": "rows", "CompareRow": "rows", "ContextCanvasRow": "rows",
         "CounterfactualRow": "rows", "Delta": "rows", "MISSING_REASONS": "rows", "Missing": "rows",
         "ModalityRow": "rows", "Report": "rows", "Sources": "sources", "SwapRow": "swap", "swap_rows": "swap",
         "DisplayTable": "tables", "INCOMPLETE_MARK": "tables", "NOT_CLEAN_MARK": "tables", "PAPER_MARK": "tables",
         "ReportView": "tables", "TablesView": "tables", "UNREVIEWED_MARK": "tables", "display_tables": "tables",
         "fmt": "tables", "fmt_ci": "tables", "fmt_delta": "tables", "fmt_opt_ci": "tables", "fmt_p": "tables",
         "units_table": "tables", "ModelUnits": "units", "PAIR_CATEGORIES": "units", "UnitOutcome": "units",
         "flat_rows": "units", "pair_category": "units"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"cfkit.report.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'cfkit.report' has no attribute {name!r}")


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
