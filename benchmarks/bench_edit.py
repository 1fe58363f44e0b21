"""Time the local parts of ``cfkit edit``: classical operations, the composite, upload preparation.

Images are synthetic (smooth gradients with noise) at sizes typical of the
benchmark's paintings; each timing is the median of a few runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cfkit.edit import composite  # noqa: E402
from cfkit.editors import EditRequest  # noqa: E402
from cfkit.editors.classical import recolor, remove  # noqa: E402
from cfkit.editors.openai_images import IMAGE_MAX_BYTES, MASK_MAX_BYTES, OpenAIEditor, upload_png  # noqa: E402

from timing import median_wall_and_cpu

ROOT = Path(__file__).resolve().parent.parent
#: Specs in the ``edit --all`` batch: the three of examples/mini, twelve times each under new ids.
BATCH = 36
#: Cases in the batch's cases file: the benchmark's size (examples/mini's three, then copies under new ids).
CASES = 1204


def _image(width: int, height: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:height, 0:width]
    img = np.stack([x * 255 / width, y * 255 / height, (x + y) % 256], axis=-1) + rng.normal(0, 4, (height, width, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def _box(width: int, height: int, fraction: float) -> np.ndarray:
    side_w, side_h = int(width * fraction ** 0.5), int(height * fraction ** 0.5)
    mask = np.zeros((height, width), np.uint8)
    top, left = height // 3, width // 3
    mask[top: top + side_h, left: left + side_w] = 255
    return mask




def run() -> list[dict]:
    # Each step is single-threaded, so its CPU time is what it takes on an idle core; the wall time on the shared
    # machine, which also counts the waits for a core, is in the note.
    rows = []

    def row(name: str, func, runs: int, target: float, note: str) -> dict:
        wall, cpu = median_wall_and_cpu(func, runs)
        return {"name": name, "value": cpu, "unit": "s", "target": f"≤ {target:g} s", "met": cpu <= target,
                "note": f"CPU time, {note} (wall {wall:.2f} s, load average {os.getloadavg()[0]:.1f})"}

    big = _image(1536, 1024)
    mask10 = _box(1536, 1024, 0.10)
    rows.append(row("classical recolor, 1536x1024, 10% mask",
                    lambda: recolor(big, mask10 > 0, (32, 160, 64), strength=1.0, feather=3.0), 3, 2.0, "median of 3"))
    rows.append(row("classical remove (biharmonic), 1536x1024, 10% mask", lambda: remove(big, mask10 > 0), 1, 20.0,
                    "one run (a sparse solve over ~157k pixels)"))
    raw = _image(1536, 1024)[::-1].copy()
    rows.append(row("composite, 1536x1024", lambda: composite(big, raw, mask10), 3, 0.5, "median of 3"))
    editor = OpenAIEditor(OpenAIEditor.Options())
    request = EditRequest(spec_id="B", prompt="p", image=big, mask=mask10)

    def prepare() -> None:
        plan = editor.plan(request.size)
        upload_png(plan.image_to_send(request.image), IMAGE_MAX_BYTES)
        upload_png(plan.mask_to_send(request.mask), MASK_MAX_BYTES)

    rows.append(row("openai upload preparation, 1536x1024", prepare, 3, 1.0,
                    "size plan + image and mask PNGs as the engine encodes them (zlib level 1), median of 3"))
    with tempfile.TemporaryDirectory() as tmp:
        rows.extend(_batch_rows(Path(tmp)))
    return rows


def _batch_workspace(folder: Path) -> tuple[Path, list[str]]:
    """examples/mini with its three specs copied to ``BATCH`` spec files (same cases and masks) and its cases
    file grown to ``CASES`` cases (copies of its own, under new ids)."""
    ws = folder / "mini"
    shutil.copytree(ROOT / "examples" / "mini", ws, ignore=shutil.ignore_patterns(".cfkit"))
    lines = (ws / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    cases = [json.loads(line) for line in lines if line.strip()]
    extra = [json.dumps({**cases[k % len(cases)], "id": f"PAD{k:04d}"}) for k in range(CASES - len(cases))]
    (ws / "cases.jsonl").write_text("\n".join(lines + extra) + "\n", encoding="utf-8")
    specs = ws / "interventions"
    texts = [path.read_text(encoding="utf-8") for path in sorted(specs.glob("*.yaml"))]
    for path in specs.glob("*.yaml"):
        path.unlink()
    ids = [f"B{k:02d}" for k in range(1, BATCH + 1)]
    for k, spec_id in enumerate(ids):
        text = re.sub(r"^id: .*$", f"id: {spec_id}", texts[k % len(texts)], count=1, flags=re.M)
        (specs / f"{spec_id}.yaml").write_text(text, encoding="utf-8")
    return ws, ids


def _batch_rows(folder: Path) -> list[dict]:
    """``cfkit edit --all`` as one process against the work each edit cannot skip, measured on the same edits.

    The ratios are of CPU time (the child's user + system time; this process's for the parts), which a shared,
    loaded machine disturbs far less than wall time; the wall time is given beside them.
    """
    import resource

    from cfkit.composite import composite, labelled_png
    from cfkit.dataset import load_cases
    from cfkit.edit import prepare_edit
    from cfkit.edit_files import lpips_scorer
    from cfkit.preserve import EditImages, check_images
    from cfkit.workspace import load_workspace

    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    ws_path, ids = _batch_workspace(folder)
    start, cpu_start = time.perf_counter(), children_cpu()
    done = subprocess.run([sys.executable, "-m", "cfkit", "edit", "--all", "--engine", "classical"], cwd=ws_path,
                          capture_output=True, text=True)
    wall, batch = time.perf_counter() - start, children_cpu() - cpu_start
    if done.returncode != 0:
        raise RuntimeError(f"cfkit edit --all failed ({done.returncode}): {done.stderr or done.stdout}")
    # The same edits in this process, each part timed alone (the store is not touched).
    ws = load_workspace(ws_path)
    scorer, note = lpips_scorer(ws)
    engine = files = check = 0.0
    for spec_id in ids:
        prep = prepare_edit(ws, spec_id, engine="classical")
        t0 = time.process_time()
        [raw] = prep.engines["classical"].editor.edit(prep.request).images
        t1 = time.process_time()
        pasted = composite(prep.request.image, raw, prep.mask)
        labelled_png(raw, "raw"), labelled_png(pasted, "composite")
        t2 = time.process_time()
        check_images(EditImages(prep.request.image, prep.mask, {"raw": raw, "composite": pasted}), prep.thresholds,
                     scorer, lpips_note=note)
        t3 = time.process_time()
        engine, files, check = engine + t1 - t0, files + t2 - t1, check + t3 - t2
    n = len(ids)
    cases_read = _cpu_median(lambda: load_cases(ws.cases_path, ws.image_root), 3)
    png_fast = _cpu_median(lambda: labelled_png(raw, "raw"), 5)
    png_default = _cpu_median(lambda: _png_default(raw), 5)
    overhead = batch - engine
    rest = batch - engine - files - check
    lpips = "with LPIPS" if scorer is not None else "without LPIPS (no weights here)"
    return [
        {"name": f"edit --all, {n} classical edits of examples/mini, per edit", "value": batch / n, "unit": "s",
         "target": "—", "met": None,
         "note": f"CPU time of one process, {batch:.1f} s in all ({wall:.1f} s wall, load average "
                 f"{os.getloadavg()[0]:.1f} after it); checks {lpips}; {CASES} cases"},
        {"name": "  the classical engine's own work, per edit", "value": engine / n, "unit": "s", "target": "—",
         "met": None, "note": "CPU time of editor.edit alone on the same requests, in-process"},
        {"name": "  per-edit overhead of edit --all / engine work", "value": overhead / engine, "unit": "x",
         "target": "—", "met": None,
         "note": (f"(batch − engine) / engine, CPU time; of the overhead: check {check / overhead:.0%}, composite + "
                  f"two PNGs {files / overhead:.0%}, the rest (start-up, reading inputs, store, output) "
                  f"{rest / overhead:.0%} = {rest / n * 1000:.0f} ms per edit")},
        {"name": f"  reading the cases file ({CASES} cases)", "value": cases_read, "unit": "s", "target": "—",
         "met": None, "note": f"CPU, median of 3; once per command in an edit session ({cases_read / engine * n:.2f}x "
                              "the engine's work per edit when it was read for every edit)"},
        {"name": "  one edit PNG at zlib level 1 / the default level 6", "value": png_fast / png_default,
         "unit": "x", "target": "—", "met": None,
         "note": f"{png_fast * 1000:.0f} ms against {png_default * 1000:.0f} ms of CPU, median of 5, same pixels"},
    ]


def _cpu_median(func, runs: int) -> float:
    """Median CPU time of ``runs`` calls of ``func``, in seconds."""
    return median_wall_and_cpu(func, runs)[1]


def _png_default(array) -> bytes:
    """An edit PNG as cfkit wrote it before (zlib's default level 6), for comparison."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


if __name__ == "__main__":
    for row in run():
        met = "" if row["met"] is None else ("met" if row["met"] else "NOT met")
        print(f"{row['name']:52s} {row['value']:.3f} {row['unit']}  target {row['target']}  {met}  ({row['note']})")
