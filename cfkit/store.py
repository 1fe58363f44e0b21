"""The workspace's SQLite store (``.cfkit/cfkit.db``).

One file holds edits and their provenance, preservation checks, review
decisions, probe runs, parsed replies and cached model responses. It runs in
WAL mode with a busy timeout so two cfkit processes can share it; every write
happens in a short ``BEGIN IMMEDIATE`` transaction, so a killed process loses at
most the write it was making.

Secrets never enter the store: nothing here accepts an API key.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cfkit.errors import StoreError

SCHEMA_VERSION = 1

# Each section belongs to one concept; keep changes to a table inside its section.
SCHEMA = """
-- edits: one row per candidate an editor produced (or failed to produce)
CREATE TABLE IF NOT EXISTS edits (
    id              INTEGER PRIMARY KEY,
    spec_id         TEXT NOT NULL,
    spec_sha256     TEXT,
    candidate       INTEGER NOT NULL DEFAULT 0,
    engine          TEXT NOT NULL,
    model           TEXT,
    params          TEXT NOT NULL DEFAULT '{}',   -- JSON
    seed            INTEGER,
    prompt          TEXT,
    source_sha256   TEXT,
    mask_sha256     TEXT,
    raw_path        TEXT,                          -- relative to the store folder
    raw_sha256      TEXT,
    composite_path  TEXT,
    composite_sha256 TEXT,
    status          TEXT NOT NULL,                 -- ok | refused | failed
    error           TEXT,
    fallback        TEXT,                          -- why an earlier engine was skipped
    usage           TEXT,                          -- JSON, as the API reported it
    cost_usd        REAL,
    started_at      TEXT NOT NULL,
    finished_at     TEXT,
    label           TEXT NOT NULL DEFAULT 'synthetic counterfactual diagnostic'
);
CREATE INDEX IF NOT EXISTS edits_spec ON edits(spec_id);

-- checks: preservation metrics of one edit output (raw or composite)
CREATE TABLE IF NOT EXISTS checks (
    id          INTEGER PRIMARY KEY,
    edit_id     INTEGER NOT NULL REFERENCES edits(id),
    spec_id     TEXT NOT NULL,
    variant     TEXT NOT NULL,                     -- raw | composite
    metrics     TEXT NOT NULL,                     -- JSON
    verdict     TEXT NOT NULL,                     -- pass | fail
    reasons     TEXT NOT NULL DEFAULT '[]',        -- JSON list
    lpips       INTEGER NOT NULL DEFAULT 0,        -- 1 when LPIPS was measured
    created_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS checks_edit ON checks(edit_id);

-- reviews: a person's decision on an edit, newest row wins
CREATE TABLE IF NOT EXISTS reviews (
    id          INTEGER PRIMARY KEY,
    spec_id     TEXT NOT NULL,
    edit_id     INTEGER REFERENCES edits(id),
    decision    TEXT NOT NULL,                     -- accept | reject | skip
    note        TEXT,
    created_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reviews_spec ON reviews(spec_id);

-- runs: one probe run of one model on one suite
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
    notes           TEXT NOT NULL DEFAULT '{}'     -- JSON: skipped pairs, backend fallbacks, why it stopped
);

-- responses: raw model responses, cached by a hash of backend, model, options and request
CREATE TABLE IF NOT EXISTS responses (
    cache_key   TEXT PRIMARY KEY,
    backend     TEXT NOT NULL,
    model       TEXT NOT NULL,
    raw         TEXT,
    usage       TEXT,                              -- JSON
    latency_s   REAL,
    cost_usd    REAL,
    refused     INTEGER NOT NULL DEFAULT 0,        -- 1 when the model explicitly declined
    created_at  TEXT NOT NULL
);

-- replies: the parsed answer of one request of a run
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
    PRIMARY KEY (run_id, case_id, pair_id, condition)
);
"""


def now() -> str:
    """The current UTC time as ISO 8601 with seconds."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def to_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


class Store:
    """A connection to one workspace's SQLite store."""

    def __init__(self, path: Path, *, timeout: float = 30.0):
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
            self.conn.row_factory = sqlite3.Row
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            self.conn.execute("PRAGMA foreign_keys=ON")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self._migrate()
        except sqlite3.OperationalError as exc:
            raise StoreError(
                f"store {path}: cannot be opened or written ({exc}). Check free disk space and the folder's "
                "permissions, then run the command again; nothing saved before was lost."
            ) from exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"store {path}: not a readable SQLite store ({exc}). If the file is damaged, move it aside; "
                "cfkit will start a new one."
            ) from exc
        except OSError as exc:
            raise StoreError(f"store {path}: cannot be created ({exc.strerror}). Check the folder's permissions.") from exc

    def _migrate(self) -> None:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"store {self.path} was written by a newer cfkit (schema {version} > {SCHEMA_VERSION}); upgrade cfkit."
            )
        if version < SCHEMA_VERSION:
            # executescript commits on its own; the statements are idempotent.
            self.conn.executescript(SCHEMA + f"\nPRAGMA user_version={SCHEMA_VERSION};")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A short write transaction; rolled back if the block raises.

        SQLite failures inside the block or at commit (a full disk, a
        read-only folder) become one :class:`StoreError`; what earlier
        transactions saved is untouched.
        """
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise StoreError(f"store {self.path}: cannot start a write ({exc}). Another process may hold it "
                             "for long, or the disk is full or read-only; run the command again.") from exc
        try:
            yield self.conn
            self.conn.execute("COMMIT")
        except BaseException as exc:
            if self.conn.in_transaction:
                try:
                    self.conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # SQLite may already have rolled back on an I/O error
            if isinstance(exc, sqlite3.OperationalError):
                raise StoreError(
                    f"store {self.path}: write failed ({exc}). Check free disk space and the folder's "
                    "permissions, then run the command again; nothing saved before was lost."
                ) from exc
            raise

    def query(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"store {self.path}: query failed ({exc}).") from exc

    def integrity_ok(self) -> bool:
        return self.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(db_path: Path) -> Store:
    return Store(db_path)
