"""The raw SQL that tests hold, in one place.

Tests read and write the store through its owner modules (``cfkit/store/``) where an owner has the
function. What is here cannot go through them, because it does what cfkit itself never does:

- read a table's rows as a user's sqlite3 would, to see exactly what was stored (``table_rows``);
- give a store a shape only an older cfkit, a run cut short or a hand edit leaves: old schemas
  (``schema_1_store``, ``store_as_of``), rows written, changed or removed past the owners, whose
  writers insist on everything cfkit records (``insert_rows``, ``update_rows``, ``delete_rows``);
- damage a store on purpose, to test that cfkit refuses it in one line and loses nothing.

``tests/package/test_architecture.py`` checks that no other module under tests/ holds SQL.
"""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path


def store_as_of(path: Path, version: int) -> None:
    """Turn a store just made at the current schema into one as an older cfkit left it at ``version``: the
    columns that later migration steps add are dropped again and ``user_version`` is set back, so that the
    next open runs those steps, as it would on a user's old workspace."""
    from cfkit.store import _migrations

    conn = sqlite3.connect(path)
    for step, statements in sorted(_migrations().items(), reverse=True):
        if step <= version:
            continue
        for sql in statements:
            added = re.match(r"ALTER TABLE (\w+) ADD COLUMN (\w+)", sql)
            if added:
                conn.execute(f"ALTER TABLE {added[1]} DROP COLUMN {added[2]}")
    conn.execute(f"PRAGMA user_version={version}")
    conn.commit()
    conn.close()


def _db_file(where: Path) -> Path:
    """A workspace folder (its ``.cfkit/cfkit.db``) or the store file itself."""
    where = Path(where)
    return where / ".cfkit" / "cfkit.db" if where.is_dir() else where


def table_rows(where: Path, table: str, columns: str = "*", *, order_by: str | None = None) -> list[dict]:
    """Every row of one store table, as dicts of the named columns, read as a user's sqlite3 would.

    Tests filter the rows in Python; the SQL stays here. ``where`` is a workspace folder or a store file."""
    sql = f"SELECT {columns} FROM {table}" + (f" ORDER BY {order_by}" if order_by else "")
    with closing(sqlite3.connect(_db_file(where))) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(sql)]


def integrity_ok(where: Path) -> bool:
    """SQLite's own integrity check of a store file."""
    with closing(sqlite3.connect(_db_file(where))) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def add_schema_5_batch(path: Path, batch_id: str, run_id: str) -> None:
    """A completed batch row as a schema-5 store held it (no provider id, no endpoint), written past the
    owner module, which writes only the current shape."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("INSERT INTO batches (id, run_id, input_file_id, requests, status, created_at) "
                     "VALUES (?, ?, 'file-1', '[]', 'completed', 't')", (batch_id, run_id))
        conn.commit()


def forget_digests(path: Path, name_ending: str) -> None:
    """Drop the cached digests of the files whose path ends so, as if they had never been hashed (the
    digest cache has no owner function that forgets, since cfkit itself never does)."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("DELETE FROM file_digests WHERE path LIKE ?", ("%" + name_ending,))
        conn.commit()


def _matching(where: dict) -> tuple[str, tuple]:
    if not where:
        return "", ()
    return " WHERE " + " AND ".join(f"{column} = ?" for column in where), tuple(where.values())


def insert_rows(where: Path, table: str, rows: list[dict]) -> list[int]:
    """Rows written as they are, past the owner modules, to give a store a shape a test needs (a run
    without its settings, an edit without its hashes, a reply without its cached response); the
    owners' writers insist on everything cfkit itself records. Returns the new rows' rowids."""
    ids = []
    with closing(sqlite3.connect(_db_file(where))) as conn:
        for row in rows:
            columns = ", ".join(row)
            marks = ", ".join("?" for _ in row)
            ids.append(conn.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", tuple(row.values())).lastrowid)
        conn.commit()
    return ids


def update_rows(where: Path, table: str, values: dict, match: dict | None = None) -> None:
    """Rows changed in place, past the owners: a store as an older cfkit or an interrupted run left it."""
    condition, params = _matching(match or {})
    setting = ", ".join(f"{column} = ?" for column in values)
    with closing(sqlite3.connect(_db_file(where))) as conn:
        conn.execute(f"UPDATE {table} SET {setting}{condition}", tuple(values.values()) + params)
        conn.commit()


def delete_rows(where: Path, table: str, match: dict) -> None:
    """Rows removed, past the owners (which never delete them): a gap as a run cut short leaves, a
    decision withdrawn."""
    condition, params = _matching(match)
    with closing(sqlite3.connect(_db_file(where))) as conn:
        conn.execute(f"DELETE FROM {table}{condition}", params)
        conn.commit()


def damage_a_page(db: Path, table: str = "checks") -> None:
    """Overwrite the header of ``table``'s root page with nonsense: SQLite still opens the file."""
    with closing(sqlite3.connect(db)) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    with db.open("r+b") as handle:
        handle.seek((root - 1) * page_size)
        handle.write(b"\x0d\x00\x00\x00\x05\xff\xff" + b"\xee" * 100)


def set_user_version(path: Path, version: int) -> None:
    """A file whose schema version says another cfkit wrote it (a newer one, when past SCHEMA_VERSION)."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(f"PRAGMA user_version={int(version)}")


def user_version(path: Path) -> int:
    """The schema version a store file carries."""
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute("PRAGMA user_version").fetchone()[0]


def table_names(path: Path) -> set[str]:
    """The tables a store file holds."""
    with closing(sqlite3.connect(path)) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def schema_1_store(path: Path) -> None:
    """A store as the first cfkit left it (schema 1): runs, replies and responses only, one row each, and
    a cost on the run that later versions record per reply."""
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript("""
        CREATE TABLE runs (id TEXT PRIMARY KEY, model TEXT NOT NULL, suite TEXT NOT NULL,
            options TEXT NOT NULL DEFAULT '{}', cfkit_version TEXT NOT NULL, templates_sha256 TEXT,
            started_at TEXT NOT NULL, finished_at TEXT, status TEXT NOT NULL DEFAULT 'running',
            n_requests INTEGER NOT NULL DEFAULT 0, n_done INTEGER NOT NULL DEFAULT 0,
            n_errors INTEGER NOT NULL DEFAULT 0, cost_usd REAL, notes TEXT NOT NULL DEFAULT '{}');
        CREATE TABLE replies (run_id TEXT NOT NULL REFERENCES runs(id), case_id TEXT NOT NULL,
            pair_id TEXT NOT NULL DEFAULT '', condition TEXT NOT NULL, cache_key TEXT, answer TEXT, parse TEXT,
            error TEXT, reason TEXT, confidence TEXT, raw TEXT, detail TEXT, created_at TEXT NOT NULL,
            PRIMARY KEY (run_id, case_id, pair_id, condition));
        CREATE TABLE responses (cache_key TEXT PRIMARY KEY, backend TEXT NOT NULL, model TEXT NOT NULL, raw TEXT,
            usage TEXT, latency_s REAL, cost_usd REAL, refused INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL);
        INSERT INTO responses (cache_key, backend, model, raw, created_at) VALUES ('k', 'openai', 'openai:m', 'x', 't');
        INSERT INTO runs (id, model, suite, cfkit_version, started_at, cost_usd) VALUES ('r1', 'm', 'modality', '0.1', 't', 1.5);
        INSERT INTO replies (run_id, case_id, condition, answer, created_at) VALUES ('r1', 'T1', 'text', 'A', 't');
        PRAGMA user_version=1;
    """)


def schema_2_store(path: Path) -> None:
    """A store at schema 2 (replies with their cost, no audit tables yet) holding one run."""
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript("""
        CREATE TABLE runs (id TEXT PRIMARY KEY, model TEXT NOT NULL, suite TEXT NOT NULL,
            options TEXT NOT NULL DEFAULT '{}', cfkit_version TEXT NOT NULL, templates_sha256 TEXT,
            started_at TEXT NOT NULL, finished_at TEXT, status TEXT NOT NULL DEFAULT 'running',
            n_requests INTEGER NOT NULL DEFAULT 0, n_done INTEGER NOT NULL DEFAULT 0,
            n_errors INTEGER NOT NULL DEFAULT 0, cost_usd REAL, notes TEXT NOT NULL DEFAULT '{}');
        CREATE TABLE replies (run_id TEXT NOT NULL REFERENCES runs(id), case_id TEXT NOT NULL,
            pair_id TEXT NOT NULL DEFAULT '', condition TEXT NOT NULL, cache_key TEXT, answer TEXT, parse TEXT,
            error TEXT, reason TEXT, confidence TEXT, raw TEXT, detail TEXT, created_at TEXT NOT NULL,
            cost_usd REAL, PRIMARY KEY (run_id, case_id, pair_id, condition));
        CREATE TABLE responses (cache_key TEXT PRIMARY KEY, backend TEXT NOT NULL, model TEXT NOT NULL, raw TEXT,
            usage TEXT, latency_s REAL, cost_usd REAL, refused INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL);
        INSERT INTO runs (id, model, suite, cfkit_version, started_at) VALUES ('r1', 'm', 'contextcanvas', '0.1', 't');
        PRAGMA user_version=2;
    """)


def insert_edit_row(tx: sqlite3.Connection, edit_id: int) -> None:
    """An edits row with an id already taken, inside the store's own transaction: the store must report the
    broken rule as such, not as a damaged file."""
    tx.execute("INSERT INTO edits (id, spec_id, engine, status, started_at) VALUES (?, 'CF01', 'x', 'ok', 't')",
               (edit_id,))


def numbers_database(path: Path, count: int):
    """A one-table database through the store's connection class, holding the integers 0..count-1."""
    from cfkit.store.db import Database

    db = Database(path, schema="CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY)", version=1)
    with db.transaction() as tx:
        tx.executemany("INSERT INTO t (k) VALUES (?)", [(i,) for i in range(count)])
    return db


def numbers_in(db, wanted: list[int]) -> list[int]:
    """The stored integers among ``wanted``, asked with ``query_in``."""
    return [r["k"] for r in db.query_in("SELECT k FROM t WHERE k IN ({})", wanted)]
