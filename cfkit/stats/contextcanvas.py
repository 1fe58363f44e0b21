"""ContextCanvas scores (Table 2 of the paper) and their paired bootstrap intervals over cases.

Supplement eqs. S17-S19: accuracy over all cases; on the two-option cases,
per-class F1, Macro-F1 and the Yes rate. A null answer stays in the Yes-rate
denominator and is a false negative of its gold class and a false positive of
neither (docs/metrics.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cfkit.stats.answers import as_answers, correct_mask, percent
from cfkit.stats.bootstrap import LEVEL, N_RESAMPLES, SEED, Interval, Resamples, rate, sum_statistic_intervals


@dataclass(frozen=True)
class ContextCanvasScores:
    """ContextCanvas figures of one model (Table 2 of the paper), in percent."""

    n: int
    n_binary: int
    accuracy: float
    macro_f1: float
    yes_f1: float
    no_f1: float
    yes_rate: float
    gold_yes_rate: float
    invalid: int


@dataclass(frozen=True)
class ContextCanvasIntervals:
    """A model's ContextCanvas scores with paired bootstrap intervals over cases, in percent.

    The F1 and Yes-rate intervals are None when no case has two options.
    """

    scores: ContextCanvasScores
    accuracy_ci: Interval
    macro_f1_ci: Interval | None
    yes_f1_ci: Interval | None
    no_f1_ci: Interval | None
    yes_rate_ci: Interval | None


def f1_score(tp: int, fp: int, fn: int) -> float:
    """F1 = 2TP / (2TP + FP + FN), in percent; 0 when the class never occurs nor is predicted.

    The harmonic mean of precision TP/(TP+FP) and recall TP/(TP+FN), as in the
    AesCanvas supplement eq. S18 (and scikit-learn with ``zero_division=0``).
    """
    denominator = 2 * tp + fp + fn
    return 0.0 if denominator == 0 else 100.0 * 2 * tp / denominator


def _f1(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """``f1_score`` over arrays of counts, with the same arithmetic (0 where the denominator is 0)."""
    denominator = 2 * tp + fp + fn
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, 100.0 * 2 * tp / denominator, 0.0)


@dataclass(frozen=True)
class _Columns:
    """Per-case indicator columns whose sums make every ContextCanvas figure."""

    correct: np.ndarray
    binary: np.ndarray
    said_yes: np.ndarray
    gold_yes: np.ndarray
    said_no: np.ndarray
    gold_no: np.ndarray
    invalid: int

    def matrix(self) -> np.ndarray:
        """Rows: 100·correct, binary, said Yes, TP/FP/FN of Yes, TP/FP/FN of No."""
        y, gy, no, gn = self.said_yes, self.gold_yes, self.said_no, self.gold_no
        rows = [100.0 * self.correct, self.binary, y, y & gy, y & ~gy, gy & ~y, no & gn, no & ~gn, gn & ~no]
        return np.stack([np.asarray(r, dtype=float) for r in rows])


def _columns(predicted: Sequence[str | None], gold: Sequence[str], yes_option: Sequence[str | None],
             no_option: Sequence[str | None]) -> _Columns:
    pred = as_answers(predicted)
    ref = as_answers(gold)
    yes = as_answers(yes_option)
    no = as_answers(no_option)
    if not (pred.shape == ref.shape == yes.shape == no.shape):
        raise ValueError("predicted, gold, yes_option and no_option need one entry per case")
    binary = np.not_equal(yes, None).astype(bool)  # an option id (a string) or None: ``y is not None``
    return _Columns(
        correct=correct_mask(pred, ref),
        binary=binary,
        said_yes=binary & (pred == yes),
        gold_yes=binary & (ref == yes),
        said_no=binary & (pred == no),
        gold_no=binary & (ref == no),
        invalid=int(np.equal(pred, None).sum()),  # answers are option ids or None: ``p is None``
    )


def contextcanvas_scores(
    predicted: Sequence[str | None],
    gold: Sequence[str],
    yes_option: Sequence[str | None],
    no_option: Sequence[str | None],
) -> ContextCanvasScores:
    """Accuracy over all cases; Yes rate, per-class F1 and Macro-F1 over the two-option cases.

    Parameters
    ----------
    predicted
        The answered option id per case, or None when no valid answer was read.
    gold
        The gold option id per case.
    yes_option, no_option
        Per case, the option ids of the canonical Yes and No classes; None for
        cases with more than two options, which count only towards accuracy.

    Notes
    -----
    Supplement eqs. S17-S19: accuracy = mean of 1[ŷ = y]; for class k,
    F1_k = 2 P_k R_k / (P_k + R_k); Macro-F1 = (F1_Yes + F1_No) / 2;
    Yes rate = share of binary cases predicted Yes. A null answer stays in the
    Yes-rate denominator and is a false negative of its gold class and a false
    positive of neither (docs/metrics.md).
    """
    return _scores(_columns(predicted, gold, yes_option, no_option))


def _scores(c: _Columns) -> ContextCanvasScores:
    """:func:`contextcanvas_scores` from the indicator columns."""
    y, gy, no, gn = c.said_yes, c.gold_yes, c.said_no, c.gold_no
    yes_f1 = f1_score(int((y & gy).sum()), int((y & ~gy).sum()), int((gy & ~y).sum()))
    no_f1 = f1_score(int((no & gn).sum()), int((no & ~gn).sum()), int((gn & ~no).sum()))
    n_binary = int(c.binary.sum())
    return ContextCanvasScores(
        n=int(c.correct.size),
        n_binary=n_binary,
        accuracy=percent(c.correct),
        macro_f1=(yes_f1 + no_f1) / 2,
        yes_f1=yes_f1,
        no_f1=no_f1,
        yes_rate=100.0 * y.sum() / n_binary if n_binary else 0.0,
        gold_yes_rate=100.0 * gy.sum() / n_binary if n_binary else 0.0,
        invalid=c.invalid,
    )


def _statistics(sums: np.ndarray, n: int) -> np.ndarray:
    """Accuracy, Macro-F1, Yes-F1, No-F1 and Yes rate from the column sums of ``_Columns.matrix``."""
    correct, binary, said_yes, tp_y, fp_y, fn_y, tp_n, fp_n, fn_n = sums
    yes_f1 = _f1(tp_y, fp_y, fn_y)
    no_f1 = _f1(tp_n, fp_n, fn_n)
    return np.stack([correct / n, (yes_f1 + no_f1) / 2, yes_f1, no_f1, rate(said_yes, binary)])


def contextcanvas_intervals(
    predicted: Sequence[str | None],
    gold: Sequence[str],
    yes_option: Sequence[str | None],
    no_option: Sequence[str | None],
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int | None = SEED,
    level: float = LEVEL,
    resamples: Resamples | None = None,
) -> ContextCanvasIntervals:
    """``contextcanvas_scores`` with percentile bootstrap intervals, cases resampled whole.

    Each resample draws cases (two- and three-option alike) with replacement
    and recomputes every figure from its own confusion counts: accuracy over
    all drawn cases, F1 and Macro-F1 by eq. S18 with docs/metrics.md's rule for
    null answers, the Yes rate over the drawn two-option cases (undefined,
    and counted in ``Interval.undefined``, in a resample without any). Pass
    one ``resamples`` for every model answering the same cases in the same
    order, so their intervals are paired (Efron & Tibshirani 1993, ch. 13).
    """
    found = _columns(predicted, gold, yes_option, no_option)  # once, for the scores and their intervals
    scores = _scores(found)
    columns = found.matrix()
    n = columns.shape[1]
    if resamples is None:
        resamples = Resamples(n, n_resamples=n_resamples, seed=seed)
    accuracy_ci, macro_ci, yes_ci, no_ci, rate_ci = sum_statistic_intervals(
        columns, lambda sums: _statistics(sums, n), resamples, level=level)
    assert accuracy_ci is not None  # accuracy is defined in every resample
    if scores.n_binary == 0:  # no two-option case: the class figures have no interval
        macro_ci = yes_ci = no_ci = rate_ci = None
    return ContextCanvasIntervals(scores, accuracy_ci, macro_ci, yes_ci, no_ci, rate_ci)
