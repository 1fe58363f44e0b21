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
from dataclasses import FrozenInstanceError, dataclass, field
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


class ModelUnits:
    """A model's units on one suite, in the order of the workspace (cases file, specs, subset file).

    Frozen. A suite asked as a grid (:class:`UnitGrid`, the usual shape) keeps
    its answers as columns and makes its :class:`UnitOutcome` records only when
    ``units`` is first read: the JSON report writes a grid's units straight
    from the columns, so a study's hundreds of thousands of records are never
    made for it.
    """

    __slots__ = ("model", "suite", "_units", "grid")

    def __init__(self, model: str, suite: str, units: list[UnitOutcome] | None = None, *,
                 grid: UnitGrid | None = None) -> None:
        if (units is None) == (grid is None):
            raise ValueError("give a model's units or their grid, one of the two")
        _set(self, "model", model)
        _set(self, "suite", suite)
        _set(self, "_units", units)
        _set(self, "grid", grid)

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field '{name}'")

    __delattr__ = __setattr__

    @property
    def units(self) -> list[UnitOutcome]:
        if self._units is None:
            _set(self, "_units", self.grid.outcomes())
        return self._units

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return (self.model, self.suite, self.units) == (other.model, other.suite, other.units)

    __hash__ = None  # type: ignore[assignment] - as the frozen dataclass it was: its units are a list

    def __reduce__(self):  # pickled and copied with its units made
        return ModelUnits, (self.model, self.suite, self.units)

    def __repr__(self) -> str:
        return f"ModelUnits(model={self.model!r}, suite={self.suite!r}, units={self.units!r})"

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "suite": self.suite, "units": [u.to_dict() for u in self.units]}

    def counts(self) -> dict[str, int]:
        """How many pairs fall in each category (a counterfactual suite), or cases are right per condition."""
        if self.suite == "counterfactual":
            return {c: sum(u.category == c for u in self.units) for c in PAIR_CATEGORIES}
        conditions = self.units[0].gold if self.units else {}
        return {c: sum(u.correct[c] for u in self.units) for c in conditions}


_set = object.__setattr__


class UnitGrid:
    """A model's suite asked as a grid: every unit under each condition in turn, none with an unusable answer.

    ``conditions`` in the order asked; ``units`` each unit's (case, pair or
    ""); ``answers`` and ``golds`` one tuple per unit, a value per condition.
    ``units`` and ``golds`` are one list shared by every model asked the same
    grid.
    """

    __slots__ = ("conditions", "units", "answers", "golds")

    def __init__(self, conditions: tuple[str, ...], units: list[tuple[str, str]], answers: list[tuple],
                 golds: list[tuple]) -> None:
        self.conditions, self.units, self.answers, self.golds = conditions, units, answers, golds

    def outcomes(self) -> list[UnitOutcome]:
        """Each unit's :class:`UnitOutcome` (what ``UnitOutcome.made`` gives, made for all units at once in C)."""
        size, order = len(self.units), self.conditions
        cases, pairs = map(_CASE, self.units), map(_NO_PAIR.get, map(_PAIR, self.units), map(_PAIR, self.units))
        fields = zip(cases, pairs, map(dict, map(zip, repeat(order), self.answers)),
                     map(dict, map(zip, repeat(order), self.golds)), map(dict, repeat((), size)))
        # Each instance's __dict__ set whole (the frozen class allows no other way).
        made = list(map(_new, repeat(UnitOutcome, size)))
        deque(map(object.__setattr__, made, repeat("__dict__"), map(dict, map(zip, repeat(_FIELDS), fields))),
              maxlen=0)
        return made


#: A unit's answer as the report asked for it: (model, suite, case, pair or "", condition).
AnswerKey = tuple[str, str, str, str, str]


class UnitKeys(list):
    """The (case, pair or "", condition) key of each of a list of units under one condition, made once for every
    model; ``units`` is the one tuple of (case, pair or "") that the list's keys under other conditions share."""

    __slots__ = ("units", "condition")

    def __init__(self, units: tuple[tuple[str, str], ...], condition: str) -> None:
        super().__init__((case, pair, condition) for case, pair in units)
        self.units, self.condition = units, condition


class AskedGrid(list):
    """A model's suite as a report asks it the usual way: a whole :class:`UnitKeys` list at a time, each under a
    condition of its own, every answer usable. Holds each ask's (keys, answers), in order, so that
    :func:`collect_units` reads the grid as it is, without indexing every answer by its key and regrouping."""

    __slots__ = ()

    def takes(self, keys: object) -> bool:
        """Whether an ask of ``keys`` can join: a :class:`UnitKeys` list over the same units, under a new condition."""
        return type(keys) is UnitKeys and (not self or (keys.units is self[0][0].units and all(
            keys.condition != asked.condition for asked, _ in self)))

    def as_dict(self) -> dict[tuple[str, str, str], str | None]:
        """The answers by (case, pair or "", condition), in the order asked (what a report indexes otherwise)."""
        found: dict[tuple[str, str, str], str | None] = {}
        for keys, answers in self:
            found.update(zip(keys, answers))
        return found


def collect_units(asked: Mapping[tuple[str, str], Mapping[tuple[str, str, str], str | None]],
                  gold: Mapping[tuple[str, str, str], str], reasons: Mapping[AnswerKey, str]) -> list[ModelUnits]:
    """Group the answers the report scored into units, per model and suite.

    ``asked`` holds, per (model, suite), every answer the sections counted by
    (case, pair or "", condition) (None where there was no usable one), in the
    order they were asked (or an :class:`AskedGrid`); ``gold`` the gold option by (case, pair or "",
    condition), a unit it lacks getting None; ``reasons`` why an answer is not
    usable, by (model, suite, case, pair or "", condition).
    """
    with_reasons = {key[:4] for key in reasons}  # (model, suite, case, pair) of the units with an unusable answer
    golds: dict[tuple, dict[str, str | None]] = {}  # (case, pair, conditions) -> their golds, the same for every model
    grids: dict[tuple, tuple[list, list]] = {}  # (conditions, cases, pairs) -> units and golds, for _grid_units
    with_runs = {key[:2] for key in with_reasons}  # (model, suite) of those units
    out, made = [], UnitOutcome.made
    for (model, suite), answered in asked.items():
        if type(answered) is AskedGrid:
            if answered and answered[0][0] and (model, suite) not in with_runs:
                out.append(ModelUnits(model, suite, grid=_asked_grid(answered, gold, grids)))
                continue
            answered = answered.as_dict()
        grid = _grid_units(model, suite, answered, gold, with_runs, grids)
        if grid is not None:
            out.append(ModelUnits(model, suite, grid=grid))
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
                grids: dict[tuple, tuple[list, list]]) -> UnitGrid | None:
    """:func:`collect_units` for one model's suite asked as a grid (the usual way: every unit under the first
    condition, then every one under the next, in the same order), regrouped in C; None for any other shape, or
    when a unit has an unusable answer (those go the general way). ``grids`` keeps each grid's units and golds,
    the same for every model."""
    keys = list(answered)
    if not keys or (model, suite) in with_reasons:
        return None
    conditions = list(map(_CONDITION, keys))
    size = conditions.count(conditions[0])
    if len(keys) % size:
        return None
    first = keys[:size]
    cases, pairs = list(map(_CASE, first)), list(map(_PAIR, first))
    blocks = [keys[start:start + size] for start in range(0, len(keys), size)]
    order = tuple(block[0][2] for block in blocks)
    if any(conditions[start:start + size].count(condition) != size or list(map(_CASE, block)) != cases
           or list(map(_PAIR, block)) != pairs for block, condition, start in zip(blocks, order, range(0, len(keys), size))):
        return None
    values = list(answered.values())
    answers = list(zip(*(values[start:start + size] for start in range(0, len(keys), size))))
    shared = (order, tuple(cases), tuple(pairs))
    found = grids.get(shared)
    if found is None:
        found = grids[shared] = (list(zip(cases, pairs)), list(zip(*(map(gold.get, block) for block in blocks))))
    return UnitGrid(order, found[0], answers, found[1])


def _asked_grid(asked: AskedGrid, gold: Mapping[tuple[str, str, str], str], grids: dict[tuple, tuple[list, list]]
                ) -> UnitGrid:
    """:func:`_grid_units` for a suite kept as it was asked: its grid's units and golds made once for every model."""
    order, units = tuple(keys.condition for keys, _ in asked), asked[0][0].units
    found = grids.get((order, id(units)))
    if found is None:  # (``units`` is kept by ``asked`` until the units are collected: its id stays its own)
        found = grids[(order, id(units))] = (list(units), list(zip(*(map(gold.get, keys) for keys, _ in asked))))
    return UnitGrid(order, found[0], list(zip(*(answers for _, answers in asked))), found[1])


_FIELDS = ("case", "pair", "answers", "gold", "missing")  # UnitOutcome's, in order


_CONDITION, _CASE, _PAIR = itemgetter(2), itemgetter(0), itemgetter(1)
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
