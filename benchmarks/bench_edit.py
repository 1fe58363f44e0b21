"""Time the local parts of ``cfkit edit``: classical operations, the composite, upload preparation.

Images are synthetic (smooth gradients with noise) at sizes typical of the
benchmark's paintings; each timing is the median of a few runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cfkit.edit import composite  # noqa: E402
from cfkit.editors import EditRequest  # noqa: E402
from cfkit.editors.classical import recolor, remove  # noqa: E402
from cfkit.editors.openai_images import OpenAIEditor  # noqa: E402
from cfkit.images import png_bytes  # noqa: E402

from timing import median_seconds


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
    rows = []
    big = _image(1536, 1024)
    mask10 = _box(1536, 1024, 0.10)
    t = median_seconds(lambda: recolor(big, mask10 > 0, (32, 160, 64), strength=1.0, feather=3.0), 3)
    rows.append({"name": "classical recolor, 1536x1024, 10% mask", "value": t, "unit": "s", "target": "≤ 2 s",
                 "met": t <= 2.0, "note": "median of 3"})
    t = median_seconds(lambda: remove(big, mask10 > 0), 1)
    rows.append({"name": "classical remove (biharmonic), 1536x1024, 10% mask", "value": t, "unit": "s",
                 "target": "≤ 20 s", "met": t <= 20.0, "note": "one run (a sparse solve over ~157k pixels)"})
    raw = _image(1536, 1024)[::-1].copy()
    t = median_seconds(lambda: composite(big, raw, mask10), 3)
    rows.append({"name": "composite, 1536x1024", "value": t, "unit": "s", "target": "≤ 0.5 s", "met": t <= 0.5,
                 "note": "median of 3"})
    editor = OpenAIEditor(OpenAIEditor.Options())
    request = EditRequest(spec_id="B", prompt="p", image=big, mask=mask10)

    def prepare() -> None:
        plan = editor.plan(request.size)
        png_bytes(plan.image_to_send(request.image))
        png_bytes(plan.mask_to_send(request.mask))

    t = median_seconds(prepare, 3)
    rows.append({"name": "openai upload preparation, 1536x1024", "value": t, "unit": "s", "target": "≤ 1 s",
                 "met": t <= 1.0, "note": "size plan + image and mask PNGs, median of 3"})
    return rows


if __name__ == "__main__":
    for row in run():
        print(f"{row['name']:52s} {row['value']:.3f} {row['unit']}  target {row['target']}  "
              f"{'met' if row['met'] else 'NOT met'}  ({row['note']})")
