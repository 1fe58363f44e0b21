"""Two conditions (or models) on the same units: exact McNemar test, Bonferroni, paired accuracy change."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cfkit.stats.answers import percent
from cfkit.stats.bootstrap import N_RESAMPLES, SEED, Interval, Resamples, bootstrap_mean_intervals


@dataclass(frozen=True)
class McNemarResult:
    """Exact McNemar test: ``b`` units right only in the first condition, ``c`` only in the second."""

    b: int
    c: int
    p_value: float
    method: str = "exact two-sided binomial test of min(b, c) of b + c at 0.5"


@dataclass(frozen=True)
class PairedComparison:
    """Accuracy of a first and a second condition (or model) on the same units, and their difference."""

    n: int
    first_acc: float
    second_acc: float
    delta: float  # second − first, percentage points
    ci: Interval
    mcnemar: McNemarResult


def mcnemar_exact(first_correct: np.ndarray, second_correct: np.ndarray) -> McNemarResult:
    """Exact two-sided McNemar test on paired right/wrong outcomes.

    b = units right only in the first, c = right only in the second; the
    p-value is the two-sided binomial test of min(b, c) successes in b + c
    trials at 0.5 (McNemar 1947; scipy.stats.binomtest), and 1 when b + c = 0.
    """
    first = np.asarray(first_correct, dtype=bool)
    second = np.asarray(second_correct, dtype=bool)
    if first.shape != second.shape:
        raise ValueError("both outcome arrays need one entry per unit")
    b = int((first & ~second).sum())
    c = int((~first & second).sum())
    return McNemarResult(b=b, c=c, p_value=mcnemar_p(b, c))


def mcnemar_p(b: int, c: int) -> float:
    """The exact two-sided McNemar p-value for discordant counts ``b`` and ``c``."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative, got b={b}, c={c}")
    if b + c == 0:
        return 1.0
    # Binomial(n, 1/2) is symmetric, so the two-sided p (the outcomes no likelier than k) is twice the
    # lower tail up to k = min(b, c), capped at 1. Summed in exact integers and divided once (Python's
    # int / int is correctly rounded), which equals scipy.stats.binomtest without importing scipy.stats
    # (seconds of a report's start-up).
    n, k = b + c, min(b, c)
    term = tail = 1  # C(n, 0)
    for i in range(k):
        term = term * (n - i) // (i + 1)  # C(n, i + 1)
        tail += term
    return min(1.0, 2 * tail / 2 ** n)


def bonferroni(p_values: Sequence[float]) -> list[float]:
    """Bonferroni adjustment: min(1, p × m) over the m comparisons reported together (Dunn 1961)."""
    m = len(p_values)
    return [min(1.0, float(p) * m) for p in p_values]


def paired_comparison(
    first_correct: np.ndarray,
    second_correct: np.ndarray,
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int | None = SEED,
    indices: np.ndarray | None = None,
    resamples: Resamples | None = None,
) -> PairedComparison:
    """Accuracy change from a first to a second condition on the same units, with interval and McNemar test.

    The interval is the paired percentile bootstrap of mean(second − first) in
    percentage points; p is the exact McNemar test (not yet adjusted). Give
    ``resamples`` (or a legacy ``indices`` matrix) to share resamples with
    other statistics over the same units.
    """
    first, second, diff = _paired(first_correct, second_correct)
    ci = bootstrap_mean_intervals(diff[None, :], n_resamples=n_resamples, seed=seed, indices=indices,
                                  resamples=resamples)[0]
    return _comparison(first, second, diff, ci)


def paired_comparisons(pairs: Sequence[tuple[np.ndarray, np.ndarray]], resamples: Resamples, *,
                       also: np.ndarray | None = None) -> tuple[list[PairedComparison], list[Interval]]:
    """:func:`paired_comparison` for several (first, second) pairs over the same units and resamples, every
    bootstrap taken from one count-matrix product; with ``also`` (``(k, n)``), the mean intervals of its rows
    from that product too (the second item; empty without it).

    Each figure equals the one :func:`paired_comparison` (and :func:`bootstrap_mean_intervals` for ``also``)
    gives alone: each row is summed on its own, and a sum of whole numbers is exact in any order. The
    differences always are whole numbers; give ``also`` rows of whole numbers (100 × correct) for the same.
    """
    paired = [_paired(first, second) for first, second in pairs]
    rows = [diff for _, _, diff in paired]
    extra = [] if also is None else list(np.asarray(also, dtype=float))
    intervals = bootstrap_mean_intervals(np.stack(extra + rows), resamples=resamples) if extra or rows else []
    found = [_comparison(first, second, diff, ci) for (first, second, diff), ci in zip(paired, intervals[len(extra):])]
    return found, intervals[:len(extra)]


def _paired(first_correct: np.ndarray, second_correct: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Both outcome arrays as booleans, and their per-unit difference in percentage points."""
    first = np.asarray(first_correct, dtype=bool)
    second = np.asarray(second_correct, dtype=bool)
    if first.shape != second.shape or first.ndim != 1:
        raise ValueError("both outcome arrays need one entry per unit")
    return first, second, 100.0 * (second.astype(float) - first.astype(float))


def _comparison(first: np.ndarray, second: np.ndarray, diff: np.ndarray, ci: Interval) -> PairedComparison:
    return PairedComparison(
        n=int(first.size),
        first_acc=percent(first),
        second_acc=percent(second),
        delta=float(diff.mean()),
        ci=ci,
        mcnemar=mcnemar_exact(first, second),
    )
