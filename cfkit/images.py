"""The one way cfkit opens an image.

Every image a user supplies goes through :func:`open_image`: it applies the EXIF
orientation, converts palette, alpha, CMYK and 16-bit modes to 8-bit RGB, and
refuses images so large they look like decompression bombs.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from cfkit.errors import ImageError

#: Largest image, in pixels, cfkit will decode (about 16k x 10k).
MAX_PIXELS = 178_956_970 // 2


def open_image(path: Path, *, what: str = "image") -> Image.Image:
    """Open ``path`` as an upright 8-bit RGB image, or raise :class:`ImageError`."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ImageError(f"{what} {path}: not found. Put the file there or fix the path.") from None
    except OSError as exc:
        raise ImageError(f"{what} {path}: cannot be read ({exc.strerror}).") from exc
    return decode_image(data, source=str(path), what=what)


def decode_image(data: bytes, *, source: str = "<bytes>", what: str = "image") -> Image.Image:
    """Decode image bytes the same way :func:`open_image` does."""
    previous = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            image.load()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageError(
            f"{what} {source}: refused, more than {MAX_PIXELS:,} pixels (a possible decompression bomb). "
            "Downscale it before use."
        ) from exc
    except UnidentifiedImageError as exc:
        raise ImageError(f"{what} {source}: not a readable image file (corrupt or unknown format).") from exc
    except (OSError, SyntaxError, ValueError) as exc:
        raise ImageError(f"{what} {source}: cannot be decoded ({exc}). Re-export it as PNG or JPEG.") from exc
    finally:
        Image.MAX_IMAGE_PIXELS = previous
    return to_rgb(ImageOps.exif_transpose(image))


def to_rgb(image: Image.Image) -> Image.Image:
    """Convert any PIL mode to 8-bit RGB; transparency is flattened onto white."""
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        arr = np.asarray(image, dtype=np.float64)
        top = 65535.0 if arr.max() > 255 else 255.0
        image = Image.fromarray(np.clip(arr / top * 255.0 + 0.5, 0, 255).astype(np.uint8), "L")
    elif image.mode == "F":
        arr = np.asarray(image, dtype=np.float64)
        image = Image.fromarray(np.clip(arr * 255.0 + 0.5, 0, 255).astype(np.uint8), "L")
    if image.mode == "P":
        image = image.convert("RGBA")
    if image.mode in ("RGBA", "LA", "PA"):
        image = image.convert("RGBA")
        background = Image.new("RGBA", image.size, (255, 255, 255, 255))
        image = Image.alpha_composite(background, image)
    if image.mode != "RGB":
        image = image.convert("RGB")
    return image


def image_array(path: Path, *, what: str = "image") -> np.ndarray:
    """``open_image`` as an ``(H, W, 3)`` uint8 array."""
    return np.asarray(open_image(path, what=what))


def png_bytes(image: Image.Image | np.ndarray) -> bytes:
    """Encode an image or array as PNG bytes."""
    if isinstance(image, np.ndarray):
        image = Image.fromarray(image)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()
