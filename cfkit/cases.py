"""ContextCanvas case records (``cases.jsonl``) and their loading.

Only a case's images, question and options ever reach a model; ``gold``,
``rationale`` and ``provenance`` stay on this side.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cfkit.errors import CaseError, describe_validation


class Option(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    text: str


class Provenance(BaseModel):
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

    @model_validator(mode="after")
    def _consistent(self) -> "Case":
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

    def __iter__(self):
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


def parse_cases(text: str, path: Path) -> list[Case]:
    """Parse ``cases.jsonl`` text; errors name the file and line."""
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CaseError(f"{path}:{lineno}: not valid JSON ({exc.msg} at column {exc.colno}).") from exc
        if not isinstance(raw, dict):
            raise CaseError(f"{path}:{lineno}: expected a JSON object per line.")
        try:
            case = Case.model_validate(raw)
        except ValidationError as exc:
            raise CaseError(f"{path}:{lineno}: {describe_validation(exc)}") from exc
        if case.id in seen:
            raise CaseError(
                f"{path}:{lineno}: duplicate case id '{case.id}' (first on line {seen[case.id]}); ids must be unique."
            )
        seen[case.id] = lineno
        cases.append(case)
    return cases


def load_cases(path: Path, image_root: Path) -> CaseSet:
    """Load and validate a cases file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CaseError(
            f"cases file {path} not found. Set [dataset] cases in cfkit.toml to your ContextCanvas cases.jsonl."
        ) from None
    return CaseSet(parse_cases(text, path), path, image_root)
