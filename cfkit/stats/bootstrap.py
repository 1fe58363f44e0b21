"""The paired percentile bootstrap over units, computed from resample counts.

A bootstrap resample of n units is a row of n unit indices drawn with
replacement. cfkit draws B such rows with
``numpy.random.default_rng(seed).integers(0, n, size=(B, n))`` — the same call,
and so the same resamples, as ``scipy.stats.bootstrap`` makes when handed that
generator. Every statistic cfkit bootstraps is a function of sums over units
(a mean, a rate, an F1 from confusion counts, κ from a 2×2 table), and a
resample is fully described by how often it draws each unit: its row of the
count matrix C (B × n); a row divided by n is Efron & Tibshirani's "resampling
vector" P* (An Introduction to the Bootstrap, 1993). The resampled sums of k per-unit
columns X (k × n) are then one matrix product C Xᵀ, shared by every statistic
of a section, instead of gathering B × n values once per statistic.

Exactness. When the per-unit values are integers (0/100 outcomes, ±100 pair
scores, 0/1 indicators) every partial sum of the product is an integer far
below 2**53, so the product is exact in float64 whatever order BLAS adds in, and the
intervals equal, bit for bit, those of averaging gathered values. Other values
agree to floating-point rounding.

Memory. Resamples are drawn and counted ``BLOCK_CELLS`` cells (resamples ×
units) at a time; up to ``KEEP_CELLS`` cells the count matrix is kept for
reuse, beyond that each use redraws the blocks from the seed (the generator's
stream does not depend on the block size), so memory stays bounded for any
number of units.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import cast

import numpy as np

from cfkit.plural import plural

#: Bootstrap defaults of docs/metrics.md: B = 10,000 resamples, seed 0, 95 % level.
N_RESAMPLES = 10_000
SEED = 0
LEVEL = 0.95
#: Resamples are drawn and counted this many cells (resamples × units) at a time.
BLOCK_CELLS = 1 << 20
#: Up to this many cells (32 MiB of float64 counts) the count matrix is kept and shared.
KEEP_CELLS = 1 << 22
#: Products are split to at most this many multiply-adds, the size up to which OpenBLAS stays on one
#: thread (M·N·K ≤ 65536 × GEMM_MULTITHREAD_THRESHOLD 4, interface/gemm.c): on a busy machine its threads
#: wait on each other and a 1 ms product takes 10 ms.
PRODUCT_CELLS = 1 << 18
#: Whole numbers up to this size are held exactly by float32 (its 24-bit significand).
_EXACT32 = 1 << 24


@dataclass(frozen=True)
class Interval:
    """A two-sided percentile bootstrap interval, in the statistic's units.

    ``undefined`` counts the resamples in which the statistic had no value
    (e.g. κ of a resample holding one label only); they are left out of the
    percentiles and said here, never silently.
    """

    low: float
    high: float
    level: float = LEVEL
    n_resamples: int = N_RESAMPLES
    seed: int | None = SEED
    method: str = "paired percentile bootstrap"
    undefined: int = 0

    def as_list(self) -> list[float]:
        return [self.low, self.high]


def _check_sizes(n: int, n_resamples: int) -> None:
    if n < 1:
        raise ValueError("the bootstrap needs at least one unit")
    if n_resamples < 1:
        raise ValueError(f"n_resamples is {n_resamples}; give a positive number (default {N_RESAMPLES})")


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level is {level}; give a fraction between 0 and 1, e.g. 0.95")


def bootstrap_indices(n: int, *, n_resamples: int = N_RESAMPLES, seed: int | None = SEED) -> np.ndarray:
    """``(n_resamples, n)`` unit indices drawn with replacement by ``numpy.random.default_rng(seed)``."""
    _check_sizes(n, n_resamples)
    return np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))


def _unit_counts(drawn: np.ndarray, n: int) -> np.ndarray:
    """Count matrix of a block of drawn index rows: cell (r, j) = draws of unit j in resample r."""
    rows = drawn.shape[0]
    # Offsetting row r by r·n makes every draw a cell of one flat array; a block has under 2**31
    # cells, so int32 offsets suffice, and adding straight into float64 (numpy's fast add.at path)
    # is about twice as fast as bincount and a conversion.
    cells = drawn + (np.arange(rows, dtype=drawn.dtype) * n)[:, None]
    counts = np.zeros(rows * n)
    np.add.at(counts, cells.ravel(), 1.0)
    return counts.reshape(rows, n)


class Resamples:
    """B bootstrap resamples of n units, held as how often each resample draws each unit.

    The resamples are those of ``bootstrap_indices(n, n_resamples=…, seed=…)``.
    Build one per list of units and pass it to every statistic over those units
    (all conditions, all models answering the same cases in the same order):
    that keeps them paired and pays for the drawing once. With ``seed=None`` the
    generator's entropy is fixed at construction, so repeated uses agree.
    """

    __slots__ = ("n", "n_resamples", "seed", "_seed_sequence", "_block_rows", "_kept", "_kept32")

    def __init__(self, n: int, *, n_resamples: int = N_RESAMPLES, seed: int | None = SEED,
                 block_cells: int = BLOCK_CELLS, keep_cells: int = KEEP_CELLS) -> None:
        _check_sizes(n, n_resamples)
        if not 1 <= block_cells <= 1 << 30:  # counting indexes a block's cells with int32
            raise ValueError(f"block_cells is {block_cells}; give 1 to 2**30 (default {BLOCK_CELLS})")
        self.n = n
        self.n_resamples = n_resamples
        self.seed = seed
        # default_rng(seed) seeds PCG64 through SeedSequence(seed): the same stream, replayable for seed=None.
        self._seed_sequence = np.random.SeedSequence(seed)
        self._block_rows = max(1, block_cells // n)
        self._kept = self._kept32 = None
        if n * n_resamples <= keep_cells:
            self._kept = list(self._draw_blocks())
            for block in self._kept:  # shared by every statistic: nobody may change it
                block.flags.writeable = False

    def __repr__(self) -> str:
        return f"Resamples(n={self.n}, n_resamples={self.n_resamples}, seed={self.seed})"

    def _draw_blocks(self) -> Iterator[np.ndarray]:
        rng = np.random.default_rng(self._seed_sequence)
        # int32 draws give the same values as int64 ones for n < 2**31, at half the memory.
        dtype = np.int32 if self.n <= np.iinfo(np.int32).max else np.int64
        for start in range(0, self.n_resamples, self._block_rows):
            rows = min(self._block_rows, self.n_resamples - start)
            yield _unit_counts(rng.integers(0, self.n, size=(rows, self.n), dtype=dtype), self.n)

    def count_blocks(self) -> Iterator[np.ndarray]:
        """The count matrix, in consecutive blocks of resamples (float64, ``(rows, n)`` each)."""
        return iter(self._kept) if self._kept is not None else self._draw_blocks()

    def _count_blocks32(self) -> Iterator[np.ndarray]:
        """:meth:`count_blocks` in float32 (counts are at most n, exact in it), kept alike."""
        if self._kept is None:
            return (block.astype(np.float32) for block in self._draw_blocks())
        if self._kept32 is None:
            self._kept32 = [block.astype(np.float32) for block in self._kept]
            for block in self._kept32:
                block.flags.writeable = False
        return iter(self._kept32)

    def sums(self, values: np.ndarray) -> np.ndarray:
        """``(k, B)``: the sum of each row of ``values`` (``(k, n)``, one column per unit) in every resample.

        Whole numbers whose sums stay below 2**24 in size (n × the largest
        value: 0/100 outcomes over a few thousand units) are summed in float32,
        twice as fast: every product and partial sum is then a whole number
        float32 holds exactly, so the sums are the float64 ones to the bit.
        """
        values = _as_matrix(values)
        if values.shape[1] != self.n:
            raise ValueError(f"values have {plural(values.shape[1], 'unit')} but the resamples were drawn over {self.n}")
        exact32 = float(np.abs(values).max(initial=0.0)) * self.n < _EXACT32 and bool((np.trunc(values) == values).all())
        columns = np.ascontiguousarray(values.T, dtype=np.float32 if exact32 else float)
        blocks = self._count_blocks32() if exact32 else self.count_blocks()
        rows = max(1, PRODUCT_CELLS // (self.n * columns.shape[1]))
        found = np.concatenate([block[start:start + rows] @ columns for block in blocks
                                for start in range(0, block.shape[0], rows)], axis=0).T
        return found.astype(float) if exact32 else found

    def means(self, values: np.ndarray) -> np.ndarray:
        """``(k, B)``: the mean of each row of ``values`` in every resample."""
        return self.sums(values) / self.n


def _as_matrix(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"values must be 2-D (statistics × units), got shape {values.shape}")
    return values


def _gathered_means(values: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Means over a caller's index matrix by gathering, in row blocks.

    This is how cfkit averaged before the count product; for integer values it
    gives the same bits, and ``np.take`` is several times faster than the
    ``values[:, indices]`` it replaces.
    """
    indices = np.asarray(indices)
    if indices.ndim != 2:
        raise ValueError(f"indices must be 2-D (resamples × draws), got shape {indices.shape}")
    rows = max(1, BLOCK_CELLS // max(1, indices.shape[1] * values.shape[0]))
    means = np.empty((values.shape[0], indices.shape[0]))
    for start in range(0, indices.shape[0], rows):
        means[:, start:start + rows] = np.take(values, indices[start:start + rows], axis=1).mean(axis=2)
    return means


def percentile_intervals(distribution: np.ndarray, *, level: float = LEVEL,
                         seed: int | None = SEED) -> list[Interval | None]:
    """Percentile intervals of each row of a ``(k, B)`` bootstrap distribution.

    The ((1 − level)/2, (1 + level)/2) percentiles, linearly interpolated
    (Efron & Tibshirani 1993, section 13.3; numpy.percentile's default, as in
    scipy.stats.bootstrap(method='percentile')). NaN entries are resamples in
    which the statistic is undefined: left out and counted; a row with no
    defined resample gives None.
    """
    _check_level(level)
    distribution = np.asarray(distribution, dtype=float)
    tail = 100.0 * (1 - level) / 2
    percentiles = [tail, 100.0 - tail]
    n_resamples = distribution.shape[1]
    undefined = np.isnan(distribution).sum(axis=1)
    out: list[Interval | None] = [None] * distribution.shape[0]
    complete = np.flatnonzero(undefined == 0)
    if complete.size:  # one call for the usual case, as the rows never need filtering
        lows, highs = row_percentiles(distribution[complete], percentiles)
        for row, low, high in zip(complete, lows, highs):
            out[row] = Interval(float(low), float(high), level, n_resamples, seed)
    for row in np.flatnonzero((undefined > 0) & (undefined < n_resamples)):
        defined = distribution[row][~np.isnan(distribution[row])]
        low, high = row_percentiles(defined[None, :], percentiles)[:, 0]
        out[row] = Interval(float(low), float(high), level, n_resamples, seed, undefined=int(undefined[row]))
    return out


def row_percentiles(rows: np.ndarray, percentiles: list[float]) -> np.ndarray:
    """``numpy.percentile(rows, percentiles, axis=1)`` for rows without NaN, the same numbers to the bit.

    numpy's default ("linear", Hyndman & Fan's 7th definition): the order
    statistics on either side of the virtual index (n − 1)·q and their
    weighted mean, by the same float operations numpy uses. Done here
    without numpy's general path, which costs a report a fixed import
    (numpy.ma) and a per-call overhead several times the work.
    """
    n = rows.shape[1]
    virtual = (n - 1) * np.true_divide(np.asarray(percentiles, dtype=float), 100)
    below = np.floor(virtual)
    top = virtual >= n - 1  # the last value alone (every index of a single resample)
    before = np.where(top, -1, below).astype(np.intp)
    after = np.where(top, -1, below + 1).astype(np.intp)
    # The order statistics wanted (numpy.unique would import numpy.ma): each is what a full sort puts there.
    ordered = np.partition(rows, sorted({0, n - 1, *(int(i) % n for i in (*before, *after))}), axis=1)
    low, high = ordered[:, before].T, ordered[:, after].T  # (len(percentiles), k)
    weight = (virtual - before)[:, None]
    step = high - low
    # numpy's _lerp: low + step·w, and for w ≥ 0.5 high − step·(1 − w) instead.
    return np.where(weight >= 0.5, high - step * (1 - weight), low + step * weight)


def bootstrap_mean_intervals(
    values: np.ndarray,
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int | None = SEED,
    level: float = LEVEL,
    indices: np.ndarray | None = None,
    resamples: Resamples | None = None,
) -> list[Interval]:
    """Percentile bootstrap intervals of the mean of each row of ``values`` (shape ``(k, n)``).

    Every row is resampled with the same units, so statistics of one unit stay
    together (the paired bootstrap). Give ``resamples`` to share one set across
    calls (the fast path: one count-matrix product for all rows); ``indices``,
    an index matrix from ``bootstrap_indices``, is still accepted and averaged
    by gathering, as before. Otherwise resamples are drawn from ``seed``.
    """
    values = _as_matrix(values)
    _check_level(level)
    if not np.isfinite(values).all():
        raise ValueError("values contain NaN or infinity; give a finite value for every unit")
    if indices is not None and resamples is not None:
        raise ValueError("give either indices or resamples, not both")
    if indices is not None:
        means = _gathered_means(values, indices)
    else:
        if resamples is None:
            resamples = Resamples(values.shape[1], n_resamples=n_resamples, seed=seed)
        means = resamples.means(values)
        seed = resamples.seed
    # Finite values give finite means, so every row has an interval.
    return cast("list[Interval]", percentile_intervals(means, level=level, seed=seed))


def sum_statistic_intervals(
    columns: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    resamples: Resamples,
    *,
    level: float = LEVEL,
) -> list[Interval | None]:
    """Intervals of statistics that are functions of column sums over units.

    ``columns`` is ``(k, n)`` (one per-unit column per sum); ``statistic`` maps
    sums of shape ``(k, ...)`` to statistics of shape ``(m, ...)``, NaN where
    undefined; the point estimates to report beside the intervals are
    ``statistic(columns.sum(axis=1))``.
    """
    return percentile_intervals(np.asarray(statistic(resamples.sums(columns)), dtype=float),
                                level=level, seed=resamples.seed)


def rate(numerator: np.ndarray | float, denominator: np.ndarray | float) -> np.ndarray:
    """100 × numerator / denominator, NaN where the denominator is 0 (an undefined rate)."""
    numerator = np.asarray(numerator, dtype=float)
    denominator = np.asarray(denominator, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, 100.0 * numerator / denominator, np.nan)
