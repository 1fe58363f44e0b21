"""Preservation check and review view timings on one 1024×1024 pair (CPU), and the check on a 4096² edit.

The 4096² rows compare ``check_images`` (raw and composite, without LPIPS) with
the SSIM work it cannot avoid: scikit-image's ``structural_similarity`` called
on the same arrays, once per output, as bare calls. Time and peak memory
(tracemalloc: what each allocates on top of the images) are ratios taken in one run.
``cfkit check`` of the same edit stored as PNGs is also timed as a whole process,
with its peak RSS.

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

from timing import median_seconds, median_wall_and_cpu

SIZE = 1024
RUNS = 3
RENDER_RUNS = 7
LARGE = 4096
LARGE_RUNS = 2  # each side timed this often, the two sides alternating


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



def _large_edit() -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """A 4096² original, a box mask over a tenth of it, and a raw (noisy everywhere) and composite output."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:LARGE, 0:LARGE].astype(np.float32)
    original = np.stack([x / 16, y / 16, (x + y) / 32], -1)
    del x, y
    original += rng.normal(0, 6, original.shape).astype(np.float32)
    original = np.clip(original, 0, 255).astype(np.uint8)
    mask = np.zeros((LARGE, LARGE), np.uint8)
    mask[1200:2400, 1400:2800] = 255
    composite = original.copy()
    composite[mask > 0] = rng.integers(0, 256, (int((mask > 0).sum()), 3), dtype=np.uint8)
    raw = np.clip(composite + rng.normal(0, 3, composite.shape).astype(np.float32), 0, 255).astype(np.uint8)
    return original, mask, {"raw": raw, "composite": composite}


#: Runs ``cfkit`` in this interpreter and reports its own peak RSS (VmHWM, KiB) on the last line of stderr.
#: (Not ru_maxrss: Linux carries the forking parent's high-water mark across exec, and this parent holds the images.)
_MEASURED_CLI = ("import atexit, re, sys\n"
                 "def peak():\n"
                 "    status = open('/proc/self/status').read()\n"
                 "    print('maxrss', re.search(r'VmHWM:\\s+(\\d+)', status).group(1), file=sys.__stderr__)\n"
                 "atexit.register(peak)\n"
                 "from cfkit.cli import main\n"
                 "main(sys.argv[1:])\n")


def _cli_check_row(root: Path, original: np.ndarray, mask: np.ndarray, outputs: dict[str, np.ndarray]) -> dict:
    """``cfkit check`` of a stored 4096² edit as a whole process: decoding the PNGs, the check, storing it."""
    import subprocess

    from cfkit.store import Store, now
    from cfkit.workspace import load_workspace

    (root / "data" / "images").mkdir(parents=True)
    (root / "interventions" / "masks").mkdir(parents=True)
    Image.fromarray(original).save(root / "data" / "images" / "L001.png", compress_level=1)
    (root / "data" / "cases.jsonl").write_text(
        '{"id": "L001", "images": ["L001.png"], "question": "Suitable?", "options": [{"id": "A", "text": "Yes"}, '
        '{"id": "B", "text": "No"}], "gold": "B", "yes_option": "A"}\n')
    (root / "cfkit.toml").write_text('[dataset]\ncases = "data/cases.jsonl"\nimages = "data/images"\n')
    Image.fromarray(mask).save(root / "interventions" / "masks" / "LX01.png")
    (root / "interventions" / "LX01.yaml").write_text(
        "id: LX01\ncase: L001\ntitle: Large\ncue: a block\nreplacement: another block\nprompt: Change it.\n"
        "mask: masks/LX01.png\n")
    ws = load_workspace(root)
    (ws.edits_dir / "LX01").mkdir(parents=True)
    for variant, image in outputs.items():
        Image.fromarray(image).save(ws.edits_dir / "LX01" / f"1-{variant}.png", compress_level=1)
    with Store(ws.db_path) as store, store.transaction() as conn:
        conn.execute("INSERT INTO edits (id, spec_id, engine, status, started_at, raw_path, composite_path) "
                     "VALUES (1, 'LX01', 'bench', 'ok', ?, 'edits/LX01/1-raw.png', 'edits/LX01/1-composite.png')",
                     (now(),))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _MEASURED_CLI, "-w", str(root), "check", "LX01"],
                          capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
    took = time.perf_counter() - start
    if done.returncode not in (0, 1) or "maxrss" not in done.stderr:
        raise RuntimeError(f"cfkit check exited {done.returncode}: {done.stderr[-500:]}")
    rss_mib = int(done.stderr.rsplit("maxrss", 1)[1].split()[0]) / 1024
    lpips = "without LPIPS" if "without LPIPS" in done.stdout + done.stderr else "with LPIPS"
    return {"name": "cfkit check, 4096² raw + composite, whole process", "value": took, "unit": "s",
            "target": None, "met": None,
            "note": f"PNG decoding, the check and storing it, {lpips}; peak RSS {rss_mib:.0f} MiB; "
                    f"load average {os.getloadavg()[0]:.1f}"}


def _peak_mib(func) -> float:
    """What ``func`` allocates at its peak, in MiB, on top of what already exists (tracemalloc)."""
    import tracemalloc

    tracemalloc.start()
    try:
        func()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def _large_rows(root: Path) -> list[dict]:
    """``check_images`` on a 4096² raw + composite pair against the bare scikit-image SSIM calls it must make."""
    from skimage.metrics import structural_similarity

    from cfkit.preserve import EditImages, Thresholds, check_images

    original, mask, outputs = _large_edit()
    images = EditImages(original, mask, outputs)

    def bare():
        for edited in outputs.values():
            structural_similarity(original, edited, full=True, data_range=255, channel_axis=-1, win_size=7)

    def check():
        check_images(images, Thresholds())

    times: dict[str, list[float]] = {"bare": [], "check": []}
    for _ in range(LARGE_RUNS):
        for name, func in (("bare", bare), ("check", check)):
            start = time.perf_counter()
            func()
            times[name].append(time.perf_counter() - start)
    bare_s, check_s = (sum(times[k]) / LARGE_RUNS for k in ("bare", "check"))
    ratio = check_s / bare_s
    bare_mib, check_mib = _peak_mib(bare), _peak_mib(check)
    load = f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    runs = ", ".join(f"{b:.1f}/{c:.1f}" for b, c in zip(times["bare"], times["check"]))
    return [
        {"name": "check, 4096² raw + composite, without LPIPS", "value": check_s, "unit": "s", "target": None,
         "met": None, "note": f"SSIM, PSNR/MSE, inside change, leaks of both outputs; mean of {LARGE_RUNS}; {load}"},
        {"name": "two bare skimage SSIM calls, 4096²", "value": bare_s, "unit": "s", "target": None, "met": None,
         "note": "structural_similarity(full=True, channel_axis=-1) of the original with each output; "
                 f"mean of {LARGE_RUNS}, alternating with the check (bare/check s: {runs})"},
        {"name": "check ÷ bare SSIM calls, time, 4096²", "value": ratio, "unit": "×", "target": "≤ 1.2×",
         "met": ratio <= 1.2, "note": "same arrays, same run"},
        {"name": "check, 4096², peak memory", "value": check_mib, "unit": "MiB", "target": None, "met": None,
         "note": "tracemalloc peak on top of the images (original, mask, two outputs: 160 MiB)"},
        {"name": "two bare skimage SSIM calls, 4096², peak memory", "value": bare_mib, "unit": "MiB",
         "target": None, "met": None, "note": "tracemalloc peak on top of the images"},
        {"name": "check ÷ bare SSIM calls, peak memory, 4096²", "value": check_mib / bare_mib, "unit": "×",
         "target": None, "met": None, "note": "same run"},
        _cli_check_row(root, original, mask, outputs),
    ]


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
            without_wall, without = median_wall_and_cpu(lambda: check_edit(one, store, 1), RUNS)
            with_lpips, with_lpips_cpu = median_wall_and_cpu(lambda: check_edit(one, store, 1, scorer=scorer), RUNS)
        with Store(two.db_path) as store:
            both = median_seconds(lambda: check_edit(two, store, 1, scorer=scorer), RUNS)
            load_wall, load_s = median_wall_and_cpu(lambda: load_view_data(two, store, "BX01"), RUNS)
            data = load_view_data(two, store, "BX01")
        timings = {}
        for width in (80, 160):
            console = Console(file=io.StringIO(), width=width, color_system="truecolor", force_terminal=True)
            timings[width] = median_wall_and_cpu(lambda: console.print(EditView(data)), RENDER_RUNS)
        large = _large_rows(Path(tmp) / "large")
    load = f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    rows.append({"name": "check, 1024² pair, without LPIPS", "value": without, "unit": "s", "target": None,
                 "met": None, "note": f"CPU time (single-threaded), SSIM, PSNR/MSE, inside change, leaks; median of {RUNS} "
                         f"(wall {without_wall:.2f} s); {load}"})
    rows.append({"name": "check, 1024² pair, with LPIPS", "value": with_lpips, "unit": "s", "target": "< 2 s",
                 "met": with_lpips < 2.0,
                 "note": f"wall time (the network runs on {threads} torch threads; {with_lpips_cpu:.2f} s of CPU); "
                         f"random-backbone AlexNet for timing only, at 512 px working size, median of {RUNS}; {load}"})
    rows.append({"name": "check, raw + composite, with LPIPS", "value": both, "unit": "s", "target": None,
                 "met": None, "note": "both outputs of one edit; the original's features are computed once"})
    rows.append({"name": "LPIPS module construction", "value": build_s, "unit": "s", "target": None, "met": None,
                 "note": "once per process (real weights are then read from disk)"})
    for width, layout in ((160, "side by side"), (80, "stacked")):
        wall, cpu = timings[width]
        rows.append({"name": f"review view render, {width} columns", "value": cpu, "unit": "s", "target": "< 0.2 s",
                     "met": cpu < 0.2, "note": f"CPU time (single-threaded), {layout}, truecolor, median of "
                                               f"{RENDER_RUNS} (wall {wall * 1000:.0f} ms)"})
    rows.append({"name": "review view data load, 1024²", "value": load_s, "unit": "s", "target": None, "met": None,
                 "note": f"CPU time, reading the PNGs, mask and leaks before the first render (wall {load_wall:.2f} s)"})
    return rows + large


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    for row in run():
        met = "" if row["met"] is None else ("  met" if row["met"] else "  MISSED")
        print(f"{row['name']:40s} {row['value']:.3f} {row['unit']}{met}  {row['note']}")
