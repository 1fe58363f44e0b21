"""The position-bias section (``swap``): each model's answers to the swap suite in both option orders.

The units are the cases the swap suite asks (:func:`cfkit.swap.swap_case_ids`
over the workspace's cases). Each answer, an option id as listed in the
prompt it answers, is turned into that option's text, and
:func:`cfkit.stats.swap_scores` compares the texts: accuracy in each order,
consistency (the same text in both orders), the first-position rate, the Yes
rate in each order and the exact McNemar test between the orders, with paired
bootstrap intervals over cases (one set of resamples for every model, so the
rows stay paired with each other as well).

An answer missing in either order (no reply, a failed request, a refusal) is
counted wrong and listed in ``Report.missing`` by the caller's units, like
every other section's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cfkit import stats
from cfkit.cases import Case, CaseSet
from cfkit.errors import CaseError, PredictionError
from cfkit.plural import plural
from cfkit.swap import answer_text, swap_case_ids, swap_problem
from cfkit.vocabulary import ORIGINAL_ORDER, SWAPPED_ORDER

#: How a note saying that a model lacks usable answers for some units ends (the CLI's one line per model and
#: reason already says it, so it prints these notes only under -v).
COVERAGE_END = "the rest are counted wrong and listed under missing."

SUITE = "swap"

#: The figures of a row that are percentages with an interval, in JSON order.
_WITH_INTERVALS = ("accuracy_original", "accuracy_swapped", "accuracy_delta", "consistency", "first_position_rate",
                   "yes_rate_original", "yes_rate_swapped")


class Units(Protocol):
    """What the section needs of the report's units (``cfkit.report.build``): usable answers, missing listed."""

    def answer(self, model: str, suite: str, got: dict, case: str, pair: str, condition: str) -> str | None: ...

    def marks(self, model: str, suite: str) -> tuple[bool, tuple[str, ...]]: ...


@dataclass(frozen=True)
class SwapRow:
    """One model's position-bias figures over the swap suite's cases."""

    model: str
    scores: stats.SwapScores
    incomplete: bool = False  # built from an incomplete run, or with units absent or failed
    runs: tuple[str, ...] = ()

    def to_dict(self, not_clean: bool = False) -> dict[str, Any]:
        """The row of docs/report-schema.md's ``swap`` section (``not_clean``: its replies were cut off or are
        mostly empty)."""
        s = self.scores
        record: dict[str, Any] = {"model": self.model, "n": s.n}
        record.update({name: getattr(s, name) for name in _WITH_INTERVALS})
        record.update({"b": s.mcnemar.b, "c": s.mcnemar.c, "p": s.mcnemar.p_value,
                       "invalid_original": s.invalid_original, "invalid_swapped": s.invalid_swapped})
        record.update({f"{name}_ci": getattr(s, f"{name}_ci").as_list() for name in _WITH_INTERVALS})
        record.update({"incomplete": self.incomplete, "not_clean": not_clean, "runs": list(self.runs)})
        return record


def swap_rows(units: Units, cases: CaseSet, answers: Mapping[str, dict], *, n_resamples: int = stats.N_RESAMPLES,
              seed: int | None = stats.SEED) -> list[SwapRow]:
    """One row per model in ``answers`` (model → {(case, '', condition): Prediction}); [] when there are none.

    Raises :class:`CaseError` when the workspace has no case the swap suite
    asks, and :class:`PredictionError` for an answer to a case it does not ask.
    """
    if not answers:
        return []
    asked = [cases.get(case_id) for case_id in swap_case_ids(cases)]
    if not asked:
        raise CaseError(f"swap predictions were given, but no case in {cases.path} is one the swap suite asks "
                        "(two options with different texts, a yes_option, one image).")
    ids = {case.id for case in asked}
    for model, got in answers.items():
        outside = sorted({case for case, _, _ in got if case not in ids})
        if outside:
            # Unknown cases were refused when the predictions were read, so this one is in the cases file.
            raise PredictionError(f"model '{model}' answered swap case {outside[0]}, which the swap suite does not ask "
                                  f"(it has {swap_problem(cases.get(outside[0]))}); remove those lines.")
    resamples = stats.Resamples(len(asked), n_resamples=n_resamples, seed=seed)
    first = [case.options[0].text for case in asked]
    second = [case.options[1].text for case in asked]
    gold = [_text(case, case.gold) for case in asked]
    yes = [_text(case, case.yes_option) for case in asked]
    rows = []
    for model, got in answers.items():
        chosen = {condition: [answer_text(case, condition, units.answer(model, SUITE, got, case.id, "", condition))
                              for case in asked]
                  for condition in (ORIGINAL_ORDER, SWAPPED_ORDER)}
        scores = stats.swap_scores(chosen[ORIGINAL_ORDER], chosen[SWAPPED_ORDER], first, second, gold, yes,
                                   resamples=resamples)
        rows.append(SwapRow(model, scores, *units.marks(model, SUITE)))
    return rows


def swap_notes(missing: list, rows: list[SwapRow]) -> list[str]:
    """Sentences for the rows whose model lacks a usable answer for some cases (``missing``: the report's list)."""
    notes = []
    for row in rows:
        lacking = len({m.case for m in missing if m.model == row.model and m.suite == SUITE})
        if lacking:
            notes.append(f"{SUITE}: {row.model} has usable answers in both orders for {row.scores.n - lacking} of "
                         f"the {plural(row.scores.n, 'case')}; " + COVERAGE_END)
    return notes


def _text(case: Case, option_id: str | None) -> str:
    return next(o.text for o in case.options if o.id == option_id)
