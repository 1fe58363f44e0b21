"""The schema of the ``audit_plans`` and ``audit_items`` tables: their DDL and migrations, re-exported by
:mod:`cfkit.store.audits`, their owner, which holds every other statement.
Why it is kept apart: :mod:`cfkit.store.tables`.
"""

from __future__ import annotations

DDL = """
CREATE TABLE IF NOT EXISTS audit_plans (
    id          TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL,
    seed        INTEGER NOT NULL,                  -- case sampling and each annotator's order
    annotators  INTEGER NOT NULL DEFAULT 2,        -- how many independent annotators label every item
    selection   TEXT NOT NULL DEFAULT '{}',        -- JSON: how the cases were chosen
    inputs      TEXT NOT NULL DEFAULT '{}',        -- JSON: hashes of the cases file and of each run's audited replies
    notes       TEXT NOT NULL DEFAULT '[]'         -- JSON: what planning left out and why
);

CREATE TABLE IF NOT EXISTS audit_items (
    id          TEXT PRIMARY KEY,                  -- opaque and random: says nothing of run or model
    audit_id    TEXT NOT NULL REFERENCES audit_plans(id),
    position    INTEGER NOT NULL,                  -- the plan's shuffled order
    run_id      TEXT NOT NULL,
    model       TEXT NOT NULL,
    case_id     TEXT NOT NULL,
    question    TEXT NOT NULL,
    options     TEXT NOT NULL,                     -- JSON: [{"id", "text"}]
    gold        TEXT NOT NULL,
    yes_option  TEXT,
    rationale   TEXT,
    images      TEXT NOT NULL,                     -- JSON: [{"path", "sha256"}], paths relative to the image root
    answer      TEXT,                              -- the parser's reading of the reply (null: none)
    parse       TEXT,
    error       TEXT,
    response    TEXT NOT NULL,                     -- the reply's reason (or raw text), self-identifying strings masked
    masked      INTEGER NOT NULL DEFAULT 0,        -- how many strings were masked
    content_sha256 TEXT NOT NULL,
    UNIQUE (audit_id, run_id, case_id)
);
CREATE INDEX IF NOT EXISTS audit_items_audit ON audit_items(audit_id, position);
"""

#: New tables only: the schema's idempotent DDL creates them when an older store is opened.
MIGRATIONS: dict[int, list[str]] = {}
