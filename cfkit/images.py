"""The one way cfkit opens an image, and the one way it hands an image to a model.

Every image a user supplies goes through :func:`open_image`: it applies the EXIF
orientation, converts palette, alpha, CMYK and 16-bit modes to 8-bit RGB, and
refuses images so large they look like decompression bombs. :func:`image_data`
is what a model receives: the file's exact bytes and MIME type. Files sent as
they are, without decoding them, pass :func:`check_sendable` first: the same
pixel limit, and a file cut short (no end marker after its image data) is
refused as it is when decoding, so a probe run never sends an image that
``cases validate`` or ``cfkit edit`` would refuse.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from pathlib import Path
from typing import NamedTuple

from cfkit.errors import ImageError

# numpy and Pillow are imported inside the functions that use them: a command that only needs ImageData
# (a cached rerun of a probe run) need not pay for them.

#: Largest image, in pixels, cfkit will decode (about 16k x 10k).
MAX_PIXELS = 178_956_970 // 2
#: Image types sent to models as they are; others are re-encoded as PNG.
SENDABLE_MIME = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})


class ImageData(NamedTuple):
    """One image as sent to a model: the exact file bytes and their MIME type."""

    data: bytes
    mime: str

    @property
    def sha256(self) -> str:
        """The SHA-256 of the bytes, in hex (what a request's cache key covers)."""
        return hashlib.sha256(self.data).hexdigest()


class EncodedImage:
    """One image as sent, held as the standard base64 of its bytes (padded, no newlines), as a backend that sends
    base64 receives it from a probe run (:attr:`cfkit.backends.Backend.sends_base64`): the file was read into a
    reused buffer, hashed and encoded there, so its bytes are never held apart. ``data`` decodes them again (for
    a caller that needs the bytes); ``sha256`` is theirs."""

    __slots__ = ("base64", "mime")

    def __init__(self, base64: bytes, mime: str):
        self.base64 = base64
        self.mime = mime

    @property
    def data(self) -> bytes:
        """The image's bytes (decoded from :attr:`base64` each time)."""
        import binascii

        return binascii.a2b_base64(self.base64, strict_mode=True)

    @property
    def sha256(self) -> str:
        """The SHA-256 of the bytes, in hex."""
        return hashlib.sha256(self.data).hexdigest()

    def __repr__(self) -> str:
        return f"EncodedImage(<{len(self.base64):,} base64 characters>, {self.mime!r})"


def open_image(path: Path, *, what: str = "image") -> "Image.Image":
    """Open ``path`` as an upright 8-bit RGB image, or raise :class:`ImageError`."""
    return read_image(path, what=what)[1]


def read_image(path: Path, *, what: str = "image") -> "tuple[bytes, Image.Image]":
    """The file's bytes and :func:`open_image`'s image of them, from one read (for a caller that hashes them too)."""
    data = _read(path, what)
    return data, decode_image(data, source=str(path), what=what)


def _read(path: Path, what: str) -> bytes:
    """The bytes of an image file, or an :class:`ImageError` saying why they cannot be read."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ImageError(f"{what} {path}: not found. Put the file there or fix the path.") from None
    except OSError as exc:
        raise ImageError(f"{what} {path}: cannot be read ({exc.strerror}).") from exc


def decode_image(data: bytes, *, source: str = "<bytes>", what: str = "image") -> Image.Image:
    """Decode image bytes the same way :func:`open_image` does."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    previous = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            image.load()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise _too_large(source, what) from exc
    except UnidentifiedImageError as exc:
        raise ImageError(f"{what} {source}: not a readable image file (corrupt or unknown format).") from exc
    except (OSError, SyntaxError, ValueError) as exc:
        raise ImageError(f"{what} {source}: cannot be decoded ({exc}). Re-export it as PNG or JPEG.") from exc
    finally:
        Image.MAX_IMAGE_PIXELS = previous
    return to_rgb(ImageOps.exif_transpose(image))


def to_rgb(image: Image.Image) -> Image.Image:
    """Convert any PIL mode to 8-bit RGB; transparency is flattened onto white."""
    import numpy as np
    from PIL import Image

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
    import numpy as np

    return np.asarray(open_image(path, what=what))


def png_bytes(image: Image.Image | np.ndarray, *, compress_level: int = 6) -> bytes:
    """Encode an image or array as PNG bytes (zlib level 6, Pillow's default, unless told otherwise).

    The level changes the bytes, never the pixels; images whose bytes are hashed into cache keys keep the
    default so that their keys stay as they were."""
    import numpy as np
    from PIL import Image

    if isinstance(image, np.ndarray):
        image = Image.fromarray(image)
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=compress_level)
    return buf.getvalue()


# ── images as a model receives them ────────────────────────────────────────


def read_header(data: bytes, *, source: str, what: str = "image") -> tuple[str, tuple[int, int]]:
    """(MIME type, (width, height)) from an image file's header, without decoding it."""
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():  # the size is checked against MAX_PIXELS by the callers, in one message
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as header:
                return header.get_format_mimetype(), header.size
    except Image.DecompressionBombError as exc:
        raise _too_large(source, what) from exc
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise ImageError(f"{what} {source}: not a readable image file (corrupt or unknown format).") from exc


def _too_large(source: str, what: str) -> ImageError:
    return ImageError(f"{what} {source}: refused, more than {MAX_PIXELS:,} pixels (a possible decompression bomb). "
                      "Downscale it before use.")


def ends_complete(mime: str, tail: bytes, size: int, head: bytes, *, unknown: bool = True) -> bool:
    """Whether an image file of ``size`` bytes, of which ``tail`` are the last and ``head`` the first, runs to its
    format's end marker (a cheap test for a file cut short); ``unknown`` for a format it cannot tell.

    JPEG: an end-of-image marker after the last start-of-scan (entropy-coded data cannot hold either
    marker, so a file cut inside its image data has none after it); PNG: an IEND chunk after the last
    IDAT; GIF: its trailer byte; WebP: as many bytes as its RIFF header declares. The last end marker of
    a file lies in its last bytes when it ends with one, so ``tail`` may be the whole file or only its end.
    """
    # Searched from the end marker on, not over the whole file: the test costs microseconds, not a scan.
    if mime == "image/jpeg":
        end = tail.rfind(b"\xff\xd9")
        return end >= 0 and tail.find(b"\xff\xda", end) < 0
    if mime == "image/png":
        end = tail.rfind(b"IEND")
        return end >= 0 and tail.find(b"IDAT", end) < 0
    if mime == "image/gif":
        return tail.rstrip(b"\x00").endswith(b";")
    if mime == "image/webp":
        return size >= 8 + int.from_bytes(head[4:8], "little")
    return unknown


def check_sendable(data: bytes, mime: str, size: tuple[int, int], *, source: str, what: str = "image") -> None:
    """Refuse, as decoding would, an image sent without being decoded: over :data:`MAX_PIXELS` pixels or cut
    short. ``size`` is (width, height) from its header."""
    if size[0] * size[1] > MAX_PIXELS:
        raise _too_large(source, what)
    if not ends_complete(mime, data, len(data), data):
        # Data after the image (a motion photo's video, a camera's trailer) can hold marker bytes too:
        # only the decoder can tell such a file from one cut short, so it decides the rare doubtful file.
        try:
            decode_image(data, source=source, what=what)
        except ImageError as exc:
            raise ImageError(f"{what} {source}: the file is cut short (no end marker after its image data); "
                             "copy or export it again.") from exc


def image_data(path: Path) -> ImageData:
    """An image file as sent to a model: its exact bytes and MIME type, read from the content.

    PNG, JPEG, WebP and GIF go as they are (so the cache key covers the very
    bytes sent); other formats are decoded by :func:`cfkit.images.open_image`
    and re-encoded as PNG. A file that is not an image is an :class:`ImageError`.
    """
    return as_sent(_read(path, "image"), source=str(path))[0]


def as_sent(data: bytes, *, source: str) -> tuple[ImageData, tuple[int, int]]:
    """An image file's bytes as a model receives them, and (width, height) of what it receives.

    A sendable type goes as it is, after :func:`check_sendable` (``data`` itself is returned); any other
    is decoded and re-encoded as PNG.
    """
    mime, size = read_header(data, source=source)
    if mime in SENDABLE_MIME:
        check_sendable(data, mime, size, source=source)
        return ImageData(data, mime), size
    image = decode_image(data, source=source)
    return ImageData(png_bytes(image), "image/png"), image.size


def side_by_side(paths: list[Path], labels: list[str]) -> ImageData:
    """Two images as one labelled PNG sheet, for backends that take a single image.

    Each panel keeps its aspect ratio at a common height, with its label in a
    white band above it, in the order the prompt names them.
    """
    from PIL import Image, ImageDraw, ImageFont

    images = [open_image(p) for p in paths]
    height = min(max(im.height for im in images), 1024)
    panels = [im.resize((max(1, round(im.width * height / im.height)), height), Image.Resampling.BICUBIC)
              for im in images]
    gap, band = 16, 40
    sheet = Image.new("RGB", (sum(p.width for p in panels) + gap * (len(panels) + 1), height + band + gap),
                      (255, 255, 255))
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default(size=24)
    x = gap
    for panel, label in zip(panels, labels, strict=True):
        draw.text((x, 8), label, fill=(0, 0, 0), font=font)
        sheet.paste(panel, (x, band))
        x += panel.width + gap
    return ImageData(png_bytes(sheet), "image/png")
