"""The full (pydantic) check of a case record, for what :mod:`cfkit.cases`' plain reading leaves to it.

A record whose values are all plainly of their types and follow every rule is
read without pydantic (:func:`cfkit.cases.plain_case`), so that commands which
only read a cases file start fast; any other record comes here, where it is
accepted, converted as pydantic converts, or refused in pydantic's words, as
always. The result is turned into :class:`cfkit.cases.Case` by its caller.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationInfo, field_validator, model_validator
from pydantic.dataclasses import dataclass

from cfkit.case_rules import case_id_problem, control_character_problem, image_path_problem
from cfkit.plural import plural



def _sendable(value: str) -> str:
    problem = control_character_problem(value)
    if problem:
        raise ValueError(problem)
    return value


@dataclass(frozen=True, slots=True, config=ConfigDict(extra="forbid", title="Option"))  # titled as before
class OptionModel:
    id: Annotated[str, Field(min_length=1)]
    text: str

    @field_validator("text")
    @classmethod
    def _text_sendable(cls, value: str) -> str:
        return _sendable(value)


class ProvenanceModel(BaseModel):
    """Where a case's image comes from and under which rights; other keys are kept as given."""

    model_config = ConfigDict(extra="allow", frozen=True, title="Provenance")

    title: str | None = None
    creator: str | None = None
    provider: str | None = None
    url: str | None = None
    license: str | None = None
    redistribution: str | None = None


@dataclass(frozen=True, slots=True, config=ConfigDict(extra="forbid", title="Case"))
class CaseModel:
    """One case record as pydantic checks it (the fields and rules of :class:`cfkit.cases.Case`)."""

    id: Annotated[str, Field(min_length=1)]
    images: Annotated[list[str], Field(min_length=1, max_length=2)]
    question: Annotated[str, Field(min_length=1)]
    options: Annotated[list[OptionModel], Field(min_length=2)]
    gold: str
    yes_option: str | None = None
    rationale: str | None = None
    domain: str | None = None
    provenance: ProvenanceModel | None = None

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
    def _consistent(self) -> CaseModel:
        ids = [o.id for o in self.options]
        if len(set(ids)) != len(ids):
            raise ValueError(f"option ids repeat ({', '.join(ids)}); give each option its own id")
        if self.gold not in ids:
            raise ValueError(f"gold '{self.gold}' is not among the option ids {ids}")
        if self.yes_option is not None:
            if len(ids) != 2:
                raise ValueError(
                    f"yes_option is only for two-option cases; this case has {plural(len(ids), 'option')}, remove yes_option"
                )
            if self.yes_option not in ids:
                raise ValueError(f"yes_option '{self.yes_option}' is not among the option ids {ids}")
        return self


_CASE = TypeAdapter(CaseModel)


def validated(record: Any) -> dict[str, Any]:
    """``record`` checked by pydantic, as plain values: the case's fields, each option an ``(id, text)`` pair and
    the provenance a dict (its extra keys kept, after the six known ones); raises pydantic's ``ValidationError``."""
    case = _CASE.validate_python(record)
    provenance = None if case.provenance is None else case.provenance.model_dump()
    return {"id": case.id, "images": list(case.images), "question": case.question,
            "options": [(o.id, o.text) for o in case.options], "gold": case.gold, "yes_option": case.yes_option,
            "rationale": case.rationale, "domain": case.domain, "provenance": provenance}
