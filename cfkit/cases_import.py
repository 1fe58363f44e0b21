"""Import cases from another format into cfkit's ``cases.jsonl``.

Sources: CSV (``.csv``, ``.tsv``), JSON (a list of records), JSON Lines
(``.jsonl``, ``.ndjson``), Parquet (``.parquet``; needs ``pyarrow``) and a
Hugging Face ``datasets`` folder written by ``save_to_disk`` (needs
``datasets``; read with ``load_from_disk``, never from the hub).

:func:`import_cases` works in steps:

1. check the target and the image folder;
2. read the source into rows (:func:`read_source`);
3. map columns to case fields (:func:`resolve_mapping`): explicit ``--map``
   entries first, then :data:`DEFAULT_COLUMNS`; a field that several columns
   could fill is refused with the candidates;
4. convert every row to a case record, collecting every problem;
5. validate the records exactly as ``cfkit cases validate`` does, and check that
   image files named by path are there;
6. only when nothing is wrong: write embedded images (never over a different
   file), then the cases file, and validate the written file.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cfkit.cases import CaseCheck, CaseProblem, case_id_problem, check_cases, check_cases_data
from cfkit.errors import CaseError, ImageError

#: Source kinds and the file endings that select them (a folder is a ``datasets`` folder).
KINDS = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl",
         ".parquet": "parquet", ".pq": "parquet"}

#: Default mapping: case field -> the column names (after :func:`normalize_column`) it is read from.
#: Names follow the AesCanvas supplement's case record (evaluation id, original case id, image
#: descriptor(s), question, options, gold option id and text, rationale, source basis,
#: provenance and rights fields) and cfkit's own field names.
DEFAULT_COLUMNS: dict[str, tuple[str, ...]] = {
    "id": ("id", "evaluation_id", "eval_id", "stable_evaluation_id"),
    "images": ("images", "image", "image_path", "image_paths", "image_file", "image_files", "image_descriptor",
               "image_descriptors", "image_descriptor_s"),
    "question": ("question", "question_text"),
    "options": ("options", "choices", "fixed_options"),
    "gold": ("gold", "gold_id", "gold_option", "gold_option_id", "answer", "answer_id", "label"),
    "gold_text": ("gold_text", "gold_option_text", "answer_text"),
    "yes_option": ("yes_option", "yes_option_id"),
    "rationale": ("rationale", "source_grounded_rationale", "explanation"),
    "domain": ("domain",),
    "provenance": ("provenance",),
    "provenance.title": ("title", "source_title", "provenance_title"),
    "provenance.creator": ("creator", "artist", "provenance_creator"),
    "provenance.provider": ("provider", "source_provider", "provenance_provider"),
    "provenance.url": ("url", "source_url", "provenance_url"),
    "provenance.license": ("license", "licence", "provenance_license"),
    "provenance.redistribution": ("redistribution", "rights", "redistribution_rights", "provenance_redistribution"),
    "provenance.original_id": ("original_case_id", "original_id", "case_id", "provenance_original_id"),
    "provenance.source_basis": ("source_basis", "provenance_source_basis"),
}
#: Fields that may be spread over several columns (one per option / image), e.g. option_A, option_B.
NUMBERED = {"options": re.compile(r"(?:option|choice)(?:_([a-z])|_?(\d+))"), "images": re.compile(r"(?:image|img)_?(\d+)")}
REQUIRED = ("id", "images", "question", "options")

_IMAGE_EXT = {"JPEG": ".jpg", "PNG": ".png", "WEBP": ".webp", "GIF": ".gif", "BMP": ".bmp", "TIFF": ".tif"}
_YES, _NO = "yes", "no"


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


@dataclass(frozen=True)
class ImportResult:
    """What an import did. With ``problems``, nothing was written and ``check`` is None."""

    source: Path
    kind: str
    target: Path
    mapping: tuple[tuple[str, tuple[str, ...]], ...]  # (field, columns) in field order
    ignored_columns: tuple[str, ...]
    problems: tuple[CaseProblem, ...]
    images_written: tuple[Path, ...]
    images_kept: tuple[Path, ...]  # embedded images identical to a file already there
    check: CaseCheck | None  # the written cases file, validated

    @property
    def ok(self) -> bool:
        return not self.problems


def import_cases(source: Path, target: Path, *, mapping: Iterable[str] = (), image_root: Path | None = None,
                 kind: str | None = None, split: str | None = None, force: bool = False) -> ImportResult:
    """Convert ``source`` to a cases file at ``target``; see the module docstring for the steps.

    ``mapping`` holds ``FIELD=COLUMN`` strings (``FIELD=COL1,COL2`` for options or
    images spread over columns, ``FIELD=`` to leave a field out). ``image_root`` is
    the folder image paths are relative to: embedded images are written there and
    images named by path must be there; without it, image files are not checked and
    embedded images are refused. Raises :class:`CaseError` for a source that cannot
    be read or a mapping that is missing or ambiguous.
    """
    # 1. target and image folder
    if target.is_dir():
        raise CaseError(f"--to {target} is a folder; give the path of the cases file to write.")
    if target.exists() and not force:
        raise CaseError(f"--to {target} already exists; pass --force to replace it, or choose another path.")
    if image_root is not None and image_root.exists() and not image_root.is_dir():
        raise CaseError(f"--images {image_root} is a file; give the folder the images are (to be) in.")
    # 2. read
    table = read_source(source, kind=kind, split=split)
    # 3. map
    fields = resolve_mapping(table, list(mapping))
    used = {c for cols in fields.values() for c in cols}
    ignored = tuple(c for c in table.columns if c not in used)
    # 4. convert
    converter = _RowConverter(table, fields, image_root)
    lines: list[str] = []
    problems: list[CaseProblem] = []
    for row, position in zip(table.rows, table.positions):
        record, row_problems = converter.convert(row, position)
        problems.extend(row_problems)
        # Line N of the checked text stands for source position N, so messages name the source's rows.
        lines.extend([""] * (position - 1 - len(lines)))
        lines.append("" if record is None else json.dumps(record, ensure_ascii=False))
    # 5. validate as 'cfkit cases validate' would, with source positions
    if any(lines):  # (when no row converted, the conversion problems say all there is)
        pre = check_cases_data(("\n".join(lines) + "\n").encode("utf-8"), source, image_root, images=False,
                               unit=table.unit)
        problems.extend(pre.problems)
        problems.extend(converter.image_problems(pre))
    problems.sort(key=lambda p: (p.line is not None, p.line or 0))
    mapping_used = tuple((f, cols) for f, cols in fields.items() if cols)
    if problems:
        return ImportResult(source, table.kind, target, mapping_used, ignored, tuple(problems), (), (), None)
    # 6. write images, then the cases file; validate what was written
    root_existed = image_root is None or image_root.exists()
    try:
        written = converter.write_images()
    except CaseError:
        _remove([], None if root_existed else image_root)
        raise
    text = "".join(line + "\n" for line in lines if line)
    from cfkit.files import write_text_atomic

    try:
        write_text_atomic(target, text, overwrite=force)
    except FileExistsError:
        _remove(written, None if root_existed else image_root)
        raise CaseError(f"--to {target} appeared while importing; pass --force to replace it.") from None
    except OSError as exc:
        _remove(written, None if root_existed else image_root)
        raise CaseError(f"cannot write {target} ({exc.strerror}); nothing was imported.") from exc
    check = check_cases(target, image_root, images=image_root is not None)
    return ImportResult(source, table.kind, target, mapping_used, ignored, check.problems, tuple(written),
                        tuple(converter.kept), check)


def _remove(paths: Iterable[Path], folder: Path | None = None) -> None:
    """Undo a failed import: the files it wrote, and the image folder it made (if still empty)."""
    for path in paths:
        path.unlink(missing_ok=True)
    if folder is not None:
        try:
            folder.rmdir()
        except OSError:
            pass


# ── reading ─────────────────────────────────────────────────────────────────


def read_source(source: Path, *, kind: str | None = None, split: str | None = None) -> SourceTable:
    """Read a CSV, JSON, JSON Lines, Parquet file or ``datasets`` folder into rows."""
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
        raise CaseError(f"{source}:{reader.line_num}: not valid {kind.upper()} ({exc}).") from exc
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


# ── mapping ─────────────────────────────────────────────────────────────────


def resolve_mapping(table: SourceTable, entries: list[str]) -> dict[str, tuple[str, ...]]:
    """Which source columns fill which case field (an empty tuple: the field is left out)."""
    fields: dict[str, tuple[str, ...]] = {}
    for entry in entries:
        name, sep, value = entry.partition("=")
        name = name.strip()
        if not sep:
            raise CaseError(f"--map '{entry}' is not FIELD=COLUMN (FIELD= leaves a field out).")
        if name not in DEFAULT_COLUMNS:
            raise CaseError(f"--map '{entry}': unknown field '{name}'. Fields: {', '.join(DEFAULT_COLUMNS)}.")
        if name in fields:
            raise CaseError(f"--map gives field '{name}' twice; give it once.")
        fields[name] = _explicit_columns(table, name, value)
    claimed = {c for cols in fields.values() for c in cols}
    by_norm: dict[str, list[str]] = {}
    for column in table.columns:
        if column not in claimed:
            by_norm.setdefault(normalize_column(column), []).append(column)
    for name, aliases in DEFAULT_COLUMNS.items():
        if name in fields:
            continue
        found = [c for alias in aliases for c in by_norm.get(alias, [])]
        numbered = _numbered(name, [c for cols in by_norm.values() for c in cols])
        if numbered and found:
            found = found + [", ".join(numbered)]
        elif numbered:
            fields[name] = tuple(numbered)
            continue
        if len(found) > 1:
            shown = ", ".join(f"'{c}'" for c in found)
            raise CaseError(f"{table.path}: field '{name}' could come from the columns {shown}; choose one with "
                            f"--map {name}=COLUMN (or leave it out with --map {name}=).")
        fields[name] = tuple(found)
    missing = [f for f in REQUIRED if not fields.get(f)]
    if not fields.get("gold") and not fields.get("gold_text"):
        missing.append("gold")
    if missing:
        free = [c for c in table.columns if c not in {x for cols in fields.values() for x in cols}]
        raise CaseError(f"{table.path}: no column for {', '.join(map(repr, missing))}; the unmapped columns are "
                        f"{', '.join(map(repr, free)) or 'none'}; give --map {missing[0]}=COLUMN.")
    return {name: fields[name] for name in DEFAULT_COLUMNS if name in fields}


def _explicit_columns(table: SourceTable, name: str, value: str) -> tuple[str, ...]:
    value = value.strip()
    if not value:
        return ()
    if value in table.columns:
        return (value,)
    parts = [p.strip() for p in value.split(",")]
    if len(parts) > 1 and name not in NUMBERED:
        raise CaseError(f"--map {name}={value}: only options and images take several columns.")
    for part in parts:
        if part not in table.columns:
            near = difflib.get_close_matches(part, table.columns, n=3)
            hint = f" Did you mean {', '.join(map(repr, near))}?" if near else ""
            raise CaseError(f"--map {name}={value}: {table.path} has no column '{part}'.{hint} "
                            f"Columns: {', '.join(table.columns)}.")
    return tuple(parts)


def _suffix(match: re.Match[str]) -> str:
    return next(g for g in match.groups() if g is not None)


def _numbered(name: str, columns: list[str]) -> list[str]:
    pattern = NUMBERED.get(name)
    if pattern is None:
        return []
    hits = [(_suffix(m), c) for c in columns if (m := pattern.fullmatch(normalize_column(c)))]
    if len(hits) < 2 and name == "options":
        return []
    # Columns in their natural order: option_A, option_B …; image_1, image_2, image_10.
    return [c for _, c in sorted(hits, key=lambda h: (len(h[0]), h[0]) if h[0].isdigit() else (0, h[0]))]


# ── converting ──────────────────────────────────────────────────────────────


class _RowProblem(Exception):
    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class _RowConverter:
    """Turns source rows into case records and keeps the embedded images to write."""

    def __init__(self, table: SourceTable, fields: dict[str, tuple[str, ...]], image_root: Path | None):
        self.table = table
        self.fields = fields
        self.image_root = image_root
        self.embedded: dict[str, bytes] = {}  # image name (relative to the root) -> bytes to write
        self.by_path: set[str] = set()  # image names given by path
        self.positions: dict[str, int] = {}  # case id -> its first source position
        self.kept: list[Path] = []

    def convert(self, row: dict[str, Any], position: int) -> tuple[dict[str, Any] | None, list[CaseProblem]]:
        case_id = None
        try:
            case_id = self._text(row, "id")
            if case_id is None:
                raise _RowProblem("no case id; every case needs one.", "id")
            if case_id in self.positions:  # checked here too, so a row that fails for another reason still counts
                raise _RowProblem(f"duplicate case id '{case_id}' (first on {self.table.unit} "
                                  f"{self.positions[case_id]}); ids must be unique.", "id")
            self.positions[case_id] = position
            id_problem = case_id_problem(case_id)
            if id_problem:
                raise _RowProblem(f"field 'id': {id_problem}.", "id")
            record: dict[str, Any] = {"id": case_id}
            record["images"] = self._images(row, case_id)
            record["question"] = self._text(row, "question")
            record["options"] = options = self._options(row)
            record["gold"] = self._gold(row, options)
            yes = self._text(row, "yes_option") if self.fields.get("yes_option") else _infer_yes(options)
            if yes is not None:
                record["yes_option"] = yes
            for name in ("rationale", "domain"):
                value = self._text(row, name)
                if value is not None:
                    record[name] = value
            provenance = self._provenance(row)
            if provenance:
                record["provenance"] = provenance
        except _RowProblem as exc:
            return None, [CaseProblem(str(self.table.path), position, str(exc), exc.field, case_id, self.table.unit)]
        return {k: v for k, v in record.items() if v is not None}, []

    # Reading one field of a row

    def _values(self, row: dict[str, Any], name: str) -> list[Any]:
        return [_missing_to_none(row.get(c)) for c in self.fields.get(name, ())]

    def _text(self, row: dict[str, Any], name: str) -> str | None:
        values = self._values(row, name)
        if not values:
            return None
        value = values[0]
        column = self.fields[name][0]
        if isinstance(value, int) and column in (self.table.labels or {}):
            names = self.table.labels[column]
            value = names[value] if 0 <= value < len(names) else value
        return _as_text(value, name, column)

    def _images(self, row: dict[str, Any], case_id: str) -> list[str]:
        items: list[Any] = []
        for value in self._values(row, "images"):
            value = _json_text(value, "[")
            items.extend(value if isinstance(value, list) else [value])
        items = [i for i in items if i is not None]
        if not items:
            raise _RowProblem("no image; give an image path or embedded image bytes.", "images")
        names = []
        for k, item in enumerate(items, start=1):
            data = item.get("bytes") if isinstance(item, dict) else item if isinstance(item, bytes | bytearray) else None
            path = item.get("path") if isinstance(item, dict) else item if isinstance(item, str) else None
            if data:
                names.append(self._embed(bytes(data), case_id, k if len(items) > 1 else None))
            elif isinstance(path, str) and path.strip():
                name = self._relative(path)
                if name in self.embedded:
                    raise _RowProblem(f"image '{name}' is also the name of another case's embedded image; "
                                      "rename one of them.", "images")
                self.by_path.add(name)
                names.append(name)
            else:
                raise _RowProblem(f"image {k} is neither a path nor image bytes ({type(item).__name__}).", "images")
        return names

    def _embed(self, data: bytes, case_id: str, number: int | None) -> str:
        from PIL import Image

        from cfkit.images import decode_image

        if self.image_root is None:
            raise _RowProblem("holds embedded image bytes; give --images DIR to write them there.", "images")
        try:
            decode_image(data, source=f"case '{case_id}' image", what="embedded")
            with Image.open(io.BytesIO(data)) as image:
                fmt = image.format or "PNG"
        except ImageError as exc:
            raise _RowProblem(str(exc), "images") from exc
        name = f"{case_id}{'' if number is None else f'_{number}'}{_IMAGE_EXT.get(fmt, '.' + fmt.lower())}"
        if name in self.embedded or name in self.by_path:
            raise _RowProblem(f"embedded image would be named '{name}', which another case already uses; "
                              "rename one of the cases.", "images")
        self.embedded[name] = data
        return name

    def _relative(self, path: str) -> str:
        # An absolute path inside the image root is written relative to it; anything else is kept as given
        # and judged by the case validation (absolute paths and '..' are refused there).
        if self.image_root is not None and Path(path).is_absolute():
            try:
                return Path(path).resolve().relative_to(self.image_root.resolve()).as_posix()
            except ValueError:
                return path
        return path

    def _options(self, row: dict[str, Any]) -> list[dict[str, str]]:
        columns = self.fields["options"]
        values = self._values(row, "options")
        if len(columns) > 1:  # one column per option; the id comes from the column name
            options = []
            for column, value in zip(columns, values):
                if value is None:
                    continue  # e.g. option_C of a two-option case
                match = NUMBERED["options"].fullmatch(normalize_column(column))
                option_id = _suffix(match).upper() if match else chr(ord("A") + len(options))
                options.append({"id": option_id, "text": _as_text(value, "options", column)})
            return options
        value = _json_text(values[0], "[{")
        if value is None:
            raise _RowProblem("no options; give the options as a list or as option_A, option_B … columns.", "options")
        if isinstance(value, dict):  # {"A": "Yes", "B": "No"}
            return [{"id": str(k), "text": _as_text(v, "options", columns[0])} for k, v in value.items()]
        if not isinstance(value, list):
            raise _RowProblem(f"options must be a list, got {type(value).__name__}.", "options")
        options = []
        for i, item in enumerate(value):
            if isinstance(item, dict):
                option_id = next((item[k] for k in ("id", "key", "label") if item.get(k) is not None), None)
                text = next((item[k] for k in ("text", "value", "option") if item.get(k) is not None), None)
                if option_id is None or text is None:
                    raise _RowProblem(f"option {i + 1} needs an id and a text (keys id/text).", f"options.{i}")
                options.append({"id": str(option_id), "text": str(text)})
            else:
                options.append({"id": chr(ord("A") + i), "text": _as_text(item, "options", columns[0])})
        return options

    def _gold(self, row: dict[str, Any], options: list[dict[str, str]]) -> str:
        gold = self._text(row, "gold")
        gold_text = self._text(row, "gold_text")
        ids = [o["id"] for o in options]
        if gold is not None and gold not in ids:
            # A gold given as the option's text ("No") becomes that option's id.
            matches = [o["id"] for o in options if _same_text(o["text"], gold)]
            if len(matches) == 1:
                gold = matches[0]
        if gold is None:
            if gold_text is None:
                raise _RowProblem("no gold answer; give the gold option id or its text.", "gold")
            matches = [o["id"] for o in options if _same_text(o["text"], gold_text)]
            if len(matches) != 1:
                raise _RowProblem(f"gold text {gold_text!r} matches {len(matches)} of the options "
                                  f"{[o['text'] for o in options]}; give the gold option id.", "gold")
            return matches[0]
        if gold_text is not None and gold in ids:
            text = options[ids.index(gold)]["text"]
            if not _same_text(text, gold_text):
                raise _RowProblem(f"gold '{gold}' is the option {text!r} but the gold text says {gold_text!r}; "
                                  "fix one of them.", "gold")
        return gold

    def _provenance(self, row: dict[str, Any]) -> dict[str, Any]:
        base = _json_text(self._values(row, "provenance")[0], "{") if self.fields.get("provenance") else None
        if base is not None and not isinstance(base, dict):
            raise _RowProblem(f"provenance must be an object, got {type(base).__name__}.", "provenance")
        provenance = {k: v for k, v in (base or {}).items() if v is not None}
        for name in DEFAULT_COLUMNS:
            if not name.startswith("provenance.") or not self.fields.get(name):
                continue
            key = name.removeprefix("provenance.")
            value = self._text(row, name)
            if value is None:
                continue
            if key in provenance and provenance[key] != value:
                raise _RowProblem(f"provenance.{key} is {provenance[key]!r} in the provenance column but "
                                  f"{value!r} in column '{self.fields[name][0]}'; keep one.", f"provenance.{key}")
            provenance[key] = value
        return provenance

    # Images on disk

    def image_problems(self, check: CaseCheck) -> list[CaseProblem]:
        """Images named by path that are not in the image root; embedded images that would overwrite a file."""
        if self.image_root is None:
            return []
        problems = []
        unit, path = self.table.unit, str(self.table.path)
        lines = self.positions
        for case in check.cases:
            for name in case.images:
                target = self.image_root / name
                if name in self.embedded:
                    if target.exists() and (not target.is_file() or target.read_bytes() != self.embedded[name]):
                        problems.append(CaseProblem(path, lines[case.id], f"case '{case.id}': {target} already "
                                                    "exists with other content; cfkit never overwrites it. Move it "
                                                    "away or choose another --images folder.", "images", case.id, unit))
                elif target.is_dir():
                    problems.append(CaseProblem(path, lines[case.id], f"case '{case.id}': image {name!r} is a "
                                                "folder; name the image file.", "images", case.id, unit))
                elif not target.is_file():
                    problems.append(CaseProblem(path, lines[case.id], f"case '{case.id}': image {name!r} not found "
                                                f"in {self.image_root}; copy the images there, or leave out --images "
                                                "to import without checking them.", "images", case.id, unit))
        return problems

    def write_images(self) -> list[Path]:
        """Write every embedded image not already there (identical files are kept); all or none."""
        from cfkit.files import write_bytes_atomic

        written: list[Path] = []
        if self.image_root is None:
            return written  # nothing embedded: _embed refuses bytes without an image root
        try:
            for name, data in self.embedded.items():
                target = self.image_root / name
                if target.is_file() and target.read_bytes() == data:
                    self.kept.append(target)
                    continue
                write_bytes_atomic(target, data, overwrite=False)
                written.append(target)
        except FileExistsError as exc:
            _remove(written)
            raise CaseError(f"{exc.filename or 'an image'} appeared while importing; nothing was imported. "
                            "Run the import again.") from None
        except OSError as exc:
            _remove(written)
            raise CaseError(f"cannot write images under {self.image_root} ({exc.strerror}); "
                            "nothing was imported.") from exc
        return written


def _missing_to_none(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None  # pandas writes missing cells as NaN
    if isinstance(value, str) and not value.strip():
        return None
    return value


def _as_text(value: Any, name: str, column: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise _RowProblem(f"field '{name}' (column '{column}') must be text, got {type(value).__name__}.", name)


def _json_text(value: Any, starts: str) -> Any:
    """A CSV cell holding a JSON list or object is read as one; other values are returned as they are."""
    if isinstance(value, str) and value.lstrip()[:1] in starts:
        try:
            return json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return value
    return value


def _same_text(a: str, b: str) -> bool:
    return a.strip().rstrip(".").casefold() == b.strip().rstrip(".").casefold()


def _infer_yes(options: list[dict[str, str]]) -> str | None:
    """The Yes option of a two-option Yes/No case; None for any other case."""
    if len(options) != 2:
        return None
    texts = [o["text"].strip().rstrip(".").casefold() for o in options]
    if sorted(texts) != [_NO, _YES]:
        return None
    return options[texts.index(_YES)]["id"]
