"""Turning one source row into a case record, collecting every problem; embedded images."""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cfkit.cases import case_id_problem
from cfkit.cases import Case
from cfkit.dataset import CaseProblem
from cfkit.files import CSV_CELL_LIMIT
from cfkit.errors import CaseError, ImageError
from cfkit.cases_import.mapping import DEFAULT_COLUMNS, NUMBERED, column_suffix
from cfkit.cases_import.sources import SourceTable, normalize_column
from cfkit.plural import plural

_IMAGE_EXT = {"JPEG": ".jpg", "PNG": ".png", "WEBP": ".webp", "GIF": ".gif", "BMP": ".bmp", "TIFF": ".tif"}
_YES, _NO = "yes", "no"


class _RowProblem(Exception):
    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class RowConverter:
    """Turns source rows into case records and keeps the embedded images to write."""

    def __init__(self, table: SourceTable, fields: dict[str, tuple[str, ...]], image_root: Path | None, *,
                 max_cell: int = CSV_CELL_LIMIT):
        self.table = table
        self.max_cell = max_cell
        self.fields = fields
        self.image_root = image_root
        self.embedded: dict[str, bytes] = {}  # image name (relative to the root) -> bytes to write
        self.by_path: set[str] = set()  # image names given by path
        self.positions: dict[str, int] = {}  # case id -> its first source position
        self.kept: list[Path] = []
        self.written: list[Path] = []
        self.provenance_fields = [n for n in DEFAULT_COLUMNS if n.startswith("provenance.") and fields.get(n)]

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
        values = []
        for column in self.fields.get(name, ()):
            value = _missing_to_none(row.get(column))
            if value.__class__ is str and len(value) > self.max_cell:
                raise _RowProblem(f"field '{name}' (column '{column}') holds {plural(len(value), 'character', spec=',')}, more than "
                                  f"the {self.max_cell:,} one value may hold; shorten it, or pass --max-cell "
                                  f"{len(value)} if it really is that long.", name)
            values.append(value)
        return values

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
        if len(columns) > 1:  # one column per option; the id comes from the column name, else its place
            options = []
            for place, (column, value) in enumerate(zip(columns, values)):
                if value is None:
                    continue  # e.g. option_C of a two-option case
                match = NUMBERED["options"].fullmatch(normalize_column(column))
                # By the column's place, not by the options read so far: an empty cell before it must not give
                # it the id of the column before (a gold 'B' would then name another option).
                option_id = column_suffix(match).upper() if match else chr(ord("A") + place)
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
        gold = self._indexed_gold(row, options) if self.fields.get("gold_index") else self._text(row, "gold")
        gold_text = self._text(row, "gold_text")
        ids = [o["id"] for o in options]
        if gold is not None and gold not in ids and gold.strip().rstrip(".").strip() in ids:
            gold = gold.strip().rstrip(".").strip()  # "B." as many answer keys write it: option B
        if gold is not None and gold not in ids:
            # A gold given as the option's text ("No") becomes that option's id.
            matches = [o["id"] for o in options if _same_text(o["text"], gold)]
            if len(matches) == 1:
                gold = matches[0]
            elif gold.strip().isdigit() and not any(i.isdigit() for i in ids):
                column = self.fields["gold"][0]
                raise _RowProblem(f"gold '{gold}' (column '{column}') is not one of the option ids {ids}; if the "
                                  f"column holds the gold option's 0-based position among the options, as Hugging "
                                  f"Face datasets do, import with --map gold_index={column}.", "gold")
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

    def _indexed_gold(self, row: dict[str, Any], options: list[dict[str, str]]) -> str | None:
        """The id of the option at the 0-based position the ``gold_index`` column gives; None when it is empty."""
        value = self._values(row, "gold_index")[0]
        if value is None:
            return None
        column, n = self.fields["gold_index"][0], len(options)
        index = _whole_number(value)
        if index is None:
            raise _RowProblem(f"field 'gold_index' (column '{column}') must be a whole number, the 0-based position "
                              f"of the gold option among the options; got {value!r}.", "gold")
        if not 0 <= index < n:
            places = f" (positions 0 to {n - 1})" if n else ""
            raise _RowProblem(f"field 'gold_index' (column '{column}') is {index}, but the case has {n} option"
                              f"{'s' if n != 1 else ''}{places}; fix the index, or map a column that counts the "
                              "options from 0.", "gold")
        return options[index]["id"]

    def _provenance(self, row: dict[str, Any]) -> dict[str, Any]:
        base = _json_text(self._values(row, "provenance")[0], "{") if self.fields.get("provenance") else None
        if base is not None and not isinstance(base, dict):
            raise _RowProblem(f"provenance must be an object, got {type(base).__name__}.", "provenance")
        provenance = {k: v for k, v in (base or {}).items() if v is not None}
        for name in self.provenance_fields:
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

    def image_problems(self, case: Case, position: int) -> list[CaseProblem]:
        """The case's images named by path that are not in the image root, and its embedded images that would
        overwrite a different file."""
        if self.image_root is None:
            return []
        problems = []
        unit, path = self.table.unit, str(self.table.path)
        for name in case.images:
            target = self.image_root / name
            if name in self.embedded:
                if target.exists() and (not target.is_file() or target.read_bytes() != self.embedded[name]):
                    problems.append(CaseProblem(path, position, f"case '{case.id}': {target} already exists with "
                                                "other content; cfkit never overwrites it. Move it away or choose "
                                                "another --images folder.", "images", case.id, unit))
            elif target.is_dir():
                problems.append(CaseProblem(path, position, f"case '{case.id}': image {name!r} is a folder; name "
                                            "the image file.", "images", case.id, unit))
            elif not target.is_file():
                problems.append(CaseProblem(path, position, f"case '{case.id}': image {name!r} not found in "
                                            f"{self.image_root}; copy the images there, or leave out --images to "
                                            "import without checking them.", "images", case.id, unit))
        return problems

    def write_images(self) -> list[Path]:
        """Write every embedded image not already there (identical files are kept); all or none."""
        from cfkit.files import write_bytes_atomic

        written = self.written
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
            remove_written(written)
            raise CaseError(f"{exc.filename or 'an image'} appeared while importing; nothing was imported. "
                            "Run the import again.") from None
        except OSError as exc:
            remove_written(written)
            raise CaseError(f"cannot write images under {self.image_root} ({exc.strerror}); "
                            "nothing was imported.") from exc
        return written


def _missing_to_none(value: Any) -> Any:
    if value is None:
        return None
    if value.__class__ is str:
        return value if value[:1].strip() or value.strip() else None  # (the first character decides most cells)
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


def _whole_number(value: Any) -> int | None:
    """An integer given as one (a float with nothing after the point, as pandas writes a column with gaps, or
    digits in a CSV cell); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return int(value)
    return None


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


def remove_written(paths: Iterable[Path], folder: Path | None = None) -> None:
    """Undo a failed import: the files it wrote, and the image folder it made (if still empty)."""
    for path in paths:
        path.unlink(missing_ok=True)
    if folder is not None:
        try:
            folder.rmdir()
        except OSError:
            pass
