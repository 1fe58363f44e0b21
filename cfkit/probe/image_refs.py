"""The images a planned request sends, held by reference: paths and digests, read only when sent.

A plan of 12,000 requests must not hold 12,000 images' bytes. Each image of
a planned request is an :class:`ImageRef`: what it is made from (one file, or
two files drawn as one labelled sheet for a backend that takes one image),
the MIME type and SHA-256 of the bytes the model will receive (what the cache
key covers) and its size in pixels (what the cost estimate needs). The bytes
are produced by :meth:`ImageRef.load` when the request is sent; the sender (:mod:`cfkit.probe.sending_images`)
shares one load between requests in flight that send the same image.

:class:`Digests` finds what each file holds. A file whose path, size and
modification time match a row of the store's digest table
(:mod:`cfkit.store.digests`) is not read at all; any other file is read and
hashed once, and remembered: worker threads read and hash runs of files
(reading and hashing release the interpreter lock) while the planning thread
reads each file's type and size from its header (:func:`_hash_in_threads`).
A row written less than :data:`cfkit.store.digests.RACY_S` after the file's own mtime is not
trusted (a rewrite within one tick of the filesystem clock keeps the mtime);
it is checked again, then trusted. A file that changed between planning and
sending (its size or mtime moved) is refused when it is loaded, rather than
sent under another image's cache key.

A :class:`Digests` made with ``lazy`` (what ``cfkit probe run`` uses) does not
read a file it does not know before the first request goes out: it checks the
file's header and its last bytes (type, pixel size, pixel limit, end marker:
the checks :func:`cfkit.images.as_sent` makes), and the :class:`ImageRef` it
gives has ``sha256`` None. The digest is then taken from the very bytes read
to send the request (:meth:`ImageRef.load_learning`), so each image is read
once; the sender remembers it in the store for the next run. A file whose
header alone cannot settle it (another image type, a header longer than
:data:`~cfkit.probe.header_checks.HEAD_BYTES`, no end marker in its last bytes) is read and hashed at
once, as before.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

from cfkit.errors import ImageError
from cfkit.images import ImageData, as_sent, read_header, side_by_side
from cfkit.probe.header_checks import header_only
from cfkit.store import Store, digests as digest_table
from cfkit.store.digests import FileDigest

#: Threads reading and hashing files not yet known.
HASH_THREADS = min(4, os.cpu_count() or 1)
#: Files go to the hashing threads in runs of about this many bytes (at least one file each), at most
#: ``HASH_THREADS + 1`` runs ahead of the one being checked: the bytes held at once stay bounded.
HASH_RUN_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class FileState:
    """A file as it was when planned: where (a plan of 12,000 requests holds 12,000 of these: the path is kept
    as text, a third the size of a :class:`~pathlib.Path`), how large, when last modified."""

    path: str
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class ImageRef:
    """One image of a request by reference (see the module docstring).

    ``kind``: ``file`` (the file's exact bytes), ``png`` (a file of another
    type, re-encoded as PNG) or ``sheet`` (two files side by side with their
    ``labels``). ``sha256`` and ``mime`` are those of the bytes sent;
    ``sha256`` is None for a ``file`` not read yet (a lazy plan): it is known
    once the request is sent.
    """

    kind: Literal["file", "png", "sheet"]
    files: tuple[FileState, ...]
    mime: str
    sha256: str | None
    width: int
    height: int
    labels: tuple[str, ...] = ()

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) in pixels, as the model receives it."""
        return (self.width, self.height)

    @property
    def data(self) -> bytes:
        """The bytes sent (read now; the runner calls :meth:`load` once per request instead)."""
        return self.load().data

    def identity(self) -> list:
        """What the image is known by before it is read: its kind, type, files (path, size, mtime) and labels
        (what a run's id covers; :func:`cfkit.probe.identity.request_key`)."""
        return [self.kind, self.mime, [[f.path, f.size, f.mtime_ns] for f in self.files], list(self.labels)]

    def load_learning(self) -> tuple[ImageData, str, FileDigest | None]:
        """(the image as sent, the SHA-256 of the bytes sent, what was learned of a file not read before).

        For an image planned without its digest (``sha256`` None) the digest
        comes from the bytes read here, and the :class:`FileDigest` returned
        lets the next run know the file without reading it.
        """
        if self.kind != "file" or self.sha256 is not None:
            data = self.load()
            return data, self.sha256 or hashlib.sha256(data.data).hexdigest(), None
        started = time.time_ns()
        data = _read_unchanged(self.files[0])
        sha = hashlib.sha256(data).hexdigest()
        return ImageData(data, self.mime), sha, self.learned(sha, started)

    def learned(self, sha: str, started: int) -> FileDigest:
        """What the store's digest table keeps of this file, read whole from ``started`` on, its bytes' SHA-256
        ``sha`` (a ``file`` image: the bytes sent are the file's)."""
        state = self.files[0]
        return FileDigest(path=state.path, size=state.size, mtime_ns=state.mtime_ns, sha256=sha, mime=self.mime,
                          sent_sha256=sha, width=self.width, height=self.height, hashed_at_ns=started)

    def load(self) -> ImageData:
        """The image as sent: read from its files now; refused when a file changed since planning."""
        if self.kind == "file":
            data = _read_unchanged(self.files[0])
            return ImageData(data, self.mime)
        if self.kind == "png":
            data = as_sent(_read_unchanged(self.files[0]), source=self.files[0].path)[0].data
        else:
            for state in self.files:
                _check_unchanged(state)
            data = side_by_side([Path(s.path) for s in self.files], list(self.labels)).data
        if hashlib.sha256(data).hexdigest() != self.sha256:  # the encoder made other bytes than when planned
            raise ImageError(f"image {self.files[0].path}: its re-encoded form differs from the one planned; "
                             "run the command again.")
        return ImageData(data, self.mime)


def _changed(state: FileState) -> ImageError:
    return ImageError(f"image {state.path} changed after the run was planned (size or modification time); "
                      "run the command again to send the new image as a new request.")


def _check_unchanged(state: FileState) -> None:
    try:
        now = os.stat(state.path)
    except OSError as exc:
        raise ImageError(f"image {state.path}: cannot be read any more ({exc.strerror}).") from exc
    if (now.st_size, now.st_mtime_ns) != (state.size, state.mtime_ns):
        raise _changed(state)


def _read_unchanged(state: FileState) -> bytes:
    try:
        with open(state.path, "rb") as fh:
            now = os.fstat(fh.fileno())
            if (now.st_size, now.st_mtime_ns) != (state.size, state.mtime_ns):
                raise _changed(state)
            return fh.read()
    except OSError as exc:
        raise ImageError(f"image {state.path}: cannot be read any more ({exc.strerror}).") from exc


class _Stated(NamedTuple):
    """What a plan uses of a file's ``os.stat``, as the inputs manifest recorded it (a full stat result holds a
    score of numbers: 12,000 of them at once cost megabytes)."""

    st_size: int
    st_mtime_ns: int


def _stat(path: Path) -> os.stat_result:
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise ImageError(f"image {path}: not found. Put the file there or fix the path.") from None
    except OSError as exc:
        raise ImageError(f"image {path}: cannot be read ({exc.strerror}).") from exc


def _trusted(row: FileDigest, st: os.stat_result) -> bool:
    return row.holds(st.st_size, st.st_mtime_ns)


def _read_hashed(path: Path) -> tuple[bytes, str, int]:
    """(the bytes of ``path``, their SHA-256, when the read began in nanoseconds since the epoch)."""
    started = time.time_ns()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImageError(f"image {path}: cannot be read ({exc.strerror}).") from exc
    return data, hashlib.sha256(data).hexdigest(), started


def _read_run(paths: list[Path]) -> list[tuple[bytes, str, int]]:
    return [_read_hashed(p) for p in paths]


def _hash_file(path: Path, st: os.stat_result) -> FileDigest:
    """Read ``path`` once: its SHA-256, its type and size from the header, and what a model receives."""
    return _described(path, st, *_read_hashed(path))


def _described(path: Path, st: os.stat_result, data: bytes, sha: str, started: int) -> FileDigest:
    sent, (width, height) = as_sent(data, source=str(path))  # refused here when sending it would be
    sent_sha = sha if sent.data is data else sent.sha256
    mime = sent.mime
    # The file's state when it was read; a file rewritten while it was read is caught at the next stat.
    return FileDigest(path=str(path), size=st.st_size, mtime_ns=st.st_mtime_ns, sha256=sha, mime=mime,
                      sent_sha256=sent_sha, width=width, height=height, hashed_at_ns=started)


def _hash_in_threads(paths: list[Path], states: dict[Path, os.stat_result]) -> list[FileDigest]:
    """:func:`_hash_file` of each of ``paths``, in order: threads read and hash runs of files (which needs the
    interpreter lock only between files) while this thread reads each header (which needs it throughout).

    Checking the headers in the threads too was no faster than one thread on two cores: each thread
    waited for the lock the other held. The first file that cannot be read or sent raises, as in one thread.
    """
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    batches: list[list[Path]] = [[]]
    size = 0
    for path in paths:
        if batches[-1] and size + states[path].st_size > HASH_RUN_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(path)
        size += states[path].st_size
    found: list[FileDigest] = []
    with ThreadPoolExecutor(HASH_THREADS) as pool:
        ahead = deque(pool.submit(_read_run, batch) for batch in batches[:HASH_THREADS + 1])
        queued = len(ahead)
        try:
            for batch in batches:
                read = ahead.popleft().result()
                if queued < len(batches):
                    ahead.append(pool.submit(_read_run, batches[queued]))
                    queued += 1
                found.extend(_described(path, states[path], *each) for path, each in zip(batch, read))
        finally:
            for pending in ahead:
                pending.cancel()
    return found


class Digests:
    """What each image file holds, for one planning pass (see the module docstring).

    ``store`` may be None (a dry run in a workspace without a store): then
    nothing is remembered across runs; with ``remember`` False the store is
    read but not written. Call :meth:`save` once planning is done. With
    ``lazy``, a file not known yet is only checked (see the module docstring);
    its digest is learned when it is sent. ``stats`` holds files stat'ed just
    before (by path as text: the inputs manifest's [path, size, mtime]
    entries), each taken instead of a second ``stat`` of that file; the
    plan's :class:`FileState` of it shares the entry's text and numbers.
    """

    def __init__(self, store: Store | None, *, remember: bool = True, lazy: bool = False,
                 stats: dict[str, list] | None = None):
        self.store = store
        self._stats = stats if stats is not None else {}  # files stat'ed just before (by path as text), used once
        self.remember = remember  # False for a dry run, which writes nothing
        self.lazy = lazy
        self.checked = 0  # files only checked (lazy), to be hashed when sent
        self._files: dict[Path, tuple[FileDigest, FileState]] = {}
        self._new: list[FileDigest] = []
        self._sheets: dict[tuple[tuple[Path, ...], tuple[str, ...]], ImageRef] = {}
        self.hashed = 0  # files read and hashed in this pass

    def prefetch(self, paths: list[Path]) -> None:
        """Find the digests of ``paths`` at once: known rows in one query, the other files hashed in threads."""
        wanted = list(dict.fromkeys(p for p in paths if p not in self._files))
        if not wanted:
            return
        known = self._stats
        states: dict[Path, os.stat_result | _Stated] = {}
        shared: dict[Path, list] = {}  # the inputs manifest's [path, size, mtime] of a file stat'ed there
        for path in wanted:
            entry = known.pop(str(path), None)
            if entry is None:
                states[path] = _stat(path)
            else:
                states[path], shared[path] = _Stated(entry[1], entry[2]), entry

        def state(path: Path, text: str, size: int, mtime_ns: int) -> FileState:
            # The file as the manifest holds it, where it holds it as found here: one text and two ints a file
            # for the whole run, not a copy for the plan beside the manifest's.
            entry = shared.get(path)
            if entry is not None and entry[1] == size and entry[2] == mtime_ns:
                return FileState(entry[0], entry[1], entry[2])
            return FileState(text, size, mtime_ns)

        rows = digest_table.known(self.store, [str(p) for p in wanted]) if self.store is not None else {}
        missing = []
        for path, st in states.items():
            row = rows.get(str(path))
            if row is not None and _trusted(row, st):
                self._files[path] = (row, state(path, row.path, st.st_size, st.st_mtime_ns))
            else:
                missing.append(path)
        if self.lazy:
            whole = []
            for path in missing:
                header = header_only(path, states[path])
                if header is None:
                    whole.append(path)
                else:
                    self._files[path] = (header, state(path, header.path, header.size, header.mtime_ns))
                    self.checked += 1
            missing = whole
        if not missing:
            return
        if len(missing) == 1 or HASH_THREADS == 1:
            found = [_hash_file(p, states[p]) for p in missing]
        else:
            found = _hash_in_threads(missing, states)
        for path, digest in zip(missing, found):
            self._files[path] = (digest, state(path, digest.path, digest.size, digest.mtime_ns))
        self._new.extend(found)
        self.hashed += len(found)

    def file(self, path: Path) -> FileDigest:
        """The digest of one file (read and hashed now when it is not known; a lazy check leaves sha256 "")."""
        if path not in self._files:
            self.prefetch([path])
        return self._files[path][0]

    def sha256(self, path: Path, *, resolve: bool = True) -> str | None:
        """The SHA-256 of the file's bytes; for a file a lazy plan only checked, None, or (``resolve``) the
        file read and hashed now."""
        digest = self.file(path)
        if digest.sha256:
            return digest.sha256
        if not resolve:
            return None
        found = _hash_file(path, _stat(path))
        self._files[path] = (found, FileState(found.path, found.size, found.mtime_ns))
        self._new.append(found)
        self.hashed += 1
        return found.sha256

    def state(self, path: Path) -> FileState:
        """The file as planned: path, size and mtime."""
        if path not in self._files:
            self.prefetch([path])
        return self._files[path][1]

    def refs(self, paths: list[Path], *, as_sheet: bool) -> tuple[ImageRef, ...]:
        """The images a request sends for ``paths``: each file, or (``as_sheet``) two files as one sheet."""
        if as_sheet and len(paths) > 1:
            labels = tuple(["First image", "Second image"][: len(paths)])
            return (self._sheet(tuple(paths), labels),)
        refs = []
        for path in paths:
            digest = self.file(path)
            state = self._files[path][1]
            kind = "file" if digest.sent_sha256 == digest.sha256 else "png"  # "" == "": checked, sent as it is
            refs.append(ImageRef(kind, (state,), digest.mime, digest.sent_sha256 or None, digest.width,
                                 digest.height))
        return tuple(refs)

    def _sheet(self, paths: tuple[Path, ...], labels: tuple[str, ...]) -> ImageRef:
        """A sheet is drawn once here for its digest and size, and drawn again when sent."""
        if (paths, labels) not in self._sheets:
            for path in paths:
                self.sha256(path)  # a sheet is drawn from the files now: they are read whole
            data = side_by_side(list(paths), list(labels)).data
            _, (width, height) = read_header(data, source="the side-by-side sheet")
            self._sheets[(paths, labels)] = ImageRef(
                "sheet", tuple(self._files[p][1] for p in paths), "image/png", hashlib.sha256(data).hexdigest(),
                width, height, labels)
        return self._sheets[(paths, labels)]

    def save(self) -> None:
        """Remember the digests found in this pass (one transaction), so the next run reads no file again."""
        if self.store is not None and self.remember and self._new:
            digest_table.remember(self.store, self._new)
        self._new = []
