"""Agreement of two annotators on yes/no labels: raw agreement, Cohen's κ, Gwet's AC1, the 2×2 table.

With a the items both label yes, d both no, b first yes only, c second yes
only, n = a + b + c + d, p_o = (a + d)/n the observed agreement, r and s the
two annotators' yes shares:

- Cohen's κ (Cohen 1960) = (p_o − p_e) / (1 − p_e), p_e = r s + (1 − r)(1 − s);
  undefined (0/0) when both annotators give every item one and the same label.
- Gwet's AC1 (Gwet 2008, Br J Math Stat Psychol 61:29-48, written out for two
  raters and two categories) = (p_o − e) / (1 − e), e = 2 π (1 − π), π = (r + s)/2;
  e ≤ 1/2, so AC1 is always defined, and it does not collapse when one label
  dominates as κ does (Wongpakaran et al. 2013, BMC Med Res Methodol 13:61).

Both are computed from integer counts, multiplied through by n² (2n² for
AC1) so that the only rounding is the final division.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cfkit.plural import plural
from cfkit.stats.answers import as_flags
from cfkit.stats.bootstrap import LEVEL, N_RESAMPLES, SEED, Interval, Resamples, sum_statistic_intervals


@dataclass(frozen=True)
class AgreementTable:
    """Two annotators' yes/no labels cross-tabulated: rows the first annotator, columns the second."""

    yes_yes: int
    yes_no: int
    no_yes: int
    no_no: int

    @property
    def n(self) -> int:
        return self.yes_yes + self.yes_no + self.no_yes + self.no_no

    def as_list(self) -> list[list[int]]:
        """``[[yes/yes, yes/no], [no/yes, no/no]]`` (first annotator's label first)."""
        return [[self.yes_yes, self.yes_no], [self.no_yes, self.no_no]]


@dataclass(frozen=True)
class Agreement:
    """Agreement of two annotators on one yes/no criterion.

    ``raw`` is in percent; ``kappa`` and ``ac1`` are coefficients in [−1, 1].
    ``kappa`` is None when undefined, with the reason in ``kappa_undefined``.
    """

    n: int
    raw: float
    kappa: float | None
    kappa_ci: Interval | None
    ac1: float
    ac1_ci: Interval
    table: AgreementTable
    kappa_undefined: str | None = None


def agreement_table(first: Sequence[bool] | np.ndarray, second: Sequence[bool] | np.ndarray) -> AgreementTable:
    """Cross-tabulate two annotators' labels of the same items (True = yes)."""
    a, b = _labels(first, second)
    return AgreementTable(int((a & b).sum()), int((a & ~b).sum()), int((~a & b).sum()), int((~a & ~b).sum()))


def _labels(first: Sequence[bool] | np.ndarray, second: Sequence[bool] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = as_flags(first, "first")
    b = as_flags(second, "second")
    if a.shape != b.shape:
        raise ValueError(f"first has {plural(a.size, 'label')} but second has {b.size}; give one per item from each annotator")
    if a.size == 0:
        raise ValueError("agreement needs at least one item labelled by both annotators")
    return a, b


def _kappa(yy: np.ndarray, yn: np.ndarray, ny: np.ndarray, nn: np.ndarray) -> np.ndarray:
    """κ from table counts (arrays allowed), NaN where undefined."""
    n = yy + yn + ny + nn
    first_yes, second_yes = yy + yn, yy + ny
    chance = first_yes * second_yes + (n - first_yes) * (n - second_yes)  # n² p_e
    denominator = n * n - chance
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, (n * (yy + nn) - chance) / denominator, np.nan)


def _ac1(yy: np.ndarray, yn: np.ndarray, ny: np.ndarray, nn: np.ndarray) -> np.ndarray:
    """Gwet's AC1 from table counts (arrays allowed)."""
    n = yy + yn + ny + nn
    yes_labels = 2 * yy + yn + ny  # both annotators' yes labels: 2n π
    chance = yes_labels * (2 * n - yes_labels)  # 2n² e
    return (2 * n * (yy + nn) - chance) / (2 * n * n - chance)


def cohen_kappa(table: AgreementTable) -> float | None:
    """Cohen's κ of a 2×2 table, or None when both annotators used one and the same label throughout."""
    value = float(_kappa(*(np.float64(v) for v in _cells(table))))
    return None if np.isnan(value) else value


def gwet_ac1(table: AgreementTable) -> float:
    """Gwet's AC1 of a 2×2 table (always defined)."""
    return float(_ac1(*(np.float64(v) for v in _cells(table))))


def _cells(table: AgreementTable) -> tuple[int, int, int, int]:
    return table.yes_yes, table.yes_no, table.no_yes, table.no_no


def agreement(
    first: Sequence[bool] | np.ndarray,
    second: Sequence[bool] | np.ndarray,
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int | None = SEED,
    level: float = LEVEL,
    resamples: Resamples | None = None,
    raters: str = "both annotators",
) -> Agreement:
    """Raw agreement, κ and AC1 of two annotators' labels of the same items, with bootstrap intervals.

    ``first[i]`` and ``second[i]`` are the two annotators' yes (True) / no
    (False) labels of item i; leave out items either has not labelled. The
    intervals are percentile bootstraps over items, both labels of an item
    kept together; resamples in which κ is undefined (a single label
    throughout) are left out and counted in ``Interval.undefined``. ``raters``
    names the two where ``kappa_undefined`` says why (e.g. "the judge and
    Annotator 1 both").
    """
    a, b = _labels(first, second)
    table = agreement_table(a, b)
    kappa = cohen_kappa(table)
    if resamples is None:
        resamples = Resamples(a.size, n_resamples=n_resamples, seed=seed)
    columns = np.stack([a & b, a & ~b, ~a & b, ~a & ~b]).astype(float)
    kappa_ci, ac1_ci = sum_statistic_intervals(
        columns, lambda sums: np.stack([_kappa(*sums), _ac1(*sums)]), resamples, level=level)
    assert ac1_ci is not None  # AC1 is defined in every resample
    reason = None
    if kappa is None:
        label = "yes" if table.yes_yes else "no"
        items = "the one item" if table.n == 1 else f"all {plural(table.n, 'item')}"
        reason = f"{raters} labelled {items} '{label}': chance agreement is 1, so κ is 0/0; AC1 stays defined"
        kappa_ci = None
    return Agreement(
        n=table.n,
        raw=100.0 * (table.yes_yes + table.no_no) / table.n,
        kappa=kappa,
        kappa_ci=kappa_ci,
        ac1=gwet_ac1(table),
        ac1_ci=ac1_ci,
        table=table,
        kappa_undefined=reason,
    )
