"""The numbers of each suite's section for one model, from its answers.

:class:`Units` takes a model's usable answer to each unit (a ContextCanvas or
modality case under one condition, a counterfactual pair's original or edit) and
records every unit without one in ``missing`` with why (absent, transport,
refused, stale), as :mod:`cfkit.report.build` lists them in the report; the
section functions turn the answers into a row's figures through
:mod:`cfkit.stats`. A suite's cases are read once for all models
(:class:`CaseColumns`).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

import numpy as np

from cfkit import stats
from cfkit.cases import Case
from cfkit.errors import SpecError
from cfkit.report.absent import absent
from cfkit.report.gold import PairGold
from cfkit.report.rows import Delta, Missing, ModalityRow
from cfkit.report.sources import Sources
from cfkit.report.units import AnswerKey, AskedGrid, UnitKeys
from cfkit.stats.answers import read_only_answers
from cfkit.vocabulary import SUITE_CONDITIONS

#: The modality deltas of the paper (Table S9's text), in report order.
MODALITY_DELTAS: tuple[tuple[str, str], ...] = (
    ("text", "neutral"), ("neutral", "evidence"), ("evidence", "image"), ("neutral", "image"),
)


_ANSWER, _ERROR, _EDIT = attrgetter("answer"), attrgetter("error"), attrgetter("edit_id")


class Units:
    """A model's usable answer to each unit; every unit without one is recorded in ``missing`` with why."""

    def __init__(self, sources: Sources):
        self.sources = sources
        self.missing: list[Missing] = []
        # Every answer the sections counted (None where unusable): (model, suite) -> (case, pair, condition) -> it.
        self.asked: dict[tuple[str, str], dict[tuple[str, str, str], str | None]] = {}
        self.reasons: dict[AnswerKey, str] = {}  # why an answer asked for is not usable

    def answer(self, model: str, suite: str, got: dict, case: str, pair: str, condition: str) -> str | None:
        """The usable answer to one unit and condition (None, listed in ``missing``, when there is none)."""
        listed = len(self.missing)
        self._asked(model, suite)[(case, pair, condition)] = found = self._answer(model, suite, got, case, pair,
                                                                                  condition)
        if len(self.missing) > listed:
            self.reasons[(model, suite, case, pair, condition)] = self.missing[-1].reason
        return found

    def _asked(self, model: str, suite: str) -> dict[tuple[str, str, str], str | None]:
        """The answers counted for one model's suite so far, by (case, pair or "", condition)."""
        found = self.asked.get((model, suite))
        if found is None or type(found) is AskedGrid:
            found = self.asked[(model, suite)] = {} if found is None else found.as_dict()
        return found

    def answers(self, model: str, suite: str, got: dict, units: Sequence[tuple[str, str, str]]) -> list[str | None]:
        """:meth:`answer` for each (case, pair, condition) of ``units``, in order.

        An answer that is there, not failed and not about an edit is taken as it
        is; only the others go through :meth:`answer`'s checks.
        """
        found = list(map(got.get, units))
        if all(found) and not set(map(_ERROR, found)) & {"transport", "refused"} and not any(map(_EDIT, found)) \
                and not self.sources.any_stale:  # all there, none failed, about an edit, a caption or a changed case
            out = list(map(_ANSWER, found))
            asked = self.asked.setdefault((model, suite), AskedGrid())  # kept as asked while it is a grid
            if type(asked) is AskedGrid and asked.takes(units):
                asked.append((units, out))
            else:
                self._asked(model, suite).update(zip(units, out))
            return out
        asked, out = self._asked(model, suite), []
        for unit in units:
            p = got.get(unit)
            if p is not None and p.edit_id is None and p.error != "transport" and p.error != "refused" \
                    and not self.sources.any_stale:
                asked[unit] = answer = p.answer
                out.append(answer)
            else:
                out.append(self.answer(model, suite, got, *unit))
        return out

    def usable(self, model: str, suite: str, got: dict) -> dict[tuple[str, str, str], str | None]:
        """Answers by unit, with stale answers (about an edit no longer selected, a caption since changed) left out."""
        return {key: (None if self.sources.stale(p) else p.answer) for key, p in got.items()}

    def _answer(self, model: str, suite: str, got: dict, case: str, pair: str, condition: str) -> str | None:
        run = self.sources.runs.get((model, suite))
        run_id = run.id if run is not None else None

        def listed(reason: str, detail: str | None) -> None:
            self.missing.append(Missing(model, suite, case, pair or None, condition, reason, detail, run_id))

        p = got.get((case, pair, condition))
        if p is None:
            listed(*absent(run, case, pair, self.sources.reviewed_view, self.sources.commands))
            return None
        if p.error == "transport":
            listed("transport", self.sources.details.get((model, suite, case, pair, condition))
                   or "the request failed and has no reply")
            return None
        if p.error == "refused":  # why it declined, as 'runs show' and the view say it: its detail, not its text
            listed("refused", self.sources.details.get((model, suite, case, pair, condition))
                   or "the model declined to answer")
            return None
        stale = self.sources.stale(p)
        if stale:
            listed("stale", stale)
            return None
        return p.answer

    def marks(self, model: str, suite: str) -> tuple[bool, tuple[str, ...]]:
        """(incomplete, run ids) of a row: its run is not complete, or units are absent, failed or stale."""
        run = self.sources.runs.get((model, suite))
        gaps = any(m.model == model and m.suite == suite and m.reason != "refused" for m in self.missing)
        return bool(gaps or (run is not None and not run.complete)), ((run.id,) if run is not None else ())


def correct(got: dict, cases: Sequence[Case], condition: str) -> np.ndarray:
    return np.array([got.get((c.id, "", condition)) == c.gold for c in cases], dtype=bool)


class CaseColumns:
    """What a suite's section reads of its cases, taken once for all models: each unit's key per condition, the
    golds, the Yes and No options."""

    def __init__(self, cases: Sequence[Case], conditions: Sequence[str]):
        self.n, self.ids = len(cases), [c.id for c in cases]
        units = tuple((c.id, "") for c in cases)
        self.keys = {condition: UnitKeys(units, condition) for condition in conditions}
        # Object arrays, which the statistics take as they are (read only: shared by every model).
        self.gold, self.yes, self.no = (read_only_answers([getattr(c, name) for c in cases])
                                        for name in ("gold", "yes_option", "no_option"))


def contextcanvas(units: Units, model: str, got: dict, cases: CaseColumns,
                   resamples: stats.Resamples | None) -> stats.ContextCanvasIntervals:
    predicted = units.answers(model, "contextcanvas", got, cases.keys["image"])
    return stats.contextcanvas_intervals(predicted, cases.gold, cases.yes, cases.no, resamples=resamples)


def counterfactual(units: Units, model: str, got: dict, pairs: list[PairGold],
                    resamples: stats.Resamples | None) -> stats.CounterfactualScores:
    if not pairs:
        raise SpecError("counterfactual predictions were given, but the workspace has no edit specs in interventions/.")
    original = units.answers(model, "counterfactual", got, [(p.case, p.pair, "original") for p in pairs])
    edit = units.answers(model, "counterfactual", got, [(p.case, p.pair, "edit") for p in pairs])
    return stats.counterfactual_scores(original, edit, [p.original for p in pairs], [p.edit for p in pairs],
                                       resamples=resamples)


def modality(units: Units, model: str, got: dict, cases: CaseColumns, resamples: stats.Resamples,
              seed: int | None) -> ModalityRow:
    conditions = SUITE_CONDITIONS["modality"]
    correct, invalid = {}, {}
    for condition in conditions:
        answered = units.answers(model, "modality", got, cases.keys[condition])
        correct[condition] = stats.correct_mask(answered, cases.gold)
        invalid[condition] = answered.count(None)
    # One set of resampling indices for every statistic (and model) keeps all of them paired by case.
    matrix = 100.0 * np.stack([correct[c] for c in conditions]).astype(float)
    # The conditions' means and the deltas from one count-matrix product (one read of the resamples a model).
    comparisons, intervals = stats.paired_comparisons([(correct[a], correct[b]) for a, b in MODALITY_DELTAS],
                                                      resamples, also=matrix)
    adjusted = stats.bonferroni([c.mcnemar.p_value for c in comparisons])
    return ModalityRow(
        model=model,
        n=cases.n,
        accuracy={c: float(matrix[i].mean()) for i, c in enumerate(conditions)},
        accuracy_ci=dict(zip(conditions, intervals)),
        deltas=[Delta(a, b, c, p) for (a, b), c, p in zip(MODALITY_DELTAS, comparisons, adjusted)],
        invalid=invalid,
        unreviewed=len(units.sources.unreviewed_of(model).intersection(cases.ids)),
        incomplete=units.marks(model, "modality")[0],
        runs=units.marks(model, "modality")[1],
    )

