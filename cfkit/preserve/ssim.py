"""SSIM over a region, one strip of rows at a time, for one or several edits of one original.

The figure is scikit-image's ``structural_similarity(a, b, full=True,
data_range=255, channel_axis=-1, win_size=7)`` map, averaged over the channels
and then over a region (see :mod:`cfkit.preserve`). The map is computed here with
the same arithmetic, in the same order, so the result is the same float:

* per channel, both images as float64; means ``ux``, ``uy`` and second moments
  ``uxx``, ``uyy``, ``uxy`` from a ``window × window`` uniform filter (scipy's
  ``uniform_filter``, mode ``reflect``); sample covariances (× n/(n−1));
* ``S = (2·ux·uy + C1)(2·vxy + C2) / ((ux² + uy² + C1)(vx + vy + C2))`` with
  ``C1 = (0.01·255)²``, ``C2 = (0.03·255)²`` (Wang et al. 2004);
* the channels summed in order and divided by their number; the region's values
  gathered in raster order and averaged once.

Two things make it cheaper than calling scikit-image once per output:

* **Strips.** A window reaches ``window // 2`` rows up and down, so the map of
  rows ``[r0, r1)`` needs only rows ``[r0 − h, r1 + h)`` of the images (clipped at
  the image's edges, where the filter reflects exactly as it does on the whole
  image). Each of a strip's temporaries is about 1 MiB (:data:`STRIP_PIXELS`
  float64 values) instead of a full-size float64 array, so they stay in cache
  and their number does not grow with the image. Strips holding no pixel of the
  region are skipped. What does grow is the gathered region values, 8 bytes a
  pixel per output, kept so that their mean is numpy's mean of the whole map.
* **The original's statistics once.** ``ux``, ``ux²``, ``2·ux`` and ``vx`` of a
  strip of the original serve every output of the edit (raw and composite).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
from scipy.ndimage import uniform_filter

from cfkit.errors import ImageError
from cfkit.plural import plural
from cfkit.preserve.regions import SSIM_WINDOW

#: Constants of Wang et al. (2004), as scikit-image uses them, for 8-bit images.
K1, K2, DATA_RANGE = 0.01, 0.03, 255

#: About how many pixels one strip holds (its height is this over the image's width, at least 16 rows).
STRIP_PIXELS = 1 << 17


def strip_rows(height: int, width: int, *, pixels: int = STRIP_PIXELS) -> int:
    """Rows per strip for an image of ``width`` columns: about ``pixels`` pixels, at least 16 rows."""
    return max(16, min(height, pixels // max(width, 1)))


def strips(height: int, rows: int) -> Iterator[tuple[int, int]]:
    """``(r0, r1)`` row ranges of ``rows`` rows (the last one shorter) covering ``height`` rows."""
    for r0 in range(0, height, rows):
        yield r0, min(height, r0 + rows)


def _filter(image: np.ndarray, window: int) -> np.ndarray:
    return uniform_filter(image, size=window)


class _Reference:
    """One channel of a strip of the original and the statistics every output's map needs from it."""

    def __init__(self, x: np.ndarray, window: int):
        points = window**2
        self.window = window
        self.cov_norm = points / (points - 1)
        self.x = x
        self.ux = _filter(x, window)
        self.ux_sq = self.ux**2
        self.two_ux = 2 * self.ux
        vx = _filter(x * x, window)  # uxx
        vx -= self.ux_sq
        vx *= self.cov_norm
        self.vx = vx

    def ssim_map(self, y: np.ndarray) -> np.ndarray:
        """scikit-image's SSIM map of this channel against ``y`` (float64), in its order of operations.

        With ``v· = n/(n−1)·(u·· − u·u·)``:
        ``(2·ux·uy + C1)(2·vxy + C2) / ((ux² + uy² + C1)(vx + vy + C2))``, each step
        computed in place where scikit-image would make a new array of the same values.
        """
        c1 = (K1 * DATA_RANGE) ** 2
        c2 = (K2 * DATA_RANGE) ** 2
        uy = _filter(y, self.window)
        uy_sq = uy**2
        vy = _filter(y * y, self.window)  # uyy
        vy -= uy_sq
        vy *= self.cov_norm
        vxy = _filter(self.x * y, self.window)  # uxy
        vxy -= self.ux * uy
        vxy *= self.cov_norm
        a1 = np.multiply(self.two_ux, uy, out=uy)
        a1 += c1
        a2 = vxy
        a2 *= 2
        a2 += c2
        b1 = np.add(self.ux_sq, uy_sq, out=uy_sq)
        b1 += c1
        b2 = np.add(self.vx, vy, out=vy)
        b2 += c2
        a1 *= a2
        b1 *= b2
        a1 /= b1
        return a1


def ssim_means(original: np.ndarray, outputs: Sequence[np.ndarray], region: np.ndarray, *,
               window: int = SSIM_WINDOW, rows: int | None = None) -> list[float | None]:
    """Mean of each output's channel-averaged SSIM map against ``original`` over ``region``.

    ``original`` and every output are ``(H, W, C)`` uint8 of one size, ``region``
    is ``(H, W)`` boolean; None for each output when the region is empty. ``rows``
    sets the strip height (default :func:`strip_rows`); the result does not depend on it.
    """
    height, width, channels = original.shape
    count = int(np.count_nonzero(region))
    if count == 0:
        return [None] * len(outputs)
    if min(height, width) < window:
        raise ImageError(f"the image is {width}x{height}; SSIM needs at least {window}x{plural(window, 'pixel')}. "
                         "Check a larger image.")
    half = window // 2
    rows = rows or strip_rows(height, width)
    gathered = [np.empty(count) for _ in outputs]
    filled = 0
    for r0, r1 in strips(height, rows):
        selected = region[r0:r1]
        n = int(np.count_nonzero(selected))
        if n == 0:
            continue
        h0, h1 = max(0, r0 - half), min(height, r1 + half)
        keep = slice(r0 - h0, r1 - h0)
        sums: list[np.ndarray | None] = [None] * len(outputs)
        for c in range(channels):
            reference = _Reference(original[h0:h1, :, c].astype(np.float64), window)
            for k, output in enumerate(outputs):
                s = reference.ssim_map(output[h0:h1, :, c].astype(np.float64))[keep]
                sums[k] = s if sums[k] is None else np.add(sums[k], s, out=sums[k])
        for k, total in enumerate(sums):
            gathered[k][filled:filled + n] = np.divide(total, channels, out=total)[selected]
        filled += n
    return [float(values.mean()) for values in gathered]
