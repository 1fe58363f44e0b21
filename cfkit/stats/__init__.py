"""Every metric and test cfkit reports, as pure functions over arrays.

Inputs are per-unit arrays (one entry per case, pair or audited item);
outputs are small frozen result objects. Percentages are in percent units
(0..100) at full precision; rounding is for display only. Definitions follow
docs/metrics.md, which restate the AesCanvas supplement
(arXiv 2608.26713, Section S2.3.3, equations S17-S22).

Modules, one concept each (every public name is re-exported here):

    bootstrap       Interval, Resamples, bootstrap_indices, bootstrap_mean_intervals,
                    percentile_intervals, sum_statistic_intervals
    answers         correct_mask
    contextcanvas   ContextCanvasScores, contextcanvas_scores, f1_score,
                    ContextCanvasIntervals, contextcanvas_intervals
    counterfactual  CounterfactualScores, counterfactual_scores (NCU)
    comparison      McNemarResult, mcnemar_exact, mcnemar_p, bonferroni,
                    PairedComparison, paired_comparison, paired_comparisons
    agreement       Agreement, AgreementTable, agreement, agreement_table,
                    cohen_kappa, gwet_ac1
    grounding       EgaScores, ega_scores, unsupported_rate (Table S8)
    position        SwapScores, swap_scores (option-order bias)

Bootstrap rules everywhere: percentile intervals, B = 10,000 resamples,
seed 0, units resampled whole (paired). Build one ``Resamples`` per list of
units and pass it to every statistic over them.
"""

from cfkit.stats.agreement import Agreement, AgreementTable, agreement, agreement_table, cohen_kappa, gwet_ac1
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
    paired_comparisons,
)
from cfkit.stats.contextcanvas import (
    ContextCanvasIntervals,
    ContextCanvasScores,
    contextcanvas_intervals,
    contextcanvas_scores,
    f1_score,
)
from cfkit.stats.counterfactual import CounterfactualScores, counterfactual_scores
from cfkit.stats.grounding import EgaScores, ega_scores, unsupported_rate
from cfkit.stats.position import SwapScores, swap_scores

__all__ = [
    "LEVEL", "N_RESAMPLES", "SEED",
    "Agreement", "AgreementTable", "ContextCanvasIntervals", "ContextCanvasScores", "CounterfactualScores",
    "EgaScores", "Interval", "McNemarResult", "PairedComparison", "Resamples", "SwapScores",
    "agreement", "agreement_table", "bonferroni", "bootstrap_indices", "bootstrap_mean_intervals", "cohen_kappa",
    "contextcanvas_intervals", "contextcanvas_scores", "correct_mask", "counterfactual_scores", "ega_scores",
    "f1_score", "gwet_ac1", "mcnemar_exact", "mcnemar_p", "paired_comparison", "paired_comparisons", "percentile_intervals",
    "sum_statistic_intervals", "swap_scores", "unsupported_rate",
]
