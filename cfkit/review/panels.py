"""The pictures of the review view as pixel arrays, at any size: for terminal cells and for a PNG alike.

Three panels show one edit: the original with the mask's outline, the edited
image, and the difference (a heat map of the largest channel change, or the
leaks in red over a faded original). The outline is drawn *beside* the mask —
on the pixels just outside it — so a tiny region (a 0.4 % mask over two
stars) stays visible inside its ring instead of being painted over. Zoom crops
every panel to the mask's bounding box — or to one of its regions, when they
lie far apart — padded and widened to the image's aspect ratio, so the crop
fills the same panel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

#: Colour of the mask outline (bright magenta, rare in photographs and paintings).
OUTLINE_RGB = (255, 0, 255)
#: Colour of leak pixels in the leak view.
LEAK_RGB = (255, 32, 32)
#: Zoom pads the mask's bounding box by this share of its size on each side (and at least 8 px).
ZOOM_PAD = 0.35
DIFF_MODES = ("heat", "leaks")
PANELS = ("original", "edited", "difference")


@dataclass(frozen=True)
class Box:
    """A crop of the image in pixels: rows ``y0:y1``, columns ``x0:x1``."""

    y0: int
    y1: int
    x0: int
    x1: int

    def crop(self, array: np.ndarray) -> np.ndarray:
        return array[self.y0:self.y1, self.x0:self.x1]

    @property
    def width(self) -> int:
        return self.x1 - self.x0

    @property
    def height(self) -> int:
        return self.y1 - self.y0


def largest_change(original: np.ndarray, edited: np.ndarray) -> np.ndarray:
    """Per pixel, the largest absolute channel difference (0..255, uint8)."""
    return np.abs(original.astype(np.int16) - edited.astype(np.int16)).max(axis=-1).astype(np.uint8)


def heat_colours(values: np.ndarray) -> np.ndarray:
    """Map 0..255 to black → red → yellow → white (a "hot" scale), uint8 RGB."""
    v = values.astype(np.float64) / 255.0
    r = np.clip(3 * v, 0, 1)
    g = np.clip(3 * v - 1, 0, 1)
    b = np.clip(3 * v - 2, 0, 1)
    return (np.stack([r, g, b], axis=-1) * 255 + 0.5).astype(np.uint8)


def block_max(values: np.ndarray, width: int, height: int) -> np.ndarray:
    """Shrink (or grow) a 2-D map to ``(height, width)`` keeping each block's maximum, so small changes stay visible."""
    rows, cols = values.shape
    ys = np.linspace(0, rows, height + 1)
    xs = np.linspace(0, cols, width + 1)
    y_start = np.minimum(np.floor(ys[:-1]).astype(int), rows - 1)
    x_start = np.minimum(np.floor(xs[:-1]).astype(int), cols - 1)
    if height <= rows and width <= cols:
        return np.maximum.reduceat(np.maximum.reduceat(values, y_start, axis=0), x_start, axis=1)
    # Growing (a zoomed crop): each output pixel takes the pixel it falls in.
    return values[y_start][:, x_start]


def resample(image: np.ndarray, width: int, height: int) -> np.ndarray:
    """An RGB image at ``width × height`` (area averaging when shrinking, nearest when growing)."""
    if image.shape[1] == width and image.shape[0] == height:
        return image
    shrinking = width <= image.shape[1] and height <= image.shape[0]
    method = Image.Resampling.BOX if shrinking else Image.Resampling.NEAREST
    return np.asarray(Image.fromarray(image).resize((width, height), method))


def mask_pixels(mask: np.ndarray, width: int, height: int) -> np.ndarray:
    """Where the mask touches each output pixel (bool): any masked source pixel marks it."""
    return block_max((mask > 127).astype(np.uint8), width, height) > 0


def ring(inside: np.ndarray, thickness: int = 1) -> np.ndarray:
    """The pixels just outside ``inside`` (bool), ``thickness`` deep: the outline drawn beside a region."""
    from scipy.ndimage import binary_dilation

    if not inside.any():
        return inside
    grown = binary_dilation(inside, structure=np.ones((3, 3), bool), iterations=max(1, thickness))
    return grown & ~inside


def zoom_box(mask: np.ndarray, pad: float = ZOOM_PAD) -> Box | None:
    """The mask's bounding box, padded and widened to the image's aspect ratio; None for an empty mask."""
    ys, xs = np.nonzero(mask > 127)
    if ys.size == 0:
        return None
    rows, cols = mask.shape
    y0, y1, x0, x1 = int(ys.min()), int(ys.max()) + 1, int(xs.min()), int(xs.max()) + 1
    extra = max(8, round(pad * max(y1 - y0, x1 - x0)))
    height, width = (y1 - y0) + 2 * extra, (x1 - x0) + 2 * extra
    aspect = cols / rows
    if width / height < aspect:
        width = round(height * aspect)
    else:
        height = round(width / aspect)
    width, height = min(cols, max(width, 2)), min(rows, max(height, 2))
    cy, cx = (y0 + y1) / 2, (x0 + x1) / 2
    top = int(min(max(0, round(cy - height / 2)), rows - height))
    left = int(min(max(0, round(cx - width / 2)), cols - width))
    return Box(top, top + height, left, left + width)


def zoom_boxes(mask: np.ndarray) -> list[Box]:
    """What ``z`` steps through: the whole mask's box, then each of its regions' when it has several.

    The whole mask's box is left out when it is nearly the image (two stars in
    opposite corners); regions are taken largest first, fragments within a few
    pixels of each other counting as one.
    """
    from scipy import ndimage

    whole = zoom_box(mask)
    if whole is None:
        return []
    rows, cols = mask.shape
    boxes = [] if whole.width * whole.height > 0.6 * rows * cols else [whole]
    joined = ndimage.binary_dilation(mask > 127, iterations=max(2, round(0.01 * max(rows, cols))))
    labels, count = ndimage.label(joined)
    if count > 1:
        sizes = np.bincount(labels.ravel(), weights=(mask > 127).ravel(), minlength=count + 1)
        for label in np.argsort(-sizes[1:]) + 1:
            region = np.where((labels == label) & (mask > 127), 255, 0).astype(np.uint8)
            box = zoom_box(region)
            if box is not None:
                boxes.append(box)
    return boxes or [whole]


@dataclass(frozen=True)
class Pictures:
    """The arrays one view draws, already cropped when zoomed; uint8 at the same size."""

    original: np.ndarray
    edited: np.ndarray
    mask: np.ndarray
    leaks: np.ndarray
    difference: np.ndarray
    zoom: float | None = None  # the magnification of a zoomed view (full width / crop width)
    region: str | None = None  # "2/3" when zoomed on one of several boxes

    @classmethod
    def of(cls, original: np.ndarray, edited: np.ndarray, mask: np.ndarray, leaks: np.ndarray,
           difference: np.ndarray | None = None, *, zoom: int = 0) -> "Pictures":
        """The arrays, cropped to the ``zoom``-th of :func:`zoom_boxes` (1-based; 0 shows the whole image)."""
        if difference is None:
            difference = largest_change(original, edited)
        boxes = zoom_boxes(mask) if zoom else []
        if not boxes:
            return cls(original, edited, mask, leaks, difference)
        box = boxes[(zoom - 1) % len(boxes)]
        region = f"{(zoom - 1) % len(boxes) + 1}/{len(boxes)}" if len(boxes) > 1 else None
        return cls(box.crop(original), box.crop(edited), box.crop(mask), box.crop(leaks), box.crop(difference),
                   zoom=mask.shape[1] / box.width, region=region)


def panel(pictures: Pictures, which: str, width: int, height: int, *, diff_mode: str = "heat",
          thickness: int = 1) -> np.ndarray:
    """One panel (``original``, ``edited`` or ``difference``) as ``(height, width, 3)`` uint8.

    ``thickness`` is the outline's width in output pixels (1 for terminal cells).
    """
    if which == "original":
        pixels = resample(pictures.original, width, height).copy()
        pixels[ring(mask_pixels(pictures.mask, width, height), thickness)] = OUTLINE_RGB
        return pixels
    if which == "edited":
        return resample(pictures.edited, width, height)
    if which != "difference":
        raise ValueError(f"panel must be one of {PANELS}, not {which!r}")
    if diff_mode == "heat":
        return heat_colours(block_max(pictures.difference, width, height))
    if diff_mode != "leaks":
        raise ValueError(f"diff_mode must be one of {DIFF_MODES}, not {diff_mode!r}")
    faded = (resample(pictures.original, width, height).astype(np.float64) * 0.35 + 255 * 0.65).astype(np.uint8)
    faded[block_max(pictures.leaks.astype(np.uint8), width, height) > 0] = LEAK_RGB
    faded[ring(mask_pixels(pictures.mask, width, height), thickness)] = OUTLINE_RGB
    return faded
