"""Per-unit outcomes: which case or pair each model got right, and how a pair's answers moved.

The sections of a report are sums over units — a ContextCanvas or modality
case, a counterfactual pair. This module keeps the units themselves: each
model's usable answer under every condition of the unit (null when it had
none, with the reason when the unit is listed under ``missing``), the gold
option, right or wrong, and for a pair its category (docs/metrics.md):

``correct``         original answered with its gold and edit with its gold (the No→Yes update)
``reverse``         each answered with the other's gold
``stuck_original``  the same answer on both, the original's gold
``stuck_edit``      the same answer on both, the edit's gold
``invalid``         a null or third-option answer on either side

Counting the units of a model gives back its row's figures exactly (the
tests check it for every model).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter
from typing import Any

_new = object.__new__

#: The categories of a counterfactual pair, in the order Table S7's counts are given.
PAIR_CATEGORIES: tuple[str, ...] = ("correct", "reverse", "stuck_original", "stuck_edit", "invalid")

#: Columns of the flat form (``report --units --format csv``): one row per unit and condition.
FLAT_COLUMNS: tuple[str, ...] = ("model", "suite", "case", "pair", "condition", "answer", "gold", "correct",
                                 "category", "missing")


def pair_category(original: str | None, edit: str | None, original_gold: str, edit_gold: str) -> str:
    """The category of one pair from its two answers and their golds (one of :data:`PAIR_CATEGORIES`)."""
    if original == original_gold and edit == edit_gold:
        return "correct"
    if original == edit_gold and edit == original_gold:
        return "reverse"
    if original == edit == original_gold:
        return "stuck_original"
    if original == edit == edit_gold:
        return "stuck_edit"
    return "invalid"


@dataclass(frozen=True)
class UnitOutcome:
    """One model's answers to one unit (a case, or a pair's two images) and how they score."""

    case: str
    pair: str | None
    answers: dict[str, str | None]  # condition -> the usable answer; None without one
    gold: dict[str, str | None]  # condition -> the gold option id (None: a suite whose gold the report lacks)
    missing: dict[str, str] = field(default_factory=dict)  # condition -> why it has no usable answer (see 'missing')

    @classmethod
    def made(cls, case: str, pair: str | None, answers: dict[str, str | None], gold: dict[str, str | None],
             missing: dict[str, str]) -> UnitOutcome:
        """The same outcome as ``UnitOutcome(case, pair, answers, gold, missing)``, made for a study's hundreds of
        thousands of units: its fields are set at once rather than by the frozen class's one
        ``object.__setattr__`` each (a third of the cost of collecting the units)."""
        made = _new(cls)
        made.__dict__.update(case=case, pair=pair, answers=answers, gold=gold, missing=missing)
        return made

    @property
    def correct(self) -> dict[str, bool]:
        return {c: self.answers[c] is not None and self.answers[c] == self.gold[c] for c in self.gold}

    @property
    def category(self) -> str | None:
        """A pair's category; None for a case."""
        if self.pair is None:
            return None
        return pair_category(self.answers["original"], self.answers["edit"], self.gold["original"],
                             self.gold["edit"])

    def to_dict(self) -> dict[str, Any]:
        answers = self.answers
        correct = {c: (a := answers[c]) is not None and a == g for c, g in self.gold.items()}  # self.correct
        if self.pair is None:  # a case: most units of a study, written as one literal
            return {"case": self.case, "answers": dict(answers), "gold": dict(self.gold), "correct": correct,
                    "missing": dict(self.missing)}
        return {"case": self.case, "pair": self.pair, "category": self.category, "answers": dict(answers),
                "gold": dict(self.gold), "correct": correct, "missing": dict(self.missing)}


@dataclass(frozen=True)
class ModelUnits:
    """A model's units on one suite, in the order of the workspace (cases file, specs, subset file)."""

    model: str
    suite: str
    units: list[UnitOutcome]

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "suite": self.suite, "units": [u.to_dict() for u in self.units]}

    def counts(self) -> dict[str, int]:
        """How many pairs fall in each category (a counterfactual suite), or cases are right per condition."""
        if self.suite == "counterfactual":
            return {c: sum(u.category == c for u in self.units) for c in PAIR_CATEGORIES}
        conditions = self.units[0].gold if self.units else {}
        return {c: sum(u.correct[c] for u in self.units) for c in conditions}


#: A unit's answer as the report asked for it: (model, suite, case, pair or "", condition).
AnswerKey = tuple[str, str, str, str, str]


def collect_units(asked: Mapping[tuple[str, str], Mapping[tuple[str, str, str], str | None]],
                  gold: Mapping[tuple[str, str, str], str], reasons: Mapping[AnswerKey, str]) -> list[ModelUnits]:
    """Group the answers the report scored into units, per model and suite.

    ``asked`` holds, per (model, suite), every answer the sections counted by
    (case, pair or "", condition) (None where there was no usable one), in the
    order they were asked; ``gold`` the gold option by (case, pair or "",
    condition), a unit it lacks getting None; ``reasons`` why an answer is not
    usable, by (model, suite, case, pair or "", condition).
    """
    with_reasons = {key[:4] for key in reasons}  # (model, suite, case, pair) of the units with an unusable answer
    golds: dict[tuple, dict[str, str | None]] = {}  # (case, pair, conditions) -> their golds, the same for every model
    grid_golds: dict[tuple, list[tuple]] = {}  # (conditions, units) -> each unit's golds, for _grid_units
    with_runs = {key[:2] for key in with_reasons}  # (model, suite) of those units
    out, made = [], UnitOutcome.made
    for (model, suite), answered in asked.items():
        grid = _grid_units(model, suite, answered, gold, with_runs, grid_golds)
        if grid is not None:
            out.append(ModelUnits(model, suite, grid))
            continue
        units: dict[tuple[str, str], dict[str, str | None]] = {}
        for (case, pair, condition), answer in answered.items():
            unit = units.get((case, pair))
            if unit is None:
                unit = units[(case, pair)] = {}
            unit[condition] = answer
        outcomes = []
        for (case, pair), answers in units.items():
            missing = {c: reasons[(model, suite, case, pair, c)] for c in answers
                       if (model, suite, case, pair, c) in reasons} \
                if with_reasons and (model, suite, case, pair) in with_reasons else {}
            shared = (case, pair, *answers)
            if shared not in golds:
                golds[shared] = {c: gold.get((case, pair, c)) for c in answers}
            # ``answers`` was made for this unit alone; each unit gets its own copy of the golds.
            outcomes.append(made(case, pair or None, answers, dict(golds[shared]), missing))
        out.append(ModelUnits(model, suite, outcomes))
    return out


def _grid_units(model: str, suite: str, answered: Mapping[tuple[str, str, str], str | None],
                gold: Mapping[tuple[str, str, str], str], with_reasons: set[tuple[str, str]],
                grid_golds: dict[tuple, list[tuple]]) -> list[UnitOutcome] | None:
    """:func:`collect_units` for one model's suite asked as a grid (the usual way: every unit under the first
    condition, then every one under the next, in the same order), each unit's answers and golds made in C; None
    for any other shape, or when a unit has an unusable answer (those go the general way)."""
    keys = list(answered)
    if not keys or (model, suite) in with_reasons:
        return None
    conditions = list(map(_CONDITION, keys))
    size = conditions.count(conditions[0])
    if len(keys) % size:
        return None
    units = list(map(_UNIT, keys[:size]))
    blocks = [keys[start:start + size] for start in range(0, len(keys), size)]
    order = tuple(block[0][2] for block in blocks)
    if any(set(map(_CONDITION, block)) != {condition} or list(map(_UNIT, block)) != units
           for block, condition in zip(blocks, order)):
        return None
    values = list(answered.values())
    answers = zip(*(values[start:start + size] for start in range(0, len(keys), size)))
    shared = (order, tuple(units))
    unit_golds = grid_golds.get(shared)
    if unit_golds is None:
        unit_golds = grid_golds[shared] = list(zip(*(map(gold.get, block) for block in blocks)))
    cases, pairs = map(_CASE, units), map(_NO_PAIR.get, map(_PAIR, units), map(_PAIR, units))
    fields = zip(cases, pairs, map(dict, map(zip, repeat(order), answers)),
                 map(dict, map(zip, repeat(order), unit_golds)), map(dict, repeat((), size)))
    # UnitOutcome.made for every unit at once: each instance's __dict__ set whole (the frozen class allows no other way).
    made = list(map(_new, repeat(UnitOutcome, size)))
    deque(map(object.__setattr__, made, repeat("__dict__"), map(dict, map(zip, repeat(_FIELDS), fields))), maxlen=0)
    return made


_FIELDS = ("case", "pair", "answers", "gold", "missing")  # UnitOutcome's, in order


_CONDITION, _UNIT, _CASE, _PAIR = itemgetter(2), itemgetter(0, 1), itemgetter(0), itemgetter(1)
_NO_PAIR = {"": None}  # .get(pair, pair): a pair's id, None for none


def flat_rows(groups: Iterable[ModelUnits]) -> list[dict[str, Any]]:
    """One record per unit and condition, with :data:`FLAT_COLUMNS` as keys (a pair's category on both rows)."""
    rows = []
    for group in groups:
        for unit in group.units:
            correct = unit.correct
            for condition, answer in unit.answers.items():
                rows.append({"model": group.model, "suite": group.suite, "case": unit.case, "pair": unit.pair,
                             "condition": condition, "answer": answer, "gold": unit.gold[condition],
                             "correct": correct[condition], "category": unit.category,
                             "missing": unit.missing.get(condition)})
    return rows
