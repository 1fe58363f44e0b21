"""The classical engine: offline, deterministic edits for cues simple operations can change.

A spec opts in with ``engines: {classical: {op: …}}`` (the first version's
``classical: {op: …}`` is read the same way); ``-o op=…`` works too:

- ``remove`` fills the masked region by biharmonic inpainting (scikit-image),
  which continues the surrounding colours smoothly into the hole;
- ``recolor`` moves the region's colour toward ``color`` in CIE Lab: the chroma
  (a*, b*) is blended toward the target's and the lightness is shifted by the
  difference of means, so the region's own shading survives;
- ``paste`` places a PNG ``asset`` over the mask's bounding box, blended through
  the asset's alpha and a feathered copy of the mask.

The same inputs always give the same output bytes.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
from PIL import Image
from pydantic import Field, model_validator

from cfkit.editors import Editor, EditorOptions, EditRequest, EditResult
from cfkit.errors import SpecError

#: Largest edge softening the engine accepts, in pixels (a blur wider than this only costs time).
MAX_FEATHER_PX = 100.0


class ClassicalOptions(EditorOptions):
    """What the classical engine does; usually given by the spec (``engines: {classical: {op: …}}``)."""

    op: Literal["remove", "recolor", "paste"] | None = Field(None, description="remove, recolor or paste")
    color: str | None = Field(None, description="recolor: the target colour, #rrggbb")
    strength: float = Field(1.0, ge=0, le=1, description="recolor: how far toward the target (0..1)")
    asset: str | None = Field(None, description="paste: a PNG, relative to the interventions folder")
    feather: float = Field(3.0, ge=0, le=MAX_FEATHER_PX, description=f"edge softening in px (0..{MAX_FEATHER_PX})")

    @model_validator(mode="after")
    def _needs(self) -> "ClassicalOptions":
        if self.op == "recolor" and (not self.color or not re.fullmatch(r"#[0-9a-fA-F]{6}", self.color)):
            raise ValueError("recolor needs 'color' as '#rrggbb'")
        if self.op == "paste" and not self.asset:
            raise ValueError("paste needs 'asset', a PNG path relative to the interventions folder")
        return self


class ClassicalEditor(Editor):
    """Offline remove / recolor / paste, chosen by the ``op`` option."""

    name: ClassVar[str] = "classical"
    max_candidates: ClassVar[int] = 1  # deterministic: more candidates would repeat one image
    auto_rank: ClassVar[int | None] = None
    Options: ClassVar[type[ClassicalOptions]] = ClassicalOptions

    def __init__(self, options: ClassicalOptions):
        self.options = options
        self.model = None if options.op is None else f"classical-{options.op}"

    def describe(self, request: EditRequest) -> dict:
        """The operation :meth:`edit` would apply (for --dry-run)."""
        return {} if self.options.op is None else {"op": self.options.op}

    def check(self, request: EditRequest) -> None:
        """Refuse before anything is written: no operation, or an asset that is not a readable PNG."""
        if self.options.op is None:
            raise SpecError(
                f"spec {request.spec_id} gives the classical engine no operation, so it does not know what to do. "
                "Add e.g. 'engines: {classical: {op: recolor, color: \"#2a7d3c\"}}' to the spec, pass -o op=remove, "
                "or choose another --engine."
            )
        if self.options.op == "paste":
            read_png_asset(self._asset(request), spec_id=request.spec_id)

    def _asset(self, request: EditRequest) -> Path:
        return request.path(self.options.asset or "", what="classical asset")

    def edit(self, request: EditRequest) -> EditResult:
        self.check(request)
        op = self.options
        mask = request.mask > 127
        if op.op == "remove":
            image = remove(request.image, mask)
            params = {"op": "remove", "method": "skimage.restoration.inpaint_biharmonic"}
        elif op.op == "recolor":
            image = recolor(request.image, mask, hex_to_rgb(op.color or ""), strength=op.strength, feather=op.feather)
            params = {"op": "recolor", "color": op.color, "strength": op.strength, "feather": op.feather,
                      "space": "CIE Lab"}
        else:
            path = self._asset(request)
            image = paste(request.image, mask, read_png_asset(path, spec_id=request.spec_id), feather=op.feather)
            params = {"op": "paste", "asset": path.name, "feather": op.feather}
        return EditResult(images=(image,), model=self.model, params=params)


def hex_to_rgb(color: str) -> tuple[int, int, int]:
    value = color.lstrip("#")
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)


def feathered(mask: np.ndarray, feather: float) -> np.ndarray:
    """A float weight map 0..1: 1 inside the mask, falling off over about ``feather`` px at its edge."""
    weight = mask.astype(np.float64)
    if feather <= 0:
        return weight
    from scipy.ndimage import gaussian_filter

    # Blur, then keep the inside fully weighted so the whole region changes.
    return np.maximum(gaussian_filter(weight, sigma=feather / 2.0), weight)


def remove(image: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Fill ``mask`` (bool) by biharmonic inpainting of each channel."""
    from skimage.restoration import inpaint_biharmonic

    filled = inpaint_biharmonic(image.astype(np.float64) / 255.0, mask, channel_axis=-1)
    return _to_uint8(filled * 255.0)


def recolor(image: np.ndarray, mask: np.ndarray, target: tuple[int, int, int], *, strength: float,
            feather: float) -> np.ndarray:
    """Move the masked region's colour toward ``target`` while keeping its shading.

    In Lab, chroma becomes ``(1 - s)·ab + s·ab_target`` and lightness becomes
    ``L + s·(L_target − mean L of the region)``, where ``s`` is ``strength``.
    """
    from skimage.color import lab2rgb, rgb2lab

    if not mask.any():
        return image.copy()
    lab = rgb2lab(image.astype(np.float64) / 255.0)
    target_lab = rgb2lab(np.array([[target]], dtype=np.float64) / 255.0)[0, 0]
    shifted = lab.copy()
    shifted[..., 0] = np.clip(lab[..., 0] + strength * (target_lab[0] - lab[..., 0][mask].mean()), 0.0, 100.0)
    shifted[..., 1:] = (1.0 - strength) * lab[..., 1:] + strength * target_lab[1:]
    with warnings.catch_warnings():
        # Colours pushed out of the sRGB gamut are clipped, which is what we want here.
        warnings.filterwarnings("ignore", message=".*negative Z values.*", category=UserWarning)
        moved = lab2rgb(shifted) * 255.0
    weight = feathered(mask, feather)[..., None]
    return _to_uint8(weight * moved + (1.0 - weight) * image.astype(np.float64))


def read_png_asset(path, *, spec_id: str) -> np.ndarray:
    """Read a paste asset as ``(H, W, 4)`` uint8 RGBA; anything but a PNG is refused."""
    try:
        with Image.open(path) as im:
            im.load()
            fmt = im.format
            rgba = np.asarray(im.convert("RGBA"))
    except FileNotFoundError:
        raise SpecError(f"spec {spec_id}: classical asset {path} not found. Put the PNG there or fix the path.") from None
    except Exception as exc:  # PIL raises several unrelated types for bad files
        raise SpecError(f"spec {spec_id}: classical asset {path} is not a readable image ({exc}).") from exc
    if fmt != "PNG":
        raise SpecError(
            f"spec {spec_id}: classical asset {path} is a {fmt or 'non-PNG'} file; paste assets must be PNG "
            "(with transparency where the asset should not cover). Convert it to PNG."
        )
    return rgba


def paste(image: np.ndarray, mask: np.ndarray, asset: np.ndarray, *, feather: float) -> np.ndarray:
    """Paste ``asset`` (RGBA) scaled to the mask's bounding box, weighted by its alpha and the feathered mask."""
    if not mask.any():
        return image.copy()
    rows = np.flatnonzero(mask.any(axis=1))
    cols = np.flatnonzero(mask.any(axis=0))
    top, bottom, left, right = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
    fitted = np.asarray(Image.fromarray(asset).resize((right - left, bottom - top), Image.Resampling.LANCZOS))
    layer = np.zeros(image.shape[:2] + (4,), dtype=np.float64)
    layer[top:bottom, left:right] = fitted
    weight = feathered(mask, feather) * (layer[..., 3] / 255.0)
    out = weight[..., None] * layer[..., :3] + (1.0 - weight[..., None]) * image.astype(np.float64)
    return _to_uint8(out)


def _to_uint8(array: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(array), 0, 255).astype(np.uint8)
