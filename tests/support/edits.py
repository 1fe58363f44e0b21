"""Stored edits built for tests: a tiny original, an output changed inside its mask, the edit recorded in the store."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from cfkit.store import Store, now
from cfkit.workspace import load_workspace
from support.store_sql import insert_rows, update_rows


W, H = 96, 64


def box_mask() -> np.ndarray:
    """The tiny workspace's TX01 mask: rows 16..31, columns 24..47."""
    mask = np.zeros((H, W), np.uint8)
    mask[H // 4: H // 2, W // 4: W // 2] = 255
    return mask


def inside_change(original: np.ndarray, seed: int = 5) -> np.ndarray:
    edited = original.copy()
    rng = np.random.default_rng(seed)
    inside = box_mask() > 0
    edited[inside] = rng.integers(0, 256, (int(inside.sum()), 3), dtype=np.uint8)
    return edited


def add_edit(ws_root: Path, spec_id: str, composite: np.ndarray, raw: np.ndarray | None = None,
             status: str = "ok") -> int:
    """Write edit PNGs under the store's edits folder and insert an ``edits`` row, as an editor would."""
    ws = load_workspace(ws_root)
    with Store(ws.db_path):
        pass  # a new workspace's store gets its tables
    [edit_id] = insert_rows(ws.db_path, "edits", [{"spec_id": spec_id, "engine": "test", "status": status,
                                                   "started_at": now()}])
    paths = {}
    for variant, image in (("raw", raw), ("composite", composite)):
        if image is None:
            continue
        path = ws.edits_dir / spec_id / f"{edit_id}-{variant}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(image).save(path)
        paths[variant] = str(path.relative_to(ws.store_dir))
    update_rows(ws.db_path, "edits", {"raw_path": paths.get("raw"), "composite_path": paths.get("composite")},
                {"id": edit_id})
    return edit_id


def tiny_original(ws_root: Path) -> np.ndarray:
    return np.asarray(Image.open(ws_root / "data" / "images" / "T001.png").convert("RGB"))


def add_maskless_spec(ws_root: Path, spec_id: str = "TX03", case: str = "T001") -> None:
    (ws_root / "interventions" / f"{spec_id}.yaml").write_text(
        f"id: {spec_id}\ncase: {case}\ntitle: No mask yet\ncue: a patch\nreplacement: another patch\n"
        "prompt: Change the patch.\n# the mask line comes from 'specs mask'\n"
    )
