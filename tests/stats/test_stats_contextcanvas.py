"""ContextCanvas intervals (issue 18 item 3) against a plain loop over the same resamples, scipy and scikit-learn.

The loop recomputes every resample's confusion counts case by case in plain
Python, by the rule of docs/metrics.md (a null answer is a false negative of its gold
class and a false positive of neither). Its per-resample figures come from the
same integer counts through the same IEEE operations, so the intervals must be
equal to the last bit; scipy.stats.bootstrap handed ``default_rng(seed)`` draws
the same resamples, and must agree to 1e-12.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from cfkit import stats

LEVEL_TAIL = 100.0 * (1 - 0.95) / 2


def make_cases(n_binary: int, n_three: int, seed: int):
    """Binary cases (Yes = A, No = B) with some null answers, then three-option cases (gold C)."""
    rng = np.random.default_rng(seed)
    gold = [str(g) for g in rng.choice(["A", "B"], size=n_binary, p=[0.4, 0.6])] + ["C"] * n_three
    predicted: list[str | None] = []
    for g in gold[:n_binary]:
        u = rng.random()
        predicted.append(None if u < 0.1 else (g if u < 0.7 else ("B" if g == "A" else "A")))
    predicted += [str(a) for a in rng.choice(["A", "B", "C"], size=n_three)]
    yes = ["A"] * n_binary + [None] * n_three
    no = ["B"] * n_binary + [None] * n_three
    return predicted, gold, yes, no


def loop_figures(predicted, gold, yes, no, drawn) -> tuple[float, float, float, float, float]:
    """Accuracy, Macro-F1, Yes-F1, No-F1, Yes rate of the cases ``drawn``, by hand."""
    right = binary = said_yes = 0
    confusion = {"yes": [0, 0, 0], "no": [0, 0, 0]}  # tp, fp, fn
    for i in drawn:
        p, g = predicted[i], gold[i]
        right += p is not None and p == g
        if yes[i] is None:
            continue
        binary += 1
        said_yes += p == yes[i]
        for name, option in (("yes", yes[i]), ("no", no[i])):
            if p == option and g == option:
                confusion[name][0] += 1
            elif p == option:
                confusion[name][1] += 1  # a null answer never lands here: it is no class's false positive
            elif g == option:
                confusion[name][2] += 1
    f1 = {}
    for name, (tp, fp, fn) in confusion.items():
        f1[name] = 0.0 if 2 * tp + fp + fn == 0 else 100.0 * 2 * tp / (2 * tp + fp + fn)
    yes_rate = 100.0 * said_yes / binary if binary else float("nan")
    return 100.0 * right / len(drawn), (f1["yes"] + f1["no"]) / 2, f1["yes"], f1["no"], yes_rate


def loop_intervals(predicted, gold, yes, no, *, n_resamples: int, seed: int):
    indices = stats.bootstrap_indices(len(gold), n_resamples=n_resamples, seed=seed)
    figures = np.array([loop_figures(predicted, gold, yes, no, row) for row in indices]).T
    out = []
    for row in figures:
        defined = row[~np.isnan(row)]
        out.append((tuple(np.percentile(defined, [LEVEL_TAIL, 100 - LEVEL_TAIL])), int(np.isnan(row).sum())))
    return out


def interval_list(result: stats.ContextCanvasIntervals):
    return [result.accuracy_ci, result.macro_f1_ci, result.yes_f1_ci, result.no_f1_ci, result.yes_rate_ci]


@pytest.mark.parametrize("n_binary,n_three,seed", [(50, 5, 0), (29, 3, 1), (120, 0, 2)])
def test_intervals_equal_a_plain_loop_over_the_same_resamples(n_binary, n_three, seed):
    predicted, gold, yes, no = make_cases(n_binary, n_three, seed)
    result = stats.contextcanvas_intervals(predicted, gold, yes, no, n_resamples=2000, seed=seed)
    expected = loop_intervals(predicted, gold, yes, no, n_resamples=2000, seed=seed)
    for ci, ((low, high), undefined) in zip(interval_list(result), expected):
        assert (ci.low, ci.high, ci.undefined) == (low, high, undefined)
        assert (ci.n_resamples, ci.seed) == (2000, seed)
    # The point figures are the existing ones, and each lies inside its interval here.
    assert result.scores == stats.contextcanvas_scores(predicted, gold, yes, no)
    points = [result.scores.accuracy, result.scores.macro_f1, result.scores.yes_f1, result.scores.no_f1,
              result.scores.yes_rate]
    assert all(ci.low <= value <= ci.high for ci, value in zip(interval_list(result), points))


def test_accuracy_interval_is_the_mean_bootstrap_of_the_outcomes():
    predicted, gold, yes, no = make_cases(80, 6, 3)
    resamples = stats.Resamples(len(gold))
    result = stats.contextcanvas_intervals(predicted, gold, yes, no, resamples=resamples)
    correct = 100.0 * stats.correct_mask(predicted, gold)
    assert result.accuracy_ci == stats.bootstrap_mean_intervals(correct[None, :], resamples=resamples)[0]


def test_macro_f1_interval_equals_scipy_bootstrap_on_the_same_resamples():
    predicted, gold, yes, no = make_cases(70, 4, 5)
    code = {None: 0, "A": 1, "B": 2, "C": 3}
    p = np.array([code[a] for a in predicted], dtype=float)
    g = np.array([code[a] for a in gold], dtype=float)
    binary = np.array([y is not None for y in yes], dtype=float)

    def macro_f1(p, g, binary, axis=-1):
        f1s = []
        for cls in (1, 2):  # A = Yes, B = No, on two-option cases only
            tp = np.sum((p == cls) & (g == cls) & (binary == 1), axis=axis)
            fp = np.sum((p == cls) & (g != cls) & (binary == 1), axis=axis)
            fn = np.sum((p != cls) & (g == cls) & (binary == 1), axis=axis)
            f1s.append(np.where(2 * tp + fp + fn > 0, 200.0 * tp / np.maximum(2 * tp + fp + fn, 1), 0.0))
        return (f1s[0] + f1s[1]) / 2

    res = scipy.stats.bootstrap((p, g, binary), macro_f1, paired=True, vectorized=True, n_resamples=3000,
                                method="percentile", rng=np.random.default_rng(11))
    ours = stats.contextcanvas_intervals(predicted, gold, yes, no, n_resamples=3000, seed=11).macro_f1_ci
    assert ours.low == pytest.approx(res.confidence_interval.low, abs=1e-12)
    assert ours.high == pytest.approx(res.confidence_interval.high, abs=1e-12)


def test_point_macro_f1_matches_scikit_learn_with_nulls_as_nobodys_false_positive():
    sklearn_metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn is not installed")
    predicted, gold, yes, no = make_cases(90, 0, 6)
    # With labels restricted to A and B, a null (written "none") counts against its gold class only.
    y_pred = ["none" if a is None else a for a in predicted]
    want = sklearn_metrics.f1_score(gold, y_pred, labels=["A", "B"], average="macro", zero_division=0)
    got = stats.contextcanvas_intervals(predicted, gold, yes, no, n_resamples=10).scores.macro_f1
    assert got == pytest.approx(100 * want, abs=1e-12)


def test_resamples_without_a_two_option_case_are_counted_not_hidden():
    # One two-option case among three: a resample misses it with probability (2/3)^3.
    predicted, gold, yes, no = ["A", "C", "B"], ["A", "C", "C"], ["A", None, None], ["B", None, None]
    result = stats.contextcanvas_intervals(predicted, gold, yes, no, n_resamples=5000, seed=2)
    indices = stats.bootstrap_indices(3, n_resamples=5000, seed=2)
    without_binary = int(sum(0 not in row for row in indices))
    assert result.yes_rate_ci.undefined == without_binary > 0
    assert result.accuracy_ci.undefined == 0 and result.macro_f1_ci.undefined == 0


def test_no_two_option_case_leaves_class_intervals_empty():
    result = stats.contextcanvas_intervals(["C", "A"], ["C", "B"], [None, None], [None, None], n_resamples=100)
    assert result.scores.n_binary == 0
    assert (result.macro_f1_ci, result.yes_f1_ci, result.no_f1_ci, result.yes_rate_ci) == (None,) * 4
    assert result.accuracy_ci is not None


def test_one_resamples_pairs_models_on_the_same_cases():
    predicted, gold, yes, no = make_cases(40, 2, 9)
    resamples = stats.Resamples(len(gold), n_resamples=3000, seed=4)
    shared = stats.contextcanvas_intervals(predicted, gold, yes, no, resamples=resamples)
    drawn = stats.contextcanvas_intervals(predicted, gold, yes, no, n_resamples=3000, seed=4)
    assert shared == drawn
    with pytest.raises(ValueError, match="drawn over 41"):
        stats.contextcanvas_intervals(predicted, gold, yes, no, resamples=stats.Resamples(41))


def test_object_arrays_are_read_as_the_lists_they_hold():
    """A report hands the gold, Yes and No columns over once as read-only object arrays for every model; the
    figures are those of the same values as lists, and the invalid answers are the null ones."""
    predicted, gold, yes, no = make_cases(40, 9, seed=3)

    from cfkit.stats.answers import read_only_answers as frozen

    resamples = stats.Resamples(len(gold), n_resamples=200, seed=1)
    as_lists = stats.contextcanvas_intervals(predicted, gold, yes, no, resamples=resamples)
    as_arrays = stats.contextcanvas_intervals(frozen(predicted), frozen(gold), frozen(yes), frozen(no),
                                              resamples=resamples)
    assert as_arrays == as_lists
    assert as_lists.scores == stats.contextcanvas_scores(predicted, gold, yes, no)
    assert as_lists.scores.invalid == sum(p is None for p in predicted) > 0
    assert as_lists.scores.n_binary == 40
    assert not frozen(gold).flags.writeable and list(frozen(gold)) == gold
