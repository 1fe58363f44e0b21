"""A workspace whose predictions reproduce the paper's tables, and the report commands run over it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.paper_tables import TABLE_2, TABLE_S7, TABLE_S9, TABLE_S10


YES_NO = [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}]


THREE = [{"id": "A", "text": "A wedding"}, {"id": "B", "text": "A funeral"}, {"id": "C", "text": "A race"}]


YES_IDS = [f"Y{i:03d}" for i in range(111)]


NO_IDS = [f"N{i:03d}" for i in range(180)]


THREE_IDS = [f"T{i:02d}" for i in range(10)]


PAIR_CASES = NO_IDS[:36]


SUBSET = YES_IDS[:50] + NO_IDS[100:150]  # 100 modality cases: gold A for the first 50, B for the rest


COUNTS = {row[0]: row[4:7] for row in TABLE_2}  # model -> (tp_yes, fp_yes, three-option correct)


S10_NAMES = {"InternVL3-8B": "InternVL3", "ArtQuant": "ArtQuant-APDD", "LLaVA-OV": "LLaVA-OneVision"}


def s10_rows():
    """Table S10 rows with model names as in Table 2."""
    return [(S10_NAMES.get(base, base), S10_NAMES.get(other, other), *rest) for base, other, *rest in TABLE_S10]


def build_workspace(root: Path) -> Path:
    root.mkdir(parents=True)
    cases = (
        [{"id": c, "images": [f"{c}.png"], "question": "Suitable?", "options": YES_NO, "gold": "A", "yes_option": "A"}
         for c in YES_IDS]
        + [{"id": c, "images": [f"{c}.png"], "question": "Suitable?", "options": YES_NO, "gold": "B", "yes_option": "A"}
           for c in NO_IDS]
        + [{"id": c, "images": [f"{c}.png"], "question": "Which event?", "options": THREE, "gold": "C"}
           for c in THREE_IDS]
    )
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    (root / "cfkit.toml").write_text('[dataset]\ncases = "cases.jsonl"\nimages = "images"\n\n[workspace]\npairs = 36\n'
                                     '\n[probe]\nmodality_subset = "subset.txt"\n')
    (root / "interventions").mkdir()
    for i, case in enumerate(PAIR_CASES, start=1):
        (root / "interventions" / f"CF{i:02d}.yaml").write_text(
            f"id: CF{i:02d}\ncase: {case}\ntitle: Pair {i}\ncue: a cue\nreplacement: another cue\nprompt: Replace it.\n"
            "regions: [{box: [0.2, 0.2, 0.6, 0.6]}]\nlabels: {original: 'No', edit: 'Yes'}\n")
    (root / "probes").mkdir()
    (root / "probes" / "subset.txt").write_text("# modality subset\n" + "\n".join(SUBSET) + "\n")
    return root


def record(model: str, suite: str, case: str, condition: str, answer: str | None, pair: str | None = None) -> str:
    return json.dumps({"model": model, "suite": suite, "case": case, "pair": pair, "condition": condition,
                       "answer": answer, "parse": None if answer is None else "json",
                       "error": "unparseable" if answer is None else None, "raw": "", "reason": None,
                       "confidence": None})


def contextcanvas_answers(tp_yes: int, fp_yes: int, three: int, correct_order: dict[str, list[str]] | None = None):
    """Answers per case id for Table 2 counts; ``correct_order`` says which cases of each group are answered right."""
    order = correct_order or {"yes": YES_IDS, "no": NO_IDS, "three": THREE_IDS}
    answers = {}
    for i, c in enumerate(order["yes"]):
        answers[c] = "A" if i < tp_yes else "B"
    for i, c in enumerate(order["no"]):
        answers[c] = "B" if i < 180 - fp_yes else "A"
    for i, c in enumerate(order["three"]):
        answers[c] = "C" if i < three else "A"
    return answers


def other_order(base: tuple[int, int, int], other: tuple[int, int, int], both: int) -> dict[str, list[str]]:
    """A case order for the second model so that exactly ``both`` cases are right for both models."""
    groups = {"yes": (YES_IDS, base[0], other[0]), "no": (NO_IDS, 180 - base[1], 180 - other[1]),
              "three": (THREE_IDS, base[2], other[2])}
    overlap = {g: min(b, o) for g, (_, b, o) in groups.items()}
    excess = sum(overlap.values()) - both
    for g, (ids, b, o) in groups.items():
        # Lowering the overlap needs room among the cases the base got wrong.
        room = min(overlap[g], len(ids) - b - (o - overlap[g]))
        take = max(0, min(excess, room))
        overlap[g] -= take
        excess -= take
    assert excess == 0, "no arrangement found"
    order = {}
    for g, (ids, b, o) in groups.items():
        right, wrong = ids[:b], ids[b:]
        k = overlap[g]
        chosen = right[:k] + wrong[:o - k]
        order[g] = chosen + [c for c in ids if c not in chosen]
    return order


def write_predictions(folder: Path) -> list[Path]:
    cc_lines, cf_lines, md_lines = [], [], []
    answers = {m: contextcanvas_answers(*COUNTS[m]) for m in COUNTS}
    for base, other, _, _, _, b, c, *_ in s10_rows():
        base_counts, other_counts = COUNTS[base], COUNTS[other]
        base_right = sum(base_counts[0:1]) + (180 - base_counts[1]) + base_counts[2]
        order = other_order(base_counts, other_counts, base_right - b)
        answers[other] = contextcanvas_answers(*other_counts, correct_order=order)
    for model, got in answers.items():
        cc_lines += [record(model, "contextcanvas", case, "image", answer) for case, answer in got.items()]
    for model, orig, edit, _, correct, reverse, *_ in TABLE_S7:
        stuck_o = round(orig * 36 / 100) - correct
        stuck_e = round(edit * 36 / 100) - correct
        pattern = [("B", "A")] * correct + [("A", "B")] * reverse + [("B", "B")] * stuck_o + [("A", "A")] * stuck_e
        for i, (case, (o, e)) in enumerate(zip(PAIR_CASES, pattern), start=1):
            cf_lines.append(record(model, "counterfactual", case, "original", o, pair=f"CF{i:02d}"))
            cf_lines.append(record(model, "counterfactual", case, "edit", e, pair=f"CF{i:02d}"))
    for model, *counts in TABLE_S9:
        for condition, count in zip(("text", "neutral", "evidence", "image"), counts):
            # The first `count` subset cases answered right; a shifted window makes conditions differ per case.
            shift = {"text": 0, "neutral": 10, "evidence": 20, "image": 30}[condition]
            for i, case in enumerate(SUBSET):
                gold = "A" if case.startswith("Y") else "B"
                right = (i - shift) % 100 < count
                md_lines.append(record(model, "modality", case, condition, gold if right else ("B" if gold == "A" else "A")))
    paths = []
    for name, lines in (("cc.jsonl", cc_lines), ("cf.jsonl", cf_lines), ("modality.jsonl", md_lines)):
        path = folder / name
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    root = tmp_path_factory.mktemp("paper")
    ws = build_workspace(root / "ws")
    paths = write_predictions(root)
    return ws, paths


def compare_args():
    return [arg for base, other, *_ in s10_rows() for arg in ("--compare", f"{base}={other}")]


def cli_args(ws: Path, paths: list[Path], *extra: str) -> list[str]:
    args = ["report", "-w", str(ws)]
    for p in paths:
        args += ["--predictions", str(p)]
    return args + list(extra)
