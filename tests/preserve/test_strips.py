"""The check computed a strip of rows at a time gives the figures of whole-image computations.

SSIM is compared with scikit-image's ``structural_similarity`` called on the
whole images, bit for bit (the strip code does the same float64 arithmetic in
the same order, and scipy's uniform filter gives the same values on a strip
padded by the window's half-width as on the whole image). The pixel sums are
compared with plain float64 numpy over the whole images, also exactly (integer
sums). Image sizes are chosen so that no strip height divides them.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from skimage.measure import label, regionprops
from skimage.metrics import structural_similarity

from cfkit.errors import ImageError
from cfkit.preserve import EditImages, Thresholds, check_images, measure
from cfkit.preserve.metrics import leaks_of, pixel_changes
from cfkit.preserve.ssim import ssim_means, strip_rows, strips


def skimage_mean(original: np.ndarray, edited: np.ndarray, region: np.ndarray) -> float:
    """The reference: scikit-image's map of the whole images, channel-averaged, averaged over the region."""
    _, full = structural_similarity(original, edited, full=True, data_range=255, channel_axis=-1, win_size=7)
    return float(full.mean(axis=-1)[region].mean())


def images(height: int, width: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An original with structure, a slightly noisy copy and an unrelated image."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    original = np.stack([x * 2 % 256, y * 3 % 256, (x * y) % 256], -1) + rng.normal(0, 8, (height, width, 3))
    original = np.clip(original, 0, 255).astype(np.uint8)
    noisy = np.clip(original + rng.normal(0, 6, original.shape), 0, 255).astype(np.uint8)
    other = rng.integers(0, 256, original.shape, dtype=np.uint8)
    return original, noisy, other


@pytest.mark.parametrize("height, width", [(37, 53), (130, 97), (301, 64)])
@pytest.mark.parametrize("rows", [1, 7, 16, 23, None])
def test_ssim_by_strips_is_skimage_on_the_whole_image(height, width, rows):
    original, noisy, other = images(height, width)
    region = np.random.default_rng(1).random((height, width)) < 0.6
    region[height // 3: height // 2] = False  # a band of strips with nothing to average is skipped
    got = ssim_means(original, [noisy, other, original], region, rows=rows)
    assert got == [skimage_mean(original, e, region) for e in (noisy, other, original)]


def test_every_pixel_of_the_map_matches_at_strip_edges_and_image_edges():
    original, noisy, _ = images(61, 45, seed=3)
    _, full = structural_similarity(original, noisy, full=True, data_range=255, channel_axis=-1, win_size=7)
    expected = full.mean(axis=-1)
    rows = 10  # strips start at 0, 10, 20, …; their edges and the image's edges are where a tiling error shows
    for y in (0, 1, 2, 3, 9, 10, 11, 12, 13, 29, 30, 57, 58, 59, 60):
        for x in (0, 2, 3, 22, 41, 42, 44):
            region = np.zeros(expected.shape, bool)
            region[y, x] = True
            assert ssim_means(original, [noisy], region, rows=rows) == [expected[y, x]], (y, x)


def test_empty_region_gives_none_and_a_too_small_image_is_an_image_error():
    original, noisy, _ = images(20, 20)
    assert ssim_means(original, [noisy, noisy], np.zeros((20, 20), bool)) == [None, None]
    with pytest.raises(ImageError, match="6x20; SSIM needs at least 7x7"):
        ssim_means(original[:, :6], [noisy[:, :6]], np.ones((20, 6), bool))


def test_strips_cover_every_row_once():
    for height, rows in ((1, 16), (16, 16), (17, 16), (4097, 32)):
        covered = [r for r0, r1 in strips(height, rows) for r in range(r0, r1)]
        assert covered == list(range(height))
    assert strip_rows(4096, 4096) == 32 and strip_rows(10, 4096) == 16 and strip_rows(50, 100) == 50


def test_pixel_sums_and_leaks_equal_whole_image_float64_arithmetic():
    # 2,000 columns: strips of 65 rows, so 301 rows make five strips, the last a short one.
    original, noisy, other = images(301, 2000, seed=4)
    rng = np.random.default_rng(5)
    keep, inside = rng.random((301, 2000)) < 0.7, rng.random((301, 2000)) < 0.2
    for edited in (noisy, other):
        changes = pixel_changes(original, edited, keep, inside, 24)
        diff = original.astype(np.float64) - edited.astype(np.float64)
        assert changes.squared_out / (keep.sum() * 3) == float(np.mean(diff[keep] * diff[keep]))
        assert changes.absolute_in / (inside.sum() * 3) / 255.0 == float(np.abs(diff[inside]).mean() / 255.0)
        assert np.array_equal(changes.leak, keep & (np.abs(diff).max(axis=-1) > 24))


def test_leaks_labelled_in_their_bounding_box_are_those_of_the_whole_image():
    rng = np.random.default_rng(6)
    keep = np.ones((200, 300), bool)
    for density in (0.002, 0.02, 0.3):
        leak = np.zeros((200, 300), bool)
        leak[40:170, 25:260] = rng.random((130, 235)) < density
        got = leaks_of(leak, keep)
        props = sorted(regionprops(label(leak, connectivity=2)), key=lambda r: r.area, reverse=True)
        assert got.count == len(props)
        assert got.boxes == [[r.bbox[1], r.bbox[0], r.bbox[3], r.bbox[2]] for r in props[:20]]
        assert got.share == leak.sum() / keep.sum()
    none = leaks_of(np.zeros((200, 300), bool), keep)
    assert (none.share, none.boxes, none.count) == (0.0, [], 0)


def test_check_of_two_outputs_is_each_output_measured_alone():
    # 1,100 × 1,300: strips of 100 rows, eleven of them; the mask crosses strip edges.
    original, noisy, other = images(1100, 1300, seed=7)
    mask = np.zeros((1100, 1300), np.uint8)
    mask[290:610, 333:900] = 255
    composite = original.copy()
    composite[mask > 0] = other[mask > 0]
    t = Thresholds()
    checked = check_images(EditImages(original, mask, {"raw": noisy, "composite": composite}), t)
    for result, edited in zip(checked, (noisy, composite)):
        alone, _ = measure(original, edited, mask, t)
        assert result.metrics == alone
    # and against scikit-image on the whole image, over the region the check reports
    y, x = np.mgrid[0:1100, 0:1300]
    dy, dx = np.maximum(0, np.maximum(290 - y, y - 609)), np.maximum(0, np.maximum(333 - x, x - 899))
    ssim_keep = (dy**2 + dx**2 > t.margin**2) & (np.maximum(dy, dx) > 3)  # K, less the 7×7 window's reach
    ssim_keep &= (y >= 4) & (y < 1096) & (x >= 4) & (x < 1296)  # less the border
    assert checked[0].metrics.ssim_pixels == ssim_keep.sum()
    assert checked[0].metrics.ssim_out == skimage_mean(original, noisy, ssim_keep)


def _ssim_temporaries(height: int, width: int) -> float:
    """Bytes ``ssim_means`` allocates at its peak for two outputs, less the region's gathered values."""
    original, noisy, _ = images(height, width, seed=8)
    region = np.ones((height, width), bool)
    tracemalloc.start()
    try:
        ssim_means(original, [noisy, original], region)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The region's values (8 B a pixel per output) are kept so that their mean is numpy's over the whole map.
    return peak - 2 * 8 * region.sum()


def test_ssim_memory_is_bounded_by_strips_not_by_the_image():
    strip = (strip_rows(2048, 512) + 6) * 512 * 8  # one float64 channel of a strip and its halo
    short, tall = _ssim_temporaries(512, 512), _ssim_temporaries(2048, 512)
    assert tall < short + 2**20  # four times the rows, the same temporaries
    # About fifteen strip-sized arrays; scikit-image holds about a dozen full-size ones (8 MiB each here).
    assert tall < 20 * strip < 3 * 2048 * 512 * 8


def test_square_dilation_in_the_masks_bounding_box_is_the_whole_image_filter():
    from scipy import ndimage

    from cfkit.preserve.regions import _dilate_square

    rng = np.random.default_rng(9)
    masks = [np.zeros((50, 70), bool), rng.random((50, 70)) < 0.01]
    edge = np.zeros((50, 70), bool)
    edge[0, 5], edge[49, 69], edge[20, 0] = True, True, True  # pixels on the image's edges
    masks.append(edge)
    for mask in masks:
        for radius in (0, 1, 3, 6):
            whole = ndimage.maximum_filter(mask.astype(np.uint8), size=2 * radius + 1, mode="constant") > 0
            assert np.array_equal(_dilate_square(mask, radius), whole), radius
