"""The SQLite connection under the store: WAL mode, short write transactions, errors translated.

This module knows no table. :class:`Database` opens a file, applies a schema
that the caller assembles (:mod:`cfkit.store` collects it from the table
owners) and turns every ``sqlite3`` failure into one :class:`StoreError` line.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cfkit.errors import StoreError


def now() -> str:
    """The current UTC time as ISO 8601 with seconds."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


#: The encoder json.dumps(sort_keys=True, ensure_ascii=False) makes anew for every call, made once.
_STORED_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False)


def to_json(value: Any) -> str:
    """JSON text as stored: sorted keys, UTF-8 kept."""
    return _STORED_JSON.encode(value)


def from_json(text: str | None, default: Any = None) -> Any:
    """The value of a stored JSON column; ``default`` for NULL or empty."""
    return default if not text else json.loads(text)


#: Store files this process has found sound: (path, device, inode).
_CHECKED: set[tuple[str, int, int]] = set()


def recovery(path: Path) -> str:
    """How to get back what a damaged store still holds, as one sentence with the commands."""
    return (f"Recover what it still holds with the sqlite3 tool (3.29 or later): 'sqlite3 {path} .recover | sqlite3 "
            f"{path}.recovered', then move {path.name} (and {path.name}-wal, {path.name}-shm if there) aside and "
            f"put {path.name}.recovered in its place; or move it aside and cfkit starts a new, empty store.")


_DISK_HINT = "Check free disk space and the folder's permissions, then run the command again; nothing saved before was lost."


class Database:
    """A connection to one SQLite file holding a versioned schema.

    ``schema`` is the DDL of every table (idempotent ``CREATE … IF NOT
    EXISTS``); ``migrations`` maps a version to the statements that bring a
    store of the previous version to it. A store written by a newer cfkit is
    refused rather than read.
    """

    def __init__(self, path: Path, *, schema: str | Callable[[], str], version: int,
                 migrations: Mapping[int, Sequence[str]] | Callable[[], Mapping[int, Sequence[str]]] | None = None,
                 timeout: float = 30.0):
        self.path = path
        self.conn: sqlite3.Connection | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
            self.conn.row_factory = sqlite3.Row
            # The busy timeout first: two processes opening a new store at once both switch it to WAL.
            self.conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            _switch_to_wal(self.conn, timeout)
            self.conn.execute("PRAGMA foreign_keys=ON")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self._check_integrity()
            self._migrate(schema, version, migrations)
        except StoreError:
            self.close()
            raise
        except sqlite3.OperationalError as exc:
            self.close()
            raise StoreError(f"store {path}: cannot be opened or written ({exc}). {_DISK_HINT}") from exc
        except sqlite3.DatabaseError as exc:
            self.close()
            raise StoreError(f"store {path}: not a readable SQLite store ({exc}). {recovery(path)}") from exc
        except OSError as exc:
            self.close()
            raise StoreError(f"store {path}: cannot be created ({exc.strerror}). Check the folder's permissions.") from exc

    def _check_integrity(self) -> None:
        """Refuse a damaged file before anything reads or writes it: ``PRAGMA quick_check``, once per process.

        quick_check reads every page (not the indexes' agreement with their
        tables, which integrity_check adds), so a store of hundreds of megabytes
        costs a fraction of a second; a process checks each file once, however
        often it opens it.
        """
        try:
            stat = self.path.stat()
        except OSError:
            return  # sqlite3 made no file (a new store in memory of a failed open): nothing to check
        key = (str(self.path.resolve()), stat.st_dev, stat.st_ino)
        if key in _CHECKED or stat.st_size == 0:
            return
        rows = [row[0] for row in self.conn.execute("PRAGMA quick_check(3)").fetchall()]
        if rows != ["ok"]:
            detail = "; ".join(" ".join(str(r).split()) for r in rows)
            raise StoreError(f"store {self.path} is damaged (SQLite's quick_check: {detail}); cfkit reads and writes "
                             f"nothing in it. {recovery(self.path)}")
        _CHECKED.add(key)

    def _migrate(self, schema, version: int, migrations) -> None:
        """Bring the file to ``version``. ``schema`` and ``migrations`` may be given as callables: they are
        read only when the file is new or older, not each time a current store is opened."""
        current = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if current > version:
            raise StoreError(f"store {self.path} was written by a newer cfkit (schema {current} > {version}); "
                             "upgrade cfkit to read it.")
        if current == version:
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated while this one waited for the lock.
            current = self.conn.execute("PRAGMA user_version").fetchone()[0]
            if current < version:
                schema = schema() if callable(schema) else schema
                migrations = (migrations() if callable(migrations) else migrations) or {}
                if current > 0:
                    for step in range(current + 1, version + 1):
                        for statement in migrations.get(step, ()):
                            self.conn.execute(statement)
                for statement in _statements(schema):
                    self.conn.execute(statement)
                self.conn.execute(f"PRAGMA user_version={int(version)}")
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise

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
        except BaseException as exc:  # roll back, then translate or re-raise
            if self.conn.in_transaction:
                try:
                    self.conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # SQLite may already have rolled back on an I/O error
            if isinstance(exc, sqlite3.OperationalError):
                raise StoreError(f"store {self.path}: write failed ({exc}). {_DISK_HINT}") from exc
            if isinstance(exc, sqlite3.IntegrityError):
                raise StoreError(f"store {self.path}: a write broke a rule of the schema ({exc}); nothing was "
                                 "changed. This is a bug in cfkit; please report it with the command you ran.") from exc
            if isinstance(exc, sqlite3.DatabaseError):
                raise StoreError(f"store {self.path}: damaged or unreadable ({exc}). Move the file aside; "
                                 "cfkit will start a new one.") from exc
            raise

    def query(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row]:
        """Rows of one read statement; SQLite errors become a :class:`StoreError`."""
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"store {self.path}: read failed ({exc}). If the file is damaged, move it aside; "
                             "cfkit will start a new one.") from exc

    def query_in(self, sql: str, values: Sequence[Any], *, chunk: int = 500) -> list[sqlite3.Row]:
        """Rows of ``sql``, whose one ``{}`` is an ``IN (…)`` list of ``values``, asked ``chunk`` values at a
        time (SQLite's parameter limit is 999 in old builds). Rows come chunk by chunk, unordered across."""
        values = list(values)
        rows: list[sqlite3.Row] = []
        for start in range(0, len(values), chunk):
            part = tuple(values[start:start + chunk])
            rows += self.query(sql.format(placeholders(part)), part)
        return rows

    def integrity_ok(self) -> bool:
        return self.query("PRAGMA integrity_check")[0][0] == "ok"

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _switch_to_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """``PRAGMA journal_mode=WAL``, retried while another connection switches the same new file.

    SQLite answers "database is locked" at once, without waiting on the busy
    timeout, to the second of two connections changing a new file's journal
    mode at the same moment; the first one's switch takes milliseconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _statements(script: str) -> list[str]:
    """Split DDL text into statements (the DDL holds no semicolons inside strings)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def placeholders(values: Sequence[Any]) -> str:
    """``?, ?, ?`` for an ``IN (…)`` list."""
    return ",".join("?" * len(values))
