"""``cfkit report --predictions`` over files of any supported format."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cfkit.errors import PredictionError, UsageError
from cfkit.interop.sniff import detect
from cfkit.predictions import load_predictions
from cfkit.workspace import Workspace

if TYPE_CHECKING:
    from cfkit.cases import CaseSet


@contextlib.contextmanager
def predictions_files(ws: Workspace, paths: Sequence[str | Path], *, fmt: str = "auto", map_path: str | None = None,
                      label: str | None = None, epoch: int | None = None) -> Iterator[tuple[list[Path], list[str]]]:
    """The predictions JSONL files to report on for ``paths`` (peers' files converted), with a line per converted
    file saying how many of cfkit's readings differ from the peer's own."""
    if not paths:
        if fmt != "auto" or map_path or label or epoch is not None:
            raise UsageError("--predictions-format, --map, --label and --epoch describe --predictions files; give "
                             "--predictions.")
        yield [], []
        return
    kinds = {detect(Path(p)) if fmt == "auto" else fmt for p in paths}
    if kinds == {"native"} and not map_path and not label and epoch is None:
        yield [Path(p) for p in paths], []
        return
    from cfkit.dataset import load_cases
    from cfkit.interop.mapping import load_map

    cases = load_cases(ws.cases_path, ws.image_root)
    mapping = load_map(map_path) if map_path else None
    with as_predictions_files(paths, cases, fmt=fmt, mapping=mapping, label=label, epoch=epoch) as result:
        yield result


@contextlib.contextmanager
def as_predictions_files(paths: Sequence[Path | str], cases: CaseSet, *, fmt: str = "auto",
                         mapping: Mapping[str, str] | None = None, label: str | None = None,
                         epoch: int | None = None) -> Iterator[tuple[list[Path], list[str]]]:
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
            if kind == "native" and label is None and epoch is None:
                for pred in load_predictions([path], cases=cases):
                    _once(seen, pred, str(path))
                out.append(path)
                continue
            from cfkit.interop.mapping import read_file
            from cfkit.predictions import dump_predictions

            imported = read_file(path, cases, fmt=kind, mapping=mapping, label=label, epoch=epoch)
            preds = [r.prediction() for r in imported.rows]
            for pred in preds:
                _once(seen, pred, str(path))
            target = Path(folder) / f"{number:03d}-{path.stem}.jsonl"
            target.write_text(dump_predictions(preds), encoding="utf-8")
            out.append(target)
            if (line := imported.summary()) is not None:
                notes.append(line)
            if (line := imported.target_warning()) is not None:
                notes.append(f"warning: {line}")
        yield out, notes


def _once(seen: dict[tuple, str], pred, source: str) -> None:
    if pred.key in seen:
        unit = f"case {pred.case}{f', pair {pred.pair}' if pred.pair else ''}, condition {pred.condition}"
        raise PredictionError(f"{source}: a second answer from model '{pred.model}' for {unit} (the first is in "
                              f"{seen[pred.key]}). Keep one file per model; to compare two, store each "
                              "with 'cfkit runs import FILE --label NAME'.")
    seen[pred.key] = source
