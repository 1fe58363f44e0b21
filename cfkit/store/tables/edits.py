"""The schema of the ``edits`` table: its DDL and migrations, re-exported by
:mod:`cfkit.store.edits`, its owner, which holds every other statement.
Why it is kept apart: :mod:`cfkit.store.tables`.
"""

from __future__ import annotations

DDL = """
CREATE TABLE IF NOT EXISTS edits (
    id              INTEGER PRIMARY KEY,
    spec_id         TEXT NOT NULL,
    spec_sha256     TEXT,
    candidate       INTEGER NOT NULL DEFAULT 0,
    engine          TEXT NOT NULL,
    model           TEXT,
    params          TEXT NOT NULL DEFAULT '{}',   -- JSON
    seed            INTEGER,
    prompt          TEXT,
    source_sha256   TEXT,
    mask_sha256     TEXT,
    raw_path        TEXT,                          -- relative to the store folder
    raw_sha256      TEXT,
    composite_path  TEXT,
    composite_sha256 TEXT,
    status          TEXT NOT NULL,                 -- ok | refused | failed
    error           TEXT,
    fallback        TEXT,                          -- why an earlier engine was skipped
    usage           TEXT,                          -- JSON, as the API reported it
    cost_usd        REAL,
    started_at      TEXT NOT NULL,
    finished_at     TEXT,
    label           TEXT NOT NULL DEFAULT 'synthetic counterfactual diagnostic'
);
CREATE INDEX IF NOT EXISTS edits_spec ON edits(spec_id);
"""

MIGRATIONS: dict[int, list[str]] = {}
