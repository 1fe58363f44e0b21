"""Rebuild the mini workspace's images and masks from the installed scikit-image.

The files this writes are committed (images/ and interventions/masks/), so the
example works without running anything. This script is the record of how they
were made, and a way to remake them:

    python examples/mini/make_images.py --out /tmp/mini-images   # write elsewhere and compare
    python examples/mini/make_images.py --force                  # overwrite the committed files

Every source photograph ships with scikit-image (``skimage.data``) and is public
domain or CC0; README.md lists each one's provenance. Images are downscaled so
the longest side is at most 512 px and saved as JPEG (quality 90) to keep the
example small.

Masks are drawn from the saved (downscaled, JPEG-decoded) image, so they match
its exact size: a hand-placed region around the cue (ellipses, or a star shape
for a spiked star), narrowed by a colour rule where the cue has a clear colour
(the crema of the coffee, the irises of the cat). White = edit.
"""

from __future__ import annotations

import argparse
import io
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
LONGEST_SIDE = 512
JPEG_QUALITY = 90


# ── images ─────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Source:
    """One image of the example and the scikit-image function that provides it."""

    name: str  # file name under images/
    load: Callable[[], np.ndarray]


def _sources() -> list[Source]:
    import skimage.data as data

    return [
        Source("coffee.jpg", data.coffee),
        Source("chelsea.jpg", data.chelsea),
        Source("hubble_deep_field.jpg", data.hubble_deep_field),
        Source("astronaut.jpg", data.astronaut),
        Source("rocket.jpg", data.rocket),
        Source("coins.jpg", data.coins),
        Source("camera.jpg", data.camera),
        Source("retina.jpg", data.retina),
    ]


def downscaled(array: np.ndarray) -> Image.Image:
    """The image with its longest side at most LONGEST_SIDE px (Lanczos), as 8-bit L or RGB."""
    image = Image.fromarray(array)
    if image.mode not in ("L", "RGB"):
        image = image.convert("RGB")
    scale = LONGEST_SIDE / max(image.size)
    if scale < 1:
        size = (round(image.width * scale), round(image.height * scale))
        image = image.resize(size, Image.Resampling.LANCZOS)
    return image


def jpeg_bytes(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    # Fixed settings so the same pixels give the same bytes.
    image.save(buf, format="JPEG", quality=JPEG_QUALITY, optimize=True, subsampling=0)
    return buf.getvalue()


# ── masks ──────────────────────────────────────────────────────────────────


def ellipse(shape: tuple[int, int], cx: float, cy: float, rx: float, ry: float) -> np.ndarray:
    """Boolean ellipse centred at (cx, cy) with radii rx, ry, in pixels."""
    y, x = np.mgrid[0:shape[0], 0:shape[1]]
    return ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 <= 1.0


def star(shape: tuple[int, int], cx: float, cy: float, core: float, spike: float, width: float) -> np.ndarray:
    """A bright core disc plus eight thin spokes (diffraction spikes) at 0°, 45°, … 315°."""
    y, x = np.mgrid[0:shape[0], 0:shape[1]]
    dx, dy = x - cx, y - cy
    mask = dx ** 2 + dy ** 2 <= core ** 2
    for angle in np.deg2rad(np.arange(0, 180, 45)):
        along = dx * np.cos(angle) + dy * np.sin(angle)
        across = -dx * np.sin(angle) + dy * np.cos(angle)
        mask |= (np.abs(along) <= spike) & (np.abs(across) <= width / 2)
    return mask


def hsv(rgb: np.ndarray) -> np.ndarray:
    from skimage.color import rgb2hsv

    return rgb2hsv(rgb)


def tidy(mask: np.ndarray, close: int = 2) -> np.ndarray:
    """Close small gaps and fill holes, so the mask is one clean region per cue."""
    from scipy import ndimage

    structure = np.ones((2 * close + 1, 2 * close + 1), bool)
    mask = ndimage.binary_closing(mask, structure=structure)
    return ndimage.binary_fill_holes(mask)


def largest_component(mask: np.ndarray) -> np.ndarray:
    from scipy import ndimage

    labels, n = ndimage.label(mask)
    if n <= 1:
        return mask
    sizes = ndimage.sum(mask, labels, range(1, n + 1))
    return labels == (1 + int(np.argmax(sizes)))


def coffee_crema(rgb: np.ndarray) -> np.ndarray:
    """EX01: the brown crema inside the cup, not the white inner wall, rim, spoon or saucer."""
    h, w = rgb.shape[:2]
    # Around the drink's surface, in fractions of the image so the rule survives a rescale.
    region = ellipse((h, w), 0.482 * w, 0.358 * h, 0.165 * w, 0.140 * h)
    c = hsv(rgb)
    # Crema: strongly saturated orange-brown. The cup's inner wall reflects a paler tan (saturation below ~0.7).
    brown = (c[..., 1] > 0.72) & (c[..., 0] > 0.02) & (c[..., 0] < 0.13)
    return largest_component(tidy(region & brown, close=3))


def cat_irises(rgb: np.ndarray) -> np.ndarray:
    """EX02: both irises (green-yellow), leaving the black pupils and the dark rims alone."""
    from scipy import ndimage

    h, w = rgb.shape[:2]
    c = hsv(rgb)
    # Irises are yellow-green (hue ~0.10-0.14); the tabby fur around them is orange (hue ~0.06-0.08).
    greenish = (c[..., 0] > 0.09) & (c[..., 0] < 0.30) & (c[..., 1] > 0.18) & (c[..., 2] > 0.20)
    dark = c[..., 2] < 0.20
    mask = np.zeros((h, w), bool)
    # The two eyes: (cx, cy, rx, ry) as fractions of the width and height.
    for cx, cy, rx, ry in ((0.378, 0.383, 0.078, 0.100), (0.703, 0.453, 0.057, 0.095)):
        eye = ellipse((h, w), cx * w, cy * h, rx * w, ry * h)
        iris = tidy(eye & greenish, close=2) & eye
        pupil = ndimage.binary_dilation(ndimage.binary_fill_holes(largest_component(eye & dark)))
        mask |= iris & ~pupil
    return mask


def spiked_stars(rgb: np.ndarray) -> np.ndarray:
    """EX03: the two points with cross-shaped diffraction spikes (foreground stars)."""
    h, w = rgb.shape[:2]
    gray = rgb.astype(np.float64).mean(axis=-1)
    mask = np.zeros((h, w), bool)
    # Approximate centres as fractions of the image, refined to the brightest pixel
    # nearby; the core radius covers the star's glow, the spokes its spikes (px).
    for fx, fy, core, spike in ((0.7537, 0.6620, 9.0, 24.0), (0.2535, 0.1910, 6.5, 13.0)):
        x0, y0 = int(round(fx * w)), int(round(fy * h))
        window = gray[y0 - 4:y0 + 5, x0 - 4:x0 + 5]
        dy, dx = np.unravel_index(int(np.argmax(window)), window.shape)
        mask |= star((h, w), x0 - 4 + dx, y0 - 4 + dy, core=core, spike=spike, width=3.0)
    return mask


MASKS: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray]]] = {
    "EX01.png": ("coffee.jpg", coffee_crema),
    "EX02.png": ("chelsea.jpg", cat_irises),
    "EX03.png": ("hubble_deep_field.jpg", spiked_stars),
}


def mask_png(mask: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.where(mask, 255, 0).astype(np.uint8), "L").save(buf, format="PNG", optimize=True)
    return buf.getvalue()


# ── main ───────────────────────────────────────────────────────────────────


def build(out: Path, *, force: bool) -> list[Path]:
    """Write images/ and interventions/masks/ under ``out``; refuse to overwrite unless ``force``."""
    images_dir = out / "images"
    masks_dir = out / "interventions" / "masks"
    planned: dict[Path, bytes] = {}
    decoded: dict[str, np.ndarray] = {}
    for source in _sources():
        data = jpeg_bytes(downscaled(source.load()))
        planned[images_dir / source.name] = data
        decoded[source.name] = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    for mask_name, (image_name, draw) in MASKS.items():
        planned[masks_dir / mask_name] = mask_png(draw(decoded[image_name]))
    existing = [p for p in planned if p.exists()]
    if existing and not force:
        names = ", ".join(str(p.relative_to(out)) for p in existing[:3])
        raise SystemExit(f"{out}: {names} … already exist; pass --force to overwrite, or --out DIR to write elsewhere.")
    for path, data in planned.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return list(planned)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="workspace folder to write into (default: this one)")
    parser.add_argument("--force", action="store_true", help="overwrite files that exist")
    args = parser.parse_args(argv)
    for path in build(args.out, force=args.force):
        print(f"wrote {path} ({path.stat().st_size:,} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
