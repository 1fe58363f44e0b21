"""Preservation check and review view timings on one 1024×1024 pair (CPU).

The LPIPS figures use the real ``lpips`` package with a *randomly initialised*
AlexNet backbone, for timing only: the network does the same arithmetic with
any weights, and the product never reports numbers from a random backbone.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from PIL import Image

from timing import median_seconds

SIZE = 1024
RUNS = 3
RENDER_RUNS = 7


def _workspace(root: Path, *, raw: bool) -> Path:
    """A workspace with one 1024×1024 case, a box mask and one stored edit."""
    from cfkit.store import Store, now
    from cfkit.workspace import load_workspace

    (root / "data" / "images").mkdir(parents=True)
    (root / "interventions" / "masks").mkdir(parents=True)
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:SIZE, 0:SIZE]
    original = np.stack([x / 4, y / 4, (x + y) / 8], -1) + rng.normal(0, 6, (SIZE, SIZE, 3))
    original = np.clip(original, 0, 255).astype(np.uint8)
    Image.fromarray(original).save(root / "data" / "images" / "B001.png")
    (root / "data" / "cases.jsonl").write_text(
        '{"id": "B001", "images": ["B001.png"], "question": "Suitable?", "options": [{"id": "A", "text": "Yes"}, '
        '{"id": "B", "text": "No"}], "gold": "B", "yes_option": "A"}\n')
    (root / "cfkit.toml").write_text('[dataset]\ncases = "data/cases.jsonl"\nimages = "data/images"\n')
    mask = np.zeros((SIZE, SIZE), np.uint8)
    mask[300:600, 350:700] = 255
    Image.fromarray(mask).save(root / "interventions" / "masks" / "BX01.png")
    (root / "interventions" / "BX01.yaml").write_text(
        "id: BX01\ncase: B001\ntitle: Bench\ncue: a block\nreplacement: another block\nprompt: Change it.\n"
        "mask: masks/BX01.png\n")
    edited = original.copy()
    edited[mask > 0] = rng.integers(0, 256, (int((mask > 0).sum()), 3), dtype=np.uint8)
    ws = load_workspace(root)
    folder = ws.edits_dir / "BX01"
    folder.mkdir(parents=True)
    Image.fromarray(edited).save(folder / "1-composite.png")
    if raw:
        noisy = np.clip(edited + rng.normal(0, 3, edited.shape), 0, 255).astype(np.uint8)
        Image.fromarray(noisy).save(folder / "1-raw.png")
    with Store(ws.db_path) as store, store.transaction() as conn:
        conn.execute("INSERT INTO edits (id, spec_id, engine, status, started_at, raw_path, composite_path) "
                     "VALUES (1, 'BX01', 'bench', 'ok', ?, ?, 'edits/BX01/1-composite.png')",
                     (now(), "edits/BX01/1-raw.png" if raw else None))
    return root




def run() -> list[dict]:
    import lpips
    import torch

    from cfkit.edit_files import check_edit
    from cfkit.preserve import LpipsScorer
    from cfkit.review.loop import load_view_data
    from cfkit.review.view import EditView
    from cfkit.store import Store
    from cfkit.workspace import load_workspace
    from rich.console import Console

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TORCH_HOME"] = str(Path(tmp) / "no-torch-cache")  # the product finds no weights here
        os.environ.pop("CFKIT_LPIPS_BACKBONE", None)
        one = load_workspace(_workspace(Path(tmp) / "one", raw=False))
        two = load_workspace(_workspace(Path(tmp) / "two", raw=True))
        torch.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            module = lpips.LPIPS(net="alex", pretrained=True, pnet_rand=True, spatial=True, verbose=False)
            build_s = time.perf_counter() - start
        scorer = LpipsScorer(module, description="random backbone, timing only")
        threads = torch.get_num_threads()
        with Store(one.db_path) as store:
            without = median_seconds(lambda: check_edit(one, store, 1), RUNS)
            with_lpips = median_seconds(lambda: check_edit(one, store, 1, scorer=scorer), RUNS)
        with Store(two.db_path) as store:
            both = median_seconds(lambda: check_edit(two, store, 1, scorer=scorer), RUNS)
            load_s = median_seconds(lambda: load_view_data(two, store, "BX01"), RUNS)
            data = load_view_data(two, store, "BX01")
        timings = {}
        for width in (80, 160):
            console = Console(file=io.StringIO(), width=width, color_system="truecolor", force_terminal=True)
            timings[width] = median_seconds(lambda: console.print(EditView(data)), RENDER_RUNS)
    load = f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    rows.append({"name": "check, 1024² pair, without LPIPS", "value": without, "unit": "s", "target": None,
                 "met": None, "note": f"SSIM, PSNR/MSE, inside change, leaks; median of {RUNS}; {load}"})
    rows.append({"name": "check, 1024² pair, with LPIPS", "value": with_lpips, "unit": "s", "target": "< 2 s",
                 "met": with_lpips < 2.0,
                 "note": f"random-backbone AlexNet for timing only, at 512 px working size, {threads} torch "
                         f"threads, median of {RUNS}; {load}"})
    rows.append({"name": "check, raw + composite, with LPIPS", "value": both, "unit": "s", "target": None,
                 "met": None, "note": "both outputs of one edit; the original's features are computed once"})
    rows.append({"name": "LPIPS module construction", "value": build_s, "unit": "s", "target": None, "met": None,
                 "note": "once per process (real weights are then read from disk)"})
    rows.append({"name": "review view render, 160 columns", "value": timings[160], "unit": "s", "target": "< 0.2 s",
                 "met": timings[160] < 0.2, "note": f"side by side, truecolor, median of {RENDER_RUNS}"})
    rows.append({"name": "review view render, 80 columns", "value": timings[80], "unit": "s", "target": "< 0.2 s",
                 "met": timings[80] < 0.2, "note": f"stacked, truecolor, median of {RENDER_RUNS}"})
    rows.append({"name": "review view data load, 1024²", "value": load_s, "unit": "s", "target": None, "met": None,
                 "note": "reading the PNGs, mask and leaks before the first render"})
    return rows


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    for row in run():
        met = "" if row["met"] is None else ("  met" if row["met"] else "  MISSED")
        print(f"{row['name']:40s} {row['value']:.3f} {row['unit']}{met}  {row['note']}")
