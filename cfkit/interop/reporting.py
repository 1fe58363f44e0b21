"""``cfkit report --predictions`` over files of any supported format.

A file written by ``cfkit runs export`` (any of its formats) records, beside
the replies, what its run was shown of each case, the image each reply was
asked with, the parser version of each reading and how the run ended: the
report reads them as it reads a stored run's (:class:`~cfkit.report.file_runs.FileRun`),
so an answer about a case changed since is stale and an incomplete run is
marked so, as they are once the file is imported. What any converted file
(a run export or a peer's own: inspect_ai, lmms-eval, VLMEvalKit) says of a
reply that gave no answer (the server's words on a failed request, a peer's
words for a failed or declined sample) is the unit's detail under the report's
``missing``, as it is once the file is imported (:func:`reply_details`).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from cfkit.errors import PredictionError, UsageError
from cfkit.interop.sniff import detect
from cfkit.predictions import load_predictions
from cfkit.workspace import Workspace

if TYPE_CHECKING:
    from cfkit.cases import CaseSet
    from cfkit.interop.records import RunRecordRow
    from cfkit.report.file_runs import FileRun
    from cfkit.report.sources import UnitKey


class PredictionFiles(NamedTuple):
    """What a report reads for its ``--predictions``: predictions JSONL files (peers' files and run exports
    converted), a line per converted file on how cfkit's readings compare with the peer's, the runs the run
    exports among them record, and what the converted files say of each reply that gave no answer."""

    paths: list[Path]
    notes: list[str]
    runs: list[FileRun]
    details: dict[UnitKey, str]


@contextlib.contextmanager
def predictions_files(ws: Workspace, paths: Sequence[str | Path], *, fmt: str = "auto", map_path: str | None = None,
                      label: str | None = None, epoch: int | None = None) -> Iterator[PredictionFiles]:
    """The predictions JSONL files to report on for ``paths`` (peers' files and run exports converted), with a line
    per converted file saying how many of cfkit's readings differ from the peer's own, and the runs the exports
    record (:class:`PredictionFiles`)."""
    if not paths:
        if fmt != "auto" or map_path or label or epoch is not None:
            raise UsageError("--predictions-format, --map, --label and --epoch describe --predictions files; give "
                             "--predictions.")
        yield PredictionFiles([], [], [], {})
        return
    kinds = {detect(Path(p)) if fmt == "auto" else fmt for p in paths}
    if kinds == {"native"} and not map_path and not label and epoch is None:
        yield PredictionFiles([Path(p) for p in paths], [], [], {})
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
                         epoch: int | None = None) -> Iterator[PredictionFiles]:
    """Predictions JSONL files for ``paths`` of any supported format, a line per converted file on how cfkit's
    readings compare with the peer's, the runs the run exports among them record and what the converted files say
    of each reply that gave no answer (:class:`PredictionFiles`). Native files are passed through; the others are converted into a temporary folder that lives as long as the context."""
    with tempfile.TemporaryDirectory(prefix="cfkit-interop-") as folder:
        out: list[Path] = []
        notes: list[str] = []
        runs: list[FileRun] = []
        details: dict[UnitKey, str] = {}
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
            runs += file_runs(imported.rows, str(path))
            details.update(reply_details(imported.rows))
            if (line := imported.summary()) is not None:
                notes.append(line)
            for line in (imported.unfinished_warning(), imported.left_out_warning(), imported.target_warning()):
                if line is not None:
                    notes.append(f"warning: {line}")
        yield PredictionFiles(out, notes, runs, details)


def file_runs(rows: Sequence[RunRecordRow], source: str) -> list[FileRun]:
    """The runs the rows of a ``cfkit runs export`` file record, one per run (rows of a peer's own file, which
    name no run, record none): its state and what it was shown, as ``cfkit runs import`` would store them."""
    from collections import Counter

    from cfkit.interop.importing import asked_pairs, group_runs, run_state, shown_notes
    from cfkit.report.file_runs import FileRun
    from cfkit.report.sources import RunInfo
    from cfkit.store.records.runs import asks_part

    found = []
    for (run_id, model, suite), group in group_runs(rows).items():
        if not run_id:
            continue
        state, shown = run_state(group), shown_notes(group)
        info = RunInfo(run_id, model, suite, state.status, state.complete, asks_part(state.selection or {}),
                       state.n_requests, state.n_done, state.stopped,
                       skipped=tuple((s["pair_id"], s.get("reason", "")) for s in state.skipped or ()),
                       imported=source, captions=shown.get("captions"), templates_sha256=state.templates,
                       asked=shown.get("asked"), selection=state.selection or None,
                       unreviewed=state.unreviewed or (), templates=state.template_digests,
                       left_out=state.left_out,
                       replayed=True,  # its replies were made elsewhere, as once imported (a replay run)
                       asked_whole=state.asked_whole, max_tokens=state.max_tokens,
                       asked_pairs=frozenset(asked_pairs(group)) if state.asked_whole and asked_pairs(group) else None)
        parsers = Counter(r.parser for r in group if r.parser is not None)
        images = tuple((r.case, r.condition, r.image_sha256) for r in group
                       if r.image_sha256 and r.condition != "edit")  # an edit's image is not the case's
        found.append(FileRun(info, tuple(sorted(parsers.items())), images))
    return found


def reply_details(rows: Sequence[RunRecordRow]) -> dict[UnitKey, str]:
    """What the rows say of each reply that gave no answer, by unit (model, suite, case, pair or '', condition): the
    server's words on a failed request, a peer's words for a failed or declined sample (inspect_ai's sample error, a
    content filter's reason, VLMEvalKit's 'Failed to obtain answer'), a parser's reason; as ``cfkit runs import``
    stores them (each reply's ``detail``), whether the rows name a run (an export) or not (a peer's own file)."""
    return {(r.model, r.suite, r.case, r.pair or "", r.condition): r.detail for r in rows
            if r.answer is None and r.detail}


def _once(seen: dict[tuple, str], pred, source: str) -> None:
    if pred.key in seen:
        unit = f"case {pred.case}{f', pair {pred.pair}' if pred.pair else ''}, condition {pred.condition}"
        raise PredictionError(f"{source}: a second answer from model '{pred.model}' for {unit} (the first is in "
                              f"{seen[pred.key]}). Keep one file per model; to compare two, store each "
                              "with 'cfkit runs import FILE --label NAME'.")
    seen[pred.key] = source
