"""Inter-annotator agreement (issue 14 item 4): κ against scikit-learn and a hand formula, AC1 against a
published worked example and a hand formula, intervals against a plain loop over the same resamples.

Tolerances: κ and AC1 to 1e-12 (both are one division of exact counts); the
published figures to their printed three decimals.
"""

from __future__ import annotations

import numpy as np
import pytest

from cfkit import stats


def labels_from_table(yes_yes: int, yes_no: int, no_yes: int, no_no: int) -> tuple[list[bool], list[bool]]:
    first = [True] * (yes_yes + yes_no) + [False] * (no_yes + no_no)
    second = [True] * yes_yes + [False] * yes_no + [True] * no_yes + [False] * no_no
    return first, second


def kappa_by_hand(first, second) -> float:
    """Cohen (1960): (p_o − p_e) / (1 − p_e), p_e from the two annotators' marginal shares."""
    n = len(first)
    p_o = sum(a == b for a, b in zip(first, second)) / n
    r, s = sum(first) / n, sum(second) / n
    p_e = r * s + (1 - r) * (1 - s)
    return (p_o - p_e) / (1 - p_e)


def ac1_by_hand(first, second) -> float:
    """Gwet (2008), two raters and two categories: e = 2π(1 − π), π = mean yes share of the two raters."""
    n = len(first)
    p_o = sum(a == b for a, b in zip(first, second)) / n
    pi = (sum(first) + sum(second)) / (2 * n)
    e = 2 * pi * (1 - pi)
    return (p_o - e) / (1 - e)


TABLES = [(40, 9, 6, 45), (80, 10, 5, 5), (3, 1, 2, 13), (0, 5, 5, 0), (50, 0, 0, 50), (1, 0, 0, 99), (7, 3, 0, 1)]


@pytest.mark.parametrize("table", TABLES)
def test_kappa_and_ac1_match_the_hand_formulas(table):
    first, second = labels_from_table(*table)
    result = stats.agreement(first, second, n_resamples=200)
    assert result.table == stats.AgreementTable(*table)
    assert result.table.as_list() == [[table[0], table[1]], [table[2], table[3]]]
    assert result.n == sum(table)
    assert result.raw == pytest.approx(100 * (table[0] + table[3]) / sum(table), abs=1e-12)
    assert result.kappa == pytest.approx(kappa_by_hand(first, second), abs=1e-12)
    assert result.ac1 == pytest.approx(ac1_by_hand(first, second), abs=1e-12)
    assert result.kappa_undefined is None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kappa_matches_scikit_learn(seed):
    metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn is not installed")
    rng = np.random.default_rng(seed)
    first = rng.random(100) < 0.3
    second = np.where(rng.random(100) < 0.8, first, ~first)
    want = metrics.cohen_kappa_score(first, second)
    assert stats.agreement(first, second, n_resamples=100).kappa == pytest.approx(want, abs=1e-12)
    assert stats.cohen_kappa(stats.agreement_table(first, second)) == pytest.approx(want, abs=1e-12)


def test_ac1_reproduces_wongpakaran_2013():
    # Wongpakaran N, Wongpakaran T, Wedding D, Gwet KL (2013), BMC Med Res Methodol 13:61: their worked 2×2
    # example (Schizoid PD, two raters, 19 subjects): both yes 3, first only 1, second only 2, both no 13.
    # Printed: κ = .565 and AC1 = .752. The exact AC1 is 0.75271 (p_o = 16/19, e = 2 · 9/38 · 29/38), so the
    # printed figure is truncated rather than rounded; κ reproduces to three decimals, which confirms the
    # orientation of the cells.
    first, second = labels_from_table(3, 1, 2, 13)
    result = stats.agreement(first, second, n_resamples=100)
    assert round(result.kappa, 3) == 0.565
    assert abs(result.ac1 - 0.752) < 0.001
    assert result.ac1 == pytest.approx((16 / 19 - 2 * 9 / 38 * 29 / 38) / (1 - 2 * 9 / 38 * 29 / 38), abs=1e-12)
    assert result.raw == pytest.approx(100 * 16 / 19)


def test_ac1_stays_high_where_kappa_collapses():
    # One label dominates: 98 % raw agreement, κ near 0 (the kappa paradox), AC1 near 0.98.
    first, second = labels_from_table(98, 1, 1, 0)
    result = stats.agreement(first, second, n_resamples=100)
    assert result.kappa == pytest.approx(kappa_by_hand(first, second), abs=1e-12) and abs(result.kappa) < 0.02
    assert result.ac1 > 0.97


@pytest.mark.parametrize("label", [True, False])
def test_a_single_label_throughout_leaves_kappa_undefined_and_ac1_defined(label):
    result = stats.agreement([label] * 12, [label] * 12, n_resamples=100)
    assert result.kappa is None and result.kappa_ci is None
    assert "chance agreement is 1" in result.kappa_undefined and ("'yes'" if label else "'no'") in result.kappa_undefined
    assert result.ac1 == 1.0 and result.raw == 100.0
    assert (result.ac1_ci.low, result.ac1_ci.high) == (1.0, 1.0)


def test_intervals_equal_a_plain_loop_over_the_same_resamples():
    # 14 items, only three with a 'yes': about (11/14)^14 ≈ 3 % of resamples hold no 'yes' at all.
    first, second = labels_from_table(2, 0, 1, 11)
    result = stats.agreement(first, second, n_resamples=3000, seed=5)
    kappas, ac1s = [], []
    for row in stats.bootstrap_indices(14, n_resamples=3000, seed=5):
        a, b = [bool(first[i]) for i in row], [bool(second[i]) for i in row]
        n, agree = len(a), sum(x == y for x, y in zip(a, b))
        r, s = sum(a), sum(b)
        chance = r * s + (n - r) * (n - s)  # n² p_e, in integers
        kappas.append(float("nan") if chance == n * n else (n * agree - chance) / (n * n - chance))
        ac1s.append(ac1_by_hand(a, b))
    tail = 100.0 * (1 - 0.95) / 2
    kappas = np.array(kappas)
    undefined = int(np.isnan(kappas).sum())
    assert undefined > 0  # some resamples hold only 'no' labels: they are left out and counted
    want_kappa = np.percentile(kappas[~np.isnan(kappas)], [tail, 100 - tail])
    want_ac1 = np.percentile(ac1s, [tail, 100 - tail])
    assert (result.kappa_ci.low, result.kappa_ci.high) == pytest.approx(tuple(want_kappa), abs=1e-12)
    assert result.kappa_ci.undefined == undefined
    assert (result.ac1_ci.low, result.ac1_ci.high) == pytest.approx(tuple(want_ac1), abs=1e-12)
    assert result.ac1_ci.undefined == 0


def test_labels_must_be_yes_or_no_and_paired():
    with pytest.raises(ValueError, match=r"first\[1\] is None"):
        stats.agreement([True, None], [True, False])
    with pytest.raises(ValueError, match="one per item"):
        stats.agreement([True, False], [True])
    with pytest.raises(ValueError, match="at least one item"):
        stats.agreement([], [])
    # 0/1 integers are accepted as labels.
    assert stats.agreement([1, 0, 1], [1, 0, 0], n_resamples=50).table == stats.AgreementTable(1, 1, 0, 1)


def test_the_reason_kappa_is_undefined_names_the_raters_given_and_one_item_in_the_singular():
    assert stats.agreement([True] * 12, [True] * 12, n_resamples=10).kappa_undefined.startswith(
        "both annotators labelled all 12 items 'yes'")
    one = stats.agreement([False], [False], n_resamples=10, raters="the judge and Annotator 2 both")
    assert one.kappa_undefined.startswith("the judge and Annotator 2 both labelled the one item 'no': ")
