"""Reading a cases file: every record checked in one pass, and a summary of the dataset.

Two entry points:

- :func:`check_cases` reads the file in one pass and returns every problem
  (file, line, field, fix) with a :class:`DatasetSummary`; ``cfkit cases
  validate`` and ``cfkit init`` show it.
- :func:`load_cases` is what every other command uses: the same checks, but the
  first problem is raised as a :class:`CaseError`.

The record schema and the id and image-path rules are :mod:`cfkit.cases`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cfkit.cases import Case, CaseSet, FileRead, parse_case
from cfkit.errors import CaseError, ImageError, describe_error
from cfkit.images import image_data

_UTF8_BOM = b"\xef\xbb\xbf"


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
    read: FileRead | None = None  # the file as it was read (check_cases)

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


class _Counts:
    """The :class:`DatasetSummary` of cases seen one at a time (none of them kept)."""

    def __init__(self) -> None:
        self.cases = self.binary = self.gold_yes = self.paired = 0
        self.options: Counter[int] = Counter()
        self.domains: Counter[str] = Counter()
        self.names: dict[str, None] = {}

    def add(self, case: Case) -> None:
        self.cases += 1
        self.options[len(case.options)] += 1
        if case.yes_option is not None:
            self.binary += 1
            self.gold_yes += case.gold == case.yes_option
        self.paired += len(case.images) == 2
        self.names.update(dict.fromkeys(case.images))
        self.domains[case.domain or "(none)"] += 1

    def summary(self, image_root: Path | None) -> DatasetSummary:
        found = missing = None
        if image_root is not None:
            found = sum((image_root / name).is_file() for name in self.names)
            missing = len(self.names) - found
        return DatasetSummary(
            cases=self.cases, two_option=self.options[2], three_option=self.options[3],
            more_options=sum(n for k, n in self.options.items() if k > 3), paired_image=self.paired,
            binary=self.binary, gold_yes=self.gold_yes, images=len(self.names), images_found=found,
            images_missing=missing, domains=tuple(sorted(self.domains.items(), key=lambda kv: (-kv[1], kv[0]))))


def summarize_cases(cases: Sequence[Case], image_root: Path | None = None) -> DatasetSummary:
    """Count options, paired images, the gold Yes rate, domains and (with ``image_root``) images on disk."""
    counts = _Counts()
    for case in cases:
        counts.add(case)
    return counts.summary(image_root)


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


def check_cases(path: Path, image_root: Path | None, *, images: bool = True, keep: bool = True) -> CaseCheck:
    """Read and validate a cases file in one pass, a line at a time.

    Every line is checked (JSON, UTF-8, schema, duplicate ids, image paths); with
    ``image_root`` given, image paths must not resolve outside it, and with
    ``images`` every named image must exist there as a file. Without ``keep``
    the cases are counted but not kept (``CaseCheck.cases`` is empty), so a file
    of any length is checked in little memory. Raises :class:`CaseError` only
    when the file itself cannot be read.
    """
    if path.is_dir():
        read_cases_bytes(path)  # says it is a folder
    try:
        handle = open(path, "rb")
    except OSError:
        read_cases_bytes(path)  # says why, in the words every cases-file reader uses
        raise
    checker = CaseChecker(path, image_root, images=images, keep=keep)
    digest = hashlib.sha256()
    with handle:
        # The file as opened, and the digest of the very bytes parsed: a file replaced or rewritten while it is
        # read is not taken for the one read (a run records these as its cases file: cfkit.probe.identity).
        opened = os.fstat(handle.fileno())
        for lineno, raw in enumerate(handle, start=1):
            digest.update(raw)
            if lineno == 1:
                checker.start(raw)
            checker.add_line(raw.removesuffix(b"\n"), lineno)
    read = FileRead(digest.hexdigest(), opened.st_size, opened.st_mtime_ns)
    return dataclasses.replace(checker.finish(), read=read)


def check_cases_data(data: bytes, path: Path, image_root: Path | None, *, images: bool = True,
                     unit: str = "line") -> CaseCheck:
    """:func:`check_cases` on bytes that are (or are about to be) the content of ``path``.

    ``unit`` names what a line number counts in messages: "line", or "row" when
    the lines stand for the data rows of an imported table.
    """
    checker = CaseChecker(path, image_root, images=images, unit=unit)
    checker.start(data[:4])
    for lineno, raw_line in enumerate(data.split(b"\n"), start=1):
        checker.add_line(raw_line, lineno)
    return checker.finish()


class CaseChecker:
    """The checks of :func:`check_cases`, fed one line (or one record) at a time."""

    def __init__(self, path: Path, image_root: Path | None, *, images: bool = True, unit: str = "line",
                 keep: bool = True, unique_ids: bool = True):
        """``unique_ids=False`` leaves the duplicate-id check to a caller that makes it already (saving a
        second table of every id)."""
        self.path, self.image_root, self.images, self.unit, self.keep = path, image_root, images, unit, keep
        self.unique_ids = unique_ids
        self.cases: list[Case] = []
        self.problems: list[CaseProblem] = []
        self.first_line: dict[str, int] = {}
        self.counts = _Counts()
        self.missing: list[str] = []
        self._images = None if image_root is None else _ImageChecker(path, image_root, images, self.missing)
        if self._images is not None:
            self.problems.extend(self._images.folder_problem())

    def start(self, head: bytes) -> None:
        """Refuse a file that begins with a UTF-16 byte-order mark (give its first bytes)."""
        if head.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise CaseError(f"{self.path}: the file is UTF-16 (it starts with a UTF-16 byte-order mark); re-save "
                            "it as UTF-8.")

    def add_line(self, raw_line: bytes, lineno: int) -> Case | None:
        if lineno == 1:
            raw_line = raw_line.removeprefix(_UTF8_BOM)  # (Windows editors, Excel) accepted and ignored
        record, problem = _decode_line(raw_line, str(self.path), lineno)
        if problem:
            self.problems.append(dataclasses.replace(problem, unit=self.unit))
            return None
        if record is None:
            return None  # blank line
        return self.add_record(record, lineno)

    def add_record(self, record: dict[str, Any], lineno: int) -> Case | None:
        """Check one record at ``lineno``; the case, or None when it has a problem (kept in ``problems``)."""
        path, unit = str(self.path), self.unit
        hint = record.get("id") if isinstance(record.get("id"), str) else None
        try:
            case = parse_case(record)
        except ValueError as exc:  # pydantic's ValidationError (the full check is imported only when needed)
            if not hasattr(exc, "errors"):
                raise
            self.problems.extend(CaseProblem(path, lineno, describe_error(e), ".".join(map(str, e["loc"])) or None,
                                             hint, unit) for e in exc.errors())
            return None
        if self.unique_ids:
            if case.id in self.first_line:
                self.problems.append(CaseProblem(
                    path, lineno, f"duplicate case id '{case.id}' (first on {unit} {self.first_line[case.id]}); "
                    "ids must be unique.", "id", case.id, unit))
                return None
            self.first_line[case.id] = lineno
        self.counts.add(case)
        if self.keep:
            self.cases.append(case)
        if self._images is not None:
            self.problems.extend(dataclasses.replace(p, unit=unit) for p in self._images.check(case, lineno))
        return case

    def finish(self) -> CaseCheck:
        problems = self.problems
        if not self.counts.cases and not problems:
            problems.append(CaseProblem(str(self.path), None, "holds no cases; write one JSON case record a line."))
        problems.sort(key=lambda p: (p.line is not None, p.line or 0))
        return CaseCheck(path=self.path, image_root=self.image_root,
                         images_checked=self.images and self.image_root is not None, cases=tuple(self.cases),
                         problems=tuple(problems),
                         summary=self.counts.summary(self.image_root if self.images else None),
                         missing_images=tuple(self.missing))


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
        if line.startswith("\ufeff"):  # as json.loads refuses it (the first line's mark is taken off before)
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", line, 0)
        record = _DECODER.decode(line)  # json.loads(line, object_pairs_hook=…) without a decoder made per line
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
    record = dict(pairs)
    if len(record) != len(pairs):  # some key came twice: name the first that did
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return record


_DECODER = json.JSONDecoder(object_pairs_hook=_refuse_duplicate_keys)


class _ImageChecker:
    """Images that resolve outside the root (symlinks followed), and, with ``existence``, ones not there."""

    def __init__(self, path: Path, image_root: Path, existence: bool, missing: list[str]):
        self.path, self.image_root, self.existence, self.missing = str(path), image_root, existence, missing
        self.root = image_root.resolve()
        self.root_text = str(image_root)  # plain file names are looked at as links by string, without pathlib
        self.root_is_dir = image_root.is_dir()
        self.seen: set[str] = set()
        self.folders: dict[Path, Path] = {}  # each folder resolved once: thousands of images share a few folders

    def folder_problem(self) -> list[CaseProblem]:
        if self.existence and not self.root_is_dir:
            what = "is not a folder" if self.image_root.exists() else "not found"
            return [CaseProblem(self.path, None, f"image folder {self.image_root} {what}; set [dataset] images "
                                                 "to the folder the cases' image paths are relative to.")]
        return []

    def check(self, case: Case, lineno: int) -> list[CaseProblem]:
        problems: list[CaseProblem] = []
        path, image_root = self.path, self.image_root
        if self.existence and not self.root_is_dir:
            self.missing.extend(n for n in case.images if n not in self.seen)
            self.seen.update(case.images)
        for i, name in enumerate(case.images):
            if "/" not in name and name not in (".", "..") and not os.path.islink(os.path.join(self.root_text, name)):
                target = self.root / name if self.existence else None  # a plain file name in the root: inside it
            else:
                target = _resolved(image_root / name, self.folders)
            where = f"images.{i}"
            if target is not None and not target.is_relative_to(self.root):
                problems.append(CaseProblem(path, lineno, f"case '{case.id}': image {name!r} resolves to "
                                            f"{target}, outside the image root {self.root}; keep images inside it "
                                            "(or set [dataset] images to the folder the link leads to).",
                                            where, case.id))
            elif self.existence and self.root_is_dir and name not in self.seen:
                self.seen.add(name)
                if target.is_dir():
                    problems.append(CaseProblem(path, lineno, f"case '{case.id}': image {name!r} is a folder; "
                                                "name the image file.", where, case.id))
                elif not target.is_file():
                    self.missing.append(name)
                    problems.append(CaseProblem(path, lineno, f"case '{case.id}': image {name!r} not found "
                                                f"in {image_root}; put the file there or fix the path.",
                                                where, case.id))
                else:  # what a probe run would send: refused here when it would be refused there
                    try:
                        image_data(image_root / name)
                    except ImageError as exc:
                        problems.append(CaseProblem(path, lineno, f"case '{case.id}': {exc}", where, case.id))
        return problems


def _resolved(path: Path, folders: dict[Path, Path]) -> Path:
    """``path.resolve()``, with the folder's resolution taken from ``folders`` (and kept there)."""
    if path.name in ("", ".", "..") or path.is_symlink():
        return path.resolve()
    folder = folders.get(path.parent)
    if folder is None:
        folder = folders[path.parent] = path.parent.resolve()
    return folder / path.name


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
    return CaseSet(list(check.cases), path, image_root, check.read)
