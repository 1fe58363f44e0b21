"""Position-bias (swap) metrics (issue 19 item 2): the baselines' known figures, McNemar against
scipy.stats.binomtest and a hand count, intervals against a plain loop over the same resamples.

The loop's per-resample figures come from the same integer counts through the same operations,
so its intervals must be equal to the last bit; p-values to 1e-12 relative.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from cfkit import stats

YES, NO = "Yes", "No"


def contextcanvas_like(n: int, seed: int):
    """n two-option cases as ContextCanvas lists them: Yes first, No second; gold 40 % Yes."""
    rng = np.random.default_rng(seed)
    gold = [YES if g else NO for g in rng.random(n) < 0.4]
    return [YES] * n, [NO] * n, gold, [YES] * n


def test_a_model_that_always_answers_the_first_listed_option():
    first, second, gold, yes = contextcanvas_like(40, 0)
    # Original order lists `first` first; the swapped order lists `second` first.
    result = stats.swap_scores(first, second, first, second, gold, yes, n_resamples=500)
    assert result.consistency == 0.0 and result.first_position_rate == 100.0
    assert (result.yes_rate_original, result.yes_rate_swapped) == (100.0, 0.0)
    gold_yes = 100.0 * gold.count(YES) / 40
    assert (result.accuracy_original, result.accuracy_swapped) == (gold_yes, 100.0 - gold_yes)
    assert (result.consistency_ci.low, result.consistency_ci.high) == (0.0, 0.0)
    assert (result.first_position_rate_ci.low, result.first_position_rate_ci.high) == (100.0, 100.0)


def test_a_model_that_always_answers_yes():
    first, second, gold, yes = contextcanvas_like(40, 1)
    result = stats.swap_scores(yes, yes, first, second, gold, yes, n_resamples=500)
    assert result.consistency == 100.0 and result.first_position_rate == 50.0
    assert (result.yes_rate_original, result.yes_rate_swapped) == (100.0, 100.0)
    assert result.accuracy_original == result.accuracy_swapped and result.accuracy_delta == 0.0
    assert (result.mcnemar.b, result.mcnemar.c, result.mcnemar.p_value) == (0, 0, 1.0)


def test_a_model_that_follows_content_is_consistent_and_position_blind():
    first, second, gold, yes = contextcanvas_like(50, 2)
    result = stats.swap_scores(gold, gold, first, second, gold, yes, n_resamples=500)
    assert (result.accuracy_original, result.accuracy_swapped, result.consistency) == (100.0, 100.0, 100.0)
    assert result.first_position_rate == 50.0


def random_model(n: int, seed: int):
    """Answers mixing content, position and nulls, over options with context-specific texts."""
    rng = np.random.default_rng(seed)
    first = [f"Suitable {i}" for i in range(n)]
    second = [f"Not suitable {i}" for i in range(n)]
    gold = [a if g else b for a, b, g in zip(first, second, rng.random(n) < 0.4)]
    def answer(listed_first, listed_second):
        u = rng.random(n)
        return [None if x < 0.08 else (f if x < 0.6 else s) for x, f, s in zip(u, listed_first, listed_second)]
    return answer(first, second), answer(second, first), first, second, gold, first


def test_mcnemar_between_the_orders_matches_binomtest_and_a_hand_count():
    original, swapped, first, second, gold, yes = random_model(120, 3)
    result = stats.swap_scores(original, swapped, first, second, gold, yes, n_resamples=200)
    right_o = [a == g for a, g in zip(original, gold)]
    right_s = [a == g for a, g in zip(swapped, gold)]
    b = sum(o and not s for o, s in zip(right_o, right_s))
    c = sum(s and not o for o, s in zip(right_o, right_s))
    assert (result.mcnemar.b, result.mcnemar.c) == (b, c)
    want = scipy.stats.binomtest(min(b, c), b + c, 0.5).pvalue
    assert result.mcnemar.p_value == pytest.approx(want, rel=1e-12)
    assert result.invalid_original == original.count(None) and result.invalid_swapped == swapped.count(None)


def test_intervals_equal_a_plain_loop_over_the_same_resamples():
    n = 60
    original, swapped, first, second, gold, yes = random_model(n, 4)
    result = stats.swap_scores(original, swapped, first, second, gold, yes, n_resamples=3000, seed=8)
    figures = []
    for row in stats.bootstrap_indices(n, n_resamples=3000, seed=8):
        right_o = sum(original[i] == gold[i] for i in row)
        right_s = sum(swapped[i] == gold[i] for i in row)
        same = sum(original[i] is not None and original[i] == swapped[i] for i in row)
        picks_first = sum((original[i] == first[i]) + (swapped[i] == second[i]) for i in row)
        yes_o = sum(original[i] == yes[i] for i in row)
        yes_s = sum(swapped[i] == yes[i] for i in row)
        figures.append([100.0 * right_o / n, 100.0 * right_s / n, 100.0 * (right_s - right_o) / n,
                        100.0 * same / n, 100.0 * picks_first / (2 * n), 100.0 * yes_o / n, 100.0 * yes_s / n])
    tail = 100.0 * (1 - 0.95) / 2
    expected = np.percentile(np.array(figures), [tail, 100 - tail], axis=0).T
    got = [result.accuracy_original_ci, result.accuracy_swapped_ci, result.accuracy_delta_ci, result.consistency_ci,
           result.first_position_rate_ci, result.yes_rate_original_ci, result.yes_rate_swapped_ci]
    for ci, (low, high) in zip(got, expected):
        assert (ci.low, ci.high) == (low, high)
        assert (ci.n_resamples, ci.seed, ci.undefined) == (3000, 8, 0)
    # Points: the same figures without resampling.
    point = [result.accuracy_original, result.accuracy_swapped, result.accuracy_delta, result.consistency,
             result.first_position_rate, result.yes_rate_original, result.yes_rate_swapped]
    assert all(ci.low <= value <= ci.high for ci, value in zip(got, point))


def test_null_answers_are_wrong_inconsistent_and_in_every_denominator():
    first, second, gold, yes = [YES] * 2, [NO] * 2, [YES, NO], [YES] * 2
    result = stats.swap_scores([None, NO], [None, NO], first, second, gold, yes, n_resamples=100)
    assert result.consistency == 50.0  # the null/null case is not consistent
    assert result.first_position_rate == 25.0  # one of four answers (No, listed first when swapped)
    assert (result.accuracy_original, result.yes_rate_original) == (50.0, 0.0)
    assert (result.invalid_original, result.invalid_swapped) == (1, 1)


def test_bad_inputs_raise_clear_errors():
    first, second, gold, yes = [YES], [NO], [YES], [YES]
    with pytest.raises(ValueError, match=r"original\[0\] is 'Maybe'"):
        stats.swap_scores(["Maybe"], [YES], first, second, gold, yes)
    with pytest.raises(ValueError, match="gold text 'Perhaps' is neither option"):
        stats.swap_scores([YES], [YES], first, second, ["Perhaps"], yes)
    with pytest.raises(ValueError, match="two distinct option texts"):
        stats.swap_scores([YES], [YES], first, [YES], gold, yes)
    with pytest.raises(ValueError, match="one entry per case"):
        stats.swap_scores([YES, NO], [YES], first, second, gold, yes)
    with pytest.raises(ValueError, match="at least one two-option case"):
        stats.swap_scores([], [], [], [], [], [])
