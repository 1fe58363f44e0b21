"""Bootstrap speed and memory: the resample-count product against the gathering it replaced (issue 17).

Old and new are timed in the same run and reported as ratios. "Gathering" is
the implementation cfkit had before: one index matrix per model, then for each
statistic the B × n resampled values gathered and averaged. "Counts" draws the
same resamples once per list of units (``stats.Resamples``) and gets every
statistic's resampled sums from one count-matrix product. Both give the same
intervals to the last bit (tests/stats/test_stats_bootstrap.py).

The end-to-end row runs ``cfkit.report.make_report`` as report.py stands (it
still hands the statistics an index matrix, which they gather); the row after
it shows the statistics of that report through shared resamples, the one-line
change left to report.py's owner.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from cfkit import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import median_seconds  # noqa: E402

RUNS = 7
MODELS = 10
CASES = 100
REPORT_TARGET_S = 0.3
DELTAS = [(0, 1), (1, 2), (2, 3), (1, 3)]  # text→neutral, neutral→evidence, evidence→image, neutral→image


def _gathered(values: np.ndarray, indices: np.ndarray) -> list[tuple[float, float]]:
    """The earlier implementation: gather B × n values per statistic, average, take percentiles."""
    means = values[:, indices].mean(axis=2)
    lows, highs = np.percentile(means, [2.5, 97.5], axis=1)
    return list(zip(lows, highs))


def _modality_old(correct: np.ndarray) -> None:
    """One model's modality statistics as before: 4 accuracies in one call, then each delta on its own."""
    indices = np.random.default_rng(0).integers(0, correct.shape[1], size=(stats.N_RESAMPLES, correct.shape[1]))
    _gathered(100.0 * correct, indices)
    for a, b in DELTAS:
        _gathered(100.0 * (correct[b] - correct[a])[None, :], indices)
        stats.mcnemar_exact(correct[a] > 0, correct[b] > 0)


def _modality_new(correct: np.ndarray, resamples: stats.Resamples | None = None) -> None:
    """The same figures through resample counts: accuracies and deltas in one product."""
    resamples = resamples or stats.Resamples(correct.shape[1])
    rows = np.concatenate([correct, np.stack([correct[b] - correct[a] for a, b in DELTAS])])
    stats.bootstrap_mean_intervals(100.0 * rows, resamples=resamples)
    for a, b in DELTAS:
        stats.mcnemar_exact(correct[a] > 0, correct[b] > 0)


def _modality_as_report(correct: np.ndarray) -> None:
    """What report._modality calls today: an index matrix shared by five calls."""
    indices = stats.bootstrap_indices(correct.shape[1])
    stats.bootstrap_mean_intervals(100.0 * correct, indices=indices)
    for a, b in DELTAS:
        stats.paired_comparison(correct[a] > 0, correct[b] > 0, indices=indices)


def _report_seconds() -> tuple[float, float]:
    """Median wall time of make_report + JSON for the modality suite of 10 models (bench_report's workspace)."""
    import bench_report
    from cfkit import report
    from cfkit.workspace import load_workspace

    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = bench_report._workspace(Path(tmp) / "ws", n_cases=120, n_pairs=36)
        predictions = Path(tmp) / "modality.jsonl"
        predictions.write_text("".join(
            bench_report._line(f"model-{m:02d}", "modality", f"C{i:03d}", condition, rng.choice("AB")) + "\n"
            for m in range(MODELS) for condition in ("text", "neutral", "evidence", "image") for i in range(CASES)))
        ws = load_workspace(root)
        start = time.perf_counter()
        report.to_json(report.make_report(ws, [predictions]))  # the first run imports scipy.stats
        first = time.perf_counter() - start
        return first, median_seconds(lambda: report.to_json(report.make_report(ws, [predictions])), RUNS)


def _peak_mib(func) -> float:
    tracemalloc.start()
    try:
        func()
        return tracemalloc.get_traced_memory()[1] / 2 ** 20
    finally:
        tracemalloc.stop()


def run() -> list[dict]:
    rng = np.random.default_rng(0)
    models = [(rng.random((4, CASES)) < rng.uniform(0.2, 0.9, size=(4, 1))).astype(float) for _ in range(MODELS)]
    old_s = median_seconds(lambda: [_modality_old(c) for c in models], RUNS)
    new_s = median_seconds(lambda: [_modality_new(c) for c in models], RUNS)
    # Every model answers the same subset cases in the same order, so one Resamples can serve them all.
    shared_s = median_seconds(lambda: [_modality_new(c, shared) for shared in [stats.Resamples(CASES)]
                                       for c in models], RUNS)
    as_report_s = median_seconds(lambda: [_modality_as_report(c) for c in models], RUNS)
    first_report, report_s = _report_seconds()

    # ContextCanvas intervals for 17 models on 301 cases (Table 2's shape), one Resamples for all of them.
    gold = ["A"] * 111 + ["B"] * 180 + ["C"] * 10
    yes, no = ["A"] * 291 + [None] * 10, ["B"] * 291 + [None] * 10
    answers = [[random.Random(m).choice("AB") for _ in gold] for m in range(17)]

    def contextcanvas() -> None:
        resamples = stats.Resamples(len(gold))
        for predicted in answers:
            stats.contextcanvas_intervals(predicted, gold, yes, no, resamples=resamples)

    cc_s = median_seconds(contextcanvas, 3)

    # Memory: 2,000 units, two statistics, B = 10,000.
    big = (rng.random((2, 2000)) < 0.5).astype(float) * 100.0
    old_mib = _peak_mib(lambda: _gathered(big, np.random.default_rng(0).integers(0, 2000, size=(10_000, 2000))))
    new_mib = _peak_mib(lambda: stats.bootstrap_mean_intervals(big))
    return [
        {"name": f"modality statistics, {MODELS} models (4 accuracies + 4 deltas, {CASES} cases, B=10,000): "
                 "gathering", "value": old_s, "unit": "s", "target": None, "met": None,
         "note": f"median of {RUNS}; the implementation before the count product, one index matrix per model"},
        {"name": "same, resample counts (one Resamples per model, one product)", "value": old_s / new_s, "unit": "×",
         "target": None, "met": None,
         "note": f"gathering / counts; counts {new_s * 1000:.1f} ms; intervals equal to the last bit"},
        {"name": "same, one Resamples shared by the 10 models", "value": old_s / shared_s, "unit": "×",
         "target": None, "met": None, "note": f"gathering / counts; counts {shared_s * 1000:.1f} ms"},
        {"name": "same, as report._modality calls it today (index matrix, 5 calls)", "value": as_report_s,
         "unit": "s", "target": None, "met": None,
         "note": f"{old_s / as_report_s:.2f}× faster than gathering: the index path now gathers with np.take; "
                 f"{as_report_s / new_s:.2f}× the per-model counts path"},
        {"name": f"report: modality, {MODELS} models ({CASES} cases × 4 conditions, 4 deltas, B=10,000)",
         "value": report_s, "unit": "s", "target": f"≤ {REPORT_TARGET_S:g} s", "met": report_s <= REPORT_TARGET_S,
         "note": f"median of {RUNS}; make_report + JSON as report.py stands; first run {first_report:.2f} s "
                 "(imports scipy.stats)"},
        {"name": "ContextCanvas intervals, 17 models × 301 cases (5 figures each, B=10,000)", "value": cc_s,
         "unit": "s", "target": None, "met": None, "note": "median of 3; one Resamples shared by the models"},
        {"name": "peak memory, 2,000 units × 2 statistics (B=10,000): gathering / counts",
         "value": old_mib / new_mib, "unit": "×", "target": None, "met": None,
         "note": f"tracemalloc peaks {old_mib:.0f} MiB / {new_mib:.0f} MiB; counts are drawn in blocks of "
                 f"{stats.bootstrap.BLOCK_CELLS:,} cells"},
    ]


if __name__ == "__main__":
    for row in run():
        print(f"{row['name']:100s} {row['value']:.4g} {row['unit']}  ({row['note']})")
