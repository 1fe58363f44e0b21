"""Report speed: the modality report of one model and of ten, and the counterfactual report of 20 models.

Each figure is the median wall time of several runs of ``cfkit.report.make_report``
(reading the predictions JSONL, checking every line against the cases and specs,
computing every statistic with 10,000 bootstrap resamples) plus the JSON export,
on a synthetic workspace built in a temporary folder. The first run, which
imports scipy.stats, is reported separately.
"""

from __future__ import annotations

import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from cfkit import report
from cfkit.workspace import load_workspace

RUNS = 5
TARGET_S = 1.0
#: Issue 17: the modality report for 10 models.
TEN_MODELS_TARGET_S = 0.3
YES_NO = [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}]


def _workspace(root: Path, n_cases: int, n_pairs: int) -> Path:
    root.mkdir(parents=True)
    cases = [{"id": f"C{i:03d}", "images": [f"C{i:03d}.png"], "question": "Suitable?", "options": YES_NO,
              "gold": "B" if i < n_pairs or i % 3 else "A", "yes_option": "A"} for i in range(n_cases)]
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    (root / "cfkit.toml").write_text('[dataset]\ncases = "cases.jsonl"\nimages = "images"\n\n'
                                     f'[workspace]\npairs = {n_pairs}\n\n[probe]\nmodality_subset = "subset.txt"\n')
    (root / "interventions").mkdir()
    for i in range(n_pairs):
        (root / "interventions" / f"CF{i + 1:02d}.yaml").write_text(
            f"id: CF{i + 1:02d}\ncase: C{i:03d}\ntitle: t\ncue: c\nreplacement: r\nprompt: p\n"
            "regions: [{box: [0.1, 0.1, 0.5, 0.5]}]\n")
    (root / "probes").mkdir()
    (root / "probes" / "subset.txt").write_text("\n".join(c["id"] for c in cases[:100]) + "\n")
    return root


def _line(model: str, suite: str, case: str, condition: str, answer: str, pair: str | None = None) -> str:
    return json.dumps({"model": model, "suite": suite, "case": case, "pair": pair, "condition": condition,
                       "answer": answer, "parse": "json", "error": None, "raw": "", "reason": None,
                       "confidence": None})


def _time(ws_root: Path, predictions: Path) -> tuple[float, float]:
    ws = load_workspace(ws_root)
    times = []
    for _ in range(RUNS + 1):
        start = time.perf_counter()
        result = report.make_report(ws, [predictions])
        report.to_json(result)
        times.append(time.perf_counter() - start)
    return times[0], statistics.median(times[1:])


def run() -> list[dict]:
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = _workspace(Path(tmp) / "ws", n_cases=120, n_pairs=36)
        modality = Path(tmp) / "modality.jsonl"
        modality.write_text("".join(
            _line("m", "modality", f"C{i:03d}", condition, rng.choice("AB")) + "\n"
            for condition in ("text", "neutral", "evidence", "image") for i in range(100)))
        ten = Path(tmp) / "modality10.jsonl"
        ten.write_text("".join(
            _line(f"model-{m:02d}", "modality", f"C{i:03d}", condition, rng.choice("AB")) + "\n"
            for m in range(10) for condition in ("text", "neutral", "evidence", "image") for i in range(100)))
        counterfactual = Path(tmp) / "counterfactual.jsonl"
        counterfactual.write_text("".join(
            _line(f"model-{m:02d}", "counterfactual", f"C{i:03d}", condition, rng.choice("AB"), pair=f"CF{i + 1:02d}")
            + "\n" for m in range(20) for i in range(36) for condition in ("original", "edit")))
        first_m, modality_s = _time(root, modality)
        first_c, counterfactual_s = _time(root, counterfactual)
        first_t, ten_s = _time(root, ten)
    return [
        {"name": "report: modality, 1 model (100 cases × 4 conditions, 4 deltas, B=10,000)", "value": modality_s,
         "unit": "s", "target": f"< {TARGET_S:g} s", "met": modality_s < TARGET_S,
         "note": f"median of {RUNS}; load + check + stats + JSON; first run {first_m:.3f} s (imports scipy.stats)"},
        {"name": "report: modality, 10 models (100 cases × 4 conditions each, B=10,000)", "value": ten_s,
         "unit": "s", "target": f"≤ {TEN_MODELS_TARGET_S:g} s", "met": ten_s <= TEN_MODELS_TARGET_S,
         "note": f"median of {RUNS}; the library call cfkit.report.make_report + to_json (load + check + stats + "
                 f"JSON, no process start); first run {first_t:.3f} s"},
        {"name": "report: counterfactual, 20 models × 36 pairs (B=10,000)", "value": counterfactual_s,
         "unit": "s", "target": f"< {TARGET_S:g} s", "met": counterfactual_s < TARGET_S,
         "note": f"median of {RUNS}; load + check + stats + JSON; first run {first_c:.3f} s"},
    ]


if __name__ == "__main__":
    for row in run():
        print(f"{row['name']:80s} {row['value']:.3f} {row['unit']}  target {row['target']}  "
              f"{'met' if row['met'] else 'NOT met'}  ({row['note']})")
