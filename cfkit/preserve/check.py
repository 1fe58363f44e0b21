"""Checking a stored edit: read its files and mask, measure, judge, store one check per output."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from cfkit.errors import ConfigError, ImageError, NotFoundError
from cfkit.images import image_array
from cfkit.preserve.metrics import measure
from cfkit.preserve.perceptual import load_lpips
from cfkit.preserve.scorer import LpipsScorer
from cfkit.preserve.thresholds import Thresholds
from cfkit.preserve.verdict import judge
from cfkit.masks import load_mask
from cfkit.specs import load_spec
from cfkit.store import Store, checks, edits
from cfkit.store.checks import VARIANTS, CheckResult, NewCheck
from cfkit.workspace import Workspace


@dataclass(frozen=True)
class EditImages:
    """An edit's original, outputs and mask as arrays at the original's size."""

    spec_id: str
    edit_id: int
    original: np.ndarray
    mask: np.ndarray
    outputs: dict[str, np.ndarray]  # variant -> image
    resized: dict[str, list[int]]  # variant -> [w, h] of the file when it was resized
    spec: Any  # cfkit.specs.Spec


def load_edit_images(ws: Workspace, store: Store, edit_id: int) -> EditImages:
    """Read an edit's files and its spec's mask; outputs of another size are resized (same aspect only)."""
    from cfkit.specs import try_load_cases

    record = edits.get(store, edit_id)
    spec_id = record.spec_id
    if record.status != "ok":
        raise NotFoundError(f"edit {edit_id} of {spec_id} is '{record.status}' ({record.error or 'no image'}); "
                         f"nothing to check. Make a new one with 'cfkit edit {spec_id}'.")
    spec = load_spec(ws, spec_id).spec
    cases = try_load_cases(ws)
    if cases is None:
        raise ConfigError(f"cases file {ws.cases_path} is missing, so {spec_id}'s original image cannot be found. "
                         "Set [dataset] cases in cfkit.toml.")
    case = cases.get(spec.case)
    original = image_array(cases.image_paths(case)[0], what=f"case {case.id} image")
    height, width = original.shape[:2]
    mask = load_mask(ws, spec, (width, height)).array
    outputs: dict[str, np.ndarray] = {}
    resized: dict[str, list[int]] = {}
    for variant in VARIANTS:
        path = record.image_path(variant)
        if path is None:
            continue
        image = image_array(path, what=f"edit {edit_id} {variant} image")
        if image.shape[:2] != (height, width):
            h, w = image.shape[:2]
            if abs((w / h) / (width / height) - 1) > 0.01:
                raise ImageError(f"edit {edit_id} {variant} image {path} is {w}x{h} but the original is "
                                 f"{width}x{height} (another aspect ratio); the check cannot align them.")
            image = np.asarray(Image.fromarray(image).resize((width, height), Image.Resampling.LANCZOS))
            resized[variant] = [w, h]
        outputs[variant] = image
    if not outputs:
        raise NotFoundError(f"edit {edit_id} of {spec_id} records no image file; nothing to check.")
    return EditImages(spec_id, edit_id, original, mask, outputs, resized, spec)


def check_edit(ws: Workspace, store: Store, edit_id: int, *, lpips_weights: Path | None = None,
               scorer: LpipsScorer | None = None) -> list[CheckResult]:
    """Measure every output of an edit, judge it and store one ``checks`` row per variant.

    LPIPS uses ``scorer`` when given, else :func:`load_lpips` (``lpips_weights``,
    ``$CFKIT_LPIPS_BACKBONE``, ``[check] lpips_backbone``, torch's hub cache).
    """
    # 1. Inputs: the edit's files, its spec's mask and thresholds.
    images = load_edit_images(ws, store, edit_id)
    thresholds = Thresholds.for_spec(images.spec.checks, margin=ws.config.check.margin)
    # 2. LPIPS, when its weights are here.
    if scorer is None:
        loaded = load_lpips(ws, lpips_weights)
        scorer, note = loaded.scorer, loaded.note
    else:
        note = f"LPIPS: {scorer.description}"
    # 3. Measure and judge each output, then store all rows together.
    new = []
    for variant, edited in images.outputs.items():
        metrics, _ = measure(images.original, edited, images.mask, thresholds, scorer, lpips_note=note)
        if variant in images.resized:
            metrics = replace(metrics, resized_from=images.resized[variant])
        verdict = judge(metrics, thresholds)
        new.append(NewCheck(variant=variant, metrics=metrics.to_dict(), verdict=verdict.verdict,
                            reasons=verdict.reasons, lpips_measured=verdict.lpips_measured))
    return checks.insert(store, edit_id, images.spec_id, new)


def check_spec(ws: Workspace, store: Store, spec_id: str, *, lpips_weights: Path | None = None,
               scorer: LpipsScorer | None = None) -> list[CheckResult]:
    """:func:`check_edit` on the newest successful edit of a spec."""
    load_spec(ws, spec_id)  # a helpful error for an unknown id
    newest = edits.newest_ok(store, spec_id)
    if newest is None:
        raise NotFoundError(f"{spec_id} has no successful edit yet; make one with 'cfkit edit {spec_id}'.")
    return check_edit(ws, store, newest.id, lpips_weights=lpips_weights, scorer=scorer)
