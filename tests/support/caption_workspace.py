"""A workspace for the caption, lint, prompt and draft tests: provenance, a three-option case,
a paired-image case and clean captions."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image

from cfkit.cases import Case, parse_case
from support.workspace import gradient_image, write_workspace

TEMPLATES = Path(__file__).resolve().parents[2] / "cfkit" / "templates"

YES_NO = [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}]

CASES = [
    {"id": "T001", "images": ["T001.png"], "question": "Is this print suitable for a surf shop's summer poster?",
     "options": YES_NO, "gold": "B", "yes_option": "A", "rationale": "RATIONALE-SECRET-1",
     "provenance": {"title": "The Great Wave off Kanagawa", "creator": "Katsushika Hokusai",
                    "provider": "PROVIDER-SECRET", "url": "https://example.org/URL-SECRET", "license": "CC0"}},
    {"id": "T002", "images": ["T002.png"], "question": "Is this photograph suitable for a children's hospital ward?",
     "options": YES_NO, "gold": "A", "yes_option": "A", "rationale": "RATIONALE-SECRET-2",
     "provenance": {"title": "Night Watch Study", "creator": "Unknown"}},
    {"id": "T003", "images": ["T003.png"], "question": "Which celebration does this poster belong to?",
     "options": [{"id": "A", "text": "A Mid-Autumn festival"}, {"id": "B", "text": "A Diwali celebration"},
                 {"id": "C", "text": "A harvest fair"}], "gold": "A"},
    {"id": "T004", "images": ["T004a.png", "T004b.png"], "question": "Which image suits a quiet reading room?",
     "options": [{"id": "A", "text": "The first image"}, {"id": "B", "text": "The second image"}], "gold": "B",
     "yes_option": "A"},
]

CLEAN = {
    "T001": {"neutral": "A woodblock print: a towering blue wave curls over three narrow boats, with a small "
                        "snow-capped mountain in the distance.",
             "evidence": "The boats are being swamped and the rowers crouch low against the breaking wave."},
    "T002": {"neutral": "A dim photograph of a long corridor; a figure in a dark coat stands at the far end.",
             "evidence": "The figure's face is hidden and the light flickers over a stained wall."},
    "T003": {"neutral": "A poster with round lanterns, a full moon and small round pastries on a plate.",
             "evidence": "The pastries are round mooncakes beneath a full moon."},
    "T004": {"neutral": "Two photographs of rooms: one has a loud neon sign, the other soft lamps and armchairs.",
             "evidence": "In the second photograph, the lamps are dimmed and the armchairs face a bookshelf."},
}


def write_caption(ws_root: Path, case_id: str, **fields) -> Path:
    import yaml

    data = {"author": "human", "reviewed": True, **fields}
    path = ws_root / "captions" / f"{case_id}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


def make_caption_ws(root: Path) -> Path:
    """The conftest workspace with provenance, a three-option case, a paired-image case and clean captions."""
    write_workspace(root)
    images = root / "data" / "images"
    for name, seed in (("T004a.png", 4), ("T004b.png", 5)):
        Image.fromarray(gradient_image(48, 32, seed)).save(images / name)
    (root / "data" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CASES))
    for case_id, fields in CLEAN.items():
        write_caption(root, case_id, **fields)
    return root


def case_by_id(case_id: str) -> Case:
    return parse_case(next(c for c in CASES if c["id"] == case_id))
