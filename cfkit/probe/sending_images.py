"""The images of the requests being sent: each read once while the requests that send it are in flight.

The sending side of :mod:`cfkit.probe.image_refs`: a planned request holds
its images by reference (:class:`~cfkit.probe.image_refs.ImageRef`);
:class:`SendingImages` gives the request with its images read, and the
SHA-256 of each (known from the plan, or taken from the bytes read now, for a
lazy plan), and shares one read between requests in flight that send the same
image.

For a backend that sends images as base64 (:attr:`cfkit.backends.Backend.sends_base64`:
the openai backend) each image is held as an :class:`~cfkit.images.EncodedImage`.
A file not read before is then read into one buffer the sender reuses for
every file, and hashed and encoded from there: its bytes are never a Python
object of their own. At 64 requests in flight a run is bound by the event
loop's CPU, and each image's bytes had been a fresh allocation of a few
hundred KB, written once, read twice and dropped.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import replace

from cfkit.backends import ProbeRequest
from cfkit.errors import ImageError
from cfkit.images import EncodedImage
from cfkit.probe.image_refs import FileState, ImageRef, _changed
from cfkit.store.digests import FileDigest

#: The read buffer a sender keeps between images (base64 senders); a larger image's buffer is dropped after it.
KEPT_BUFFER_BYTES = 16 * 1024 * 1024


class SendingImages:
    """The images of the requests being sent, each loaded once while requests that send it are in flight.

    With ``base64`` (a backend that sends images as base64: :attr:`cfkit.backends.Backend.sends_base64`) each
    image is held as an :class:`~cfkit.images.EncodedImage`: a file not read before is read into one buffer
    reused for every file, hashed and encoded there, so its bytes are never held apart (at 64 requests in
    flight each image's bytes were a fresh allocation written once, read twice, and dropped)."""

    def __init__(self, *, base64: bool = False) -> None:
        self._held: dict[ImageRef, list] = {}  # ref -> [the image as sent, requests holding it, its SHA-256]
        self.learned: list[FileDigest] = []  # files read for the first time, for the store's digest table
        self._encode = None
        if base64:
            from cfkit.backends.openai_wire import b64encode

            self._encode = b64encode
        self._buffer = bytearray(0)  # reused by each read of a file not read before (base64 only)

    def acquire(self, request: ProbeRequest) -> ProbeRequest:
        """``request`` with its images as bytes (read now, or shared with a request in flight)."""
        return self.acquire_with_digests(request)[0]

    def acquire_with_digests(self, request: ProbeRequest) -> tuple[ProbeRequest, tuple[str | None, ...]]:
        """(``request`` with its images as bytes, the SHA-256 of each image's bytes: known from the plan or
        taken from the bytes read now; None for an image the request held as bytes already)."""
        if not any(isinstance(image, ImageRef) for image in request.images):
            return request, tuple(None for _ in request.images)
        loaded = []
        shas: list[str | None] = []
        try:
            for image in request.images:
                if not isinstance(image, ImageRef):
                    loaded.append(image)
                    shas.append(None)
                    continue
                held = self._held.get(image)
                if held is None:
                    data, sha, learned = image.load_learning() if self._encode is None else self._encoded(image)
                    if learned is not None:
                        self.learned.append(learned)
                    held = self._held[image] = [data, 0, sha]
                held[1] += 1
                loaded.append(held[0])
                shas.append(held[2])
        except BaseException:
            self._release(request.images[: len(loaded)])
            raise
        return replace(request, images=tuple(loaded)), tuple(shas)

    def _encoded(self, image: ImageRef) -> tuple[EncodedImage, str, FileDigest | None]:
        """:meth:`ImageRef.load_learning` with the image as base64; a file not read before (a lazy plan's) is read
        into the reused buffer, and hashed and encoded from there."""
        if image.kind != "file" or image.sha256 is not None:
            data, sha, learned = image.load_learning()
            return EncodedImage(self._encode(data.data), data.mime), sha, learned
        started = time.time_ns()
        state = image.files[0]
        if len(self._buffer) <= state.size:
            self._buffer = bytearray(state.size + 1)  # + 1: a file that grew since its stat is seen to
        try:
            read = _read_unchanged_into(state, memoryview(self._buffer))
            sha = hashlib.sha256(read).hexdigest()
            encoded = self._encode(read)
        finally:
            if len(self._buffer) > KEPT_BUFFER_BYTES:  # one very large image does not stay resident
                self._buffer = bytearray(0)
        return EncodedImage(encoded, image.mime), sha, image.learned(sha, started)

    def release(self, request: ProbeRequest) -> None:
        """The request is answered: drop the images no other request in flight holds."""
        self._release(request.images)

    def _release(self, images) -> None:
        for image in images:
            held = self._held.get(image) if isinstance(image, ImageRef) else None
            if held is not None:
                held[1] -= 1
                if held[1] <= 0:
                    del self._held[image]


def _read_unchanged_into(state: FileState, buffer: memoryview) -> memoryview:
    """:func:`_read_unchanged` into ``buffer`` (longer than the file): the part of it the file filled."""
    try:
        with open(state.path, "rb", buffering=0) as fh:
            now = os.fstat(fh.fileno())
            if (now.st_size, now.st_mtime_ns) != (state.size, state.mtime_ns):
                raise _changed(state)
            size = 0
            while size < len(buffer):
                got = fh.readinto(buffer[size:])
                if not got:
                    break
                size += got
    except OSError as exc:
        raise ImageError(f"image {state.path}: cannot be read any more ({exc.strerror}).") from exc
    if size != state.size:  # written to while it was read
        raise _changed(state)
    return buffer[:size]
