"""The schema of the ``leases`` table: its DDL and migrations, re-exported by
:mod:`cfkit.store.leases`, its owner, which holds every other statement.
Why it is kept apart: :mod:`cfkit.store.tables`.
"""

from __future__ import annotations

DDL = """
CREATE TABLE IF NOT EXISTS leases (
    run_id      TEXT NOT NULL,
    case_id     TEXT NOT NULL,
    pair_id     TEXT NOT NULL DEFAULT '',
    condition   TEXT NOT NULL,
    owner       TEXT NOT NULL,                     -- host:pid:token of the process sending the request
    expires_at  REAL NOT NULL,                     -- seconds since the epoch; renewed while the owner runs
    state       TEXT NOT NULL DEFAULT 'sending',   -- sending | failed (its transport failure is stored)
    PRIMARY KEY (run_id, case_id, pair_id, condition)
);
"""

MIGRATIONS: dict[int, list[str]] = {}  # new in schema 5: created by its DDL
