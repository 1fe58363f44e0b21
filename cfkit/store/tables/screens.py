"""The schema of the ``screens`` table: its DDL and migrations, re-exported by
:mod:`cfkit.store.screens`, its owner, which holds every other statement.
Why it is kept apart: :mod:`cfkit.store.tables`.
"""

from __future__ import annotations

DDL = """
CREATE TABLE IF NOT EXISTS screens (
    edit_id         INTEGER NOT NULL REFERENCES edits(id),
    spec_id         TEXT NOT NULL,
    judge           TEXT NOT NULL,                 -- the judge model, KIND:NAME
    prompt_version  TEXT NOT NULL,                 -- sha256 of the question file and templates, first 12
    question        TEXT NOT NULL,                 -- the question's id in the question file
    expected        TEXT NOT NULL,                 -- Yes | No: the answer of a good edit
    answer          TEXT,                          -- Yes | No, or NULL: no valid answer
    parse           TEXT,                          -- the parser's rule, or its failure
    prompt          TEXT NOT NULL,                 -- the question as sent
    raw             TEXT,                          -- the judge's reply
    server_model    TEXT,                          -- the model id the server said answered
    created_at      TEXT NOT NULL,
    PRIMARY KEY (edit_id, judge, prompt_version, question)
);
"""

#: New in schema 6: created by its DDL.
MIGRATIONS: dict[int, list[str]] = {}
