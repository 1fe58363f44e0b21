"""ContextCanvas case records (``cases.jsonl``): the schema, loading and validation.

Only a case's images, question and options ever reach a model; ``gold``,
``rationale`` and ``provenance`` stay on this side.

Two entry points read a cases file:

- :func:`check_cases` reads it in one pass and returns every problem (file,
  line, field, fix) with a :class:`DatasetSummary`; ``cfkit cases validate``
  and ``cfkit init`` show it.
- :func:`load_cases` is what every other command uses: the same checks, but the
  first problem is raised as a :class:`CaseError`.

Case ids name files (``captions/ID.yaml``, imported images), so they must match
:data:`CASE_ID_PATTERN`. Image paths are relative to the image root, use ``/``,
never contain ``..`` and must not resolve (after symlinks) outside the root.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from cfkit.errors import CaseError, describe_error

#: A case id: 1 to 64 ASCII letters, digits, ``.``, ``_`` or ``-``, starting with a letter or digit.
CASE_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
_CASE_ID = re.compile(CASE_ID_PATTERN)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_UTF8_BOM = b"\xef\xbb\xbf"


def check_case_id(value: str) -> str:
    """Return ``value`` if it is a valid case id, else raise :class:`CaseError` (for ids typed by a user)."""
    problem = case_id_problem(value)
    if problem:
        raise CaseError(problem)
    return value


def case_id_problem(value: str) -> str | None:
    """Why ``value`` is not an acceptable case id (see :data:`CASE_ID_PATTERN`), or None."""
    if _CASE_ID.fullmatch(value):
        return None
    return (f"case id {value!r} is not allowed: ids are 1-64 ASCII letters, digits, '.', '_' or '-', "
            "starting with a letter or digit, because they name files; rename the case")


def image_path_problem(value: str) -> str | None:
    """Why ``value`` is not an acceptable image path (relative to the image root), or None.

    This is the lexical rule; :func:`check_cases` also resolves symlinks against the root.
    """
    if not value.strip():
        return "is empty; give the image's path relative to the image root"
    if _CONTROL.search(value):
        return "contains a control character; rename the file"
    if "\\" in value:
        return "contains '\\'; write paths with '/' relative to the image root"
    if value.startswith("/") or re.match(r"[A-Za-z]:", value):
        return "is absolute; give the path relative to the image root ([dataset] images)"
    if ".." in value.split("/"):
        return "contains '..'; keep every image inside the image root"
    return None


class Option(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    text: str


class Provenance(BaseModel):
    """Where a case's image comes from and under which rights; other keys are kept as given."""

    model_config = ConfigDict(extra="allow", frozen=True)

    title: str | None = None
    creator: str | None = None
    provider: str | None = None
    url: str | None = None
    license: str | None = None
    redistribution: str | None = None


class Case(BaseModel):
    """One ContextCanvas question about one or two images."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    images: list[str] = Field(min_length=1, max_length=2)
    question: str = Field(min_length=1)
    options: list[Option] = Field(min_length=2)
    gold: str
    yes_option: str | None = None
    rationale: str | None = None
    domain: str | None = None
    provenance: Provenance | None = None

    @field_validator("id")
    @classmethod
    def _id_names_a_file(cls, value: str) -> str:
        problem = case_id_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("images")
    @classmethod
    def _images_inside_root(cls, value: list[str], info: ValidationInfo) -> list[str]:
        owner = info.data.get("id")
        for name in value:
            problem = image_path_problem(name)
            if problem:
                case = f"case '{owner}': " if owner else ""
                raise ValueError(f"{case}image path {name!r} {problem}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Case:
        ids = [o.id for o in self.options]
        if len(set(ids)) != len(ids):
            raise ValueError(f"option ids repeat ({', '.join(ids)}); give each option its own id")
        if self.gold not in ids:
            raise ValueError(f"gold '{self.gold}' is not among the option ids {ids}")
        if self.yes_option is not None:
            if len(ids) != 2:
                raise ValueError(
                    f"yes_option is only for two-option cases; this case has {len(ids)} options, remove yes_option"
                )
            if self.yes_option not in ids:
                raise ValueError(f"yes_option '{self.yes_option}' is not among the option ids {ids}")
        return self

    @property
    def option_ids(self) -> list[str]:
        return [o.id for o in self.options]

    @property
    def no_option(self) -> str | None:
        """The option that is not ``yes_option`` in a two-option case."""
        if self.yes_option is None:
            return None
        return next(o.id for o in self.options if o.id != self.yes_option)

    def option_for_label(self, label: str) -> str | None:
        """Map a "Yes"/"No" label to this case's option id (two-option cases only)."""
        if label.strip().lower() == "yes":
            return self.yes_option
        if label.strip().lower() == "no":
            return self.no_option
        return None


class CaseSet:
    """All cases of a dataset, by id, in file order."""

    def __init__(self, cases: list[Case], path: Path, image_root: Path):
        self.path = path
        self.image_root = image_root
        self._by_id = {c.id: c for c in cases}

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[Case]:
        return iter(self._by_id.values())

    def __contains__(self, case_id: object) -> bool:
        return case_id in self._by_id

    def get(self, case_id: str) -> Case:
        try:
            return self._by_id[case_id]
        except KeyError:
            raise CaseError(
                f"case '{case_id}' is not in {self.path}. Check the id (cases there: {_sample(self._by_id)})."
            ) from None

    def image_paths(self, case: Case) -> list[Path]:
        return [self.image_root / name for name in case.images]

    @cached_property
    def ids(self) -> list[str]:
        return list(self._by_id)


def _sample(ids) -> str:
    ids = list(ids)
    head = ", ".join(ids[:5])
    return head + (f", … ({len(ids)} in all)" if len(ids) > 5 else "")


# ── validation ──────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class CaseProblem:
    """One thing wrong with a cases file, at one line (or data row, for an imported table)."""

    path: str
    line: int | None  # 1-based; None for the file as a whole
    message: str  # what is wrong and how to fix it
    field: str | None = None  # e.g. "gold", "images.0"; None when the whole record is wrong
    case_id: str | None = None
    unit: str = "line"  # "line" for JSONL, "row" for the data rows of an imported table

    @property
    def where(self) -> str:
        if self.line is None:
            return self.path
        return f"{self.path}:{self.line}" if self.unit == "line" else f"{self.path} row {self.line}"

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(frozen=True)
class DatasetSummary:
    """What a cases file holds. ``images_found``/``images_missing`` are None when images were not checked."""

    cases: int
    two_option: int
    three_option: int
    more_options: int  # four or more options
    paired_image: int  # cases with two images
    binary: int  # two-option cases with a yes_option (the Yes-rate denominator)
    gold_yes: int  # of those, gold is the Yes option
    images: int  # distinct image paths the cases name
    images_found: int | None
    images_missing: int | None
    domains: tuple[tuple[str, int], ...]  # (domain, cases), most frequent first; "(none)" for no domain

    @property
    def gold_yes_rate(self) -> float | None:
        """Percent of the binary cases whose gold answer is Yes (the paper reports 38.14 on ContextCanvas)."""
        return None if self.binary == 0 else 100.0 * self.gold_yes / self.binary

    def to_dict(self) -> dict[str, Any]:
        return {
            "cases": self.cases, "two_option": self.two_option, "three_option": self.three_option,
            "more_options": self.more_options, "paired_image": self.paired_image, "binary": self.binary,
            "gold_yes": self.gold_yes, "gold_yes_rate": self.gold_yes_rate, "images": self.images,
            "images_found": self.images_found, "images_missing": self.images_missing,
            "domains": dict(self.domains),
        }


@dataclass(frozen=True)
class CaseCheck:
    """The outcome of reading a cases file: its valid cases, every problem, and a summary of the valid cases."""

    path: Path
    image_root: Path | None
    images_checked: bool
    cases: tuple[Case, ...]
    problems: tuple[CaseProblem, ...]
    summary: DatasetSummary
    missing_images: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "image_root": None if self.image_root is None else str(self.image_root),
            "ok": self.ok,
            "problems": [{"line": p.line, "field": p.field, "case": p.case_id, "message": p.message}
                         for p in self.problems],
            "summary": self.summary.to_dict(),
            "missing_images": list(self.missing_images),
        }


def summarize_cases(cases: Sequence[Case], image_root: Path | None = None) -> DatasetSummary:
    """Count options, paired images, the gold Yes rate, domains and (with ``image_root``) images on disk."""
    option_counts = Counter(len(c.options) for c in cases)
    binary = [c for c in cases if c.yes_option is not None]
    names = list(dict.fromkeys(name for c in cases for name in c.images))
    found = missing = None
    if image_root is not None:
        found = sum((image_root / name).is_file() for name in names)
        missing = len(names) - found
    domains = Counter(c.domain or "(none)" for c in cases)
    return DatasetSummary(
        cases=len(cases),
        two_option=option_counts[2],
        three_option=option_counts[3],
        more_options=sum(n for k, n in option_counts.items() if k > 3),
        paired_image=sum(len(c.images) == 2 for c in cases),
        binary=len(binary),
        gold_yes=sum(c.gold == c.yes_option for c in binary),
        images=len(names),
        images_found=found,
        images_missing=missing,
        domains=tuple(sorted(domains.items(), key=lambda kv: (-kv[1], kv[0]))),
    )


def read_cases_bytes(path: Path) -> bytes:
    """The bytes of a cases file; :class:`CaseError` when it is missing, a folder or unreadable."""
    if path.is_dir():
        raise CaseError(f"cases file {path} is a folder; give the cases.jsonl file itself ([dataset] cases).")
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise CaseError(
            f"cases file {path} not found. Set [dataset] cases in cfkit.toml to your ContextCanvas cases.jsonl, "
            "or make one with 'cfkit cases import'."
        ) from None
    except OSError as exc:
        raise CaseError(f"cases file {path} cannot be read ({exc.strerror}); check its permissions.") from exc


def check_cases(path: Path, image_root: Path | None, *, images: bool = True) -> CaseCheck:
    """Read and validate a cases file in one pass.

    Every line is checked (JSON, UTF-8, schema, duplicate ids, image paths); with
    ``image_root`` given, image paths must not resolve outside it, and with
    ``images`` every named image must exist there as a file. Raises
    :class:`CaseError` only when the file itself cannot be read.
    """
    return check_cases_data(read_cases_bytes(path), path, image_root, images=images)


def check_cases_data(data: bytes, path: Path, image_root: Path | None, *, images: bool = True,
                     unit: str = "line") -> CaseCheck:
    """:func:`check_cases` on bytes that are (or are about to be) the content of ``path``.

    ``unit`` names what a line number counts in messages: "line", or "row" when
    the lines stand for the data rows of an imported table.
    """
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise CaseError(f"{path}: the file is UTF-16 (it starts with a UTF-16 byte-order mark); re-save it as UTF-8.")
    # A UTF-8 byte-order mark (Windows editors, Excel) is accepted and ignored.
    data = data.removeprefix(_UTF8_BOM)
    cases: list[Case] = []
    problems: list[CaseProblem] = []
    first_line: dict[str, int] = {}
    case_lines: list[int] = []
    for lineno, raw_line in enumerate(data.split(b"\n"), start=1):
        record, problem = _decode_line(raw_line, str(path), lineno)
        if problem:
            problems.append(dataclasses.replace(problem, unit=unit))
            continue
        if record is None:
            continue  # blank line
        hint = record.get("id") if isinstance(record.get("id"), str) else None
        try:
            case = Case.model_validate(record)
        except ValidationError as exc:
            problems.extend(CaseProblem(str(path), lineno, describe_error(e), ".".join(map(str, e["loc"])) or None,
                                        hint, unit) for e in exc.errors())
            continue
        if case.id in first_line:
            problems.append(CaseProblem(
                str(path), lineno,
                f"duplicate case id '{case.id}' (first on {unit} {first_line[case.id]}); ids must be unique.",
                "id", case.id, unit))
            continue
        first_line[case.id] = lineno
        cases.append(case)
        case_lines.append(lineno)
    if not cases and not problems:
        problems.append(CaseProblem(str(path), None, "holds no cases; write one JSON case record a line."))
    missing: list[str] = []
    if image_root is not None:
        problems.extend(dataclasses.replace(p, unit=unit)
                        for p in _image_problems(path, cases, case_lines, image_root, images, missing))
    problems.sort(key=lambda p: (p.line is not None, p.line or 0))
    return CaseCheck(path=path, image_root=image_root, images_checked=images and image_root is not None,
                     cases=tuple(cases), problems=tuple(problems),
                     summary=summarize_cases(cases, image_root if images else None),
                     missing_images=tuple(missing))


def _decode_line(raw: bytes, path: str, lineno: int) -> tuple[dict | None, CaseProblem | None]:
    raw = raw.removesuffix(b"\r")
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, CaseProblem(path, lineno, f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                                               "re-save the file as UTF-8.")
    if not line.strip():
        return None, None
    try:
        record = json.loads(line, object_pairs_hook=_refuse_duplicate_keys)
    except json.JSONDecodeError as exc:
        return None, CaseProblem(path, lineno, f"not valid JSON ({exc.msg} at column {exc.colno}); "
                                               "write one JSON object a line.")
    except _DuplicateKey as exc:
        return None, CaseProblem(path, lineno, f"key '{exc}' appears twice in one record; keep one.", str(exc))
    except RecursionError:
        return None, CaseProblem(path, lineno, "JSON nested too deeply to read; a case record is flat.")
    if not isinstance(record, dict):
        return None, CaseProblem(path, lineno, "expected a JSON object per line.")
    return record, None


class _DuplicateKey(ValueError):
    pass


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads would silently keep the last of two equal keys.
    record: dict[str, Any] = {}
    for key, value in pairs:
        if key in record:
            raise _DuplicateKey(key)
        record[key] = value
    return record


def _image_problems(path: Path, cases: list[Case], lines: list[int], image_root: Path, existence: bool,
                    missing: list[str]) -> list[CaseProblem]:
    """Images that resolve outside the root (symlinks followed), and, with ``existence``, ones not there."""
    problems: list[CaseProblem] = []
    root = image_root.resolve()
    if existence and not image_root.is_dir():
        what = "is not a folder" if image_root.exists() else "not found"
        problems.append(CaseProblem(str(path), None, f"image folder {image_root} {what}; set [dataset] images "
                                                     "to the folder the cases' image paths are relative to."))
        missing.extend(dict.fromkeys(name for c in cases for name in c.images))
    seen: set[str] = set()
    for case, lineno in zip(cases, lines):
        for i, name in enumerate(case.images):
            target = (image_root / name).resolve()
            where = f"images.{i}"
            if not target.is_relative_to(root):
                problems.append(CaseProblem(str(path), lineno, f"case '{case.id}': image {name!r} resolves to "
                                            f"{target}, outside the image root {root}; keep images inside it "
                                            "(or set [dataset] images to the folder the link leads to).",
                                            where, case.id))
            elif existence and image_root.is_dir() and name not in seen:
                seen.add(name)
                if target.is_dir():
                    problems.append(CaseProblem(str(path), lineno, f"case '{case.id}': image {name!r} is a folder; "
                                                "name the image file.", where, case.id))
                elif not target.is_file():
                    missing.append(name)
                    problems.append(CaseProblem(str(path), lineno, f"case '{case.id}': image {name!r} not found "
                                                f"in {image_root}; put the file there or fix the path.",
                                                where, case.id))
    return problems


def load_cases(path: Path, image_root: Path) -> CaseSet:
    """Load and validate a cases file; the first problem is raised as a :class:`CaseError`.

    Images are not required to exist here (a command that opens one says so), but
    an image path that resolves outside ``image_root`` is refused.
    """
    check = check_cases(path, image_root, images=False)
    if check.problems:
        more = len(check.problems) - 1
        tail = f" ({more} more problem{'s' if more > 1 else ''}; 'cfkit cases validate' lists them all.)" if more else ""
        raise CaseError(f"{check.problems[0]}{tail}")
    return CaseSet(list(check.cases), path, image_root)
