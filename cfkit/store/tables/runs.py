"""The schema of the ``runs`` and ``replies`` tables: their DDL and migrations, re-exported by
:mod:`cfkit.store.runs`, their owner, which holds every other statement.
Why it is kept apart: :mod:`cfkit.store.tables`.
"""

from __future__ import annotations

DDL = """
CREATE TABLE IF NOT EXISTS runs (
    id              TEXT PRIMARY KEY,
    model           TEXT NOT NULL,
    suite           TEXT NOT NULL,
    options         TEXT NOT NULL DEFAULT '{}',    -- JSON
    cfkit_version   TEXT NOT NULL,
    templates_sha256 TEXT,
    started_at      TEXT NOT NULL,
    finished_at     TEXT,
    status          TEXT NOT NULL DEFAULT 'running',
    n_requests      INTEGER NOT NULL DEFAULT 0,
    n_done          INTEGER NOT NULL DEFAULT 0,
    n_errors        INTEGER NOT NULL DEFAULT 0,
    cost_usd        REAL,                          -- sum over the run's replies, when prices are known
    notes           TEXT NOT NULL DEFAULT '{}',    -- JSON: skipped pairs, backend fallbacks, why it stopped
    settings        TEXT NOT NULL DEFAULT '{}',    -- JSON: backend, model, endpoint, generation, identity, protocol
    settings_sha256 TEXT,                          -- over settings: runs that may be reported together share it
    requests_sha256 TEXT,                          -- over every planned request's cache key
    inputs_sha256   TEXT,                          -- over the files the requests come from, once complete
    endpoint        TEXT,                          -- the resolved server URL (credentials removed), if remote
    versions        TEXT NOT NULL DEFAULT '{}',    -- JSON: cfkit's and the key libraries' versions
    protocol        TEXT,                          -- the preset the settings came from (default, paper)
    selection       TEXT NOT NULL DEFAULT '{}',    -- JSON: --limit, --cases, --accepted-only, --reviewed-only
    error           TEXT,                          -- why the run stopped with a failure
    inputs_manifest TEXT                           -- JSON: the input files' sizes and mtimes, once complete
);

CREATE TABLE IF NOT EXISTS replies (
    run_id      TEXT NOT NULL REFERENCES runs(id),
    case_id     TEXT NOT NULL,
    pair_id     TEXT NOT NULL DEFAULT '',
    condition   TEXT NOT NULL,
    cache_key   TEXT,
    answer      TEXT,
    parse       TEXT,
    error       TEXT,
    reason      TEXT,
    confidence  TEXT,
    raw         TEXT,
    detail      TEXT,                              -- why: a transport failure's message, the parser's note
    created_at  TEXT NOT NULL,
    cost_usd    REAL,                              -- what this reply cost, when prices are known
    edit_id     INTEGER,                           -- the edit an 'edit' question showed
    image_sha256 TEXT,                             -- SHA-256 of the one image file the question shows
    server_model TEXT,                             -- the model id the server said answered
    system_fingerprint TEXT,                       -- the server's build fingerprint, when it gives one
    raw_chars   INTEGER,                           -- the reply's full length when raw was cut to the storage cap
    reasoning   TEXT,                              -- reasoning split off the reply or returned beside it; never graded
    parser      TEXT,                              -- cfkit.parse.PARSER_VERSION of the reading (NULL: not parsed)
    truncated   INTEGER NOT NULL DEFAULT 0,        -- 1 when the reply stopped at the token limit (finish_reason length)
    endpoint    TEXT,                              -- the server that answered (redacted), when a model has several
    PRIMARY KEY (run_id, case_id, pair_id, condition)
);
"""

MIGRATIONS: dict[int, list[str]] = {
    2: ["ALTER TABLE replies ADD COLUMN cost_usd REAL"],
    3: [*(f"ALTER TABLE runs ADD COLUMN {column}" for column in (
            "settings TEXT NOT NULL DEFAULT '{}'", "settings_sha256 TEXT", "requests_sha256 TEXT",
            "inputs_sha256 TEXT", "endpoint TEXT", "versions TEXT NOT NULL DEFAULT '{}'", "protocol TEXT",
            "selection TEXT NOT NULL DEFAULT '{}'", "error TEXT")),
        *(f"ALTER TABLE replies ADD COLUMN {column}" for column in (
            "edit_id INTEGER", "image_sha256 TEXT", "server_model TEXT", "system_fingerprint TEXT"))],
    5: [*(f"ALTER TABLE replies ADD COLUMN {column}" for column in ("raw_chars INTEGER", "reasoning TEXT",
                                                                   "parser TEXT")),
        "ALTER TABLE runs ADD COLUMN inputs_manifest TEXT"],
    7: ["ALTER TABLE replies ADD COLUMN truncated INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE replies ADD COLUMN endpoint TEXT"],
}
