"""The full (pydantic) check of a prediction, for what :mod:`cfkit.predictions`' plain reading leaves to it.

A predictions file (or a set of stored replies) whose values are all plainly
of their types and consistent is read without pydantic; any other comes here,
line by line, where each line is accepted, converted as pydantic converts (an
``edit_id`` of ``2.0`` read as 2), or refused in pydantic's words, as always.
The values are turned into :class:`cfkit.predictions.Prediction` by the caller.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cfkit.errors import PredictionError, describe_validation
from cfkit.files import json_value
from cfkit.parse import RULES
from cfkit.vocabulary import SUITE_CONDITIONS, Condition, Suite

#: Fields of counterfactual 'edit' answers only (cfkit.predictions.OPTIONAL_FIELDS).
_EDIT_FIELDS = ("edit_id", "image_sha256")


class PredictionModel(BaseModel):
    """One model's answer to one case under one condition, as pydantic checks it."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True, protected_namespaces=(),
                              title="Prediction")  # pydantic's messages name it as before

    model: str = Field(min_length=1)
    suite: Suite
    case: str = Field(min_length=1)
    pair: str | None = None  # counterfactual pairs only
    condition: Condition
    answer: str | None = None  # an option id; null when no unique valid option was read
    parse: str | None = None  # the rule that read the answer: one of cfkit.parse.RULES
    error: Literal["missing", "ambiguous", "conflicting", "unparseable", "refused", "transport"] | None = None
    raw: str | None = None
    reason: str | None = None
    confidence: str | None = None
    edit_id: int | None = Field(None, ge=1)  # counterfactual 'edit' answers: the edit the model was shown
    image_sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")  # … and the SHA-256 of the image sent
    truncated: bool | None = None  # true: the reply stopped at the token limit (written only then)
    server_model: str | None = None  # the model id the server said answered
    system_fingerprint: str | None = None  # the server's build fingerprint
    reasoning: str | None = None  # a reasoning text returned beside the reply or split off it; never graded
    endpoint: str | None = None  # the server that answered, when the model had several

    @field_validator("parse")
    @classmethod
    def _known_rule(cls, value: str | None) -> str | None:
        if value is not None and value not in RULES:
            raise ValueError(f"'{value}' is not a parser rule ({', '.join(RULES)})")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "PredictionModel":
        allowed = SUITE_CONDITIONS[self.suite]
        if self.condition not in allowed:
            raise ValueError(
                f"condition '{self.condition}' is not one of suite {self.suite}'s conditions ({', '.join(allowed)})"
            )
        if self.suite == "counterfactual" and not self.pair:
            raise ValueError("a counterfactual prediction needs 'pair' (the spec id, e.g. CF18)")
        if self.suite != "counterfactual" and self.pair:
            raise ValueError(f"'pair' is only for the counterfactual suite; remove it from this {self.suite} line")
        if self.answer is not None and self.error is not None:
            raise ValueError(f"answer '{self.answer}' comes with error '{self.error}'; an answer has no error")
        if (self.condition != "edit" or self.suite != "counterfactual") and (
                self.edit_id is not None or self.image_sha256 is not None):  # _EDIT_FIELDS, tested at once
            for name in _EDIT_FIELDS:
                if getattr(self, name) is not None:
                    raise ValueError(f"'{name}' is only for counterfactual 'edit' answers; remove it from this "
                                     f"{self.suite} {self.condition} line")
        return self


FIELDS: tuple[str, ...] = tuple(PredictionModel.model_fields)


def values_of(model: PredictionModel) -> tuple:
    """A checked prediction's field values, in :data:`FIELDS` order."""
    return tuple(map(model.__dict__.__getitem__, FIELDS))


def checked(values: dict[str, Any]) -> tuple:
    """``values`` (a prediction's fields) checked by pydantic: the values in :data:`FIELDS` order, as pydantic
    converts them; raises pydantic's ``ValidationError``."""
    return values_of(PredictionModel(**values))


@functools.cache
def one_pass_reader() -> Callable[[str], PredictionModel]:
    """A line's JSON read and checked by pydantic in one pass, without the model's two checks written in Python
    (``_known_rule``, ``_consistent``), which the caller makes inline (a study's hundreds of thousands of lines
    pay for calls from Rust); the full validator where pydantic's schema is not laid out as expected."""
    from pydantic_core import SchemaValidator

    try:
        outer = PredictionModel.__pydantic_core_schema__
        model = dict(outer["schema"])
        fields_schema = dict(model["schema"])
        fields = dict(fields_schema["fields"])
        parse = dict(fields["parse"])
        default = dict(parse["schema"])
        inner = default["schema"]
        if (outer["type"], model["type"], default["type"], inner["type"]) != (
                "function-after", "model", "default", "function-after") or model.get("cls") is not PredictionModel:
            return PredictionModel.__pydantic_validator__.validate_json
        default["schema"] = inner["schema"]
        parse["schema"], fields["parse"], fields_schema["fields"], model["schema"] = default, parse, fields, fields_schema
        return SchemaValidator(model, model.get("config")).validate_json
    except (KeyError, TypeError):
        return PredictionModel.__pydantic_validator__.validate_json


def plain_line(line: str, where: str) -> tuple:
    """One line read by ``json.loads`` and checked by the model (the values, in :data:`FIELDS` order): what a line
    the one-pass reading refused gets, with the model's own words for a refusal.

    The one-pass reading (pydantic's own JSON parser) gives the same prediction
    for every line it accepts; it refuses some that ``json.loads`` reads (a lone
    surrogate escape, a tab inside a string), and those are read here as always.
    """
    raw = json_value(line, where, PredictionError, hint="Each line must be one JSON object.",
                     shape="a prediction is one flat object whose 'raw' is the reply text")
    if not isinstance(raw, dict):
        raise PredictionError(f"{where}: expected a JSON object, got {type(raw).__name__}.")
    try:
        return values_of(PredictionModel.model_validate(raw))
    except ValidationError as exc:
        raise PredictionError(f"{where}: {describe_validation(exc, PredictionModel)}") from exc
