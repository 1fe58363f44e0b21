"""Every metric and test cfkit reports, as pure functions over arrays.

Inputs are per-unit arrays (one entry per case, pair or audited item);
outputs are small frozen result objects. Percentages are in percent units
(0..100) at full precision; rounding is for display only. Definitions follow
DESIGN.md's "Metric definitions", which restate the AesCanvas supplement
(arXiv 2608.26713, Section S2.3.3, equations S17-S22).

Modules, one concept each (every public name is re-exported here):

    bootstrap       Interval, Resamples, bootstrap_indices, bootstrap_mean_intervals,
                    percentile_intervals, sum_statistic_intervals
    answers         correct_mask
    contextcanvas   ContextCanvasScores, contextcanvas_scores, f1_score,
                    ContextCanvasIntervals, contextcanvas_intervals
    counterfactual  CounterfactualScores, counterfactual_scores (NCU)
    comparison      McNemarResult, mcnemar_exact, mcnemar_p, bonferroni,
                    PairedComparison, paired_comparison

Bootstrap rules everywhere: percentile intervals, B = 10,000 resamples,
seed 0, units resampled whole (paired). Build one ``Resamples`` per list of
units and pass it to every statistic over them.
"""

from cfkit.stats.answers import correct_mask
from cfkit.stats.bootstrap import (
    LEVEL,
    N_RESAMPLES,
    SEED,
    Interval,
    Resamples,
    bootstrap_indices,
    bootstrap_mean_intervals,
    percentile_intervals,
    sum_statistic_intervals,
)
from cfkit.stats.comparison import (
    McNemarResult,
    PairedComparison,
    bonferroni,
    mcnemar_exact,
    mcnemar_p,
    paired_comparison,
)
from cfkit.stats.contextcanvas import (
    ContextCanvasIntervals,
    ContextCanvasScores,
    contextcanvas_intervals,
    contextcanvas_scores,
    f1_score,
)
from cfkit.stats.counterfactual import CounterfactualScores, counterfactual_scores

__all__ = [
    "LEVEL", "N_RESAMPLES", "SEED",
    "ContextCanvasIntervals", "ContextCanvasScores", "CounterfactualScores", "Interval", "McNemarResult",
    "PairedComparison", "Resamples",
    "bonferroni", "bootstrap_indices", "bootstrap_mean_intervals", "contextcanvas_intervals", "contextcanvas_scores",
    "correct_mask", "counterfactual_scores", "f1_score", "mcnemar_exact", "mcnemar_p", "paired_comparison",
    "percentile_intervals", "sum_statistic_intervals",
]
