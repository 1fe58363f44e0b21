"""Pixel metrics of an edit against its original, and :func:`measure`, which gathers them all."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from cfkit.errors import ImageError, SpecError
from cfkit.preserve.scorer import LpipsScorer
from cfkit.preserve.regions import SSIM_WINDOW, keep_region, ssim_region
from cfkit.preserve.thresholds import Thresholds


def masked_ssim(original: np.ndarray, edited: np.ndarray, region: np.ndarray) -> float | None:
    """Mean of the SSIM map (channel-averaged) over ``region``; None when the region is empty."""
    from skimage.metrics import structural_similarity

    if not region.any():
        return None
    _, ssim_map = structural_similarity(
        original, edited, full=True, data_range=255, channel_axis=-1, win_size=SSIM_WINDOW
    )
    return float(ssim_map.mean(axis=-1)[region].mean())


def masked_mse(original: np.ndarray, edited: np.ndarray, region: np.ndarray) -> float | None:
    """Mean squared error over the region's pixels only (0..255 scale, all channels)."""
    if not region.any():
        return None
    diff = original[region].astype(np.float64) - edited[region].astype(np.float64)
    return float(np.mean(diff * diff))


def psnr(mse: float | None) -> float | None:
    """PSNR in dB for 8-bit images; None when the MSE is 0 (infinite) or unknown."""
    if mse is None or mse == 0:
        return None
    return 10.0 * math.log10(255.0**2 / mse)


def mean_abs_change(original: np.ndarray, edited: np.ndarray, region: np.ndarray) -> float | None:
    """Mean absolute difference over the region, as a fraction of full scale (0..1)."""
    if not region.any():
        return None
    diff = np.abs(original[region].astype(np.float64) - edited[region].astype(np.float64))
    return float(diff.mean() / 255.0)


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
    from skimage.measure import label, regionprops

    diff = np.abs(original.astype(np.int16) - edited.astype(np.int16)).max(axis=-1)
    leak = keep & (diff > delta)
    total = int(keep.sum())
    share = float(leak.sum()) / total if total else 0.0
    labels = label(leak, connectivity=2)
    props = sorted(regionprops(labels), key=lambda r: r.area, reverse=True)
    boxes = [[int(r.bbox[1]), int(r.bbox[0]), int(r.bbox[3]), int(r.bbox[2])] for r in props[:MAX_LEAK_BOXES]]
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


def measure(original: np.ndarray, edited: np.ndarray, mask: np.ndarray, thresholds: Thresholds,
            scorer: LpipsScorer | None = None, *, lpips_note: str | None = None) -> tuple[Metrics, Leaks]:
    """Every preservation figure of ``edited`` against ``original`` (uint8 RGB, one size)."""
    if original.shape != edited.shape or original.ndim != 3:
        raise ImageError(f"images to compare must be (H, W, 3) of one size; got {original.shape} and {edited.shape}.")
    if mask.shape != original.shape[:2]:
        raise SpecError(f"mask is {mask.shape[1]}x{mask.shape[0]} but the image is "
                        f"{original.shape[1]}x{original.shape[0]}; redraw the mask at the image's size.")
    inside = mask > 0
    keep = keep_region(mask, thresholds.margin, thresholds.border)
    if not inside.any():
        raise SpecError("the edit mask is empty; paint the region to edit in white.")
    if not keep.any():
        raise SpecError(f"the mask plus a {thresholds.margin}px margin covers the whole image; nothing is left "
                        "to check. Tighten the mask or lower checks.margin.")
    ssim_keep = ssim_region(mask, keep)
    mse = masked_mse(original, edited, keep)
    leaks = find_leaks(original, edited, keep, thresholds.leak_delta)
    lpips_out = lpips_in = None
    if scorer is not None:
        lpips_in = float(scorer.distance_map(original, edited)[inside].mean())
        lpips_out = outside_lpips(original, edited, keep, scorer)
    metrics = Metrics(
        ssim_out=masked_ssim(original, edited, ssim_keep),
        mse_out=mse,
        psnr_out=psnr(mse),
        lpips_out=lpips_out,
        lpips_in=lpips_in,
        mad_in=mean_abs_change(original, edited, inside),
        leak_share=leaks.share,
        leak_boxes=leaks.boxes,
        leak_count=leaks.count,
        keep_pixels=int(keep.sum()),
        mask_pixels=int(inside.sum()),
        ssim_pixels=int(ssim_keep.sum()),
        lpips_pixels=int(keep.sum()) if scorer is not None else 0,
        width=int(original.shape[1]),
        height=int(original.shape[0]),
        margin=thresholds.margin,
        lpips_note=lpips_note,
    )
    return metrics, leaks
