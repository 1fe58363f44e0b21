"""Pixel metrics of an edit against its original, and :func:`measure`, which gathers them all."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from collections.abc import Sequence
from typing import Any

import numpy as np

from cfkit.errors import ImageError, SpecError
from cfkit.preserve.scorer import LpipsScorer
from cfkit.preserve.regions import keep_region, ssim_region
from cfkit.preserve.ssim import ssim_means, strip_rows, strips
from cfkit.preserve.thresholds import Thresholds


def masked_ssim(original: np.ndarray, edited: np.ndarray, region: np.ndarray) -> float | None:
    """Mean of the SSIM map (channel-averaged) over ``region``; None when the region is empty."""
    return ssim_means(original, [edited], region)[0]


@dataclass(frozen=True)
class Changes:
    """What an edit changed, pixel by pixel, summed exactly over the regions (see :func:`pixel_changes`)."""

    squared_out: int  # sum over K's pixels and channels of (original - edited)²
    absolute_in: int  # sum over M's pixels and channels of |original - edited|
    leak: np.ndarray  # (H, W) bool: pixels of K whose largest channel difference exceeds the leak delta


def pixel_changes(original: np.ndarray, edited: np.ndarray, keep: np.ndarray, inside: np.ndarray,
                  delta: int) -> Changes:
    """One pass over both images, a strip of rows at a time, for the MSE, the inside change and the leaks.

    Differences are small integers (int16) and their sums are exact (int64), so
    the figures derived from them do not depend on the strips.
    """
    height, width = keep.shape
    squared = absolute = 0
    leak = np.zeros(keep.shape, bool)
    for r0, r1 in strips(height, strip_rows(height, width)):
        diff = original[r0:r1].astype(np.int16)
        diff -= edited[r0:r1]
        np.abs(diff, out=diff)
        diff = diff.view(np.uint16)  # 0..255, so its square fits too
        out, into = keep[r0:r1], inside[r0:r1]
        if out.any():
            squared += int((diff * diff).sum(axis=-1, dtype=np.uint32)[out].sum(dtype=np.int64))
            largest = diff[..., 0].copy()
            for c in range(1, diff.shape[-1]):  # faster than .max(axis=-1) over three values
                np.maximum(largest, diff[..., c], out=largest)
            np.logical_and(out, largest > delta, out=leak[r0:r1])
        if into.any():
            absolute += int(diff.sum(axis=-1, dtype=np.uint32)[into].sum(dtype=np.int64))
    return Changes(squared, absolute, leak)


def masked_mse(original: np.ndarray, edited: np.ndarray, region: np.ndarray) -> float | None:
    """Mean squared error over the region's pixels only (0..255 scale, all channels)."""
    count = int(np.count_nonzero(region))
    if count == 0:
        return None
    squared = pixel_changes(original, edited, region, np.zeros_like(region), 255).squared_out
    return squared / (count * original.shape[-1])


def psnr(mse: float | None) -> float | None:
    """PSNR in dB for 8-bit images; None when the MSE is 0 (infinite) or unknown."""
    if mse is None or mse == 0:
        return None
    return 10.0 * math.log10(255.0**2 / mse)


def mean_abs_change(original: np.ndarray, edited: np.ndarray, region: np.ndarray) -> float | None:
    """Mean absolute difference over the region, as a fraction of full scale (0..1)."""
    count = int(np.count_nonzero(region))
    if count == 0:
        return None
    absolute = pixel_changes(original, edited, np.zeros_like(region), region, 255).absolute_in
    return absolute / (count * original.shape[-1]) / 255.0


@dataclass(frozen=True)
class Leaks:
    """Pixels of K that changed by more than the leak threshold."""

    share: float  # 0..1 of K's pixels
    boxes: list[list[int]]  # [x0, y0, x1, y1], end-exclusive, largest leak first
    count: int  # connected leak regions in all
    pixels: np.ndarray = field(repr=False, compare=False)  # boolean leak map, for views


#: How many leak boxes are kept in the metrics (the count says how many there were).
MAX_LEAK_BOXES = 20


def find_leaks(original: np.ndarray, edited: np.ndarray, keep: np.ndarray, delta: int) -> Leaks:
    """Leaks: pixels of K whose largest channel difference exceeds ``delta`` (0..255)."""
    return leaks_of(pixel_changes(original, edited, keep, np.zeros_like(keep), delta).leak, keep)


def leaks_of(leak: np.ndarray, keep: np.ndarray) -> Leaks:
    """The share of K that ``leak`` covers and its connected parts (8-connected), largest first.

    Only the bounding box of the leak pixels is labelled: the parts, their order
    (raster order of their first pixel, then by area) and their boxes are the
    same as on the whole image.
    """
    total = int(np.count_nonzero(keep))
    leaked = int(np.count_nonzero(leak))
    share = float(leaked) / total if total else 0.0
    if leaked == 0:
        return Leaks(share=share, boxes=[], count=0, pixels=leak)
    from skimage.measure import label, regionprops

    rows = np.flatnonzero(leak.any(axis=1))
    cols = np.flatnonzero(leak.any(axis=0))
    y0, x0 = int(rows[0]), int(cols[0])
    labels = label(leak[y0:rows[-1] + 1, x0:cols[-1] + 1], connectivity=2)
    props = sorted(regionprops(labels), key=lambda r: r.area, reverse=True)
    boxes = [[int(r.bbox[1]) + x0, int(r.bbox[0]) + y0, int(r.bbox[3]) + x0, int(r.bbox[2]) + y0]
             for r in props[:MAX_LEAK_BOXES]]
    return Leaks(share=share, boxes=boxes, count=len(props), pixels=leak)


@dataclass(frozen=True)
class Metrics:
    """Preservation figures of one edited image against its original (see the module docstring)."""

    ssim_out: float | None
    mse_out: float | None
    psnr_out: float | None
    lpips_out: float | None
    lpips_in: float | None
    mad_in: float | None
    leak_share: float
    leak_boxes: list[list[int]]
    leak_count: int
    keep_pixels: int
    mask_pixels: int
    ssim_pixels: int
    lpips_pixels: int
    width: int
    height: int
    margin: int
    lpips_note: str | None = None  # why LPIPS is missing, or where its weights came from
    resized_from: list[int] | None = None  # [w, h] when the edit had another size

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def outside_lpips(original: np.ndarray, edited: np.ndarray, keep: np.ndarray, scorer: LpipsScorer) -> float:
    """LPIPS of what the edit changed in the keep region K, and of nothing else.

    ``edited`` is compared with itself with K's pixels put back from ``original``
    (the in-mask-only composite): both hold the same change inside the mask and
    its margin, so the network's receptive field, which carries that change tens
    of pixels into K, gives them the same features there. What remains, averaged
    over K, is the effect of the pixels the edit changed in K. An edit that changed
    no pixel of K scores exactly 0 (without running the network).
    """
    reference = np.where(keep[..., None], original, edited)
    if np.array_equal(reference, edited):
        return 0.0
    return float(scorer.distance_map(reference, edited)[keep].mean())


@dataclass(frozen=True)
class Regions:
    """M, K and K less the SSIM window's reach around M, for one mask (shared by every output of an edit)."""

    inside: np.ndarray
    keep: np.ndarray
    ssim_keep: np.ndarray

    @classmethod
    def of(cls, mask: np.ndarray, shape: tuple[int, ...], thresholds: Thresholds) -> "Regions":
        if mask.shape != shape[:2]:
            raise SpecError(f"mask is {mask.shape[1]}x{mask.shape[0]} but the image is "
                            f"{shape[1]}x{shape[0]}; redraw the mask at the image's size.")
        inside = mask > 0
        keep = keep_region(mask, thresholds.margin, thresholds.border)
        if not inside.any():
            raise SpecError("the edit mask is empty; paint the region to edit in white.")
        if not keep.any():
            raise SpecError(f"the mask plus a {thresholds.margin}px margin covers the whole image; nothing is left "
                            "to check. Tighten the mask or lower checks.margin.")
        return cls(inside, keep, ssim_region(mask, keep))


def measure(original: np.ndarray, edited: np.ndarray, mask: np.ndarray, thresholds: Thresholds,
            scorer: LpipsScorer | None = None, *, lpips_note: str | None = None) -> tuple[Metrics, Leaks]:
    """Every preservation figure of ``edited`` against ``original`` (uint8 RGB, one size)."""
    return measure_outputs(original, [edited], mask, thresholds, scorer, lpips_note=lpips_note)[0]


def measure_outputs(original: np.ndarray, outputs: Sequence[np.ndarray], mask: np.ndarray, thresholds: Thresholds,
                    scorer: LpipsScorer | None = None, *,
                    lpips_note: str | None = None) -> list[tuple[Metrics, Leaks]]:
    """:func:`measure` for several edits of one original: the regions and the original's SSIM statistics once."""
    for edited in outputs:
        if original.shape != edited.shape or original.ndim != 3:
            raise ImageError(f"images to compare must be (H, W, 3) of one size; got {original.shape} and "
                             f"{edited.shape}.")
    regions = Regions.of(mask, original.shape, thresholds)
    ssims = ssim_means(original, outputs, regions.ssim_keep)
    return [_measure_one(original, edited, regions, ssim, thresholds, scorer, lpips_note)
            for edited, ssim in zip(outputs, ssims)]


def _measure_one(original: np.ndarray, edited: np.ndarray, regions: Regions, ssim: float | None,
                 thresholds: Thresholds, scorer: LpipsScorer | None, lpips_note: str | None) -> tuple[Metrics, Leaks]:
    inside, keep = regions.inside, regions.keep
    keep_pixels, mask_pixels = int(np.count_nonzero(keep)), int(np.count_nonzero(inside))
    channels = original.shape[-1]
    changes = pixel_changes(original, edited, keep, inside, thresholds.leak_delta)
    mse = changes.squared_out / (keep_pixels * channels)
    leaks = leaks_of(changes.leak, keep)
    lpips_out = lpips_in = None
    if scorer is not None:
        lpips_in = float(scorer.distance_map(original, edited)[inside].mean())
        lpips_out = outside_lpips(original, edited, keep, scorer)
    metrics = Metrics(
        ssim_out=ssim,
        mse_out=mse,
        psnr_out=psnr(mse),
        lpips_out=lpips_out,
        lpips_in=lpips_in,
        mad_in=changes.absolute_in / (mask_pixels * channels) / 255.0,
        leak_share=leaks.share,
        leak_boxes=leaks.boxes,
        leak_count=leaks.count,
        keep_pixels=keep_pixels,
        mask_pixels=mask_pixels,
        ssim_pixels=int(np.count_nonzero(regions.ssim_keep)),
        lpips_pixels=keep_pixels if scorer is not None else 0,
        width=int(original.shape[1]),
        height=int(original.shape[0]),
        margin=thresholds.margin,
        lpips_note=lpips_note,
    )
    return metrics, leaks
