"""A model's figures do not depend on which other models are reported beside it.

The modality section draws one resample matrix for all models (not one per
model); each model's intervals and tests must equal those of a report of that
model alone, which draws its own matrix from the same seed.
"""

from __future__ import annotations

import json

from cfkit import report
from cfkit.workspace import load_workspace


def _lines(model: str, answers: dict[str, str], third: str = "C") -> list[dict]:
    return [{"model": model, "suite": "modality", "case": case, "pair": None, "condition": condition,
             "answer": answers[condition] if case != "T003" else third, "parse": "json", "error": None,
             "raw": "", "reason": None, "confidence": None}
            for condition in ("text", "neutral", "evidence", "image") for case in ("T001", "T002", "T003")]


def test_modality_rows_equal_whether_a_model_is_reported_alone_or_with_others(tiny_ws, tmp_path):
    first = _lines("m1", {"text": "A", "neutral": "B", "evidence": "B", "image": "A"})
    second = _lines("m2", {"text": "B", "neutral": "A", "evidence": "B", "image": "B"}, third="A")
    paths = {}
    for name, lines in (("m1", first), ("m2", second), ("both", first + second)):
        paths[name] = tmp_path / f"{name}.jsonl"
        paths[name].write_text("".join(json.dumps(line) + "\n" for line in lines))
    ws = load_workspace(tiny_ws)

    def rows(name: str) -> dict:
        made = report.make_report(ws, [paths[name]], n_resamples=300, seed=7, all_cases=True)
        return {row["model"]: row for row in made.to_dict()["modality"]}

    together = rows("both")
    assert together["m1"] == rows("m1")["m1"]
    assert together["m2"] == rows("m2")["m2"]
    assert together["m1"]["accuracy"] != together["m2"]["accuracy"]  # two different models, told apart
