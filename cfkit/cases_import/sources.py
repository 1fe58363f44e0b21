"""Reading an import source into rows: CSV/TSV, JSON, JSON Lines, Parquet, a ``datasets`` folder."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cfkit.errors import CaseError
from cfkit.files import csv_problem

#: Source kinds and the file endings that select them (a folder is a ``datasets`` folder).
KINDS = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl",
         ".parquet": "parquet", ".pq": "parquet"}


def normalize_column(name: str) -> str:
    """Lower case, every run of other characters than letters and digits as one ``_``: 'Gold option ID' -> gold_option_id."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


@dataclass(frozen=True)
class SourceTable:
    """A source read into rows; ``positions`` are the 1-based line (JSON Lines) or row numbers of the rows."""

    path: Path
    kind: str
    columns: tuple[str, ...]
    rows: tuple[dict[str, Any], ...]
    positions: tuple[int, ...]
    unit: str  # "line" or "row"
    labels: Mapping[str, tuple[str, ...]] | None = None  # class names of ``datasets`` ClassLabel columns


def read_source(source: Path | str, *, kind: str | None = None, split: str | None = None) -> SourceTable:
    """Read a CSV, JSON, JSON Lines, Parquet file or ``datasets`` folder into rows; or a hub dataset named
    ``hf://datasets/OWNER/NAME[:SPLIT]`` (:mod:`cfkit.cases_import.hub`)."""
    from cfkit.cases_import import hub  # the hub reader (hf://datasets/…)

    if hub.is_hub(source):
        if kind not in (None, "datasets"):
            raise CaseError(f"{source} is a hub dataset; leave out --format {kind}.")
        import datasets

        loaded = hub.load(str(source), split)  # one split already chosen when one was named
        return _from_dataset(source, loaded, split if isinstance(loaded, datasets.DatasetDict) else None)
    source = Path(source)
    if not source.exists():
        raise CaseError(f"{source}: not found; give the file (or datasets folder) to import.")
    if kind is None:
        if source.is_dir():
            kind = "datasets"
        elif source.suffix.lower() in KINDS:
            kind = KINDS[source.suffix.lower()]
        else:
            raise CaseError(f"{source}: cannot tell the format from '{source.suffix}'; name it .csv, .tsv, .json, "
                            ".jsonl, .parquet, or give --format (csv, tsv, json, jsonl, parquet, datasets).")
    if kind == "datasets":
        return _read_datasets(source, split)
    if source.is_dir():
        raise CaseError(f"{source} is a folder; --format {kind} reads a file.")
    if split is not None:
        raise CaseError(f"--split is for a datasets folder; {source} is a {kind} file.")
    if kind == "parquet":
        return _read_parquet(source)
    text = _read_text(source)
    if kind in ("csv", "tsv"):
        return _read_csv(source, text, "\t" if kind == "tsv" else ",", kind)
    if kind == "jsonl":
        return _read_jsonl(source, text)
    return _read_json(source, text)


def _read_text(source: Path) -> str:
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise CaseError(f"{source}: cannot be read ({exc.strerror}).") from exc
    try:
        return data.decode("utf-8-sig")  # a UTF-8 byte-order mark (Excel's "CSV UTF-8") is accepted
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise CaseError(f"{source}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x}); re-save the file as UTF-8.") from None


def _table(source: Path, kind: str, records: list[dict[str, Any]], positions: list[int], unit: str,
           labels: Mapping[str, tuple[str, ...]] | None = None) -> SourceTable:
    if not records:
        raise CaseError(f"{source}: holds no records; nothing to import.")
    columns = tuple(dict.fromkeys(k for r in records for k in r))
    return SourceTable(source, kind, columns, tuple(records), tuple(positions), unit, labels)


def _read_csv(source: Path, text: str, delimiter: str, kind: str) -> SourceTable:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(reader, None)
        if not header:
            raise CaseError(f"{source}: empty; the first row must name the columns.")
        repeated = sorted({h for h in header if header.count(h) > 1})
        if repeated:
            raise CaseError(f"{source}: column {', '.join(map(repr, repeated))} appears more than once in the "
                            "header; give each column its own name.")
        if any(not h.strip() for h in header):
            raise CaseError(f"{source}: column {[h.strip() for h in header].index('') + 1} of the header has no "
                            "name; name it or remove the column.")
        records: list[dict[str, Any]] = []
        for number, cells in enumerate(reader, start=1):
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                raise CaseError(f"{source} row {number}: {len(cells)} cells but the header has {len(header)}; "
                                "quote cells that contain the delimiter.")
            records.append({h: (c if c.strip() else None) for h, c in zip(header, cells)})
    except csv.Error as exc:
        raise CaseError(f"{source}:{reader.line_num}: not valid {kind.upper()} ({csv_problem(exc)}).") from exc
    return _table(source, kind, records, list(range(1, len(records) + 1)), "row")


def _loads(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CaseError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}).") from exc
    except RecursionError:
        raise CaseError(f"{where}: JSON nested too deeply to read.") from None


def _read_jsonl(source: Path, text: str) -> SourceTable:
    records, positions = [], []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        value = _loads(line, f"{source}:{lineno}")
        if not isinstance(value, dict):
            raise CaseError(f"{source}:{lineno}: expected a JSON object per line.")
        records.append(value)
        positions.append(lineno)
    return _table(source, "jsonl", records, positions, "line")


def _read_json(source: Path, text: str) -> SourceTable:
    value = _loads(text, str(source))
    if isinstance(value, dict):
        lists = [k for k, v in value.items() if isinstance(v, list)]
        if len(lists) != 1:
            raise CaseError(f"{source}: expected a list of records, or an object holding one list of records "
                            f"(found {len(lists)} lists); for one record a line use .jsonl.")
        value = value[lists[0]]
    if not isinstance(value, list):
        raise CaseError(f"{source}: expected a JSON list of records.")
    for i, item in enumerate(value, start=1):
        if not isinstance(item, dict):
            raise CaseError(f"{source} row {i}: expected a JSON object, got {type(item).__name__}.")
    return _table(source, "json", value, list(range(1, len(value) + 1)), "row")


def _read_parquet(source: Path) -> SourceTable:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise CaseError(f"{source}: reading Parquet needs pyarrow; run 'pip install pyarrow'.") from None
    try:
        records = pyarrow.parquet.read_table(source).to_pylist()
    except (pyarrow.ArrowException, OSError) as exc:
        raise CaseError(f"{source}: not a readable Parquet file ({exc}).") from exc
    return _table(source, "parquet", records, list(range(1, len(records) + 1)), "row")


def _read_datasets(source: Path, split: str | None) -> SourceTable:
    try:
        import datasets
        import pyarrow
    except ImportError:
        raise CaseError(f"{source}: reading a datasets folder needs the 'datasets' package; "
                        "run 'pip install datasets'.") from None
    markers = ("dataset_info.json", "state.json", "dataset_dict.json")
    if not any((source / m).is_file() for m in markers):
        raise CaseError(f"{source}: not a folder written by datasets' save_to_disk (no {', '.join(markers)}).")
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # library progress bars would mix with cfkit's output
    try:
        loaded = datasets.load_from_disk(str(source))
    except (FileNotFoundError, ValueError, OSError, pyarrow.ArrowException, json.JSONDecodeError) as exc:
        raise CaseError(f"{source}: the datasets folder cannot be loaded ({exc}).") from exc
    finally:
        if bars:
            datasets.enable_progress_bars()
    return _from_dataset(source, loaded, split)


def _from_dataset(source: Path | str, loaded, split: str | None) -> SourceTable:
    """The rows of a loaded Dataset, or of one split of a DatasetDict."""
    import datasets

    if isinstance(loaded, datasets.DatasetDict):
        names = list(loaded)
        if split is None and len(names) != 1:
            raise CaseError(f"{source} holds the splits {', '.join(names)}; choose one with --split NAME.")
        split = split or names[0]
        if split not in loaded:
            raise CaseError(f"{source} has no split '{split}'; its splits are {', '.join(names)}.")
        loaded = loaded[split]
    elif split is not None:
        raise CaseError(f"{source} holds one dataset without splits; leave out --split.")
    # The arrow form keeps images as {bytes, path} and class labels as integers, undecoded.
    records = loaded.with_format("arrow")[0:len(loaded)].to_pylist()
    labels = {name: tuple(feature.names) for name, feature in loaded.features.items()
              if isinstance(feature, datasets.ClassLabel)}
    return _table(source, "datasets", records, list(range(1, len(records) + 1)), "row", labels)
