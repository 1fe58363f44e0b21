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

import contextlib
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from cfkit.cases import CaseSet
from cfkit.interop.mapping import READ_FORMATS, Imported, detect, load_map, read_file
from cfkit.interop.records import COLUMNS, RunRecordRow, run_rows
from cfkit.interop.samples import PEER_FORMATS
from cfkit.interop.tables import EXPORT_FORMATS, SUFFIXES, read_export, write_export
from cfkit.errors import PredictionError
from cfkit.predictions import dump_predictions, load_predictions

__all__ = ["COLUMNS", "EXPORT_FORMATS", "Imported", "PEER_FORMATS", "READ_FORMATS", "RunRecordRow", "SUFFIXES",
           "as_predictions_files", "detect", "load_map", "read_export", "read_file", "run_rows", "write_export"]


@contextlib.contextmanager
def as_predictions_files(paths: Sequence[Path | str], cases: CaseSet, *, fmt: str = "auto",
                         mapping: Mapping[str, str] | None = None,
                         label: str | None = None) -> Iterator[tuple[list[Path], list[str]]]:
    """Predictions JSONL files for ``paths`` of any supported format, and a line per converted file on how cfkit's
    readings compare with the peer's. Native files are passed through; the others are converted into a temporary
    folder that lives as long as the context."""
    with tempfile.TemporaryDirectory(prefix="cfkit-interop-") as folder:
        out: list[Path] = []
        notes: list[str] = []
        seen: dict[tuple, str] = {}  # an answer given twice is named by the files it came from, not the copies
        for number, path in enumerate(paths):
            path = Path(path)
            kind = detect(path) if fmt == "auto" else fmt
            if kind == "native" and label is None:
                for pred in load_predictions([path], cases=cases):
                    _once(seen, pred, str(path))
                out.append(path)
                continue
            imported = read_file(path, cases, fmt=kind, mapping=mapping, label=label)
            preds = [r.prediction() for r in imported.rows]
            for pred in preds:
                _once(seen, pred, str(path))
            target = Path(folder) / f"{number:03d}-{path.stem}.jsonl"
            target.write_text(dump_predictions(preds), encoding="utf-8")
            out.append(target)
            if (line := imported.summary()) is not None:
                notes.append(line)
        yield out, notes


def _once(seen: dict[tuple, str], pred, source: str) -> None:
    if pred.key in seen:
        unit = f"case {pred.case}{f', pair {pred.pair}' if pred.pair else ''}, condition {pred.condition}"
        raise PredictionError(f"{source}: a second answer from model '{pred.model}' for {unit} (the first is in "
                              f"{seen[pred.key]}). Keep one file per model; to compare two, store each "
                              "with 'cfkit runs import FILE --label NAME'.")
    seen[pred.key] = source
