"""The schema of the ``responses`` table: its DDL and migrations, re-exported by
:mod:`cfkit.store.responses`, its owner, which holds every other statement.
Why it is kept apart: :mod:`cfkit.store.tables`.
"""

from __future__ import annotations

DDL = """
CREATE TABLE IF NOT EXISTS responses (
    cache_key   TEXT PRIMARY KEY,
    backend     TEXT NOT NULL,
    model       TEXT NOT NULL,
    raw         TEXT,
    usage       TEXT,                              -- JSON
    latency_s   REAL,
    cost_usd    REAL,
    refused     INTEGER NOT NULL DEFAULT 0,        -- 1 when the model explicitly declined
    created_at  TEXT NOT NULL,
    server_model TEXT,                             -- the model id the server said answered
    system_fingerprint TEXT,                       -- the server's build fingerprint, when it gives one
    raw_chars   INTEGER,                           -- the reply's full length when raw was cut to the storage cap
    reasoning   TEXT,                              -- a reasoning text the server returned beside the reply
    truncated   INTEGER NOT NULL DEFAULT 0,        -- 1 when generation stopped at the token limit
    endpoint    TEXT                               -- the server that answered (redacted), when a model has several
);
"""

MIGRATIONS: dict[int, list[str]] = {
    3: ["ALTER TABLE responses ADD COLUMN server_model TEXT",
        "ALTER TABLE responses ADD COLUMN system_fingerprint TEXT"],
    5: ["ALTER TABLE responses ADD COLUMN raw_chars INTEGER", "ALTER TABLE responses ADD COLUMN reasoning TEXT"],
    7: ["ALTER TABLE responses ADD COLUMN truncated INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE responses ADD COLUMN endpoint TEXT"],
}
