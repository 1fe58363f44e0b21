"""Edit masks: a spec's mask file or regions as an array at the source image's size.

Inside cfkit a mask is always an 8-bit array, 255 = edit, 0 = keep. A spec
names a mask PNG (white = edit; a transparent-where-edit RGBA mask, the
OpenAI convention, is read the same way, unless its colours draw the
opposite, which is refused as ambiguous) or ``regions`` (boxes and polygons
in 0..1 image coordinates), rasterised at the source image's size.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from cfkit.cases import CaseSet
from cfkit.errors import CfkitError, SpecError
from cfkit.plural import plural
from cfkit.specs import Region, Spec
from cfkit.workspace import Workspace

#: A rescaled mask may differ from the image's aspect ratio by at most this much.
ASPECT_TOLERANCE = 0.01
#: A mask covering more than this share of the image draws a warning: the decisive cue should be local.
LOCAL_MASK_MAX = 0.25
#: Share of pixels (anti-aliased edges) on which the colour and the transparency of a mask PNG may disagree
#: while still counting as the same drawing, which cfkit refuses as ambiguous (:func:`load_mask`).
TRANSPARENT_DISAGREEMENT = 0.01
#: tEXt key of a mask PNG derived from an edit (:mod:`cfkit.mask_derive`); its value is JSON provenance.
DERIVED_KEY = "cfkit-derived-mask"


@dataclass(frozen=True)
class Mask:
    """An edit mask at the source image's size: uint8, 255 = edit, 0 = keep."""

    array: np.ndarray
    source: str  # "file:masks/CF18.png" or "regions"
    note: str | None = None

    @property
    def coverage(self) -> float:
        """Fraction of pixels to edit, 0..1."""
        return float(np.count_nonzero(self.array)) / self.array.size

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.array.tobytes() + repr(self.array.shape).encode()).hexdigest()


def mask_file(ws: Workspace, spec: Spec) -> Path | None:
    if not spec.mask:
        return None
    return ws.confined(spec.mask, base=ws.interventions_dir, what=f"spec {spec.id} field 'mask'")


def rasterize_regions(regions: list[Region], size: tuple[int, int]) -> np.ndarray:
    """Draw regions at ``size = (width, height)``; 255 inside any region."""
    width, height = size
    canvas = Image.new("L", size, 0)
    draw = ImageDraw.Draw(canvas)
    for region in regions:
        if region.box is not None:
            x0, y0, x1, y1 = region.box
            # Whole pixels the box touches: a box narrower than a pixel still marks the one it lies in.
            left, top = min(int(x0 * width), width - 1), min(int(y0 * height), height - 1)
            right = max(left, min(math.ceil(x1 * width), width) - 1)
            bottom = max(top, min(math.ceil(y1 * height), height) - 1)
            draw.rectangle([left, top, right, bottom], fill=255)
        else:
            draw.polygon([(x * width, y * height) for x, y in region.polygon], fill=255)
    return np.asarray(canvas, dtype=np.uint8).copy()


def load_mask(ws: Workspace, spec: Spec, size: tuple[int, int]) -> Mask:
    """The spec's mask at ``size = (width, height)`` of its source image.

    A mask file of another size but the same aspect ratio is rescaled (nearest
    neighbour) and the returned note says so; any other mismatch is an error.
    """
    if spec.regions:
        return Mask(rasterize_regions(spec.regions, size), source="regions")
    path = mask_file(ws, spec)
    if path is None:
        raise SpecError(
            f"spec {spec.id}: no mask; add 'mask: masks/{spec.id}.png' (white = edit) or 'regions:' boxes/polygons, "
            f"or derive one from an edit made elsewhere: 'cfkit specs mask {spec.id} --from-edit EDITED.png'."
        )
    if path.is_dir():
        raise SpecError(f"spec {spec.id}: mask {path} is a folder, not an image; point 'mask:' at the PNG.")
    if not path.is_file():
        raise SpecError(
            f"spec {spec.id}: mask file {path} is missing. Draw it at the source image's size "
            f"({size[0]}x{size[1]}), white where the edit goes, and save it there, or derive it from an edit "
            f"made elsewhere: 'cfkit specs mask {spec.id} --from-edit EDITED.png'."
        )
    try:
        image = Image.open(path)
        image.load()
    except Exception as exc:  # PIL raises several unrelated types for bad files
        raise SpecError(f"spec {spec.id}: mask {path} is not a readable image ({exc}).") from exc
    if image.mode in ("P", "PA", "RGB", "L") and "transparency" in image.info:
        image = image.convert("RGBA")  # a palette or tRNS transparency is read like an alpha channel
    if image.mode in ("RGBA", "LA") and image.getextrema()[-1][0] < 255:
        gray = _transparent_mask(image, path, spec.id)
    elif image.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        # 16-bit and float masks are scaled to 8 bits, not clipped (a 16-bit white is 65535, not 255).
        values = np.asarray(image, dtype=np.float64)
        top = 1.0 if image.mode == "F" and values.max() <= 1.0 else (65535.0 if values.max() > 255 else 255.0)
        gray = np.clip(values / top * 255.0 + 0.5, 0, 255).astype(np.uint8)
    else:
        gray = np.asarray(image.convert("L"), dtype=np.uint8)
    note = None
    if image.size != size:
        mask_ratio = image.size[0] / image.size[1]
        image_ratio = size[0] / size[1]
        if abs(mask_ratio / image_ratio - 1) > ASPECT_TOLERANCE:
            raise SpecError(
                f"spec {spec.id}: mask {path} is {image.size[0]}x{image.size[1]} but the image is "
                f"{size[0]}x{size[1]} (another aspect ratio). Redraw the mask at the image's size."
            )
        gray = np.asarray(Image.fromarray(gray).resize(size, Image.Resampling.NEAREST))
        note = f"mask rescaled from {image.size[0]}x{image.size[1]} to {size[0]}x{size[1]}"
    binary = np.where(gray > 127, 255, 0).astype(np.uint8)
    if not binary.any() and gray.any():  # painted, but in a grey that reads as keep: not "no white pixels"
        raise SpecError(
            f"spec {spec.id}: mask {path} has {plural(np.count_nonzero(gray), 'grey pixel')} (at most {int(gray.max())} of "
            f"255) and none above 127, the level from which a pixel counts as edit. Paint the region to edit "
            f"in white."
        )
    return Mask(binary, source=f"file:{spec.mask}", note=note)


def _transparent_mask(image: Image.Image, path: Path, spec_id: str) -> np.ndarray:
    """The grey mask of a PNG with transparency: transparent = edit (the OpenAI convention).

    Its colours are read too. When they draw white exactly where the file is
    opaque and black where it is transparent, the file reads two opposite ways
    (white shapes painted on a transparent layer, or a white sheet with the
    edit erased), so it is refused rather than guessed at.
    """
    alpha = np.asarray(image.getchannel("A"), dtype=np.uint8)
    colour = np.asarray(image.convert("RGB" if image.mode == "RGBA" else "LA").convert("L"), dtype=np.uint8)
    opaque, white = alpha > 127, colour > 127
    if white.any() and not white.all() and np.count_nonzero(white != opaque) <= TRANSPARENT_DISAGREEMENT * white.size:
        raise SpecError(
            f"spec {spec_id}: mask {path} is white where it is opaque and transparent elsewhere, which reads two "
            f"opposite ways (white = edit, or transparent = edit as in OpenAI's masks). Save it without "
            f"transparency: white where the edit goes, black elsewhere."
        )
    return 255 - alpha


def mask_coverage_standalone(ws: Workspace, spec: Spec, cases: CaseSet | None) -> float | None:
    """Coverage of the mask at the source image's size, or of the mask file alone when the image is absent."""
    size = None
    if cases is not None and spec.case in cases:
        case = cases.get(spec.case)
        path = cases.image_paths(case)[0]
        if path.is_file():
            try:
                with Image.open(path) as im:
                    size = im.size if (im.getexif().get(0x0112, 1) not in (5, 6, 7, 8)) else im.size[::-1]
            except (OSError, ValueError, Image.DecompressionBombError):
                size = None  # an unreadable image: the listing shows no coverage; 'specs validate' says why
    try:
        if size is not None:
            return load_mask(ws, spec, size).coverage
        if spec.regions:
            return load_mask(ws, spec, (1000, 1000)).coverage
        path = mask_file(ws, spec)
        if path is not None and path.is_file():
            with Image.open(path) as im:
                return load_mask(ws, spec, im.size).coverage
    except CfkitError:
        return None
    return None


@dataclass(frozen=True)
class DerivedState:
    """A spec's mask derived from an edit, and whether a person has accepted an edit made with it."""

    provenance: dict
    sha256: str  # of the mask as an array (:attr:`Mask.sha256`), to match edits made with it
    reviewed: bool

    @property
    def source(self) -> str:
        return str(self.provenance.get("source", "an edit"))

    @property
    def label(self) -> str:
        """``derived from edit #12, not reviewed`` — for listings and the review view."""
        return f"derived from {self.source}" + ("" if self.reviewed else ", not reviewed")


def derived_provenance(path: Path) -> dict | None:
    """The provenance a derived mask PNG carries, or None for a mask drawn by hand (or unreadable)."""
    import json

    try:
        with Image.open(path) as image:
            text = getattr(image, "text", {}) or {}
    except (OSError, ValueError, Image.DecompressionBombError):
        return None
    value = text.get(DERIVED_KEY)
    if value is None:
        return None
    try:
        found = json.loads(value)
    except (ValueError, RecursionError):
        return {"source": "an edit"}
    return found if isinstance(found, dict) else {"source": "an edit"}


def derived_mask_state(ws: Workspace, spec: Spec, size: tuple[int, int] | None = None) -> DerivedState | None:
    """Whether the spec's mask file was derived from an edit, and if so whether it has been reviewed.

    A derived mask counts as reviewed once a person accepted an edit of the
    spec made with this very mask (the edit's recorded mask hash matches).
    ``size`` is the source image's; without it the mask file's own size is used.
    """
    if spec.regions:
        return None
    try:
        path = mask_file(ws, spec)
    except CfkitError:
        return None
    if path is None or not path.is_file():
        return None
    provenance = derived_provenance(path)
    if provenance is None:
        return None
    try:
        if size is None:
            with Image.open(path) as image:
                size = image.size
        digest = load_mask(ws, spec, size).sha256
    except (CfkitError, OSError):
        return DerivedState(provenance, "", reviewed=False)
    return DerivedState(provenance, digest, reviewed=_accepted_with_mask(ws, spec.id, digest))


def _accepted_with_mask(ws: Workspace, spec_id: str, mask_sha256: str) -> bool:
    if not ws.db_path.is_file():
        return False
    from cfkit.store import Store, edits, reviews

    with Store(ws.db_path) as store:
        decisions = reviews.decisions_by_edit(store, spec_id)
        return any(record.mask_sha256 == mask_sha256 and decisions.get(record.id) is not None
                   and decisions[record.id].decision == "accept" for record in edits.ok_edits(store, spec_id))
