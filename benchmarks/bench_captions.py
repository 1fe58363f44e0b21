"""Caption lint and condition rendering over a benchmark-sized workspace (301 cases)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from timing import median_seconds

N_CASES = 301  # the size of ContextCanvas
RUNS = 5


def _workspace(root: Path) -> Path:
    (root / "captions").mkdir(parents=True)
    (root / "probes").mkdir()
    (root / "images").mkdir()
    yes_no = [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}]
    lines = []
    for i in range(N_CASES):
        case_id = f"B{i:03d}"
        lines.append(json.dumps({
            "id": case_id, "images": [f"{case_id}.jpg"], "question": f"Is this picture suitable for event {i}?",
            "options": yes_no, "gold": "B", "yes_option": "A",
            "provenance": {"title": f"Harbour at Dusk No. {i}", "creator": "Ada Example Painter"}}))
        (root / "captions" / f"{case_id}.yaml").write_text(
            "neutral: >-\n  A harbour at dusk with a dozen small boats moored along a stone quay; gulls circle above\n"
            "  the masts and warm light falls from the windows of the houses behind. A woman in a long\n"
            "  coat walks a dog along the water's edge while two children watch from a bench.\n"
            "evidence: >-\n  A black flag flies from the nearest mast.\nauthor: human\nreviewed: true\n")
    (root / "cases.jsonl").write_text("\n".join(lines) + "\n")
    (root / "cfkit.toml").write_text('[dataset]\ncases = "cases.jsonl"\nimages = "images"\n')
    return root




def run() -> list[dict]:
    from cfkit.lint import lint_captions
    from cfkit.prompts import build_conditions
    from cfkit.workspace import load_workspace

    with tempfile.TemporaryDirectory() as tmp:
        ws = load_workspace(_workspace(Path(tmp) / "ws"))
        # Every case, as the paper's full set would be (a workspace's default is its modality subset file).
        report = lint_captions(ws, all_cases=True)
        assert report.ok and len(report.cases) == N_CASES, report.findings[:3]
        lint_s = median_seconds(lambda: lint_captions(ws, all_cases=True), RUNS)
        build_s = median_seconds(lambda: build_conditions(ws, all_cases=True), RUNS)
    return [
        {"name": f"cfkit captions lint, {N_CASES} captions", "value": lint_s, "unit": "s", "target": "≤ 1 s",
         "met": lint_s <= 1.0, "note": f"median of {RUNS}, library call, {len(report.verdict_terms)} verdict terms"},
        {"name": f"render 4 conditions × {N_CASES} cases", "value": build_s, "unit": "s", "target": "≤ 1 s",
         "met": build_s <= 1.0, "note": f"median of {RUNS}, {4 * N_CASES} prompts, captions read from disk"},
    ]


if __name__ == "__main__":
    for row in run():
        print(f"{row['name']:45s} {row['value']:.3f} {row['unit']}  target {row['target']}  {row['note']}")
