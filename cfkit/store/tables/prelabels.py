"""The schema of the ``prelabels`` table: its DDL and migrations, re-exported by
:mod:`cfkit.store.prelabels`, its owner, which holds every other statement.
Why it is kept apart: :mod:`cfkit.store.tables`.
"""

from __future__ import annotations

DDL = """
CREATE TABLE IF NOT EXISTS prelabels (
    audit_id        TEXT NOT NULL,
    item_id         TEXT NOT NULL,
    judge           TEXT NOT NULL,                 -- the judge model, KIND:NAME
    prompt_version  TEXT NOT NULL,
    criterion       TEXT NOT NULL,                 -- cue | link
    value           INTEGER,                       -- 1 yes, 0 no, NULL no valid answer
    parse           TEXT,
    prompt          TEXT NOT NULL,
    raw             TEXT,
    server_model    TEXT,
    created_at      TEXT NOT NULL,
    PRIMARY KEY (audit_id, item_id, judge, prompt_version, criterion)
);
"""

#: New in schema 6: created by its DDL.
MIGRATIONS: dict[int, list[str]] = {}
