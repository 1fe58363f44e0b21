"""The resample-count bootstrap (issue 17 item 6) against the gathering implementation it replaces and scipy.

Tolerances: for integer-valued per-unit values (0/100 outcomes, ±100 pair
scores and differences — every statistic cfkit reports) the intervals must be
equal to the last bit (``==``), since every partial sum is an exact integer in
float64; for arbitrary real values, equal to 1e-12 relative. scipy.stats.bootstrap
draws its resamples with ``rng.integers(0, n, (B, n))``, so handed
``default_rng(seed)`` it uses the very same resamples and must agree exactly too.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.stats

from cfkit import stats


def gathered_intervals(values: np.ndarray, *, n_resamples: int, seed: int, level: float = 0.95):
    """The implementation before the count formulation, kept verbatim as the reference."""
    values = np.asarray(values, dtype=float)
    indices = np.random.default_rng(seed).integers(0, values.shape[1], size=(n_resamples, values.shape[1]))
    means = values[:, indices].mean(axis=2)
    tail = 100.0 * (1 - level) / 2
    lows, highs = np.percentile(means, [tail, 100.0 - tail], axis=1)
    return [(float(lo), float(hi)) for lo, hi in zip(lows, highs)]


def bounds(intervals):
    return [(ci.low, ci.high) for ci in intervals]


def outcome_rows(rng: np.random.Generator, k: int, n: int) -> np.ndarray:
    """k conditions' right/wrong outcomes on n cases, in percent units, with different accuracies."""
    return 100.0 * (rng.random((k, n)) < rng.uniform(0.1, 0.9, size=(k, 1)))


CASES = [(1, 0, 2000), (2, 1, 2000), (36, 0, 10_000), (100, 0, 10_000), (100, 12345, 3000), (301, 0, 10_000),
         (517, 7, 2500)]


@pytest.mark.parametrize("n,seed,n_resamples", CASES)
def test_counts_are_the_resamples_of_bootstrap_indices(n, seed, n_resamples):
    indices = stats.bootstrap_indices(n, n_resamples=n_resamples, seed=seed)
    expected = np.stack([np.bincount(row, minlength=n) for row in indices[:200]])
    # Default blocks; tiny blocks; and blocks redrawn from the seed at every use instead of kept.
    for resamples in (stats.Resamples(n, n_resamples=n_resamples, seed=seed),
                      stats.Resamples(n, n_resamples=n_resamples, seed=seed, block_cells=97),
                      stats.Resamples(n, n_resamples=n_resamples, seed=seed, block_cells=5000, keep_cells=0)):
        counts = np.concatenate(list(resamples.count_blocks()))
        assert counts.shape == (n_resamples, n)
        assert np.array_equal(counts[:200], expected)
        assert np.array_equal(counts.sum(axis=1), np.full(n_resamples, n))


@pytest.mark.parametrize("n,seed,n_resamples", CASES)
def test_intervals_equal_the_gathering_implementation_to_the_last_bit(n, seed, n_resamples):
    rng = np.random.default_rng(n + seed)
    accuracy = outcome_rows(rng, 4, n)  # four modality conditions
    deltas = np.stack([accuracy[b] - accuracy[a] for a, b in [(0, 1), (1, 2), (2, 3), (1, 3)]])
    pair_scores = 100.0 * rng.integers(-1, 2, size=(1, n))  # NCU's per-pair +1 / 0 / −1
    values = np.concatenate([accuracy, deltas, pair_scores])
    expected = gathered_intervals(values, n_resamples=n_resamples, seed=seed)
    shared = stats.Resamples(n, n_resamples=n_resamples, seed=seed)
    streamed = stats.Resamples(n, n_resamples=n_resamples, seed=seed, block_cells=1000, keep_cells=0)
    indices = stats.bootstrap_indices(n, n_resamples=n_resamples, seed=seed)
    assert bounds(stats.bootstrap_mean_intervals(values, resamples=shared)) == expected
    assert bounds(stats.bootstrap_mean_intervals(values, resamples=streamed)) == expected
    assert bounds(stats.bootstrap_mean_intervals(values, n_resamples=n_resamples, seed=seed)) == expected
    assert bounds(stats.bootstrap_mean_intervals(values, indices=indices, seed=seed)) == expected
    # Row by row, as the report computes each delta, gives the same bits.
    for row, want in zip(values, expected):
        assert bounds(stats.bootstrap_mean_intervals(row[None, :], resamples=shared)) == [want]


def test_public_statistics_keep_their_intervals_bit_for_bit():
    rng = np.random.default_rng(3)
    for n in (36, 100, 301):
        first = rng.random(n) < 0.3
        second = rng.random(n) < 0.6
        diff = 100.0 * (second.astype(float) - first)
        want = gathered_intervals(diff[None, :], n_resamples=10_000, seed=0)[0]
        resamples = stats.Resamples(n)
        for ci in (stats.paired_comparison(first, second).ci,
                   stats.paired_comparison(first, second, resamples=resamples).ci,
                   stats.paired_comparison(first, second, indices=stats.bootstrap_indices(n)).ci):
            assert (ci.low, ci.high) == want
        original = np.where(rng.random(n) < 0.5, "A", "B").tolist()
        edit = np.where(rng.random(n) < 0.5, "A", "B").tolist()
        scores = stats.counterfactual_scores(original, edit, ["B"] * n, ["A"] * n, resamples=resamples)
        ncu_row = 100.0 * (((np.array(original) == "B") & (np.array(edit) == "A")).astype(float)
                           - ((np.array(original) == "A") & (np.array(edit) == "B")))
        assert (scores.ncu_ci.low, scores.ncu_ci.high) == gathered_intervals(ncu_row[None, :], n_resamples=10_000,
                                                                               seed=0)[0]


@pytest.mark.parametrize("n,seed", [(36, 0), (100, 4), (301, 0)])
def test_intervals_equal_scipy_bootstrap_on_the_same_resamples(n, seed):
    rng = np.random.default_rng(seed + 99)
    first, second = outcome_rows(rng, 2, n)
    resamples = stats.Resamples(n, seed=seed)
    kwargs = dict(n_resamples=10_000, method="percentile", vectorized=True)
    accuracy = scipy.stats.bootstrap((first,), np.mean, rng=np.random.default_rng(seed), **kwargs)
    delta = scipy.stats.bootstrap((first, second), lambda a, b, axis=-1: np.mean(b - a, axis=axis), paired=True,
                                  rng=np.random.default_rng(seed), **kwargs)
    ours = stats.bootstrap_mean_intervals(np.stack([first, second - first]), resamples=resamples)
    assert (ours[0].low, ours[0].high) == (accuracy.confidence_interval.low, accuracy.confidence_interval.high)
    assert (ours[1].low, ours[1].high) == (delta.confidence_interval.low, delta.confidence_interval.high)


def test_real_valued_data_agree_to_rounding():
    rng = np.random.default_rng(8)
    values = rng.normal(size=(3, 77))
    want = gathered_intervals(values, n_resamples=4000, seed=2)
    got = bounds(stats.bootstrap_mean_intervals(values, n_resamples=4000, seed=2))
    assert np.allclose(got, want, rtol=1e-12, atol=0)


def test_seedless_resamples_replay_the_same_draws_at_every_use():
    resamples = stats.Resamples(50, n_resamples=3000, seed=None, block_cells=4000, keep_cells=0)
    values = outcome_rows(np.random.default_rng(1), 2, 50)
    assert np.array_equal(resamples.sums(values), resamples.sums(values))
    assert stats.bootstrap_mean_intervals(values, resamples=resamples)[0].seed is None


def test_memory_stays_bounded_for_many_units():
    # 2,000 units × 10,000 resamples: the index matrix alone would take 160 MB and the gathered values 320 MB;
    # drawn and counted in blocks of 2**20 cells, the peak is a few blocks' worth (about 36 MiB here).
    values = outcome_rows(np.random.default_rng(2), 2, 2000)
    tracemalloc.start()
    try:
        intervals = stats.bootstrap_mean_intervals(values, resamples=stats.Resamples(2000))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 48 * 2 ** 20, f"peak {peak / 2 ** 20:.0f} MiB"
    assert all(ci.low <= row.mean() <= ci.high for ci, row in zip(intervals, values))


def test_undefined_resamples_are_left_out_and_counted():
    distribution = np.array([[1.0, 2.0, np.nan, 4.0, 5.0], [np.nan] * 5, [3.0] * 5])
    defined, empty, constant = stats.percentile_intervals(distribution, seed=4)
    # (to 1e-12: the tail is computed as 100 × (1 − 0.95) / 2, one rounding away from 2.5)
    assert (defined.low, defined.high) == pytest.approx(np.percentile([1.0, 2.0, 4.0, 5.0], [2.5, 97.5]), abs=1e-12)
    assert (defined.undefined, defined.n_resamples, defined.seed) == (1, 5, 4)
    assert empty is None
    assert (constant.low, constant.high, constant.undefined) == (3.0, 3.0, 0)


def test_bad_bootstrap_inputs_raise_clear_errors():
    values = np.zeros((1, 5))
    with pytest.raises(ValueError, match="not both"):
        stats.bootstrap_mean_intervals(values, indices=stats.bootstrap_indices(5), resamples=stats.Resamples(5))
    with pytest.raises(ValueError, match="drawn over 6"):
        stats.bootstrap_mean_intervals(values, resamples=stats.Resamples(6))
    with pytest.raises(ValueError, match="NaN"):
        stats.bootstrap_mean_intervals(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError, match="level"):
        stats.bootstrap_mean_intervals(values, level=95)
    with pytest.raises(ValueError, match="at least one unit"):
        stats.Resamples(0)


@pytest.mark.parametrize("n, seed, p_right", [(1204, 0, 0.6), (37, 5, 0.5), (300, 2, 0.99), (50, 1, 0.0)])
def test_several_comparisons_from_one_product_equal_each_alone_bit_for_bit(n, seed, p_right):
    """The modality section takes its four deltas and four condition means from one product; every figure must be
    what the comparison alone (and scipy's binomial test for McNemar's p) gives."""
    rng = np.random.default_rng(seed)
    correct = [rng.random(n) < p_right for _ in range(4)]
    pairs = [(correct[0], correct[1]), (correct[1], correct[2]), (correct[2], correct[3]), (correct[1], correct[3])]
    means = 100.0 * np.stack(correct).astype(float)
    resamples = stats.Resamples(n, n_resamples=500, seed=seed)
    together, intervals = stats.paired_comparisons(pairs, resamples, also=means)
    alone = [stats.paired_comparison(first, second, resamples=resamples) for first, second in pairs]
    assert together == alone
    assert intervals == stats.bootstrap_mean_intervals(means, resamples=resamples)
    for comparison in together:
        b, c = comparison.mcnemar.b, comparison.mcnemar.c
        expected = 1.0 if b + c == 0 else scipy.stats.binomtest(min(b, c), b + c, 0.5).pvalue
        assert comparison.mcnemar.p_value == pytest.approx(expected, rel=1e-12)
    assert stats.paired_comparisons([], resamples) == ([], [])


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 39, 40, 41, 999, 1000, 1001, 10_000])
def test_row_percentiles_equal_numpys_to_the_bit(n):
    """The intervals' percentiles are numpy.percentile's default (linear) ones, bit for bit, at every level and
    size, for values with ties, integers and fractions alike."""
    from cfkit.stats.bootstrap import row_percentiles

    rng = np.random.default_rng(n)
    for rows in (rng.random((5, n)) * 100, rng.integers(0, 4, (5, n)).astype(float),
                 rng.integers(-999, 999, (5, n)) / 7.0, np.round(rng.normal(50, 20, (5, n)), 2)):
        for level in (0.5, 0.9, 0.95, 0.99, 0.999, 0.123):
            tail = 100.0 * (1 - level) / 2
            expected = np.percentile(rows, [tail, 100.0 - tail], axis=1)
            assert row_percentiles(rows, [tail, 100.0 - tail]).tobytes() == expected.tobytes()


@pytest.mark.parametrize("n, largest", [(1, 1), (37, 100), (1204, 100), (4000, 4000), (5000, 4000)])
def test_sums_of_whole_numbers_equal_float64_products_to_the_bit(n, largest):
    """Whole-number columns whose sums stay under 2**24 are summed in float32 (exact there); the sums equal the
    float64 count-matrix product to the bit, below the limit and past it (which stays in float64), with negative
    values too; fractions stay in float64."""
    rng = np.random.default_rng(n)
    resamples = stats.Resamples(n, n_resamples=300, seed=2, block_cells=5000)
    counts = np.concatenate(list(resamples.count_blocks()))
    whole = rng.integers(-largest, largest + 1, (4, n)).astype(float)
    for values in (whole, np.abs(whole), (whole > 0) * 100.0, np.full((2, n), largest + 1.0)):
        expected = (counts @ values.T).T
        assert resamples.sums(values).tobytes() == expected.tobytes()
        assert resamples.sums(values).dtype == np.float64
    fractions = whole / 7.0  # float64 products, which agree to rounding in any order of summing
    assert np.allclose(resamples.sums(fractions), (counts @ fractions.T).T, rtol=1e-13, atol=1e-9)
    drawn = stats.Resamples(n, n_resamples=300, seed=2, block_cells=5000, keep_cells=0)  # blocks drawn again
    assert drawn.sums(whole).tobytes() == resamples.sums(whole).tobytes()
