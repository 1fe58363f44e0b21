"""The schema of the ``reviews`` table: its DDL and migrations, re-exported by
:mod:`cfkit.store.reviews`, its owner, which holds every other statement.
Why it is kept apart: :mod:`cfkit.store.tables`.
"""

from __future__ import annotations

DDL = """
CREATE TABLE IF NOT EXISTS reviews (
    id          INTEGER PRIMARY KEY,
    spec_id     TEXT NOT NULL,
    edit_id     INTEGER REFERENCES edits(id),
    decision    TEXT NOT NULL,                     -- accept | reject | skip
    note        TEXT,
    created_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reviews_spec ON reviews(spec_id);
"""

MIGRATIONS: dict[int, list[str]] = {}
