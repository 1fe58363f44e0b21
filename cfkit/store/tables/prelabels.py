"""The schema of the ``prelabels`` table: its DDL and migrations, re-exported by
:mod:`cfkit.store.prelabels`, its owner, which holds every other statement.
Why it is kept apart: :mod:`cfkit.store.tables`.
"""

from __future__ import annotations

#: The table as schema 6 made it (a store older than 6 has none yet: its migration creates this, then adds the
#: columns of schema 8).
_DDL_6 = """
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

#: Schema 8: what the judge's replies behind a label cost (the screens table keeps the same of an answer), each reply it took (a label's earlier replies, replaced by
#: 'prelabel --retry-unanswered', included). ``replies`` NULL: stored before cfkit kept this (not known).
COST_COLUMNS = (
    ("replies", "INTEGER"),
    ("priced", "INTEGER"),  # 1: the judge was priced; 0: not (cost_usd NULL)
    ("cost_usd", "REAL"),  # NULL when not priced, or when no reply reported a cost
    ("unreported", "INTEGER"),  # replies without a known cost on a priced label (earlier unpriced ones too)
    ("tokens_in", "INTEGER"),  # as the server reported them; NULL when a reply did not
    ("tokens_out", "INTEGER"),
)

#: Schema 9: what the cost columns left out. ``cut_off``: of ``replies``, those cut off at the token limit (never
#: read); ``abandoned``: attempts given up after they were sent (a timeout, a connection dropped mid-reply), which a
#: provider may bill; ``pending``: 1 for a row with no reply read yet (only what such replies and attempts cost: no
#: answer, asked again by the next run). NULL in a row stored before (``cut_off`` NULL: not kept then).
SPEND_COLUMNS = (("cut_off", "INTEGER"), ("abandoned", "INTEGER"), ("pending", "INTEGER"))

DDL = _DDL_6.replace("    PRIMARY KEY", "".join(f"    {name:<15} {kind},\n" for name, kind in COST_COLUMNS + SPEND_COLUMNS)
                     + "    PRIMARY KEY")

#: New in schema 6: created by its DDL; schema 8 adds the cost columns, schema 9 what they left out.
MIGRATIONS: dict[int, list[str]] = {
    8: [_DDL_6, *(f"ALTER TABLE prelabels ADD COLUMN {name} {kind}" for name, kind in COST_COLUMNS)],
    9: [f"ALTER TABLE prelabels ADD COLUMN {name} {kind}" for name, kind in SPEND_COLUMNS],
}
