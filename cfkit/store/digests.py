"""The ``file_digests`` table: what cfkit already knows about an input file, keyed by path, size and mtime.

Its SQL lives here and nowhere else (the DDL and migrations:
:mod:`cfkit.store.tables.digests`). A probe run's cache keys cover the SHA-256
of every image it sends: a row lets a run key a request without reading its
image, and a run that reads an image to send it (a lazy plan,
:mod:`cfkit.probe.image_refs`) writes the row from those bytes. A file whose
path, size and modification time (in nanoseconds) match a row is taken to have
that row's content; the caller decides how recent a row may be to be trusted (a
file rewritten within one tick of the filesystem's clock keeps its mtime).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cfkit.store.db import Database, placeholders
from cfkit.store.tables.digests import DDL as DDL, MIGRATIONS as MIGRATIONS  # the schema (cfkit.store.tables)

#: A digest written within this many seconds of the file's mtime is checked again before it is trusted
#: (filesystems with whole-second timestamps get a whole second more).
RACY_S = 0.05


@dataclass(frozen=True, slots=True)
class FileDigest:
    """What one image file holds, as of one size and mtime."""

    path: str
    size: int
    mtime_ns: int
    sha256: str
    mime: str  # as sent (image/png for a file re-encoded as PNG)
    sent_sha256: str
    width: int
    height: int
    hashed_at_ns: int

    def holds(self, size: int, mtime_ns: int) -> bool:
        """Whether the file, found now with ``size`` and ``mtime_ns``, still holds what this row says: the same
        size and mtime, and the row written long enough after that mtime (:data:`RACY_S`)."""
        return _holds(self.size, self.mtime_ns, self.hashed_at_ns, size, mtime_ns)


def _holds(size: int, mtime_ns: int, hashed_at_ns: int, size_now: int, mtime_now_ns: int) -> bool:
    """:meth:`FileDigest.holds` of a row's size, mtime and hashing time."""
    if (size, mtime_ns) != (size_now, mtime_now_ns):
        return False
    window = RACY_S + (1.0 if mtime_now_ns % 1_000_000_000 == 0 else 0.0)
    return hashed_at_ns - mtime_now_ns >= window * 1e9


def _digest(row: sqlite3.Row) -> FileDigest:
    found = {name: row[name] for name in FileDigest.__dataclass_fields__}
    if found["sent_sha256"] == found["sha256"]:
        found["sent_sha256"] = found["sha256"]  # one string, not two equal ones, for each of thousands of files
    return FileDigest(**found)


def known(store: Database, paths: Sequence[str]) -> dict[str, FileDigest]:
    """The stored digests among ``paths``, by path (whatever their size and mtime; the caller compares)."""
    return {row["path"]: _digest(row) for row in store.query_in("SELECT * FROM file_digests WHERE path IN ({})", paths)}


def remember(store: Database, digests: Iterable[FileDigest]) -> None:
    """Store ``digests`` in one transaction, replacing what was known of those paths."""
    rows = [tuple(getattr(d, name) for name in FileDigest.__dataclass_fields__) for d in digests]
    if not rows:
        return
    columns = ", ".join(FileDigest.__dataclass_fields__)
    with store.transaction() as tx:
        tx.executemany(f"INSERT OR REPLACE INTO file_digests ({columns}) VALUES ({placeholders(rows[0])})", rows)


def sha256_now(store: Database, paths: Sequence[str]) -> dict[str, str | None]:
    """Each file's SHA-256 as it is now, by path: from its row where the row still holds (one ``stat``), else read
    and hashed (not remembered: a reader of the store does not write it); None for a file that cannot be read."""
    import hashlib
    import os

    rows = {path: row for path, *row in store.query_in(  # the four columns it needs, not a FileDigest a file
        "SELECT path, size, mtime_ns, hashed_at_ns, sha256 FROM file_digests WHERE path IN ({})", paths)}
    found: dict[str, str | None] = {}
    for path in dict.fromkeys(paths):
        try:
            st = os.stat(path)
        except OSError:
            found[path] = None
            continue
        row = rows.get(path)
        if row is not None and _holds(*row[:3], st.st_size, st.st_mtime_ns):
            found[path] = row[3]
            continue
        try:
            with open(path, "rb") as fh:
                found[path] = hashlib.file_digest(fh, "sha256").hexdigest()
        except OSError:
            found[path] = None
    return found
