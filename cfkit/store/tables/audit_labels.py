"""The schema of the ``audit_annotators``, ``audit_labels`` and ``audit_finals`` tables: their DDL and migrations, re-exported by
:mod:`cfkit.store.audit_labels`, their owner, which holds every other statement.
Why it is kept apart: :mod:`cfkit.store.tables`.
"""

from __future__ import annotations

DDL = """
CREATE TABLE IF NOT EXISTS audit_annotators (
    audit_id    TEXT NOT NULL REFERENCES audit_plans(id),
    name        TEXT NOT NULL,
    number      INTEGER NOT NULL,                  -- 1, 2, …: how adjudication names them
    joined_at   TEXT NOT NULL,
    PRIMARY KEY (audit_id, name),
    UNIQUE (audit_id, number)
);

CREATE TABLE IF NOT EXISTS audit_labels (
    audit_id    TEXT NOT NULL REFERENCES audit_plans(id),
    item_id     TEXT NOT NULL REFERENCES audit_items(id),
    annotator   TEXT NOT NULL,
    answer_ok   INTEGER NOT NULL,                  -- 1: the response selected the correct answer
    cue         INTEGER,                           -- 1: identified the decisive visible cue; NULL: not decided yet
    link        INTEGER,                           -- 1: correctly linked the cue to the stated use; NULL: not yet
    unsure      INTEGER NOT NULL DEFAULT 0,        -- 1: the annotator asks for the item to be discussed
    note        TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (item_id, annotator)
);
CREATE INDEX IF NOT EXISTS audit_labels_audit ON audit_labels(audit_id, annotator);

CREATE TABLE IF NOT EXISTS audit_finals (
    item_id     TEXT PRIMARY KEY REFERENCES audit_items(id),
    audit_id    TEXT NOT NULL REFERENCES audit_plans(id),
    answer_ok   INTEGER NOT NULL,
    cue         INTEGER NOT NULL,
    link        INTEGER NOT NULL,
    basis       TEXT NOT NULL,                     -- agreed | resolved
    decided_by  TEXT NOT NULL,                     -- the annotators (agreed) or the adjudicator (resolved)
    note        TEXT,
    decided_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_finals_audit ON audit_finals(audit_id);
"""

#: New tables only: the schema's idempotent DDL creates them when an older store is opened.
MIGRATIONS: dict[int, list[str]] = {}
