"""The schema of the ``file_digests`` table: its DDL and migrations, re-exported by
:mod:`cfkit.store.digests`, its owner, which holds every other statement.
Why it is kept apart: :mod:`cfkit.store.tables`.
"""

from __future__ import annotations

DDL = """
CREATE TABLE IF NOT EXISTS file_digests (
    path         TEXT PRIMARY KEY,                 -- as the run names it (absolute)
    size         INTEGER NOT NULL,                 -- bytes
    mtime_ns     INTEGER NOT NULL,                 -- modification time, nanoseconds since the epoch
    sha256       TEXT NOT NULL,                    -- of the file's bytes
    mime         TEXT NOT NULL,                    -- the image type read from the content
    sent_sha256  TEXT NOT NULL,                    -- of the bytes a model receives (a re-encoded PNG for other types)
    width        INTEGER NOT NULL,                 -- pixels, as the model receives it
    height       INTEGER NOT NULL,
    hashed_at_ns INTEGER NOT NULL                  -- when the file was read (nanoseconds since the epoch)
);
"""

MIGRATIONS: dict[int, list[str]] = {}  # new in schema 5: created by its DDL
