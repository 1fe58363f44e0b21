"""Import cases from another format into cfkit's ``cases.jsonl``.

Sources: CSV (``.csv``, ``.tsv``), JSON (a list of records), JSON Lines
(``.jsonl``, ``.ndjson``), Parquet (``.parquet``; needs ``pyarrow``) and a
Hugging Face ``datasets`` folder written by ``save_to_disk`` (needs
``datasets``; read with ``load_from_disk``, never from the hub).

:func:`import_cases` works in steps:

1. check the target and the image folder;
2. open the source (:func:`read_source`): its columns, and its rows to take one at
   a time (CSV, TSV and JSON Lines are streamed from disk);
3. map columns to case fields (:func:`resolve_mapping`): explicit ``--map``
   entries first, then :data:`DEFAULT_COLUMNS`; a field that several columns
   could fill is refused with the candidates;
4. convert every row to a case record, collecting every problem (the first
   :data:`MAX_PROBLEMS` kept, the rest counted); a value over ``max_cell``
   characters is a problem;
5. validate each record exactly as ``cfkit cases validate`` does, check that
   image files named by path are there, and write it to a temporary file;
6. only when nothing is wrong: write embedded images (never over a different
   file), move the cases file into place, and (with an image folder) check the
   images of the written file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cfkit.cases_import.convert import RowConverter, remove_written
from cfkit.dataset import CaseCheck, CaseChecker, CaseProblem, check_cases
from cfkit.errors import CaseError
from cfkit.files import CSV_CELL_LIMIT
from cfkit.cases_import.mapping import DEFAULT_COLUMNS, resolve_mapping
from cfkit.cases_import.sources import KINDS, SourceTable, normalize_column, read_source

__all__ = ["DEFAULT_COLUMNS", "KINDS", "ImportResult", "SourceTable", "import_cases", "normalize_column", "read_source",
           "resolve_mapping"]


@dataclass(frozen=True)
class ImportResult:
    """What an import did. With ``problems``, nothing was written and ``check`` is None."""

    source: Path | str
    kind: str
    target: Path
    mapping: tuple[tuple[str, tuple[str, ...]], ...]  # (field, columns) in field order
    ignored_columns: tuple[str, ...]
    problems: tuple[CaseProblem, ...]
    images_written: tuple[Path, ...]
    images_kept: tuple[Path, ...]  # embedded images identical to a file already there
    check: CaseCheck | None  # the written cases file, validated
    more_problems: int = 0  # problems past the first MAX_PROBLEMS, counted but not kept

    @property
    def ok(self) -> bool:
        return not self.problems


#: At most this many problems are kept and shown; the rest are counted.
MAX_PROBLEMS = 1000


def import_cases(source: Path | str, target: Path, *, mapping: Iterable[str] = (), image_root: Path | None = None,
                 kind: str | None = None, split: str | None = None, force: bool = False,
                 max_cell: int = CSV_CELL_LIMIT) -> ImportResult:
    """Convert ``source`` to a cases file at ``target``; see the module docstring for the steps.

    ``mapping`` holds ``FIELD=COLUMN`` strings (``FIELD=COL1,COL2`` for options or
    images spread over columns, ``FIELD=`` to leave a field out). ``image_root`` is
    the folder image paths are relative to: embedded images are written there and
    images named by path must be there; without it, image files are not checked and
    embedded images are refused. ``max_cell`` bounds the characters of one value.
    A CSV, TSV or JSON Lines source is streamed: one row is held at a time, and
    the cases go to a temporary file that becomes ``target`` only when every row
    passed. Raises :class:`CaseError` for a source that cannot be read or a
    mapping that is missing or ambiguous.
    """
    # 1. target and image folder
    if target.is_dir():
        raise CaseError(f"--to {target} is a folder; give the path of the cases file to write.")
    if target.exists() and not force:
        raise CaseError(f"--to {target} already exists; pass --force to replace it, or choose another path.")
    if image_root is not None and image_root.exists() and not image_root.is_dir():
        raise CaseError(f"--images {image_root} is a file; give the folder the images are (to be) in.")
    # 2. read
    table = read_source(source, kind=kind, split=split, max_cell=max_cell)
    # 3. map
    fields = resolve_mapping(table, list(mapping))
    used = {c for cols in fields.values() for c in cols}
    ignored = tuple(c for c in table.columns if c not in used)
    mapping_used = tuple((f, cols) for f, cols in fields.items() if cols)
    # 4-5. convert, validate as 'cfkit cases validate' would (with source positions), and write to a temporary file
    converter = RowConverter(table, fields, image_root, max_cell=max_cell)
    # (the converter refuses a repeated id, so the checker need not keep a second table of ids)
    checker = CaseChecker(source, image_root, images=False, unit=table.unit, keep=False, unique_ids=False)
    problems = _Problems()
    root_existed = image_root is None or image_root.exists()
    from cfkit.files import atomic_writer

    try:
        with atomic_writer(target, overwrite=force) as sink:
            rows = 0
            for position, row in table.rows:
                rows += 1
                record, row_problems = converter.convert(row, position)
                problems.extend(row_problems)
                if record is None:
                    continue
                before = len(checker.problems)
                case = checker.add_record(record, position)
                problems.extend(checker.problems[before:])
                del checker.problems[before:]
                if case is not None:
                    problems.extend(converter.image_problems(case, position))
                if not problems:
                    sink.write(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")
            if not rows:
                raise CaseError(f"{source}: holds no records; nothing to import.")
            if problems:
                raise _Refused()
            # 6. images (all or none), then the cases file takes its place
            written = converter.write_images()
    except _Refused:
        problems.sort()
        return ImportResult(source, table.kind, target, mapping_used, ignored, tuple(problems.kept), (), (), None,
                            problems.more)
    except FileExistsError:
        remove_written(converter.written, None if root_existed else image_root)
        raise CaseError(f"--to {target} appeared while importing; pass --force to replace it.") from None
    except CaseError:
        remove_written(converter.written, None if root_existed else image_root)
        raise
    except OSError as exc:
        remove_written(converter.written, None if root_existed else image_root)
        raise CaseError(f"cannot write {target} ({exc.strerror}); nothing was imported.") from exc
    # The file holds exactly the records checked above; the images on disk are checked now that all are there.
    check = checker.finish() if image_root is None else check_cases(target, image_root, keep=False)
    return ImportResult(source, table.kind, target, mapping_used, ignored, check.problems, tuple(written),
                        tuple(converter.kept), check)


class _Refused(Exception):
    """A row had a problem: the temporary file is dropped."""


class _Problems:
    """The first :data:`MAX_PROBLEMS` problems, and a count of the rest."""

    def __init__(self) -> None:
        self.kept: list[CaseProblem] = []
        self.more = 0

    def extend(self, problems: Iterable[CaseProblem]) -> None:
        for problem in problems:
            if len(self.kept) < MAX_PROBLEMS:
                self.kept.append(problem)
            else:
                self.more += 1

    def sort(self) -> None:
        self.kept.sort(key=lambda p: (p.line is not None, p.line or 0))

    def __bool__(self) -> bool:
        return bool(self.kept)
