"""The regions the preservation metrics average over (see :mod:`cfkit.preserve`).

M is the mask (255 = edit); K, the keep region, is every pixel farther than
``margin`` pixels from M minus a ``border`` along the image's edges.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

#: Side of the square window scikit-image's SSIM uses by default.
SSIM_WINDOW = 7


def _bounding_box(region: np.ndarray, pad: int) -> tuple[slice, slice] | None:
    """The rows and columns holding ``region``'s pixels, widened by ``pad`` (clipped); None when it is empty."""
    rows = np.flatnonzero(region.any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(region.any(axis=0))
    return (slice(max(0, rows[0] - pad), min(region.shape[0], rows[-1] + pad + 1)),
            slice(max(0, cols[0] - pad), min(region.shape[1], cols[-1] + pad + 1)))


def grow(region: np.ndarray, radius: float) -> np.ndarray:
    """Pixels within Euclidean distance ``radius`` of a boolean region (the region included).

    Only the region's bounding box, padded by the radius, is transformed: no
    pixel outside it can be that close, and a small mask on a large image costs little.
    """
    out = np.zeros_like(region)
    box = _bounding_box(region, int(np.ceil(radius)) + 1)
    if box is not None:
        out[box] = ndimage.distance_transform_edt(~region[box]) <= radius
    return out


def _clear_border(region: np.ndarray, width: int) -> np.ndarray:
    if width > 0:
        region[:width, :] = region[-width:, :] = False
        region[:, :width] = region[:, -width:] = False
    return region


def keep_region(mask: np.ndarray, margin: int, border: int) -> np.ndarray:
    """K: pixels farther than ``margin`` from the mask, minus ``border`` pixels at the edges."""
    return _clear_border(~grow(mask > 0, margin), border)


def _dilate_square(region: np.ndarray, radius: int) -> np.ndarray:
    """Grow a boolean region by ``radius`` pixels in the chessboard metric (a square window).

    Like :func:`grow`, only the bounding box padded by the radius is filtered.
    """
    if radius <= 0:
        return region.copy()
    out = np.zeros_like(region)
    box = _bounding_box(region, radius)
    if box is not None:
        out[box] = ndimage.maximum_filter(region[box].astype(np.uint8), size=2 * radius + 1, mode="constant") > 0
    return out


def ssim_region(mask: np.ndarray, keep: np.ndarray, window: int = SSIM_WINDOW) -> np.ndarray:
    """K minus the mask dilated by the SSIM window, so that no window centred there touches M."""
    return keep & ~_dilate_square(mask > 0, window // 2)
