"""A prediction as a plain frozen record, and the plain checks that let a file or a stored run skip pydantic.

:class:`Prediction` holds the fields of the "Predictions" record of
docs/formats.md. A set of predictions whose values are all plainly of their
types and consistent is checked here a column at a time
(:func:`_columns_pass`); anything else goes to the full check of
:mod:`cfkit.predictions_schema`, whose conversions and words are pydantic's.
"""

from __future__ import annotations

import re
from collections import namedtuple
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from operator import attrgetter
from types import NoneType
from typing import Any, get_args

from cfkit.parse import RULES
from cfkit.vocabulary import SUITE_CONDITIONS, Condition, Suite

#: A prediction's fields, in the documented order (cfkit.predictions_schema.PredictionModel's, which a test checks).
FIELDS = ("model", "suite", "case", "pair", "condition", "answer", "parse", "error", "raw", "reason", "confidence",
          "edit_id", "image_sha256", "truncated", "server_model", "system_fingerprint", "reasoning", "endpoint")
ERRORS = ("missing", "ambiguous", "conflicting", "unparseable", "refused", "transport")


class Prediction(namedtuple("_PredictionFields", FIELDS, defaults=(None,) * 14)):
    """One model's answer to one case under one condition: a frozen record of :data:`FIELDS`.

    ``Prediction(**fields)`` checks the fields as the predictions format
    requires: plainly when every value is of its type and consistent, else by
    the full check of :mod:`cfkit.predictions_schema`, which converts what
    pydantic converts and raises pydantic's ``ValidationError``. A file or a
    stored run is checked a column at a time (:func:`parse_predictions`).
    """

    __slots__ = ()

    def __new__(cls, **values: Any) -> Prediction:
        row = tuple(map(values.get, FIELDS))
        if not (values.keys() <= _FIELD_SET and _row_passes(row)):
            from cfkit.predictions_schema import checked

            row = checked(values)
        return tuple.__new__(cls, row)

    @classmethod
    def model_validate(cls, values: Mapping[str, Any]) -> Prediction:
        """A prediction from a mapping of its fields, checked as ``Prediction(**values)`` checks them."""
        return cls(**values)

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """What may occur once: model, suite, case, pair and condition."""
        return (self.model, self.suite, self.case, self.pair or "", self.condition)

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        """Every field by name, in :data:`FIELDS` order (all values are JSON's already, whatever ``mode``)."""
        return dict(zip(FIELDS, self))

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Prediction:
        """A copy with the fields in ``update`` replaced (not checked again, as pydantic's ``model_copy``)."""
        return self._replace(**update) if update else self

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    def __reduce__(self):
        return _restored, (tuple(self),)


def _restored(values: tuple) -> Prediction:
    return tuple.__new__(Prediction, values)


_FIELD_SET = frozenset(FIELDS)
_REQUIRED = frozenset(("model", "suite", "case", "condition"))
_SUITES, _CONDITIONS = frozenset(get_args(Suite)), frozenset(get_args(Condition))
_PARSES, _ERRORS = frozenset((*RULES, None)), frozenset((*ERRORS, None))
_STR, _TEXT, _COUNT, _FLAG = {str}, {str, NoneType}, {int, NoneType}, {bool, NoneType}
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SURROGATE = re.compile("[\ud800-\udfff]")  # a lone surrogate (a JSON escape): pydantic refuses it as a string
_BIGGEST = 2**63 - 1  # an edit id above it is left to pydantic


def _rows_pass(rows: Sequence[tuple]) -> bool:
    """Whether every row (the values of :data:`FIELDS`, in order) plainly passes the full check: True only when
    pydantic would accept each as it is, without converting anything."""
    return not rows or _columns_pass(dict(zip(FIELDS, zip(*rows))), len(rows))


def _row_passes(row: tuple) -> bool:
    """:func:`_rows_pass` for one row, field by field (what ``Prediction(**fields)`` asks)."""
    model, suite, case, pair, condition, answer, parse, error, raw, reason, confidence, edit_id, sha, truncated, \
        server_model, fingerprint, reasoning, endpoint = row
    if not (type(model) is str and type(suite) is str and type(case) is str and type(condition) is str
            and model and case and suite in _SUITES and condition in _CONDITIONS):
        return False
    texts = (pair, answer, parse, error, raw, reason, confidence, sha, server_model, fingerprint, reasoning, endpoint)
    for value in texts:
        if value is not None and type(value) is not str:
            return False
    text = model + suite + case + condition + "".join(filter(None, texts))
    return ((text.isascii() or _SURROGATE.search(text) is None) and parse in _PARSES and error in _ERRORS
            and (edit_id is None or (type(edit_id) is int and 1 <= edit_id <= _BIGGEST))
            and (truncated is None or type(truncated) is bool)
            and (sha is None or _SHA256.fullmatch(sha) is not None)
            and _shape_passes(suite, condition, pair, parse, answer, error, edit_id, sha))


#: Fields checked by their distinct values (a study repeats a few of each), and the free texts, by their types.
_NAMED = {"model": None, "suite": _SUITES, "case": None, "condition": _CONDITIONS, "parse": _PARSES,
          "error": _ERRORS, "pair": None, "answer": None, "image_sha256": None, "edit_id": None, "truncated": None}


def _columns_pass(cols: dict[str, Sequence], n: int, *, whole_strings: bool = False,
                  distinct: dict[str, set] | None = None) -> bool:
    """:func:`_rows_pass` on the rows' columns by field (a field absent from ``cols`` is null on every row): each
    column's distinct values (or, for the free texts, its types), and the consistency rules on the distinct
    combinations of the fields they read. ``whole_strings``: the strings are known to hold no lone surrogate
    (orjson refuses one), which is otherwise looked for. ``distinct`` (when given) receives each checked field's
    distinct values, for a caller's further checks."""
    if not _REQUIRED <= cols.keys():
        return False
    distinct = {} if distinct is None else distinct
    for name, column in cols.items():
        if name in _NAMED:
            try:
                values = distinct[name] = _NONE if _all_none(column) else set(column)
            except TypeError:  # a list or an object: not a flat record's value
                return False
            kinds = set(map(type, values))
            allowed = _NAMED[name]
            if name == "edit_id":
                if not kinds <= _COUNT or not all(1 <= v <= _BIGGEST for v in values if v is not None):
                    return False
                continue
            if name == "truncated":
                if not kinds <= _FLAG:
                    return False
                continue
            if name in _REQUIRED:
                if kinds != _STR or "" in values:
                    return False
            elif not kinds <= _TEXT:
                return False
            if allowed is not None and not values <= allowed:
                return False
            if name == "image_sha256" and not all(_SHA256.fullmatch(v) for v in values if v is not None):
                return False
            column = values
        elif not _all_none(column) and not set(map(type, column)) <= _TEXT:
            return False
        if not whole_strings:
            text = "".join(filter(None, column))
            if not text.isascii() and _SURROGATE.search(text):
                return False
    if all(distinct.get(name, {None}) == {None} for name in ("pair", "error", "edit_id", "image_sha256")):
        # The usual file (no pair, no error, no edit): only the suite's conditions are left to look at.
        suites = distinct["suite"]
        if "counterfactual" in suites:
            return False
        if len(suites) == 1:
            return distinct["condition"] <= set(SUITE_CONDITIONS[next(iter(suites))])
        return all(condition in SUITE_CONDITIONS[suite] for suite, condition in set(zip(cols["suite"], cols["condition"])))
    shapes = set(zip(*(cols[name] if name in cols else repeat(None, n) for name in _SHAPE_FIELDS)))
    return all(_shape_passes(*shape) for shape in shapes)



_NONE = frozenset((None,))


def _all_none(column: Sequence) -> bool:
    """Whether every value of ``column`` is None (a field the lines write as null: looked at without a set)."""
    return bool(column) and column[0] is None and column.count(None) == len(column)


#: Fields whose values repeat from line to line, each value kept as one string (:func:`_shared_values`).
_REPEATED_FIELDS = ("model", "suite", "case", "condition", "answer", "parse")


def _shared_values(case_ids: Iterable[str] | None) -> dict[str, str]:
    """Where a file's repeated values are kept, one string each, starting with the suites' and conditions' names
    and the cases' own ids.

    JSON gives every line its own copy of each string: a study's model names, suites, conditions, answers and case
    ids (a case under every condition and model) would be held and freed tens of times over, and a case id looked
    up against the workspace's compared character by character rather than found to be the same string."""
    shared = {name: name for name in (*_SUITES, *_CONDITIONS)}  # the vocabulary's strings, which the report's keys use
    shared.update((case, case) for case in case_ids or ())
    return shared


_RULES = frozenset(RULES)
#: What :func:`_checks_pass` looks at.
_SHAPE_FIELDS = ("suite", "condition", "pair", "parse", "answer", "error", "edit_id", "image_sha256")
_SHAPE = attrgetter(*_SHAPE_FIELDS)



def _checks_pass(pred: Prediction) -> bool:
    """Whether ``pred`` passes Prediction's ``_known_rule`` and ``_consistent`` (True only when both would)."""
    return _shape_passes(*_SHAPE(pred))


def _shape_passes(suite: str, condition: str, pair: str | None, parse: str | None, answer: str | None,
                  error: str | None, edit_id: int | None, image_sha256: str | None) -> bool:
    """:func:`_checks_pass` on the fields it reads (:data:`_SHAPE`)."""
    return ((parse is None or parse in _RULES)
            and condition in SUITE_CONDITIONS[suite]
            and (suite == "counterfactual") == bool(pair)
            and (answer is None or error is None)
            and ((edit_id is None and image_sha256 is None) or (condition == "edit" and suite == "counterfactual")))


