"""Non-target preservation: did an edit change the cue and keep everything else?

An edit is compared with its source image at the source's size. Two regions
matter:

* the **mask** M (255 = edit), where the image *should* change, and
* the **keep region** K: every pixel farther than ``margin`` pixels (Euclidean)
  from M, minus a ``border`` of pixels along the image's edges (editors and
  resamplers disturb edges, and windowed metrics pad there).

Measured for each output of an edit (the editor's ``raw`` image and the
``composite`` pasted back over the original outside the mask):

``ssim_out``
    scikit-image's ``structural_similarity(full=True, data_range=255,
    channel_axis=-1)`` map, averaged over the channels and then over K minus
    the mask dilated by the SSIM window (7 × 7, so no window touches M).
``mse_out`` / ``psnr_out``
    Mean squared error over K's pixels only (0..255 scale, all channels), and
    PSNR = 10·log10(255² / MSE) in dB. ``psnr_out`` is null when the MSE is 0
    (identical over K: PSNR is infinite).
``lpips_in``
    LPIPS (Zhang et al. 2018, the ``lpips`` package, AlexNet, ``spatial=True``,
    inputs scaled to [-1, 1]) between the original and the edit, averaged over M.
``lpips_out``
    LPIPS of what the edit changed in K alone: the edit against the *in-mask-only
    composite* (the edit with K's pixels put back from the original), averaged
    over K. Both images hold the same change inside M and its margin, so the
    network's receptive field (which carries an in-mask change tens of pixels
    into K) cancels; an edit that changed no pixel of K scores exactly 0, and any
    change in K is measured in full. (Comparing with the original over K would
    count the mask's own change as a change outside it.)

For both, images whose longest side exceeds ``LPIPS_WORKING_SIZE`` (512) are
scaled down for the network and the map is scaled back. Null when the AlexNet
ImageNet weights are not on this machine; see :func:`cfkit.weights.lpips.load_lpips`.
``mad_in``
    Mean absolute difference inside M, as a fraction of full scale (0..1).
``leak_share`` / ``leak_boxes``
    Share of K's pixels whose largest channel difference exceeds
    ``leak_delta`` (0..255), and the bounding boxes ``[x0, y0, x1, y1]``
    (pixels, end-exclusive) of the connected leaks, largest first.

Default thresholds (:class:`Thresholds`; a spec's ``checks:`` overrides
``lpips_out_max``, ``ssim_out_min``, ``psnr_out_min``, ``change_in_min``,
``leak_max`` and ``margin``; ``[check] margin`` in cfkit.toml sets the
workspace default):

=================  ========  ===================================================
threshold          default   fails when
=================  ========  ===================================================
``ssim_out_min``   0.95      SSIM over K is lower
``psnr_out_min``   30 dB     PSNR over K is lower
``lpips_out_max``  0.05      LPIPS of K's change is higher (when measured)
``leak_max``       0.01      more than 1 % of K changed by more than 24/255
``mad_in_min``     0.02      the mean absolute change inside M is smaller
``change_in_min``  0.05      LPIPS inside M is smaller (when measured)
=================  ========  ===================================================

The last two catch a no-op edit. Without LPIPS weights the verdict is decided
on the other figures and marked "without LPIPS".

The package's rooms: :mod:`~cfkit.preserve.regions` (M, K and the regions each
metric averages over), :mod:`~cfkit.preserve.ssim` (the SSIM map a strip of rows
at a time, the original's statistics shared by every output: scikit-image's
figure, bit for bit, in bounded memory), :mod:`~cfkit.preserve.metrics` (pixel
metrics, leaks, :func:`measure`), :mod:`~cfkit.preserve.scorer` (the LPIPS scorer),
:mod:`~cfkit.preserve.thresholds` and :mod:`~cfkit.preserve.verdict` (:func:`judge`)
and :mod:`~cfkit.preserve.check` (:func:`check_images`: every output of an edit).
The package is pure: arrays in, figures out. It imports no store, workspace, spec
or mask module (a test keeps it so). Finding LPIPS's weights is
:mod:`cfkit.weights.lpips`; reading a stored edit's files and storing its checks
is :mod:`cfkit.edit_files`.
"""

from __future__ import annotations

from cfkit.preserve.check import EditImages, OutputCheck, check_images, fit_output
from cfkit.preserve.metrics import (Leaks, Metrics, find_leaks, masked_mse, masked_ssim, mean_abs_change, measure,
                                    measure_outputs, outside_lpips, psnr)
from cfkit.preserve.scorer import LPIPS_WORKING_SIZE, LpipsScorer, scorer_from_features, working_image, working_shape
from cfkit.preserve.regions import SSIM_WINDOW, grow, keep_region, ssim_region
from cfkit.preserve.ssim import ssim_means
from cfkit.preserve.thresholds import Thresholds
from cfkit.preserve.verdict import Verdict, judge

__all__ = [
    "EditImages", "LPIPS_WORKING_SIZE", "Leaks", "LpipsScorer", "Metrics", "OutputCheck", "SSIM_WINDOW", "Thresholds",
    "Verdict", "check_images", "find_leaks", "fit_output", "grow", "judge", "keep_region",
    "masked_mse", "masked_ssim", "mean_abs_change", "measure", "measure_outputs", "outside_lpips", "psnr",
    "scorer_from_features", "ssim_means", "ssim_region",
    "working_image", "working_shape",
]
