"""Every metric and test cfkit reports, as pure functions over arrays.

Inputs are per-unit arrays (one entry per case or per pair); outputs are small
frozen result objects. Percentages are in percent units (0..100) at full
precision; rounding is for display only. Definitions follow DESIGN.md's
"Metric definitions", which restate the AesCanvas supplement (arXiv
2608.26713, Section S2.3.3, equations S17-S22).

Results
    ContextCanvasScores   accuracy, per-class F1, Macro-F1, Yes rate
    CounterfactualScores  orig/edit/pair accuracy, directional counts, NCU
    Interval              a percentile bootstrap interval
    McNemarResult         discordant counts and the exact two-sided p-value
    PairedComparison      two conditions (or models) on the same units
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Bootstrap defaults of DESIGN.md: B = 10,000 resamples, seed 0, 95 % level.
N_RESAMPLES = 10_000
SEED = 0
LEVEL = 0.95


# ── result objects ─────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Interval:
    """A two-sided percentile bootstrap interval, in the statistic's units."""

    low: float
    high: float
    level: float = LEVEL
    n_resamples: int = N_RESAMPLES
    seed: int | None = SEED
    method: str = "paired percentile bootstrap"

    def as_list(self) -> list[float]:
        return [self.low, self.high]


@dataclass(frozen=True)
class McNemarResult:
    """Exact McNemar test: ``b`` units right only in the first condition, ``c`` only in the second."""

    b: int
    c: int
    p_value: float
    method: str = "exact two-sided binomial test of min(b, c) of b + c at 0.5"


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
class CounterfactualScores:
    """Counterfactual-pair figures of one model (Table S7), accuracies and NCU in percent."""

    n_pairs: int
    orig_acc: float
    edit_acc: float
    pair_acc: float
    correct: int
    reverse: int
    stuck_original: int
    stuck_edit: int
    invalid: int
    ncu: float
    ncu_ci: Interval


@dataclass(frozen=True)
class PairedComparison:
    """Accuracy of a first and a second condition (or model) on the same units, and their difference."""

    n: int
    first_acc: float
    second_acc: float
    delta: float  # second − first, percentage points
    ci: Interval
    mcnemar: McNemarResult


# ── ContextCanvas ──────────────────────────────────────────────────────────


def _as_answers(values: Sequence[str | None] | np.ndarray) -> np.ndarray:
    return np.asarray(list(values), dtype=object)


def correct_mask(predicted: Sequence[str | None], gold: Sequence[str | None]) -> np.ndarray:
    """True where the predicted option id equals the gold id; a null answer is never correct."""
    pred = _as_answers(predicted)
    ref = _as_answers(gold)
    if pred.shape != ref.shape:
        raise ValueError(f"predicted has {pred.shape[0]} entries but gold has {ref.shape[0]}; give one per unit")
    return np.array([p is not None and p == g for p, g in zip(pred, ref)], dtype=bool)


def f1_score(tp: int, fp: int, fn: int) -> float:
    """F1 = 2TP / (2TP + FP + FN), in percent; 0 when the class never occurs nor is predicted.

    The harmonic mean of precision TP/(TP+FP) and recall TP/(TP+FN), as in the
    AesCanvas supplement eq. S18 (and scikit-learn with ``zero_division=0``).
    """
    denominator = 2 * tp + fp + fn
    return 0.0 if denominator == 0 else 100.0 * 2 * tp / denominator


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
    positive of neither (DESIGN.md).
    """
    pred = _as_answers(predicted)
    ref = _as_answers(gold)
    yes = _as_answers(yes_option)
    no = _as_answers(no_option)
    if not (pred.shape == ref.shape == yes.shape == no.shape):
        raise ValueError("predicted, gold, yes_option and no_option need one entry per case")
    correct = correct_mask(pred, ref)
    binary = np.array([y is not None for y in yes], dtype=bool)
    said_yes = binary & (pred == yes)
    said_no = binary & (pred == no)
    gold_yes = binary & (ref == yes)
    gold_no = binary & (ref == no)
    yes_f1 = f1_score(int((said_yes & gold_yes).sum()), int((said_yes & ~gold_yes).sum()),
                      int((gold_yes & ~said_yes).sum()))
    no_f1 = f1_score(int((said_no & gold_no).sum()), int((said_no & ~gold_no).sum()),
                     int((gold_no & ~said_no).sum()))
    n_binary = int(binary.sum())
    return ContextCanvasScores(
        n=int(pred.size),
        n_binary=n_binary,
        accuracy=_percent(correct),
        macro_f1=(yes_f1 + no_f1) / 2,
        yes_f1=yes_f1,
        no_f1=no_f1,
        yes_rate=100.0 * said_yes.sum() / n_binary if n_binary else 0.0,
        gold_yes_rate=100.0 * gold_yes.sum() / n_binary if n_binary else 0.0,
        invalid=int(sum(p is None for p in pred)),
    )


def _percent(mask: np.ndarray) -> float:
    return 100.0 * float(mask.mean()) if mask.size else 0.0


# ── counterfactual pairs ───────────────────────────────────────────────────


def counterfactual_scores(
    original: Sequence[str | None],
    edit: Sequence[str | None],
    original_gold: Sequence[str],
    edit_gold: Sequence[str],
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int | None = SEED,
) -> CounterfactualScores:
    """Table S7's figures over P pairs: accuracies, directional counts and NCU with its interval.

    Per pair, with o / e the answers on the original / edit and go / ge their golds:
    ``correct`` o = go and e = ge; ``reverse`` o = ge and e = go; ``stuck_original``
    o = e = go; ``stuck_edit`` o = e = ge; ``invalid`` any other pattern (a null or a
    third option on either side). NCU = 100 × (correct − reverse) / P (supplement
    eq. S22); its interval is the percentile bootstrap of the per-pair score
    +1 / −1 / 0 (Efron & Tibshirani 1993, ch. 13), pairs resampled whole.
    """
    o, e = _as_answers(original), _as_answers(edit)
    go, ge = _as_answers(original_gold), _as_answers(edit_gold)
    if not (o.shape == e.shape == go.shape == ge.shape):
        raise ValueError("original, edit and both gold sequences need one entry per pair")
    n = int(o.size)
    if n == 0:
        raise ValueError("counterfactual scores need at least one pair")
    orig_ok = correct_mask(o, go)
    edit_ok = correct_mask(e, ge)
    said_go_on_edit = correct_mask(e, go)
    said_ge_on_orig = correct_mask(o, ge)
    correct = orig_ok & edit_ok
    reverse = said_ge_on_orig & said_go_on_edit
    stuck_original = orig_ok & said_go_on_edit
    stuck_edit = said_ge_on_orig & edit_ok
    invalid = ~(correct | reverse | stuck_original | stuck_edit)
    score = correct.astype(float) - reverse.astype(float)
    return CounterfactualScores(
        n_pairs=n,
        orig_acc=_percent(orig_ok),
        edit_acc=_percent(edit_ok),
        pair_acc=_percent(correct),
        correct=int(correct.sum()),
        reverse=int(reverse.sum()),
        stuck_original=int(stuck_original.sum()),
        stuck_edit=int(stuck_edit.sum()),
        invalid=int(invalid.sum()),
        ncu=100.0 * float(score.mean()),
        ncu_ci=bootstrap_mean_intervals(100.0 * score[None, :], n_resamples=n_resamples, seed=seed)[0],
    )


# ── bootstrap ──────────────────────────────────────────────────────────────


def bootstrap_indices(n: int, *, n_resamples: int = N_RESAMPLES, seed: int | None = SEED) -> np.ndarray:
    """``(n_resamples, n)`` unit indices drawn with replacement by ``numpy.random.default_rng(seed)``."""
    if n < 1:
        raise ValueError("the bootstrap needs at least one unit")
    if n_resamples < 1:
        raise ValueError(f"n_resamples is {n_resamples}; give a positive number (default {N_RESAMPLES})")
    return np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))


def bootstrap_mean_intervals(
    values: np.ndarray,
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int | None = SEED,
    level: float = LEVEL,
    indices: np.ndarray | None = None,
) -> list[Interval]:
    """Percentile bootstrap intervals of the mean of each row of ``values`` (shape ``(k, n)``).

    Every row is resampled with the same unit indices, so statistics of one
    unit stay together (the paired bootstrap). The interval is the
    ((1 − level)/2, (1 + level)/2) percentiles of the resampled means, linearly
    interpolated (Efron & Tibshirani 1993, section 13.3; numpy.percentile).
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"values must be 2-D (statistics × units), got shape {values.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level is {level}; give a fraction between 0 and 1, e.g. 0.95")
    if indices is None:
        indices = bootstrap_indices(values.shape[1], n_resamples=n_resamples, seed=seed)
    means = values[:, indices].mean(axis=2)  # (k, B)
    tail = 100.0 * (1 - level) / 2
    lows, highs = np.percentile(means, [tail, 100.0 - tail], axis=1)
    return [Interval(float(lo), float(hi), level, indices.shape[0], seed) for lo, hi in zip(lows, highs)]


# ── tests ──────────────────────────────────────────────────────────────────


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
    from scipy.stats import binomtest  # scipy.stats is slow to import; only tests need it

    return float(min(1.0, binomtest(min(b, c), b + c, 0.5, alternative="two-sided").pvalue))


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
) -> PairedComparison:
    """Accuracy change from a first to a second condition on the same units, with interval and McNemar test.

    The interval is the paired percentile bootstrap of mean(second − first) in
    percentage points; p is the exact McNemar test (not yet adjusted).
    """
    first = np.asarray(first_correct, dtype=bool)
    second = np.asarray(second_correct, dtype=bool)
    if first.shape != second.shape or first.ndim != 1:
        raise ValueError("both outcome arrays need one entry per unit")
    diff = 100.0 * (second.astype(float) - first.astype(float))
    ci = bootstrap_mean_intervals(diff[None, :], n_resamples=n_resamples, seed=seed, indices=indices)[0]
    return PairedComparison(
        n=int(first.size),
        first_acc=_percent(first),
        second_acc=_percent(second),
        delta=float(diff.mean()),
        ci=ci,
        mcnemar=mcnemar_exact(first, second),
    )
