"""Results in other harnesses' formats, in and out.

Readers (:mod:`~cfkit.interop.mapping`): inspect_ai eval logs, lmms-eval
per-sample JSONL and VLMEvalKit prediction tables become cfkit's records —
peer ids mapped to case ids, each raw reply read by cfkit's parser — for
``cfkit report --predictions`` and ``cfkit runs import``
(:mod:`~cfkit.interop.importing`). Writers (:mod:`~cfkit.interop.tables`):
``cfkit runs export --format`` with every stored field
(:mod:`~cfkit.interop.records`). The formats themselves: docs/formats.md,
"Other harnesses' formats".
"""

from __future__ import annotations

from typing import Any

#: Each name this package offers, by the module that defines it, imported when first asked for: ``cfkit report``
#: over cfkit's own predictions files needs none of the readers or writers behind them.
_LAZY = {"COLUMNS": "records", "RunRecordRow": "records", "run_rows": "records", "EXPORT_FORMATS": "tables",
         "SUFFIXES": "tables", "read_export": "tables", "write_export": "tables", "Imported": "mapping",
         "READ_FORMATS": "mapping", "load_map": "mapping", "read_file": "mapping", "detect": "sniff",
         "PEER_FORMATS": "samples", "as_predictions_files": "reporting"}

__all__ = ["COLUMNS", "EXPORT_FORMATS", "Imported", "PEER_FORMATS", "READ_FORMATS", "RunRecordRow", "SUFFIXES",
           "as_predictions_files", "detect", "load_map", "read_export", "read_file", "run_rows", "write_export"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"cfkit.interop.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'cfkit.interop' has no attribute {name!r}")
