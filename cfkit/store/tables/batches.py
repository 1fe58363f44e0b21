"""The schema of the ``batches`` table: its DDL and migrations, re-exported by
:mod:`cfkit.store.batches`, its owner, which holds every other statement.
Why it is kept apart: :mod:`cfkit.store.tables`.
"""

from __future__ import annotations

DDL = """
CREATE TABLE IF NOT EXISTS batches (
    id            TEXT PRIMARY KEY,                -- the local key: the provider's batch id, or it with ~N if reused
    run_id        TEXT NOT NULL,
    endpoint      TEXT,                            -- the server (credentials removed)
    input_file_id TEXT NOT NULL,
    input_path    TEXT,                            -- the local copy of the uploaded file, until collected
    requests      TEXT NOT NULL,                   -- JSON: [[case, pair, condition, cache key, edit id, image sha], …]
    status        TEXT NOT NULL,                   -- the provider's last word: validating … completed, expired …
    counts        TEXT NOT NULL DEFAULT '{}',      -- JSON: total, completed, failed
    errors        TEXT NOT NULL DEFAULT '[]',      -- JSON: why the batch itself failed
    output_file_id TEXT,
    error_file_id TEXT,
    created_at    TEXT NOT NULL,
    checked_at    TEXT,
    collected_at  TEXT,                            -- when its results were stored
    server_id     TEXT                             -- the provider's batch id (NULL in older rows: the id)
);
"""

#: The table as schema 5 made it (a store older than 5 has none yet: it gets this one, then the new column).
_DDL_5 = "\n".join(line.replace("collected_at  TEXT,", "collected_at  TEXT ") for line in DDL.splitlines()
                    if not line.lstrip().startswith("server_id"))
MIGRATIONS: dict[int, list[str]] = {  # new in schema 5: created by its DDL
    6: [_DDL_5, "ALTER TABLE batches ADD COLUMN server_id TEXT"],
}
