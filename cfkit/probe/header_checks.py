"""Checking an image file before a run sends it, without reading all of it.

A probe run refuses, before anything is sent, an image the model could not
use: not an image, more pixels than :data:`cfkit.images.MAX_PIXELS`, or cut
short (no end marker after its image data). :func:`cfkit.images.as_sent` makes
those checks on the whole file; :func:`header_only` makes them on the file's
first :data:`HEAD_BYTES` (the header: type and pixel size) and last
:data:`TAIL_BYTES` (the end marker), which is all a lazy plan reads of a file
it does not know yet (:class:`cfkit.probe.image_refs.Digests`). Where those
bytes cannot settle it, the caller reads the whole file, and the whole-file
check decides (and words any refusal).
"""

from __future__ import annotations

import os
from pathlib import Path

from cfkit.errors import ImageError
from cfkit.images import MAX_PIXELS, SENDABLE_MIME, ends_complete, read_header
from cfkit.store.digests import FileDigest

#: A header check reads this much of a file's start (its header) …
HEAD_BYTES = 64 * 1024
#: … and this much of its end (the format's end marker).
TAIL_BYTES = 4 * 1024
#: It reads the start in two steps: this much first, which holds the header of a plain JPEG, PNG or GIF; the
#: rest of HEAD_BYTES only where the first look cannot settle what HEAD_BYTES would (:func:`_settled`).
FIRST_BYTES = 4 * 1024


#: JPEG start-of-frame markers (they hold the pixel size); C4, C8 and CC share the range but are not frames.
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(head: bytes) -> tuple[int, int] | None:
    """(width, height) from a JPEG's frame header, walking its segments; None where Pillow should decide
    (a multi-picture file, which Pillow opens as MPO; a frame header beyond ``head``; anything unusual)."""
    at = 2
    while at + 4 <= len(head):
        if head[at] != 0xFF:
            return None
        marker = head[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if 0xD0 <= marker <= 0xD7 or marker == 0x01:  # markers without a length
            at += 2
            continue
        length = int.from_bytes(head[at + 2:at + 4], "big")
        if marker == 0xE2 and head[at + 4:at + 7] == b"MP\x00":
            return None
        if marker in _SOF:
            if at + 9 > len(head) or length < 7:
                return None
            height, width = int.from_bytes(head[at + 5:at + 7], "big"), int.from_bytes(head[at + 7:at + 9], "big")
            return (width, height) if width and height else None
        if marker == 0xDA:  # image data before any frame header
            return None
        at += 2 + length
    return None


def quick_header(head: bytes) -> tuple[str, tuple[int, int]] | None:
    """(MIME type, (width, height)) of a plain JPEG, PNG or GIF from its first bytes, as Pillow would read them
    (:func:`cfkit.images.read_header`), without importing or running Pillow; None for anything else (another
    type, an animated PNG, a multi-picture JPEG, a header cut off), which Pillow then reads."""
    if head[:3] == b"\xff\xd8\xff":
        size = _jpeg_size(head)
        return ("image/jpeg", size) if size else None
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR" and len(head) >= 24:
        if b"acTL" in head[:head.find(b"IDAT") if b"IDAT" in head else len(head)]:
            return None  # an animated PNG: Pillow names it image/apng
        width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
        return ("image/png", (width, height)) if width and height else None
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        width, height = int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
        return ("image/gif", (width, height)) if width and height else None
    return None


def _settled(found: tuple[str, tuple[int, int]] | None, head: bytes, size: int) -> bool:
    """Whether :func:`quick_header`'s answer on ``head``, a file's first bytes, is its answer on the file's first
    HEAD_BYTES: the walk to a JPEG's frame header stops at the same place on either; a GIF's size is in its first
    ten bytes; a PNG is known not to be animated only once its first IDAT chunk is in view."""
    if found is None:
        return False
    if len(head) >= min(size, HEAD_BYTES) or found[0] != "image/png":
        return True
    return b"IDAT" in head


#: The pixel sizes seen, each held once: a plan of 12,000 images of a few sizes keeps one int per size, not two a
#: request (ints above 256 are objects of their own).
_SIZES: dict[int, int] = {}


def _read_at(fd: int, size: int, at: int) -> bytes:
    """Up to ``size`` bytes of the file open as ``fd`` from offset ``at`` (fewer only at its end)."""
    data = os.pread(fd, size, at)
    while data and len(data) < size:  # a regular file gives all at once; anything else may give less
        more = os.pread(fd, size - len(data), at + len(data))
        if not more:
            break
        data += more
    return data


def header_only(path: Path, st: os.stat_result) -> FileDigest | None:
    """What a lazy plan knows of ``path`` without hashing it: type and size from the header (sha256 empty), or
    None when the header and the last bytes cannot settle that it will be sent as it is. It reads FIRST_BYTES
    of the start (all of HEAD_BYTES where they do not settle the header) and the bytes a HEAD_BYTES read would
    leave unread of the file's last TAIL_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise ImageError(f"image {path}: cannot be read ({exc.strerror}).") from exc
    try:  # positioned reads on the descriptor: no buffered file object per image (half the cost of the check)
        head = _read_at(fd, FIRST_BYTES, 0)
        found = quick_header(head)
        if not _settled(found, head, st.st_size):
            head += _read_at(fd, HEAD_BYTES - len(head), len(head))
            found = quick_header(head)
        after_head = min(st.st_size, HEAD_BYTES)  # the end of what a HEAD_BYTES read holds
        start = max(st.st_size - TAIL_BYTES, 0 if st.st_size <= HEAD_BYTES else after_head)
        if start >= len(head) or len(head) < after_head:
            tail = _read_at(fd, TAIL_BYTES, start)
        else:
            tail = head[start:]  # a small file is read whole: its last bytes are in its head
    except OSError as exc:
        raise ImageError(f"image {path}: cannot be read ({exc.strerror}).") from exc
    finally:
        os.close(fd)
    if found is None:
        try:
            found = read_header(head, source=str(path))
        except ImageError:
            return None  # a header longer than HEAD_BYTES, or a bad file: the whole file decides, and says why
    mime, (width, height) = found
    width, height = _SIZES.setdefault(width, width), _SIZES.setdefault(height, height)  # one int per size held
    if mime not in SENDABLE_MIME or width * height > MAX_PIXELS or not ends_complete(mime, tail, st.st_size, head, unknown=False):
        return None
    return FileDigest(path=str(path), size=st.st_size, mtime_ns=st.st_mtime_ns, sha256="", mime=mime,
                      sent_sha256="", width=width, height=height, hashed_at_ns=0)
