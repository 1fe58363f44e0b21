"""Reading an import source into rows: CSV/TSV, JSON, JSON Lines, Parquet, a ``datasets`` folder."""

from __future__ import annotations

import codecs
import csv
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cfkit.errors import CaseError
from cfkit.files import CSV_CELL_LIMIT, csv_problem, csv_reader, json_value
from cfkit.plural import plural

#: Source kinds and the file endings that select them (a folder is a ``datasets`` folder).
KINDS = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl",
         ".parquet": "parquet", ".pq": "parquet"}


def normalize_column(name: str) -> str:
    """Lower case, every run of other characters than letters and digits as one ``_``: 'Gold option ID' -> gold_option_id."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


@dataclass(frozen=True)
class SourceTable:
    """A source's columns and its rows as ``(position, record)``; a position is the 1-based line (JSON Lines) or
    data row number. CSV, TSV and JSON Lines files are read as the rows are taken, once per pass, so an import
    holds one row at a time."""

    path: Path
    kind: str
    columns: tuple[str, ...]
    rows: Iterable[tuple[int, dict[str, Any]]]
    unit: str  # "line" or "row"
    labels: Mapping[str, tuple[str, ...]] | None = None  # class names of ``datasets`` ClassLabel columns


def read_source(source: Path | str, *, kind: str | None = None, split: str | None = None,
                max_cell: int = CSV_CELL_LIMIT) -> SourceTable:
    """Read a CSV, JSON, JSON Lines, Parquet file or ``datasets`` folder: its columns, and its rows to take; or a
    hub dataset named ``hf://datasets/OWNER/NAME[:SPLIT]`` (:mod:`cfkit.cases_import.hub`).

    ``max_cell`` bounds a CSV cell and a JSON Lines line (in characters), so no
    single value can take the memory of the machine.
    """
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
    if kind in ("csv", "tsv"):
        return _read_csv(source, "\t" if kind == "tsv" else ",", kind, max_cell)
    if kind == "jsonl":
        return _read_jsonl(source, max_cell)
    return _read_json(source, _read_text(source))


#: Byte-order marks of encodings other than UTF-8, and how to convert a file from them.
_OTHER_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
               (codecs.BOM_UTF16_BE, "UTF-16"))


def _refuse_other_encoding(source: Path, head: bytes) -> None:
    for bom, name in _OTHER_BOMS:
        if head.startswith(bom):
            raise CaseError(f"{source}: the file is {name} (it starts with a {name} byte-order mark), not UTF-8; "
                            f"convert it with 'iconv -f {name} -t UTF-8 {source.name} > {source.stem}-utf8"
                            f"{source.suffix}' (or save it from Excel as 'CSV UTF-8').")


def _not_utf8(source: Path, line: int, exc: UnicodeDecodeError) -> CaseError:
    return CaseError(f"{source}:{line}: not UTF-8 (byte 0x{exc.object[exc.start]:02x}); re-save the file as UTF-8.")


#: The largest JSON file read (a JSON list is read whole; JSON Lines and CSV are streamed and have no such bound).
MAX_WHOLE_FILE = 512 << 20


def _read_text(source: Path) -> str:
    try:
        size = source.stat().st_size
        if size > MAX_WHOLE_FILE:
            raise CaseError(f"{source}: {size / (1 << 20):,.0f} MiB of JSON, more than the {MAX_WHOLE_FILE >> 20} MiB "
                            "read whole; write it as JSON Lines (one record a line, e.g. with jq -c '.[]'), which "
                            "is read a line at a time.")
        data = source.read_bytes()
    except OSError as exc:
        raise CaseError(f"{source}: cannot be read ({exc.strerror}).") from exc
    _refuse_other_encoding(source, data[:4])
    try:
        return data.decode("utf-8-sig")  # a UTF-8 byte-order mark (Excel's "CSV UTF-8") is accepted
    except UnicodeDecodeError as exc:
        raise _not_utf8(source, data[:exc.start].count(b"\n") + 1, exc) from None


def _lines(source: Path, max_line: int) -> Iterator[str]:
    """The file's lines as text, one at a time, with their line endings; a line over ``max_line`` bytes is refused."""
    try:
        handle = open(source, "rb")
    except OSError as exc:
        raise CaseError(f"{source}: cannot be read ({exc.strerror}).") from exc
    with handle:
        _refuse_other_encoding(source, handle.read(4))
        handle.seek(0)
        if handle.read(3) != codecs.BOM_UTF8:  # a UTF-8 byte-order mark (Excel's "CSV UTF-8") is read past
            handle.seek(0)
        number = 0
        while True:
            raw = handle.readline(max_line + 1)
            if not raw:
                return
            number += 1
            if len(raw) > max_line and not raw.endswith(b"\n"):
                raise CaseError(f"{source}:{number}: the line is longer than {plural(max_line, 'byte', spec=',')}, more than a case "
                                "can hold; is the file a table of cases? (--max-cell raises the bound.)")
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _not_utf8(source, number, exc) from None


def _line_bound(max_cell: int) -> int:
    return 4 * max_cell + (1 << 20)  # a UTF-8 character is at most four bytes; room for the other cells


class _CsvRows:
    """The data rows of a CSV/TSV file, read from disk each time they are iterated."""

    def __init__(self, source: Path, delimiter: str, kind: str, max_cell: int):
        self.source, self.delimiter, self.kind, self.max_cell = source, delimiter, kind, max_cell

    def reader(self) -> Iterator[list[str]]:
        reader = csv_reader(_lines(self.source, _line_bound(self.max_cell)), delimiter=self.delimiter,
                            limit=self.max_cell)
        try:
            yield from reader
        except csv.Error as exc:
            problem = csv_problem(exc)
            if "field larger than field limit" in str(exc):
                problem += f"; or, if the cell really is that long, pass --max-cell with a larger number"
            raise CaseError(f"{self.source}:{reader.line_num}: not valid {self.kind.upper()} ({problem}).") from exc

    def header(self) -> list[str]:
        header = next(self.reader(), None)
        if not header:
            raise CaseError(f"{self.source}: empty; the first row must name the columns.")
        return header

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        rows = self.reader()
        header = next(rows, None) or []
        number = 0
        for cells in rows:
            if not any(c.strip() for c in cells):
                continue
            number += 1
            if len(cells) != len(header):
                raise CaseError(f"{self.source} row {number}: {plural(len(cells), 'cell')} but the header has {len(header)}; "
                                "quote cells that contain the delimiter.")
            yield number, {h: (c if c.strip() else None) for h, c in zip(header, cells)}


def _read_csv(source: Path, delimiter: str, kind: str, max_cell: int) -> SourceTable:
    rows = _CsvRows(source, delimiter, kind, max_cell)
    header = rows.header()
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated:
        raise CaseError(f"{source}: column {', '.join(map(repr, repeated))} appears more than once in the "
                        "header; give each column its own name.")
    if any(not h.strip() for h in header):
        raise CaseError(f"{source}: column {[h.strip() for h in header].index('') + 1} of the header has no "
                        "name; name it or remove the column.")
    # A first pass finds what is wrong with the file as a table (encoding, quotes, cell counts, a cell over the
    # bound) before the mapping is judged; the import reads the rows again, one at a time.
    if not sum(1 for _ in rows):
        raise CaseError(f"{source}: holds no records; nothing to import.")
    return SourceTable(source, kind, tuple(header), rows, "row")


def _loads(text: str, where: str) -> Any:
    return json_value(text, where, CaseError)


class _JsonlRows:
    """The records of a JSON Lines file, read from disk each time they are iterated."""

    def __init__(self, source: Path, max_cell: int):
        self.source, self.max_cell = source, max_cell

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        for lineno, line in enumerate(_lines(self.source, _line_bound(self.max_cell)), start=1):
            if not line.strip():
                continue
            value = _loads(line, f"{self.source}:{lineno}")
            if not isinstance(value, dict):
                raise CaseError(f"{self.source}:{lineno}: expected a JSON object per line.")
            yield lineno, value


def _read_jsonl(source: Path, max_cell: int) -> SourceTable:
    rows = _JsonlRows(source, max_cell)
    columns: dict[str, None] = {}
    for _, record in rows:  # a first pass for the column names; the import reads the rows again
        columns.update(dict.fromkeys(record))
    if not columns:
        raise CaseError(f"{source}: holds no records; nothing to import.")
    return SourceTable(source, "jsonl", tuple(columns), rows, "line")


def _table(source: Path, kind: str, records: list[dict[str, Any]],
           labels: Mapping[str, tuple[str, ...]] | None = None) -> SourceTable:
    """A source read whole (JSON, Parquet, datasets) as a table."""
    if not records:
        raise CaseError(f"{source}: holds no records; nothing to import.")
    columns = tuple(dict.fromkeys(k for r in records for k in r))
    return SourceTable(source, kind, columns, tuple(enumerate(records, start=1)), "row", labels)


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
    return _table(source, "json", value)


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
    return _table(source, "parquet", records)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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
        raise CaseError(f"{source}: the datasets folder cannot be loaded ({_first_line(exc)}).") from exc
    except RecursionError:  # its metadata (dataset_info.json, state.json) nested past what Python can read
        raise CaseError(f"{source}: the datasets folder's metadata is nested too deeply to read; it was not "
                        "written by save_to_disk as it is. Save the dataset again.") from None
    except (TypeError, KeyError, AttributeError) as exc:  # metadata of the wrong shape reaches datasets' own code
        raise CaseError(f"{source}: the datasets folder's metadata is not what save_to_disk writes "
                        f"({type(exc).__name__}: {_first_line(exc)}). Save the dataset again.") from exc
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
    return _table(source, "datasets", records, labels)
