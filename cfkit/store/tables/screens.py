"""The schema of the ``screens`` table: its DDL and migrations, re-exported by
:mod:`cfkit.store.screens`, its owner, which holds every other statement.
Why it is kept apart: :mod:`cfkit.store.tables`.
"""

from __future__ import annotations

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

#: Schema 8: what the judge's reply behind an answer cost, as the ``prelabels`` table keeps it
#: (:mod:`cfkit.store.tables.prelabels`); ``replies`` NULL: stored before cfkit kept this (not known).
_COST_COLUMNS = (("replies", "INTEGER"), ("priced", "INTEGER"), ("cost_usd", "REAL"), ("unreported", "INTEGER"),
                 ("tokens_in", "INTEGER"), ("tokens_out", "INTEGER"))

#: Schema 9: what the cost columns left out. ``cut_off``: of ``replies``, those cut off at the token limit (never
#: read); ``abandoned``: attempts given up after they were sent (a timeout, a connection dropped mid-reply), which a
#: provider may bill; ``pending``: 1 for a row with no reply read yet (only what such replies and attempts cost: no
#: answer, asked again by the next run). NULL in a row stored before (``cut_off`` NULL: not kept then).
SPEND_COLUMNS = (("cut_off", "INTEGER"), ("abandoned", "INTEGER"), ("pending", "INTEGER"))

DDL = _DDL_6.replace("    PRIMARY KEY", "".join(f"    {name:<15} {kind},\n" for name, kind in _COST_COLUMNS + SPEND_COLUMNS)
                     + "    PRIMARY KEY")

#: New in schema 6: created by its DDL; schema 8 adds the cost columns, schema 9 what they left out.
MIGRATIONS: dict[int, list[str]] = {
    8: [_DDL_6, *(f"ALTER TABLE screens ADD COLUMN {name} {kind}" for name, kind in _COST_COLUMNS)],
    9: [f"ALTER TABLE screens ADD COLUMN {name} {kind}" for name, kind in SPEND_COLUMNS],
}
