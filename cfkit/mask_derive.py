"""Masks derived from an edit: where an edited image differs from its source.

An edit made elsewhere shows by itself where it changed the image, so a spec
without a hand-drawn mask can take one from the difference.
:func:`derive_mask` reads as steps:

1. the per-pixel colour difference, CIE76 ΔE in CIE Lab (perceptual units:
   about 2.3 is a just-noticeable difference), lightly smoothed so re-encoding
   noise does not count;
2. a threshold: Otsu's split of the difference, never below
   :data:`MIN_DELTA_E`, applied with hysteresis (pixels above half the
   threshold count when they touch pixels above it, so a feathered edge stays
   with its region);
3. clean-up: specks smaller than :data:`MIN_REGION_SHARE` of the image are
   dropped, nearby fragments are joined (a morphological closing) and holes
   inside a region are filled (a changed object keeps its unchanged pixels);
4. a margin of ``margin_px`` around every region (default about 0.6 % of the
   image's shorter side, at least 1 px).

:func:`write_derived_mask` writes the result as the spec's mask PNG, never over
an existing mask unless asked, with a tEXt chunk saying it was derived
(:data:`cfkit.masks.DERIVED_KEY`): a derived mask is flagged for review until a
person accepts an edit made with it (:func:`cfkit.masks.derived_mask_state`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, PngImagePlugin

from cfkit.errors import ImageError, OutputError, SpecError
from cfkit.files import write_bytes_atomic
from cfkit.images import open_image
from cfkit.masks import ASPECT_TOLERANCE, DERIVED_KEY, mask_file
from cfkit.specs import Spec, load_spec, set_spec_mask, try_load_cases
from cfkit.workspace import Workspace

#: Smallest colour difference (CIE76 ΔE) that counts as a change, whatever Otsu's split says.
MIN_DELTA_E = 6.0
#: Regions smaller than this share of the image are dropped as specks (at least 16 px).
MIN_REGION_SHARE = 0.0002
#: Holes inside a region up to this share of the image are filled (an object keeps its unchanged pixels).
HOLE_SHARE = 0.0005
#: The noise ceiling: this many robust standard deviations above the median difference.
NOISE_MADS = 10.0
#: Default margin around the derived regions, as a share of the image's shorter side (at least 1 px).
MARGIN_SHARE = 0.006


@dataclass(frozen=True)
class DerivedMask:
    """A mask derived from an edit: uint8 at the source's size, 255 = changed (with the margin)."""

    array: np.ndarray
    threshold: float  # ΔE that counted as a change
    margin_px: int
    regions: int  # connected regions after the clean-up

    @property
    def coverage(self) -> float:
        """Share of the image the mask covers, 0..1."""
        return float(np.count_nonzero(self.array)) / self.array.size

    def provenance(self, source: str) -> dict:
        """What the mask PNG records about how it was made; ``source`` names the edit it came from."""
        return {"source": source, "threshold_delta_e": round(self.threshold, 3), "margin_px": self.margin_px,
                "regions": self.regions, "method": "CIE76 ΔE above the noise, hysteresis, closing, small holes filled"}


def colour_difference(original: np.ndarray, edited: np.ndarray) -> np.ndarray:
    """Per-pixel CIE76 ΔE between two uint8 RGB images of one size (float64, ≥ 0)."""
    from skimage.color import deltaE_cie76, rgb2lab

    if original.shape != edited.shape:
        raise ImageError(f"the edit is {edited.shape[1]}x{edited.shape[0]} but the source is "
                         f"{original.shape[1]}x{original.shape[0]}; align them first.")
    return deltaE_cie76(rgb2lab(original), rgb2lab(edited))


def derive_mask(original: np.ndarray, edited: np.ndarray, *, threshold: float | None = None,
                margin_px: int | None = None) -> DerivedMask:
    """The region where ``edited`` differs from ``original`` (both uint8 RGB, one size), with a margin.

    ``threshold`` is the ΔE that counts as a change (default: Otsu's split of
    the difference, at least :data:`MIN_DELTA_E`); ``margin_px`` the margin
    added around every region. Raises :class:`SpecError` when nothing changed.
    """
    from scipy import ndimage
    from skimage.morphology import disk

    height, width = original.shape[:2]
    short = min(height, width)
    # 1. The difference, smoothed a little: re-encoding noise is pixel-sized, an edit is not.
    smoothed = ndimage.gaussian_filter(colour_difference(original, edited), sigma=max(1.0, short / 256))
    # 2. The thresholds: pixels above the noise that belong to a region with a clear change in it.
    low, high = change_thresholds(smoothed, threshold)
    labels, count = ndimage.label(smoothed > low, structure=np.ones((3, 3)))
    seeded = np.zeros(count + 1, bool)
    seeded[np.unique(labels[smoothed > high])] = True
    seeded[0] = False
    changed = seeded[labels]
    # 3. Clean-up: no specks, fragments joined, small holes filled.
    area = height * width
    changed = _drop_small(changed, max(16, round(MIN_REGION_SHARE * area)))
    closing = max(1, round(short / 100))
    padded = np.pad(changed, closing)
    changed = ndimage.binary_closing(padded, structure=disk(closing))[closing:-closing, closing:-closing]
    changed = ~_drop_small(~changed, max(16, round(HOLE_SHARE * area)))
    if not changed.any():
        median = float(np.median(smoothed))
        if median > MIN_DELTA_E:  # most of the picture differs: the noise ceiling rose above any local change
            raise SpecError(f"the edit differs from its source almost everywhere (median ΔE {median:.1f}), so no "
                            "local change stands out; it looks like another picture or a re-rendered one. Check "
                            "that it is an edit of this spec's source image, or pass --threshold.")
        raise SpecError(f"the edit differs from its source nowhere by more than ΔE {high:.1f}; "
                        "there is no change to derive a mask from. Check that it is the edited image.")
    # 4. The margin.
    margin = max(1, round(MARGIN_SHARE * short)) if margin_px is None else max(0, int(margin_px))
    if margin:
        changed = ndimage.binary_dilation(changed, structure=disk(margin))
    _, regions = ndimage.label(changed)
    return DerivedMask(np.where(changed, 255, 0).astype(np.uint8), low, margin, int(regions))


def change_thresholds(difference: np.ndarray, threshold: float | None = None) -> tuple[float, float]:
    """The two ΔE levels of the hysteresis: ``(low, high)``.

    ``low`` — what counts as a change — is ``threshold`` when given, else the
    larger of :data:`MIN_DELTA_E` and a robust noise ceiling (the median plus
    :data:`NOISE_MADS` scaled median absolute deviations, so re-encoding noise
    spread over the image stays out). A region counts only where it reaches
    ``high``: twice ``low``, or Otsu's split of the difference when higher.
    """
    from skimage.filters import threshold_otsu

    if threshold is None:
        median = float(np.median(difference))
        mad = 1.4826 * float(np.median(np.abs(difference - median)))
        threshold = max(MIN_DELTA_E, median + NOISE_MADS * mad)
    otsu = float(threshold_otsu(difference)) if np.ptp(difference) > 0 else 0.0
    return float(threshold), max(2.0 * threshold, otsu)


def _drop_small(regions: np.ndarray, smallest: int) -> np.ndarray:
    """``regions`` without the connected components of fewer than ``smallest`` pixels."""
    from scipy import ndimage

    labels, count = ndimage.label(regions)
    if count == 0:
        return regions
    keep = np.bincount(labels.ravel(), minlength=count + 1) >= smallest
    keep[0] = False
    return keep[labels]


# ── a spec's derived mask ──────────────────────────────────────────────────


@dataclass(frozen=True)
class DerivedMaskFile:
    """A derived mask written as a spec's mask PNG."""

    spec_id: str
    path: Path
    mask: DerivedMask
    source: str  # "edit #12" or the file it was derived from
    replaced: bool  # an existing mask file was overwritten (--force)
    edited: Path | None = None  # the edited image it was derived from (a recorded edit's raw output, or the file)

    def as_dict(self) -> dict:
        return {"spec": self.spec_id, "path": str(self.path), "source": self.source, "replaced": self.replaced,
                "coverage": round(100 * self.mask.coverage, 4), "threshold_delta_e": round(self.mask.threshold, 3),
                "margin_px": self.mask.margin_px, "regions": self.mask.regions}


def source_image(ws: Workspace, spec: Spec) -> np.ndarray:
    """The spec's source image (its case's first), uint8 RGB."""
    cases = try_load_cases(ws)
    if cases is None:
        raise SpecError(f"cases file {ws.cases_path} is missing, so {spec.id}'s source image cannot be found; "
                        "set [dataset] cases in cfkit.toml.")
    if spec.case not in cases:
        raise SpecError(f"spec {spec.id}: case '{spec.case}' is not in {cases.path}. Fix the spec's 'case'.")
    case = cases.get(spec.case)
    return np.asarray(open_image(cases.image_paths(case)[0], what=f"case {case.id} image"))


def aligned_edit(path: Path, size: tuple[int, int], *, what: str) -> np.ndarray:
    """An edited image at the source's ``size = (width, height)``: resized when only the scale differs."""
    image = open_image(path, what=what)
    if image.size != size:
        if abs((image.size[0] / image.size[1]) / (size[0] / size[1]) - 1.0) > ASPECT_TOLERANCE:
            raise ImageError(f"{what} {path} is {image.size[0]}x{image.size[1]} but the source image is "
                             f"{size[0]}x{size[1]} (another aspect ratio). Export the edit at the source's size.")
        image = image.resize(size, Image.Resampling.LANCZOS)
    return np.asarray(image)


def mask_target(ws: Workspace, spec: Spec) -> Path:
    """Where a spec's mask PNG goes: its ``mask:`` path, else ``masks/ID.png``; a spec with ``regions`` has no file."""
    if spec.regions:
        raise SpecError(f"spec {spec.id} gives its mask as 'regions:'; a derived mask would replace them. "
                        f"Remove 'regions:' from interventions/{spec.id}.yaml first if you want one.")
    return mask_file(ws, spec) or ws.confined(f"masks/{spec.id}.png", base=ws.interventions_dir,
                                              what=f"spec {spec.id} mask")


def mask_png(mask: DerivedMask, provenance: dict, description: str) -> bytes:
    """The mask as a greyscale PNG with its provenance in a tEXt chunk."""
    info = PngImagePlugin.PngInfo()
    info.add_text(DERIVED_KEY, json.dumps(provenance, sort_keys=True))
    info.add_text("Description", description)
    buffer = io.BytesIO()
    Image.fromarray(mask.array, mode="L").save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


def write_derived_mask(ws: Workspace, spec_id: str, mask: DerivedMask, *, source: str,
                       overwrite: bool = False) -> DerivedMaskFile:
    """Write ``mask`` as spec ``spec_id``'s mask PNG, flagged as derived from ``source``.

    An existing mask file is refused unless ``overwrite``; a spec without a
    ``mask:`` field gets one (``masks/ID.png``).
    """
    spec_file = load_spec(ws, spec_id)
    spec = spec_file.spec
    path = mask_target(ws, spec)
    existed = path.exists()
    if existed and not overwrite:
        raise OutputError(f"{path} already exists (spec {spec_id}'s mask); it is kept. Pass --force to replace it "
                          "with the derived one.")
    data = mask_png(mask, mask.provenance(source), f"cfkit mask of spec {spec_id}, derived from {source}")
    try:
        write_bytes_atomic(path, data, overwrite=overwrite)
    except FileExistsError as exc:
        raise OutputError(f"{path} appeared while writing; it is kept. Pass --force to replace it.") from exc
    except OSError as exc:
        raise OutputError(f"cannot write the mask {path} ({exc.strerror}).") from exc
    if not spec.mask:
        set_spec_mask(spec_file, path.relative_to(ws.interventions_dir.resolve()).as_posix()
                      if path.is_relative_to(ws.interventions_dir.resolve()) else str(path))
    return DerivedMaskFile(spec_id, path, mask, source, replaced=existed)


def derive_spec_mask(ws: Workspace, spec_id: str, edit: int | Path, *, overwrite: bool = False,
                     threshold: float | None = None, margin_px: int | None = None) -> DerivedMaskFile:
    """Derive spec ``spec_id``'s mask from a recorded edit (its id; the raw output is used) or an image file."""
    from cfkit.store import Store, edits

    spec = load_spec(ws, spec_id).spec
    target = mask_target(ws, spec)
    if target.exists() and not overwrite:  # refused before any image is read
        raise OutputError(f"{target} already exists (spec {spec_id}'s mask); it is kept. Pass --force to replace "
                          "it with a derived one.")
    original = source_image(ws, spec)
    size = (original.shape[1], original.shape[0])
    if isinstance(edit, int):
        if not ws.db_path.is_file():
            raise SpecError(f"no edits recorded yet in {ws.db_path}; give the edited image's file instead.")
        with Store(ws.db_path) as store:
            record = edits.get(store, edit)
        if record.spec_id != spec_id:
            raise SpecError(f"edit #{edit} belongs to {record.spec_id}, not {spec_id}. See 'cfkit edits list {spec_id}'.")
        path = record.raw_path or record.composite_path
        if record.status != "ok" or path is None:
            raise SpecError(f"edit #{edit} of {spec_id} has no image ({record.status}); choose another edit.")
        edited = aligned_edit(path, size, what=f"edit #{edit} raw image")
        source = f"edit #{edit}"
    else:
        edited = aligned_edit(edit, size, what="--from-edit")
        source = f"{edit.name} (sha256 {hashlib.sha256(edit.read_bytes()).hexdigest()[:12]})"
    mask = derive_mask(original, edited, threshold=threshold, margin_px=margin_px)
    written = write_derived_mask(ws, spec_id, mask, source=source, overwrite=overwrite)
    return dataclasses.replace(written, edited=path if isinstance(edit, int) else edit)
