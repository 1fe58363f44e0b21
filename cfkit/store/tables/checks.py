"""The schema of the ``checks`` table: its DDL and migrations, re-exported by
:mod:`cfkit.store.checks`, its owner, which holds every other statement.
Why it is kept apart: :mod:`cfkit.store.tables`.
"""

from __future__ import annotations

DDL = """
CREATE TABLE IF NOT EXISTS checks (
    id          INTEGER PRIMARY KEY,
    edit_id     INTEGER NOT NULL REFERENCES edits(id),
    spec_id     TEXT NOT NULL,
    variant     TEXT NOT NULL,                     -- raw | composite
    metrics     TEXT NOT NULL,                     -- JSON
    verdict     TEXT NOT NULL,                     -- pass | fail
    reasons     TEXT NOT NULL DEFAULT '[]',        -- JSON list
    lpips       INTEGER NOT NULL DEFAULT 0,        -- 1 when LPIPS was measured
    created_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS checks_edit ON checks(edit_id);
"""

MIGRATIONS: dict[int, list[str]] = {}
