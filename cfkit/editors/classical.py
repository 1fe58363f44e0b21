"""The classical engine: offline, deterministic edits for cues simple operations can change.

A spec opts in with ``classical: {op: …}``:

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

import warnings

import numpy as np
from PIL import Image

from cfkit.editors import EditRequest, EditResult
from cfkit.errors import InputError, SpecError


class ClassicalEditor:
    """Offline remove / recolor / paste, chosen by the spec's ``classical.op``."""

    name = "classical"

    def describe(self, request: EditRequest) -> dict:
        """The operation :meth:`edit` would apply (for --dry-run)."""
        return {} if request.classical is None else {"op": request.classical.op}

    def edit(self, request: EditRequest) -> EditResult:
        op = request.classical
        if op is None:
            raise InputError(
                f"spec {request.spec_id} has no 'classical:' field, so the classical engine does not know what "
                "to do. Add e.g. 'classical: {op: recolor, color: \"#2a7d3c\"}', or choose another --engine."
            )
        if request.n != 1:
            # Deterministic: n candidates would be n identical files.
            raise InputError(f"the classical engine is deterministic; -n {request.n} would repeat one image. Use -n 1.")
        mask = request.mask > 127
        if op.op == "remove":
            image = remove(request.image, mask)
            params = {"op": "remove", "method": "skimage.restoration.inpaint_biharmonic"}
        elif op.op == "recolor":
            image = recolor(request.image, mask, hex_to_rgb(op.color or ""), strength=op.strength, feather=op.feather)
            params = {"op": "recolor", "color": op.color, "strength": op.strength, "feather": op.feather,
                      "space": "CIE Lab"}
        else:
            if request.asset is None:
                raise SpecError(f"spec {request.spec_id}: classical paste needs 'asset', a PNG inside the workspace.")
            asset = read_png_asset(request.asset, spec_id=request.spec_id)
            image = paste(request.image, mask, asset, feather=op.feather)
            params = {"op": "paste", "asset": request.asset.name, "feather": op.feather}
        return EditResult(images=(image,), model=f"classical-{op.op}", params=params)


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
        raise SpecError(f"spec {spec_id}: classical.asset {path} not found. Put the PNG there or fix the path.") from None
    except Exception as exc:  # PIL raises several unrelated types for bad files
        raise SpecError(f"spec {spec_id}: classical.asset {path} is not a readable image ({exc}).") from exc
    if fmt != "PNG":
        raise SpecError(
            f"spec {spec_id}: classical.asset {path} is a {fmt or 'non-PNG'} file; paste assets must be PNG "
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
