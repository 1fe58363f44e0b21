"""Shared fixtures. Tests never touch the network or download weights."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

# Set before any test imports huggingface libraries.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.pop("OPENAI_API_KEY", None)
os.environ.pop("OPENAI_BASE_URL", None)
os.environ.pop("CFKIT_WORKSPACE", None)
os.environ.pop("CFKIT_LPIPS_BACKBONE", None)
# A developer's own weights (cfkit's cache, torch's hub) must not change what the tests see.
_ISOLATED = __import__("tempfile").mkdtemp(prefix="cfkit-tests-")
os.environ["CFKIT_WEIGHTS_DIR"] = os.path.join(_ISOLATED, "cfkit-weights")
os.environ["TORCH_HOME"] = os.path.join(_ISOLATED, "torch-home")

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

REPO = Path(__file__).resolve().parent.parent
MINI = REPO / "examples" / "mini"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def run_cli(args: list[str], *, env: dict[str, str] | None = None, input: str | None = None):
    """Invoke the CLI in-process; returns click's Result (exit_code, stdout, stderr)."""
    from cfkit.cli import cli

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


@pytest.fixture
def tiny_ws(tmp_path: Path) -> Path:
    """Path of a fresh tiny workspace (see :func:`write_workspace`)."""
    return write_workspace(tmp_path / "ws")


@pytest.fixture
def mini_ws(tmp_path: Path) -> Path:
    """A private copy of examples/mini."""
    if not (MINI / "cfkit.toml").is_file():
        pytest.skip("examples/mini is not in this checkout")
    dest = tmp_path / "mini"
    shutil.copytree(MINI, dest, ignore=shutil.ignore_patterns(".cfkit"))
    return dest


def tree_snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root with its bytes, to assert that nothing changed."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def store_as_of(path: Path, version: int) -> None:
    """Turn a store just made at the current schema into one as an older cfkit left it at ``version``: the
    columns that later migration steps add are dropped again and ``user_version`` is set back, so that the
    next open runs those steps, as it would on a user's old workspace."""
    import re
    import sqlite3

    from cfkit.store import _migrations

    conn = sqlite3.connect(path)
    for step, statements in sorted(_migrations().items(), reverse=True):
        if step <= version:
            continue
        for sql in statements:
            added = re.match(r"ALTER TABLE (\w+) ADD COLUMN (\w+)", sql)
            if added:
                conn.execute(f"ALTER TABLE {added[1]} DROP COLUMN {added[2]}")
    conn.execute(f"PRAGMA user_version={version}")
    conn.commit()
    conn.close()
