"""cfkit.stats against the paper's published tables and independent computations.

Published figures: AesCanvas, arXiv 2608.26713 — Table 2 (main text), Tables S7,
S9 and S10 (supplement pp. 25, 27, 28). Printed figures have two decimals, so
"exact" means equal after rounding to two decimals (p-values: four).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from cfkit import stats
from support.paper_tables import TABLE_2, TABLE_S10, TABLE_S7, TABLE_S9

GRID_36 = 100 / 36  # one step of a 36-pair percentage
GRID_301 = 100 / 301


def table2_arrays(tp_yes: int, fp_yes: int, three_correct: int, nulls: tuple[int, int] = (0, 0)):
    """301 cases (A = Yes, B = No; three-option gold C) answered with the given counts."""
    null_yes, null_no = nulls
    gold = ["A"] * 111 + ["B"] * 180 + ["C"] * 10
    yes = ["A"] * 291 + [None] * 10
    no = ["B"] * 291 + [None] * 10
    fn_yes = 111 - tp_yes - null_yes
    tn_no = 180 - fp_yes - null_no
    predicted = (["A"] * tp_yes + ["B"] * fn_yes + [None] * null_yes
                 + ["A"] * fp_yes + ["B"] * tn_no + [None] * null_no
                 + ["C"] * three_correct + ["A"] * (10 - three_correct))
    return predicted, gold, yes, no


@pytest.mark.parametrize("model,acc,macro_f1,yes_rate,tp_yes,fp_yes,three", TABLE_2, ids=[r[0] for r in TABLE_2])
def test_table_2_rows_reproduced(model, acc, macro_f1, yes_rate, tp_yes, fp_yes, three):
    scores = stats.contextcanvas_scores(*table2_arrays(tp_yes, fp_yes, three))
    assert (scores.n, scores.n_binary) == (301, 291)
    assert round(scores.gold_yes_rate, 2) == 38.14
    assert round(scores.accuracy, 2) == acc
    assert round(scores.macro_f1, 2) == macro_f1
    assert round(scores.yes_rate, 2) == yes_rate


def test_per_class_f1_against_hand_count():
    # Claude Opus 5: Yes: TP 87, FP 1, FN 24 → 174/199; No: TP 179, FP 24, FN 1 → 358/383 (docs/metrics.md's rule).
    scores = stats.contextcanvas_scores(*table2_arrays(87, 1, 10))
    assert scores.yes_f1 == pytest.approx(100 * 174 / 199, abs=1e-12)
    assert scores.no_f1 == pytest.approx(100 * 358 / 383, abs=1e-12)
    assert round(scores.yes_f1, 2) == 87.44 and round(scores.no_f1, 2) == 93.47


def test_null_answer_is_false_negative_of_gold_class_only():
    # Two gold Yes, two gold No; one Yes case unanswered.
    scores = stats.contextcanvas_scores([None, "A", "B", "B"], ["A", "A", "B", "B"], ["A"] * 4, ["B"] * 4)
    # Yes: TP 1, FP 0, FN 1 → 2/3. No: TP 2, FP 0 (the null is not a No), FN 0 → 1.
    assert scores.yes_f1 == pytest.approx(100 * 2 / 3)
    assert scores.no_f1 == pytest.approx(100.0)
    assert scores.yes_rate == pytest.approx(25.0)  # the null stays in the denominator
    assert scores.accuracy == pytest.approx(75.0)
    assert scores.invalid == 1


def test_null_answers_keep_table_2_figures_for_alternative_solution():
    # Qwen3-VL-Instruct also matches with 3 null Yes answers and 1 null No answer (TP 34, FP 96, 10 three-option).
    scores = stats.contextcanvas_scores(*table2_arrays(34, 96, 10, nulls=(3, 1)))
    assert (round(scores.accuracy, 2), round(scores.macro_f1, 2), round(scores.yes_rate, 2)) == (42.19, 38.74, 44.67)
    assert scores.invalid == 4


def s7_answers(orig, edit, correct, reverse):
    stuck_original = round(orig * 36 / 100) - correct
    stuck_edit = round(edit * 36 / 100) - correct
    assert correct + reverse + stuck_original + stuck_edit == 36
    # Original gold No = B, edit gold Yes = A.
    original = ["B"] * correct + ["A"] * reverse + ["B"] * stuck_original + ["A"] * stuck_edit
    edited = ["A"] * correct + ["B"] * reverse + ["B"] * stuck_original + ["A"] * stuck_edit
    return original, edited, stuck_original, stuck_edit


@pytest.mark.parametrize("row", TABLE_S7, ids=[r[0] for r in TABLE_S7])
def test_table_s7_rows_reproduced(row):
    model, orig, edit, pair, correct, reverse, ncu, (low, high) = row
    original, edited, stuck_original, stuck_edit = s7_answers(orig, edit, correct, reverse)
    scores = stats.counterfactual_scores(original, edited, ["B"] * 36, ["A"] * 36)
    assert scores.n_pairs == 36
    assert (round(scores.orig_acc, 2), round(scores.edit_acc, 2), round(scores.pair_acc, 2)) == (orig, edit, pair)
    assert (scores.correct, scores.reverse) == (correct, reverse)
    assert (scores.stuck_original, scores.stuck_edit, scores.invalid) == (stuck_original, stuck_edit, 0)
    assert round(scores.ncu, 2) == ncu
    # The acceptance bound is one grid step; with seed 0 these constructions in fact land on the printed values.
    assert abs(scores.ncu_ci.low - low) <= GRID_36 and abs(scores.ncu_ci.high - high) <= GRID_36
    assert scores.ncu_ci.n_resamples == 10_000 and scores.ncu_ci.seed == 0


def test_artimuse_yes_count_matches_the_text():
    # Supplement p. 26: ArtiMuse "predicts Yes for 64 of the 72 original/edit images".
    original, edited, *_ = s7_answers(19.44, 97.22, 6, 0)
    assert (original + edited).count("A") == 64


def test_invalid_pairs_are_neither_update_nor_stuck():
    scores = stats.counterfactual_scores(["B", None, "B", "C"], ["A", "A", None, "A"], ["B"] * 4, ["A"] * 4)
    assert (scores.correct, scores.reverse, scores.stuck_original, scores.stuck_edit, scores.invalid) == (1, 0, 0, 0, 3)
    assert scores.ncu == pytest.approx(25.0)
    assert scores.orig_acc == pytest.approx(50.0) and scores.edit_acc == pytest.approx(75.0)


def test_table_s10_p_values_and_bonferroni():
    p_values = [stats.mcnemar_p(b, c) for *_, b, c, _, _, _ in TABLE_S10]
    adjusted = stats.bonferroni(p_values)
    for row, p, p_adj in zip(TABLE_S10, p_values, adjusted):
        assert round(p, 4) == row[-2], row[0]
        assert round(p_adj, 4) == row[-1], row[0]


@pytest.mark.parametrize("row", TABLE_S10, ids=[r[1] for r in TABLE_S10])
def test_table_s10_paired_comparison(row):
    _, _, base_acc, spec_acc, delta, b, c, (low, high), p, _ = row
    both = round(base_acc * 301 / 100) - b
    first = np.zeros(301, bool)
    second = np.zeros(301, bool)
    first[:b] = True
    second[b:b + c] = True
    first[b + c:b + c + both] = second[b + c:b + c + both] = True
    result = stats.paired_comparison(first, second)
    assert (round(result.first_acc, 2), round(result.second_acc, 2), round(result.delta, 2)) == (base_acc, spec_acc, delta)
    assert (result.mcnemar.b, result.mcnemar.c) == (b, c)
    assert round(result.mcnemar.p_value, 4) == p
    # Interval: within one grid step (100/301) of the printed one, plus the 0.005 of the printed rounding.
    # (Three rows land on the printed interval; ArtiMuse's upper end is 0.66 against the printed 0.33.)
    tolerance = GRID_301 + 0.005
    assert abs(result.ci.low - low) <= tolerance and abs(result.ci.high - high) <= tolerance


def exact_mcnemar_by_hand(b: int, c: int) -> float:
    """Two-sided exact binomial p at 0.5 by direct summation (independent of scipy)."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


@pytest.mark.parametrize("b,c", [(0, 0), (0, 1), (1, 0), (3, 35), (35, 3), (5, 5), (12, 11), (0, 32), (40, 60), (7, 0)])
def test_mcnemar_matches_direct_summation(b, c):
    assert stats.mcnemar_p(b, c) == pytest.approx(exact_mcnemar_by_hand(b, c), rel=1e-12, abs=1e-300)


def test_mcnemar_counts_discordant_units():
    first = np.array([1, 1, 0, 0, 1, 0], bool)
    second = np.array([1, 0, 1, 1, 0, 0], bool)
    result = stats.mcnemar_exact(first, second)
    assert (result.b, result.c) == (2, 2)
    assert result.p_value == 1.0


def test_bonferroni_caps_at_one():
    assert stats.bonferroni([0.01, 0.3, 0.6]) == pytest.approx([0.03, 0.9, 1.0])
    assert stats.bonferroni([]) == []


# ── Table S9 ───────────────────────────────────────────────────────────────


@pytest.mark.parametrize("row", TABLE_S9, ids=[r[0] for r in TABLE_S9])
def test_table_s9_accuracies(row):
    _, *counts = row
    gold = ["A"] * 100
    for count in counts:
        predicted = ["A"] * count + ["B"] * (100 - count)
        assert stats.correct_mask(predicted, gold).mean() * 100 == pytest.approx(count)


def test_text_to_neutral_p_below_1e7_when_updates_are_one_directional():
    # The text reports p < 1e-7 for text → neutral; with GPT-5.2's +32 points and b = 0 discordant losses:
    assert stats.mcnemar_p(0, 32) < 1e-7
    # b + c must be at least 25 for an exact two-sided p below 1e-7 to be possible at all (2 × 0.5^25).
    assert stats.mcnemar_p(0, 24) > 1e-7 > stats.mcnemar_p(0, 25)


# ── bootstrap ──────────────────────────────────────────────────────────────


def test_bootstrap_matches_a_loop_over_resamples():
    values = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0]) * 100
    interval = stats.bootstrap_mean_intervals(values[None, :], n_resamples=2000, seed=7)[0]
    rng = np.random.default_rng(7)
    draws = rng.integers(0, values.size, size=(2000, values.size))
    means = [values[row].mean() for row in draws]
    assert interval.low == pytest.approx(np.percentile(means, 2.5))
    assert interval.high == pytest.approx(np.percentile(means, 97.5))


def test_bootstrap_is_seeded_and_paired():
    rng = np.random.default_rng(1)
    a = rng.random(50) < 0.5
    b = rng.random(50) < 0.7
    one = stats.paired_comparison(a, b, seed=0)
    two = stats.paired_comparison(a, b, seed=0)
    other = stats.paired_comparison(a, b, seed=1)
    assert one.ci == two.ci
    assert one.ci != other.ci
    # Identical outcomes differ by exactly zero in every resample.
    same = stats.paired_comparison(a, a)
    assert (same.ci.low, same.ci.high, same.delta) == (0.0, 0.0, 0.0)


def test_interval_of_a_constant_is_that_constant():
    interval = stats.bootstrap_mean_intervals(np.full((1, 20), 42.0))[0]
    assert (interval.low, interval.high) == (42.0, 42.0)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="one per unit"):
        stats.correct_mask(["A"], ["A", "B"])
    with pytest.raises(ValueError, match="n_resamples"):
        stats.bootstrap_indices(5, n_resamples=0)
    with pytest.raises(ValueError, match="at least one pair"):
        stats.counterfactual_scores([], [], [], [])
    with pytest.raises(ValueError, match="non-negative"):
        stats.mcnemar_p(-1, 3)


def test_mcnemar_equals_scipy_binomtest_up_to_study_sized_counts():
    scipy_stats = pytest.importorskip("scipy.stats")
    pairs = [(b, c) for b in (0, 1, 2, 9, 50, 301) for c in (0, 1, 3, 10, 49, 300, 1204)] + [(600, 604), (1204, 0)]
    for b, c in pairs:
        expected = 1.0 if b + c == 0 else scipy_stats.binomtest(min(b, c), b + c, 0.5).pvalue
        assert stats.mcnemar_p(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-300), (b, c)
