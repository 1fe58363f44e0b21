"""The schema of the ``screens`` table: its DDL and migrations, re-exported by
:mod:`cfkit.store.screens`, its owner, which holds every other statement.
Why it is kept apart: :mod:`cfkit.store.tables`.
"""

from __future__ import annotations

from cfkit.store.tables.prelabels import COST_COLUMNS, SPEND_COLUMNS

#: The table as schema 6 made it (a store older than 6 has none yet: its migration creates this, then adds the
#: columns of schema 8).
_DDL_6 = """
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

DDL = _DDL_6.replace("    PRIMARY KEY", "".join(f"    {name:<15} {kind},\n" for name, kind in COST_COLUMNS + SPEND_COLUMNS)
                     + "    PRIMARY KEY")

#: New in schema 6: created by its DDL; schema 8 adds the cost columns, schema 9 what they left out (the columns
#: the prelabels table has: what the judge's replies cost, cfkit.store.tables.prelabels).
MIGRATIONS: dict[int, list[str]] = {
    8: [_DDL_6, *(f"ALTER TABLE screens ADD COLUMN {name} {kind}" for name, kind in COST_COLUMNS)],
    9: [f"ALTER TABLE screens ADD COLUMN {name} {kind}" for name, kind in SPEND_COLUMNS],
}
