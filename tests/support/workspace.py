"""The basics most test modules share: where the checkout is, the CLI run in-process, a textured test
image, the tiny workspace, and a snapshot of a folder's files."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
from click.testing import CliRunner
from PIL import Image


TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
MINI = REPO / "examples" / "mini"


def aged(root: Path, at: float | None = None) -> Path:
    """Every file under ``root`` dated ``at`` (default an hour ago), as a user's files are: written long before a
    run. A digest taken within RACY_S of a file's mtime is not trusted later, so a just-written file is read
    again; tests that need a rerun to know its files by stat alone age them first. Returns ``root``."""
    at = time.time() - 3600 if at is None else at
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (at, at))
    return root


def run_cli(args: list[str], *, env: dict[str, str] | None = None, input: str | None = None):
    """Invoke the CLI in-process; returns click's Result (exit_code, stdout, stderr)."""
    from cfkit.cli import cli
    import cfkit.cli.console  # noqa: F401  its consoles take the environment it was imported in: this process's,
    # not the env= of the first invocation that happened to import it (a later test's COLUMNS would be ignored)

    return CliRunner().invoke(cli, args, env=env, input=input, catch_exceptions=False, prog_name="cfkit")


def gradient_image(width: int = 96, height: int = 64, seed: int = 0) -> np.ndarray:
    """A smooth, textured RGB test image (uint8)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    img = np.stack([x * 255 / max(width - 1, 1), y * 255 / max(height - 1, 1), (x + y) % 256], axis=-1)
    img = img + rng.normal(0, 4, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def write_workspace(root: Path, *, width: int = 96, height: int = 64) -> Path:
    """A tiny workspace: two Yes/No cases and one three-option case, one spec with a box mask."""
    (root / "data" / "images").mkdir(parents=True)
    (root / "interventions" / "masks").mkdir(parents=True)
    (root / "captions").mkdir()
    (root / "probes").mkdir()
    Image.fromarray(gradient_image(width, height, 0)).save(root / "data" / "images" / "T001.png")
    Image.fromarray(gradient_image(width, height, 1)).save(root / "data" / "images" / "T002.png")
    Image.fromarray(gradient_image(width, height, 2)).save(root / "data" / "images" / "T003.png")
    yes_no = [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}]
    cases = [
        {"id": "T001", "images": ["T001.png"], "question": "Is this picture suitable for a spring fair poster?",
         "options": yes_no, "gold": "B", "yes_option": "A", "domain": "photo"},
        {"id": "T002", "images": ["T002.png"], "question": "Is this picture suitable for a winter card?",
         "options": yes_no, "gold": "A", "yes_option": "A", "domain": "photo"},
        {"id": "T003", "images": ["T003.png"], "question": "Which event fits this picture best?",
         "options": [{"id": "A", "text": "A wedding"}, {"id": "B", "text": "A funeral"}, {"id": "C", "text": "A race"}],
         "gold": "C", "domain": "photo"},
    ]
    (root / "data" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    (root / "cfkit.toml").write_text(
        '[dataset]\ncases = "data/cases.jsonl"\nimages = "data/images"\n\n[workspace]\npairs = 3\n'
    )
    mask = np.zeros((height, width), np.uint8)
    mask[height // 4: height // 2, width // 4: width // 2] = 255
    Image.fromarray(mask).save(root / "interventions" / "masks" / "TX01.png")
    (root / "interventions" / "TX01.yaml").write_text(
        "id: TX01\ncase: T001\ntitle: Test edit\ncue: a grey block\nreplacement: a green block\n"
        "prompt: Make the block green.\nmask: masks/TX01.png\nlabels: {original: 'No', edit: 'Yes'}\n"
        "classical: {op: recolor, color: '#20a040'}\n"
    )
    return root



def tree_snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root with its bytes, to assert that nothing changed."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

