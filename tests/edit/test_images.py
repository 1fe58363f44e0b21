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


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP"])
def test_an_image_sent_as_it_is_is_refused_where_decoding_refuses_it(tmp_path: Path, fmt: str):
    """probe run sends PNG/JPEG/GIF/WebP without decoding them; a file cut short is refused all the same."""
    from cfkit.images import image_data

    rng = np.random.default_rng(0)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (96, 96, 3), dtype=np.uint8)).save(buf, format=fmt)
    whole = tmp_path / f"whole.{fmt.lower()}"
    whole.write_bytes(buf.getvalue())
    assert image_data(whole).data == buf.getvalue()  # a whole file goes as it is
    cut = tmp_path / f"cut.{fmt.lower()}"
    cut.write_bytes(buf.getvalue()[: len(buf.getvalue()) * 2 // 3])
    with pytest.raises(ImageError):  # the decoder refuses it ...
        open_image(cut)
    # ... and so does sending (a WebP cut short does not even pass its header)
    with pytest.raises(ImageError, match=f"cut.{fmt.lower()}: (the file is cut short|not a readable image)"):
        image_data(cut)


def test_an_image_over_the_pixel_limit_is_not_sent_undecoded(tmp_path: Path):
    from cfkit.images import image_data

    side = int(MAX_PIXELS ** 0.5) + 100
    path = tmp_path / "bomb.png"
    Image.new("1", (side, side)).save(path)
    with pytest.raises(ImageError, match="bomb.png: refused, more than .* pixels"):
        image_data(path)


def test_a_header_beyond_pillows_own_limit_is_the_same_one_line(tmp_path: Path):
    """Past twice its limit Pillow raises on the header alone; that is the pixel-limit message too."""
    from cfkit.images import image_data

    path = tmp_path / "huge.png"
    Image.new("1", (14_000, 14_000)).save(path)  # 196 M pixels: past Pillow's 179 M error threshold
    with pytest.raises(ImageError, match="huge.png: refused, more than"):
        image_data(path)
    with pytest.raises(ImageError, match="huge.png: refused, more than"):
        open_image(path)


def test_data_after_the_image_that_holds_marker_bytes_is_not_taken_for_a_cut_file(tmp_path: Path):
    """A motion photo carries a video after the JPEG's end marker; its bytes may hold a start-of-scan marker."""
    from cfkit.images import image_data

    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(1).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(buf, format="JPEG")
    path = tmp_path / "motion.jpg"
    path.write_bytes(buf.getvalue() + b"ftypmp42" + b"\xff\xda\x00\x08" + bytes(range(256)) * 4)
    assert image_data(path).data == path.read_bytes()  # decodes whole, so it goes as it is
