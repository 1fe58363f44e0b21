"""The ``batches`` table: the provider batches a run's requests were sent in (``probe run --batch``).

Its SQL lives here and nowhere else (the DDL and migrations:
:mod:`cfkit.store.tables.batches`). A batch is recorded as soon as the provider
accepts it, with the requests it carries (each one's place in the run and its
cache key, which is the batch line's ``custom_id``), so ``cfkit probe collect``
can be run, stopped and run again until every batch has ended and its results
are stored; a collected batch is never read twice.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any

from cfkit.store.db import Database, from_json, now, to_json
from cfkit.store.tables.batches import DDL as DDL, MIGRATIONS as MIGRATIONS  # the schema (cfkit.store.tables)


@dataclass(frozen=True)
class BatchRequest:
    """One request a batch carries: its place in the run, its cache key (the ``custom_id``), what it showed."""

    case_id: str
    pair_id: str
    condition: str
    cache_key: str
    edit_id: int | None = None
    image_sha256: str | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.case_id, self.pair_id, self.condition)


@dataclass(frozen=True)
class BatchRecord:
    """One row of the batches table."""

    id: str
    run_id: str
    endpoint: str | None
    input_file_id: str
    input_path: str | None
    requests: tuple[BatchRequest, ...]
    status: str
    counts: dict[str, Any] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    output_file_id: str | None = None
    error_file_id: str | None = None
    created_at: str = ""
    checked_at: str | None = None
    collected_at: str | None = None
    server_id: str = ""  # the provider's id, which may repeat one it gave before; ``id`` is unique here

    @property
    def provider_id(self) -> str:
        return self.server_id or self.id


def _record(row: sqlite3.Row) -> BatchRecord:
    return BatchRecord(
        id=row["id"], run_id=row["run_id"], endpoint=row["endpoint"], input_file_id=row["input_file_id"],
        input_path=row["input_path"], requests=tuple(BatchRequest(*r) for r in from_json(row["requests"], [])),
        status=row["status"], counts=from_json(row["counts"], {}), errors=tuple(from_json(row["errors"], [])),
        output_file_id=row["output_file_id"], error_file_id=row["error_file_id"], created_at=row["created_at"],
        checked_at=row["checked_at"], collected_at=row["collected_at"], server_id=row["server_id"] or row["id"])


def add(store: Database, batch_id: str, run_id: str, *, endpoint: str | None, input_file_id: str,
        input_path: str | None, requests: list[BatchRequest], status: str) -> str:
    """Record a batch the provider accepted as ``batch_id``; returns its key here, which is ``batch_id`` unless
    a batch recorded before has that id too (a server may reuse ids): then ``batch_id~2``, ``~3`` …"""
    rows = [[r.case_id, r.pair_id, r.condition, r.cache_key, r.edit_id, r.image_sha256] for r in requests]
    with store.transaction() as tx:
        taken = {r[0] for r in tx.execute("SELECT id FROM batches WHERE id = ? OR server_id = ? OR id LIKE ?",
                                          (batch_id, batch_id, batch_id.replace("~", "") + "~%"))}
        key, n = batch_id, 1
        while key in taken:
            n += 1
            key = f"{batch_id}~{n}"
        tx.execute("INSERT INTO batches (id, run_id, endpoint, input_file_id, input_path, requests, status, "
                   "created_at, server_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (key, run_id, endpoint, input_file_id, input_path, to_json(rows), status, now(), batch_id))
    return key


def for_run(store: Database, run_id: str) -> list[BatchRecord]:
    """A run's batches, in the order they were sent."""
    return [_record(r) for r in store.query("SELECT * FROM batches WHERE run_id = ? ORDER BY rowid", (run_id,))]


def uncollected(store: Database, run_id: str) -> list[BatchRecord]:
    """A run's batches whose results are not stored yet."""
    return [b for b in for_run(store, run_id) if b.collected_at is None]


def checked(store: Database, batch_id: str, *, status: str, counts: dict[str, Any], errors: tuple[str, ...],
            output_file_id: str | None, error_file_id: str | None) -> None:
    """Record what the provider last said of a batch."""
    with store.transaction() as tx:
        tx.execute("UPDATE batches SET status = ?, counts = ?, errors = ?, output_file_id = ?, error_file_id = ?, "
                   "checked_at = ? WHERE id = ?", (status, to_json(counts), to_json(list(errors)), output_file_id,
                                                   error_file_id, now(), batch_id))


def collected(store: Database, batch_id: str) -> None:
    """Mark a batch's results stored (after they were committed: a crash between the two only means the
    results are read and stored again, the same, by the next collect)."""
    with store.transaction() as tx:
        tx.execute("UPDATE batches SET collected_at = ?, input_path = NULL WHERE id = ?", (now(), batch_id))
