"""ContextCanvas case records (``cases.jsonl``): the schema and the rules for ids and image paths.

Only a case's images, question and options ever reach a model; ``gold``,
``rationale`` and ``provenance`` stay on this side. Reading a cases file is
:mod:`cfkit.dataset`.

Case ids name files (``captions/ID.yaml``, imported images), so they must match
:data:`CASE_ID_PATTERN`. Image paths are relative to the image root, use ``/``,
never contain ``..`` and must not resolve (after symlinks) outside the root.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterable, Iterator
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from cfkit.case_rules import (
    CASE_ID,
    CASE_ID_PATTERN,
    case_id_problem,
    control_character_problem,
    image_path_problem,
)
from cfkit.errors import CaseError
from cfkit.suggest import did_you_mean

__all__ = ["CASE_ID_PATTERN", "Case", "CaseSet", "Option", "Provenance", "case_id_problem", "check_case_id",
           "control_character_problem", "image_path_problem", "parse_case", "plain_case"]


def check_case_id(value: str) -> str:
    """Return ``value`` if it is a valid case id, else raise :class:`CaseError` (for ids typed by a user)."""
    problem = case_id_problem(value)
    if problem:
        raise CaseError(problem)
    return value


# Cases and options are held as slotted dataclasses: a plan of 12,000 requests keeps every case it asks about, and
# a model instance (its ``__dict__`` and its set of fields given) is six times the size. They are checked when read
# (parse_case), not when built: code that builds one (swap.py's swapped case) builds it from a checked one.


@dataclasses.dataclass(frozen=True, slots=True)
class Option:
    id: str
    text: str


@lru_cache(maxsize=1024)
def shared_option(option_id: str, text: str) -> Option:
    """``Option(option_id, text)``, one object for every case that lists the same option (a cases file of
    Yes/No questions holds two, not two per case): an option is immutable, and a large run keeps every case."""
    return Option(option_id, text)


_PROVENANCE_FIELDS = ("title", "creator", "provider", "url", "license", "redistribution")


class Provenance:
    """Where a case's image comes from and under which rights; other keys are kept as given (read as attributes,
    and listed by :attr:`model_extra`)."""

    __slots__ = (*_PROVENANCE_FIELDS, "_extra")

    def __init__(self, **values: Any):
        for name in _PROVENANCE_FIELDS:
            object.__setattr__(self, name, values.pop(name, None))
        object.__setattr__(self, "_extra", values)

    def __getattr__(self, name: str) -> Any:  # only for names that are not slots: the extra keys
        try:
            return object.__getattribute__(self, "_extra")[name]
        except KeyError:
            raise AttributeError(f"'Provenance' object has no attribute '{name}'") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field '{name}'")

    @property
    def model_extra(self) -> dict[str, Any]:
        return dict(self._extra)

    def model_dump(self) -> dict[str, Any]:
        """The six known fields, then the extra keys as given."""
        return {**{name: getattr(self, name) for name in _PROVENANCE_FIELDS}, **self._extra}

    def __eq__(self, other: object) -> bool:
        return type(other) is Provenance and self.model_dump() == other.model_dump()

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, name) for name in _PROVENANCE_FIELDS))

    def __repr__(self) -> str:
        return "Provenance(" + ", ".join(f"{k}={v!r}" for k, v in self.model_dump().items()) + ")"


@dataclasses.dataclass(frozen=True, slots=True)
class Case:
    """One ContextCanvas question about one or two images (:func:`parse_case` reads one from a record)."""

    id: str
    images: list[str]
    question: str
    options: list[Option]
    gold: str
    yes_option: str | None = None
    rationale: str | None = None
    domain: str | None = None
    provenance: Provenance | None = None

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


def parse_case(record: Any) -> Case:
    """Check one case record (a mapping) and make it a :class:`Case`; raises pydantic's ``ValidationError``.

    A record plainly right is read without pydantic (:func:`plain_case`); any
    other goes through the full check of :mod:`cfkit.cases_schema`, imported
    only then, which converts what pydantic converts and words every refusal.
    """
    case = plain_case(record)
    if case is None:
        from cfkit.cases_schema import validated

        values = validated(record)
        values["options"] = [shared_option(i, t) for i, t in values["options"]]
        if values["provenance"] is not None:
            values["provenance"] = Provenance(**values["provenance"])
        case = Case(**values)
    return case


_KEYS = frozenset(("id", "images", "question", "options", "gold", "yes_option", "rationale", "domain", "provenance"))
_OPTION_KEYS = frozenset(("id", "text"))


def plain_case(record: Any) -> Case | None:
    """``record`` as a :class:`Case` when it plainly passes every rule of the full check (exact JSON types, no key
    missing or extra, ids and image paths allowed, no NUL, options distinct and gold among them); else None, and
    the full check decides (it converts what pydantic converts, and words every refusal)."""
    if type(record) is not dict or not record.keys() <= _KEYS:
        return None
    get = record.get
    case_id, images, question, options, gold = get("id"), get("images"), get("question"), get("options"), get("gold")
    yes, rationale, domain, provenance = get("yes_option"), get("rationale"), get("domain"), get("provenance")
    if not (type(case_id) is str and CASE_ID.fullmatch(case_id) is not None
            and type(images) is list and 1 <= len(images) <= 2
            and _text(question) and question and "\x00" not in question
            and type(options) is list and len(options) >= 2 and _text(gold)
            and (yes is None or _text(yes)) and (rationale is None or _text(rationale))
            and (domain is None or _text(domain))):
        return None
    for name in images:
        if not _text(name) or image_path_problem(name) is not None:
            return None
    made = []
    for option in options:
        if type(option) is not dict or option.keys() != _OPTION_KEYS:
            return None
        option_id, text = option["id"], option["text"]
        if not (_text(option_id) and option_id and _text(text) and "\x00" not in text):
            return None
        made.append(shared_option(option_id, text))
    ids = [o.id for o in made]
    if len(set(ids)) != len(ids) or gold not in ids or (yes is not None and (len(ids) != 2 or yes not in ids)):
        return None
    if provenance is not None:
        provenance = _plain_provenance(provenance)
        if provenance is None:
            return None
    return Case(case_id, images, question, made, gold, yes, rationale, domain, provenance)


def asked_digests(cases: Iterable[Case]) -> dict[str, str]:
    """Per case id, a digest of what a model is shown of the case: its question, its options (ids and texts, in
    order) and its image names; not its gold, rationale or provenance. A run records them, so that a report can
    tell an answer to the case as it is now from one to an earlier version of it (docs/report-schema.md)."""
    found = {}
    for case in cases:
        if case.id not in found:
            text = "\0".join([case.question, *(f"{o.id}\x1f{o.text}" for o in case.options), "\x1e", *case.images])
            found[case.id] = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return found


#: A lone surrogate (from a JSON escape such as ``\\ud800``): pydantic refuses it as "not a valid string".
_SURROGATE = re.compile("[\ud800-\udfff]")


def _text(value: Any) -> bool:
    """Whether ``value`` is a ``str`` pydantic takes as it is (one without a lone surrogate)."""
    return type(value) is str and (value.isascii() or _SURROGATE.search(value) is None)


def _plain_provenance(record: Any) -> Provenance | None:
    """A provenance record whose six known keys are plainly strings or null, as a :class:`Provenance`; else None."""
    if type(record) is not dict:
        return None
    for name, value in record.items():
        if name in _PROVENANCE_FIELDS:
            if value is not None and not _text(value):
                return None
        elif not name.isidentifier() or name.startswith(("_", "model_")):
            return None  # a key pydantic may treat in its own way: it decides
    return Provenance(**record)


@dataclasses.dataclass(frozen=True, slots=True)
class FileRead:
    """What a file held as it was read: the SHA-256 of the bytes read, and its size and mtime when opened."""

    sha256: str
    size: int
    mtime_ns: int


class CaseSet:
    """All cases of a dataset, by id, in file order; ``read``: the file as it was read (None when not read from
    one file), so that what a run records of its cases file is what it parsed, whatever the file holds since."""

    def __init__(self, cases: list[Case], path: Path, image_root: Path, read: FileRead | None = None):
        self.path = path
        self.image_root = image_root
        self.read = read
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
