"""ContextCanvas case records (``cases.jsonl``): the schema and the rules for ids and image paths.

Only a case's images, question and options ever reach a model; ``gold``,
``rationale`` and ``provenance`` stay on this side. Reading a cases file is
:mod:`cfkit.dataset`.

Case ids name files (``captions/ID.yaml``, imported images), so they must match
:data:`CASE_ID_PATTERN`. Image paths are relative to the image root, use ``/``,
never contain ``..`` and must not resolve (after symlinks) outside the root.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.dataclasses import dataclass

from cfkit.errors import CaseError
from cfkit.suggest import did_you_mean

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


#: Cases and options are validated like models but held as slotted dataclasses: a plan of 12,000 requests keeps
#: every case it asks about, and a model instance (its ``__dict__`` and its set of fields given) is six times the
#: size.
_STRICT = ConfigDict(extra="forbid")


#: A NUL is never sent to a model: it ends the string early in many servers' C code, or is refused by their JSON
#: parser. (Other control characters, terminal escapes included, are kept as data; every view escapes them.)
_NUL = re.compile(r"\x00")


def control_character_problem(value: str) -> str | None:
    """Why ``value`` cannot be sent to a model as it is (a control character such as NUL), or None."""
    found = _NUL.search(value)
    if found is None:
        return None
    return (f"holds the control character U+{ord(found.group()):04X} (NUL) at position {found.start() + 1}; "
            "remove it (it is invisible, often left by a conversion from UTF-16 or a copy from a PDF)")


def _sendable(value: str) -> str:
    problem = control_character_problem(value)
    if problem:
        raise ValueError(problem)
    return value


@dataclass(frozen=True, slots=True, config=_STRICT)
class Option:
    id: Annotated[str, Field(min_length=1)]
    text: str

    @field_validator("text")
    @classmethod
    def _text_sendable(cls, value: str) -> str:
        return _sendable(value)


class Provenance(BaseModel):
    """Where a case's image comes from and under which rights; other keys are kept as given."""

    model_config = ConfigDict(extra="allow", frozen=True)

    title: str | None = None
    creator: str | None = None
    provider: str | None = None
    url: str | None = None
    license: str | None = None
    redistribution: str | None = None


@dataclass(frozen=True, slots=True, config=_STRICT)
class Case:
    """One ContextCanvas question about one or two images (:func:`parse_case` reads one from a record)."""

    id: Annotated[str, Field(min_length=1)]
    images: Annotated[list[str], Field(min_length=1, max_length=2)]
    question: Annotated[str, Field(min_length=1)]
    options: Annotated[list[Option], Field(min_length=2)]
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

    @field_validator("question")
    @classmethod
    def _question_sendable(cls, value: str) -> str:
        return _sendable(value)

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


_CASE = TypeAdapter(Case)


def parse_case(record: Any) -> Case:
    """Validate one case record (a mapping) into a :class:`Case`; raises pydantic's ``ValidationError``."""
    return _CASE.validate_python(record)


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
                f"case '{case_id}' is not in {self.path}.{did_you_mean(case_id, self._by_id)} "
                f"Check the id (cases there: {_sample(self._by_id)})."
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
