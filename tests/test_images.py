"""open_image: orientation, modes, bombs, corrupt files."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cfkit.errors import ImageError
from cfkit.images import MAX_PIXELS, open_image


def test_exif_orientation_is_applied(tmp_path: Path):
    arr = np.zeros((20, 40, 3), np.uint8)
    arr[:, :20] = (255, 0, 0)  # red left half
    image = Image.fromarray(arr)
    exif = image.getexif()
    exif[0x0112] = 6  # rotate 90° clockwise to display
    path = tmp_path / "rotated.jpg"
    image.save(path, exif=exif, quality=95)
    shown = open_image(path)
    assert shown.size == (20, 40)
    top = np.asarray(shown)[2, 10]
    assert top[0] > 200 and top[1] < 60  # the red half is now on top


@pytest.mark.parametrize("mode", ["P", "RGBA", "LA", "L", "CMYK", "I;16"])
def test_modes_become_rgb(tmp_path: Path, mode: str):
    base = Image.fromarray(np.full((8, 8, 3), (10, 120, 200), np.uint8))
    if mode == "I;16":
        image = Image.fromarray(np.full((8, 8), 65535 // 2, np.uint16))
        path = tmp_path / "deep.png"
    elif mode == "CMYK":
        image = base.convert("CMYK")
        path = tmp_path / "cmyk.jpg"
    else:
        image = base.convert(mode)
        path = tmp_path / f"img-{mode}.png"
    image.save(path)
    out = open_image(path)
    assert out.mode == "RGB" and out.size == (8, 8)
    if mode == "I;16":
        assert abs(int(np.asarray(out)[0, 0, 0]) - 128) <= 1  # half of the 16-bit range


def test_transparency_flattens_onto_white(tmp_path: Path):
    rgba = np.zeros((4, 4, 4), np.uint8)  # fully transparent black
    path = tmp_path / "clear.png"
    Image.fromarray(rgba, "RGBA").save(path)
    assert (np.asarray(open_image(path)) == 255).all()


def test_decompression_bomb_refused(tmp_path: Path):
    side = int(MAX_PIXELS ** 0.5) + 100
    path = tmp_path / "bomb.png"
    Image.new("1", (side, side)).save(path)  # a tiny file that decodes huge
    with pytest.raises(ImageError, match="decompression bomb"):
        open_image(path)


def test_corrupt_and_missing(tmp_path: Path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"nope")
    with pytest.raises(ImageError, match="not a readable image"):
        open_image(bad)
    truncated = tmp_path / "cut.png"
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), "red").save(buf, format="PNG")
    truncated.write_bytes(buf.getvalue()[:60])
    with pytest.raises(ImageError, match="cut.png"):
        open_image(truncated)
    with pytest.raises(ImageError, match="not found"):
        open_image(tmp_path / "absent.png")
