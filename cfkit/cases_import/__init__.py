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

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cfkit.cases_import.convert import RowConverter, remove_written
from cfkit.dataset import CaseCheck, CaseProblem, check_cases, check_cases_data
from cfkit.errors import CaseError
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

    @property
    def ok(self) -> bool:
        return not self.problems


def import_cases(source: Path | str, target: Path, *, mapping: Iterable[str] = (), image_root: Path | None = None,
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
    converter = RowConverter(table, fields, image_root)
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
        remove_written([], None if root_existed else image_root)
        raise
    text = "".join(line + "\n" for line in lines if line)
    from cfkit.files import write_text_atomic

    try:
        write_text_atomic(target, text, overwrite=force)
    except FileExistsError:
        remove_written(written, None if root_existed else image_root)
        raise CaseError(f"--to {target} appeared while importing; pass --force to replace it.") from None
    except OSError as exc:
        remove_written(written, None if root_existed else image_root)
        raise CaseError(f"cannot write {target} ({exc.strerror}); nothing was imported.") from exc
    check = check_cases(target, image_root, images=image_root is not None)
    return ImportResult(source, table.kind, target, mapping_used, ignored, check.problems, tuple(written),
                        tuple(converter.kept), check)
