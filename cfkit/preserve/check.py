"""The preservation check over arrays: every output of an edit against its source, judged.

Pure: uint8 arrays in, figures and verdicts out; nothing here reads a file, a spec
or the store. Reading a stored edit's files is :mod:`cfkit.edit_files`, which also
stores the results; ``cfkit edit`` checks the arrays it has just made.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from cfkit.errors import ImageError
from cfkit.preserve.metrics import Metrics, measure_outputs
from cfkit.preserve.scorer import LpipsScorer
from cfkit.preserve.thresholds import Thresholds
from cfkit.preserve.verdict import Verdict, judge


@dataclass(frozen=True)
class EditImages:
    """An edit's source, mask (255 = edit) and outputs, as arrays at the source's size."""

    original: np.ndarray
    mask: np.ndarray
    outputs: dict[str, np.ndarray]  # variant ("raw", "composite") -> image
    resized: dict[str, list[int]] = field(default_factory=dict)  # variant -> [w, h] of the file when it was resized


@dataclass(frozen=True)
class OutputCheck:
    """The figures and the verdict of one output."""

    variant: str
    metrics: Metrics
    verdict: Verdict


def fit_output(image: np.ndarray, size: tuple[int, int], *, what: str) -> tuple[np.ndarray, list[int] | None]:
    """``image`` at ``size`` (width, height): as it is, or resized when only its scale differs.

    Returns the image and, when it was resized, its own ``[w, h]``. Another aspect
    ratio is an :class:`ImageError`: the check could not align the pixels.
    """
    width, height = size
    if image.shape[:2] == (height, width):
        return image, None
    from PIL import Image

    h, w = image.shape[:2]
    if abs((w / h) / (width / height) - 1) > 0.01:
        raise ImageError(f"{what} is {w}x{h} but the original is {width}x{height} (another aspect ratio); "
                         "the check cannot align them.")
    return np.asarray(Image.fromarray(image).resize((width, height), Image.Resampling.LANCZOS)), [w, h]


def check_images(images: EditImages, thresholds: Thresholds, scorer: LpipsScorer | None = None, *,
                 lpips_note: str | None = None) -> list[OutputCheck]:
    """Measure and judge every output of ``images``; LPIPS with ``scorer`` when there is one."""
    variants = list(images.outputs)
    measured = measure_outputs(images.original, [images.outputs[v] for v in variants], images.mask, thresholds,
                               scorer, lpips_note=lpips_note)
    results = []
    for variant, (metrics, _) in zip(variants, measured):
        if variant in images.resized:
            metrics = replace(metrics, resized_from=images.resized[variant])
        results.append(OutputCheck(variant, metrics, judge(metrics, thresholds)))
    return results
