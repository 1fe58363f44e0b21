"""The header check of a lazy plan (cfkit.probe.header_checks.header_only) reads a file's first FIRST_BYTES and
reads on to HEAD_BYTES only where they do not settle the header; its verdict is held here to the check that
always read HEAD_BYTES (written out below as it was), file by file: real images of each type and size, headers
pushed past the first look, animated PNGs, files cut short at many places."""

from __future__ import annotations

import io
import os
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from cfkit.errors import ImageError
from cfkit.images import MAX_PIXELS, SENDABLE_MIME, ends_complete, read_header
from cfkit.probe import header_checks
from cfkit.probe.header_checks import FIRST_BYTES, HEAD_BYTES, TAIL_BYTES, header_only, quick_header
from cfkit.store.digests import FileDigest
from support.workspace import gradient_image


def _always_head_bytes(path: Path, st: os.stat_result) -> FileDigest | None:
    """The check as it read HEAD_BYTES of every file's start."""
    with open(path, "rb") as fh:
        head = fh.read(HEAD_BYTES)
        tail = head[-TAIL_BYTES:]
        if len(head) < st.st_size:
            fh.seek(max(len(head), st.st_size - TAIL_BYTES))
            tail = fh.read(TAIL_BYTES)
    found = quick_header(head)
    if found is None:
        try:
            found = read_header(head, source=str(path))
        except ImageError:
            return None
    mime, (width, height) = found
    if mime not in SENDABLE_MIME or width * height > MAX_PIXELS or not ends_complete(mime, tail, st.st_size, head,
                                                                                        unknown=False):
        return None
    return FileDigest(path=str(path), size=st.st_size, mtime_ns=st.st_mtime_ns, sha256="", mime=mime,
                      sent_sha256="", width=width, height=height, hashed_at_ns=0)


def _saved(fmt: str, size: tuple[int, int], **options) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(gradient_image(*size, 3)).save(buffer, fmt, **options)
    return buffer.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png_with_text_before(data: bytes, text_bytes: int) -> bytes:
    """A PNG with a tEXt chunk of ``text_bytes`` right after its IHDR: what follows (acTL, IDAT) moves on."""
    return data[:33] + _chunk(b"tEXt", b"Comment\0" + b"x" * text_bytes) + data[33:]


def _apng(frames: int = 2) -> bytes:
    images = [Image.fromarray(gradient_image(40, 30, 3 + i)) for i in range(frames)]
    buffer = io.BytesIO()
    images[0].save(buffer, "PNG", save_all=True, append_images=images[1:])
    return buffer.getvalue()


def _files() -> dict[str, bytes]:
    found = {
        "jpeg small": _saved("JPEG", (8, 8)),
        "jpeg": _saved("JPEG", (640, 480), quality=45),
        "jpeg progressive": _saved("JPEG", (300, 200), progressive=True),
        "png": _saved("PNG", (97, 13)),
        "png large": _saved("PNG", (600, 400)),
        "gif": _saved("GIF", (50, 20)),
        "webp": _saved("WEBP", (64, 64)),
        "bmp": _saved("BMP", (20, 20)),
        "apng": _apng(),
    }
    for exif in (FIRST_BYTES - 600, FIRST_BYTES, FIRST_BYTES + 300, 20_000, HEAD_BYTES - 2_000, 65_000):
        found[f"jpeg exif {exif}"] = _saved("JPEG", (120, 90), exif=b"Exif\0\0" + b"\0" * exif)
    for text in (FIRST_BYTES - 200, FIRST_BYTES + 100, 30_000, HEAD_BYTES):
        found[f"png text {text}"] = _png_with_text_before(found["png"], text)
        found[f"apng text {text}"] = _png_with_text_before(found["apng"], text)
    for name, data in list(found.items()):  # cut short: inside the header, the data, the last bytes
        for cut in (10, 700, FIRST_BYTES - 3, FIRST_BYTES + 5, len(data) // 2, len(data) - 2, len(data) - 1):
            if 0 < cut < len(data):
                found[f"{name} cut at {cut}"] = data[:cut]
    # Sizes around each read's edges, padded with a JPEG comment segment (the file stays a whole JPEG).
    base = _saved("JPEG", (16, 16))
    for size in (FIRST_BYTES - 1, FIRST_BYTES, FIRST_BYTES + 1, HEAD_BYTES - 1, HEAD_BYTES, HEAD_BYTES + 1,
                 HEAD_BYTES + TAIL_BYTES - 1, HEAD_BYTES + TAIL_BYTES + 1):
        pad = size - len(base) - 4
        if 0 < pad < 65_530:
            found[f"jpeg of {size} bytes"] = base[:2] + b"\xff\xfe" + struct.pack(">H", pad + 2) + b"c" * pad + base[2:]
    return found


FILES = _files()


@pytest.mark.parametrize("name", sorted(FILES))
def test_the_two_step_read_gives_the_verdict_of_the_head_bytes_read(name, tmp_path):
    path = tmp_path / "image"
    path.write_bytes(FILES[name])
    st = os.stat(path)
    assert header_only(path, st) == _always_head_bytes(path, st)


def test_a_plain_jpeg_is_settled_by_the_first_look(tmp_path, monkeypatch):
    """The point of the first look: a common photo's start is read FIRST_BYTES deep, not HEAD_BYTES."""
    path = tmp_path / "photo.jpg"
    path.write_bytes(FILES["jpeg"])
    asked: list[int] = []
    real_pread = os.pread

    def counted(fd, n, at):
        asked.append(n)
        return real_pread(fd, n, at)

    monkeypatch.setattr(header_checks.os, "pread", counted)
    found = header_only(path, os.stat(path))
    assert found is not None and (found.mime, found.width, found.height) == ("image/jpeg", 640, 480)
    assert max(asked) <= max(FIRST_BYTES, TAIL_BYTES) and HEAD_BYTES not in asked
