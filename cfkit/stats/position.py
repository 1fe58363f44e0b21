"""Position bias: two-option cases asked in both option orders (the ``swap`` suite).

Each case is asked with its options as given (original order) and with the
two option texts exchanged (swapped order). Answers are compared by option
*text*, so a model that follows content picks the same text in both orders
and one that follows position picks whichever text is listed first. Per case
and order the answer is the chosen option's text, or None when no valid
answer was read (wrong, and neither first-listed nor Yes).

- accuracy in each order: share of cases answered with the gold text;
- consistency: share of cases answered with the same text in both orders
  (a null answer is consistent with nothing);
- first-position rate: share of all 2n answers that pick the option listed
  first in their prompt (a position-blind model sits near 50);
- Yes rate in each order: share of cases answered with the Yes option's text;
- McNemar between the orders: b = cases right only in the original order,
  c = right only in the swapped order (exact, as elsewhere in cfkit).

Intervals: paired percentile bootstrap over cases (both orders of a case kept
together), one set of resamples for every figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cfkit.stats.answers import as_answers
from cfkit.stats.bootstrap import LEVEL, N_RESAMPLES, SEED, Interval, Resamples, bootstrap_mean_intervals
from cfkit.stats.comparison import McNemarResult, mcnemar_exact


@dataclass(frozen=True)
class SwapScores:
    """One model's position-bias figures over n two-option cases, in percent (delta in points)."""

    n: int
    accuracy_original: float
    accuracy_swapped: float
    accuracy_delta: float  # swapped − original
    consistency: float
    first_position_rate: float
    yes_rate_original: float
    yes_rate_swapped: float
    mcnemar: McNemarResult
    invalid_original: int
    invalid_swapped: int
    accuracy_original_ci: Interval
    accuracy_swapped_ci: Interval
    accuracy_delta_ci: Interval
    consistency_ci: Interval
    first_position_rate_ci: Interval
    yes_rate_original_ci: Interval
    yes_rate_swapped_ci: Interval


def _check_options(first: np.ndarray, second: np.ndarray, gold: np.ndarray, yes: np.ndarray) -> None:
    for i, (one, two, g, y) in enumerate(zip(first, second, gold, yes)):
        if one == two:
            raise ValueError(f"case {i}: both options read {one!r}; a swapped order needs two distinct option texts")
        for name, value in (("gold", g), ("yes", y)):
            if value not in (one, two):
                raise ValueError(f"case {i}: {name} text {value!r} is neither option ({one!r}, {two!r})")


def _check_answers(answers: np.ndarray, first: np.ndarray, second: np.ndarray, name: str) -> None:
    for i, (answer, one, two) in enumerate(zip(answers, first, second)):
        if answer is not None and answer not in (one, two):
            raise ValueError(f"{name}[{i}] is {answer!r}, neither option ({one!r}, {two!r}); "
                             "give the chosen option's text, or None when no valid answer was read")


def swap_scores(
    original: Sequence[str | None],
    swapped: Sequence[str | None],
    first: Sequence[str],
    second: Sequence[str],
    gold: Sequence[str],
    yes: Sequence[str],
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int | None = SEED,
    level: float = LEVEL,
    resamples: Resamples | None = None,
) -> SwapScores:
    """Accuracy per order, consistency, first-position rate, Yes rate per order and McNemar, with intervals.

    Parameters
    ----------
    original, swapped
        Per case, the text of the option chosen in the original / swapped
        order, or None when no valid answer was read.
    first, second
        Per case, the two option texts as listed in the original order; the
        swapped order lists ``second`` first.
    gold, yes
        Per case, the text of the gold option and of the Yes-class option (the
        same text in both orders, since texts move with their meaning).
    """
    o, s = as_answers(original), as_answers(swapped)
    one, two = as_answers(first), as_answers(second)
    g, y = as_answers(gold), as_answers(yes)
    if not (o.shape == s.shape == one.shape == two.shape == g.shape == y.shape):
        raise ValueError("original, swapped, first, second, gold and yes need one entry per case")
    n = int(o.size)
    if n == 0:
        raise ValueError("position-bias scores need at least one two-option case")
    _check_options(one, two, g, y)
    _check_answers(o, one, two, "original")
    _check_answers(s, one, two, "swapped")
    right_o = np.array([a is not None and a == b for a, b in zip(o, g)], dtype=bool)
    right_s = np.array([a is not None and a == b for a, b in zip(s, g)], dtype=bool)
    consistent = np.array([a is not None and a == b for a, b in zip(o, s)], dtype=bool)
    # The first-listed text is `first` in the original order and `second` in the swapped one.
    first_o = np.array([a is not None and a == b for a, b in zip(o, one)], dtype=float)
    first_s = np.array([a is not None and a == b for a, b in zip(s, two)], dtype=float)
    yes_o = np.array([a is not None and a == b for a, b in zip(o, y)], dtype=float)
    yes_s = np.array([a is not None and a == b for a, b in zip(s, y)], dtype=float)
    rows = 100.0 * np.stack([right_o, right_s, right_s.astype(float) - right_o, consistent,
                             (first_o + first_s) / 2, yes_o, yes_s]).astype(float)
    if resamples is None:
        resamples = Resamples(n, n_resamples=n_resamples, seed=seed)
    cis = bootstrap_mean_intervals(rows, level=level, resamples=resamples)
    means = rows.sum(axis=1) / n  # the resampled statistics divide the same sums by n
    return SwapScores(
        n=n,
        accuracy_original=float(means[0]),
        accuracy_swapped=float(means[1]),
        accuracy_delta=float(means[2]),
        consistency=float(means[3]),
        first_position_rate=float(means[4]),
        yes_rate_original=float(means[5]),
        yes_rate_swapped=float(means[6]),
        mcnemar=mcnemar_exact(right_o, right_s),
        invalid_original=int(sum(a is None for a in o)),
        invalid_swapped=int(sum(a is None for a in s)),
        accuracy_original_ci=cis[0],
        accuracy_swapped_ci=cis[1],
        accuracy_delta_ci=cis[2],
        consistency_ci=cis[3],
        first_position_rate_ci=cis[4],
        yes_rate_original_ci=cis[5],
        yes_rate_swapped_ci=cis[6],
    )
