"""Evidence-grounded accuracy (Table 6 / Table S8 of the paper): accuracy, EGA and Unsupported.

Per audited response, three final human judgements: the answer is correct,
the decisive visible cue (or a warranted equivalent) is identified, and that
cue is correctly linked to the stated use. Supplement eqs. S20-S21:
EGA = share of responses meeting all three; Unsupported = 100 × (correct −
grounded) / correct, the share of correct answers that fail the grounding
criterion (undefined when no answer is correct). Example, Gemini 3.1 Pro on
100 cases: accuracy 83, EGA 79 → Unsupported 100 × 4 / 83 = 4.82.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cfkit.stats.answers import as_flags
from cfkit.stats.bootstrap import LEVEL, N_RESAMPLES, SEED, Interval, Resamples, rate, sum_statistic_intervals


@dataclass(frozen=True)
class EgaScores:
    """One model's row of Table S8, in percent; Unsupported is None when no answer is correct."""

    n: int
    correct: int
    grounded: int  # correct, cue identified and cue linked
    accuracy: float
    ega: float
    unsupported: float | None
    accuracy_ci: Interval
    ega_ci: Interval
    unsupported_ci: Interval | None


def unsupported_rate(correct: int, grounded: int) -> float | None:
    """100 × (correct − grounded) / correct, or None when nothing is correct (eq. S21)."""
    if not 0 <= grounded <= correct:
        raise ValueError(f"grounded ({grounded}) must lie between 0 and correct ({correct})")
    return None if correct == 0 else float(rate(correct - grounded, correct))


def _statistics(sums: np.ndarray, n: int) -> np.ndarray:
    correct100, grounded100, correct, grounded = sums
    return np.stack([correct100 / n, grounded100 / n, rate(correct - grounded, correct)])


def ega_scores(
    correct: Sequence[bool] | np.ndarray,
    cue: Sequence[bool] | np.ndarray,
    link: Sequence[bool] | np.ndarray,
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int | None = SEED,
    level: float = LEVEL,
    resamples: Resamples | None = None,
) -> EgaScores:
    """Accuracy, EGA and Unsupported of one model's audited responses, with paired bootstrap intervals.

    ``correct[i]``, ``cue[i]`` and ``link[i]`` are the final judgements of
    response i (True = met). The three intervals share one set of resamples
    over items; resamples without a correct answer leave Unsupported
    undefined and are counted in ``Interval.undefined``. Order every model's
    items by case and pass one ``resamples`` to pair the models too.
    """
    ok = as_flags(correct, "correct")
    found = as_flags(cue, "cue")
    linked = as_flags(link, "link")
    if not (ok.shape == found.shape == linked.shape):
        raise ValueError("correct, cue and link need one judgement per audited response each")
    n = int(ok.size)
    if n == 0:
        raise ValueError("EGA needs at least one audited response")
    grounded = ok & found & linked
    if resamples is None:
        resamples = Resamples(n, n_resamples=n_resamples, seed=seed)
    columns = np.stack([100.0 * ok, 100.0 * grounded, ok, grounded]).astype(float)
    accuracy_ci, ega_ci, unsupported_ci = sum_statistic_intervals(
        columns, lambda sums: _statistics(sums, n), resamples, level=level)
    assert accuracy_ci is not None and ega_ci is not None  # means are defined in every resample
    n_correct, n_grounded = int(ok.sum()), int(grounded.sum())
    unsupported = unsupported_rate(n_correct, n_grounded)
    return EgaScores(
        n=n,
        correct=n_correct,
        grounded=n_grounded,
        accuracy=float(columns[0].sum() / n),
        ega=float(columns[1].sum() / n),
        unsupported=unsupported,
        accuracy_ci=accuracy_ci,
        ega_ci=ega_ci,
        unsupported_ci=None if unsupported is None else unsupported_ci,
    )
