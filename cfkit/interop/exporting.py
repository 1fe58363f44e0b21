"""``cfkit runs export`` and ``cfkit runs import``: the procedures behind the commands."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cfkit import __version__
from cfkit.errors import OutputError, UsageError
from cfkit.store.runs import RunRecord
from cfkit.workspace import Workspace

#: Formats that can go to stdout (text, one file); the others need --output.
STDOUT_FORMATS = ("predictions", "jsonl", "csv")


@dataclass(frozen=True)
class Exported:
    """What an export wrote: the run, and the text when it goes to stdout."""

    run: RunRecord
    text: str | None
    written: tuple[Path, ...] = ()


def export_run(ws: Workspace, run_ref: str, fmt: str, output: str | None, *, force: bool = False) -> Exported:
    """Export one stored run in ``fmt`` to ``output`` (or, for the text formats, return the text)."""
    from cfkit.dataset import load_cases
    from cfkit.interop.records import run_rows
    from cfkit.interop.tables import to_csv, to_jsonl, write_export
    from cfkit.predictions import export_run as predictions_text
    from cfkit.store import open_store
    from cfkit.store.runs import find_run

    if output is None and fmt not in STDOUT_FORMATS:
        raise UsageError(f"--format {fmt} writes a file; give --output FILE.")
    with open_store(ws.db_path) as store:
        record = find_run(store, run_ref)
        if fmt == "predictions":
            text = predictions_text(store, record.id)
            rows = None
        else:
            rows = run_rows(store, record.id)
            text = to_jsonl(rows) if fmt == "jsonl" else to_csv(rows) if fmt == "csv" else None
    if output is None:
        return Exported(record, text)
    path = Path(output)
    targets = [path]
    if fmt == "lmms":
        from cfkit.interop.lmms import companion

        targets.append(companion(path))
    for target in targets:
        if target.exists() and not force:
            raise OutputError(f"{target} already exists; choose another file name or pass --force to replace it.")
    if not path.parent.is_dir():
        raise OutputError(f"cannot write {path}: folder {path.parent} does not exist.")
    if text is not None:
        _atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    else:
        cases = load_cases(ws.cases_path, ws.image_root)
        from cfkit.store import now

        _atomic(path, lambda tmp: write_export(rows or [], fmt, tmp, cases, created=now(), version=__version__),
                companion=fmt == "lmms")
    return Exported(record, None, tuple(targets))


def _atomic(path: Path, write, *, companion: bool = False) -> None:
    """Write through a temporary file in the same folder, then rename over ``path`` (and its lmms companion)."""
    from cfkit.files import FILE_MODE

    handle, name = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=path.suffix, dir=path.parent)
    os.fchmod(handle, FILE_MODE)  # what open() would give, as every file cfkit writes; mkstemp alone gives 0600
    os.close(handle)
    tmp = Path(name)
    try:
        write(tmp)
        if companion:
            from cfkit.interop.lmms import companion as results_of

            results_of(tmp).replace(results_of(path))
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
        if companion:
            from cfkit.interop.lmms import companion as results_of

            results_of(tmp).unlink(missing_ok=True)


def import_file(ws: Workspace, path: str, *, fmt: str = "auto", map_path: str | None = None,
                label: str | None = None, epoch: int | None = None):
    """Store a results file as replay runs; returns the file as read and the runs stored."""
    from cfkit.interop.importing import import_rows
    from cfkit.interop.mapping import load_map, read_file
    from cfkit.report.gold import load_gold
    from cfkit.store import open_store

    gold = load_gold(ws, all_cases=True)
    imported = read_file(path, gold.cases, fmt=fmt, mapping=load_map(map_path) if map_path else None, label=label,
                         epoch=epoch)
    with open_store(ws.db_path) as store:
        stored = import_rows(store, imported.rows, gold.cases, gold.pair_cases, source=str(path), fmt=imported.fmt,
                             disagreements=imported.disagreements)
    return imported, stored
