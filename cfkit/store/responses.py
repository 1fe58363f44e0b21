"""The ``responses`` table: raw model responses, cached by request.

Its SQL lives here and nowhere else (the DDL and migrations:
:mod:`cfkit.store.tables.responses`). A response is keyed by a SHA-256 over
backend, model, answer-changing options and the exact request (see
:mod:`cfkit.probe.identity`); a rerun that finds the key sends nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cfkit.store.db import Database, from_json, now, to_json
from cfkit.store.tables.responses import DDL as DDL, MIGRATIONS as MIGRATIONS  # the schema (cfkit.store.tables)


@dataclass(frozen=True)
class CachedResponse:
    """One cached response."""

    cache_key: str
    raw: str | None
    usage: dict[str, Any] = field(default_factory=dict)
    latency_s: float = 0.0
    cost_usd: float | None = None
    refused: bool = False
    server_model: str | None = None
    system_fingerprint: str | None = None
    raw_chars: int | None = None  # the reply's full length when ``raw`` was cut to the storage cap
    reasoning: str | None = None  # what the server returned beside the reply (not what was split off it)
    truncated: bool = False  # generation stopped at the token limit
    endpoint: str | None = None  # the server that answered, when the model had several (provenance)


def _response(row: sqlite3.Row) -> CachedResponse:
    return CachedResponse(cache_key=row["cache_key"], raw=row["raw"], usage=from_json(row["usage"], {}),
                          latency_s=row["latency_s"] or 0.0, cost_usd=row["cost_usd"], refused=bool(row["refused"]),
                          server_model=row["server_model"], system_fingerprint=row["system_fingerprint"],
                          raw_chars=row["raw_chars"], reasoning=row["reasoning"], truncated=bool(row["truncated"]),
                          endpoint=row["endpoint"])


def cached(store: Database, keys: Sequence[str]) -> dict[str, CachedResponse]:
    """The cached responses among ``keys``, by key."""
    return {row["cache_key"]: _response(row)
            for row in store.query_in("SELECT * FROM responses WHERE cache_key IN ({})", keys)}


def holds_any(store: Database, *, backend: str, model: str) -> bool:
    """Whether any response of ``model`` on ``backend`` is cached (a run that finds none needs no lookups)."""
    return bool(store.query("SELECT 1 FROM responses WHERE backend = ? AND model = ? LIMIT 1", (backend, model)))


def put(tx: sqlite3.Connection, response: CachedResponse, *, backend: str, model: str) -> None:
    """Cache a response inside the caller's transaction; an existing key is kept as it is."""
    tx.execute(_PUT, response_row(response, backend=backend, model=model))


def response_row(response: CachedResponse, *, backend: str, model: str, created_at: str | None = None) -> tuple:
    """One response as :func:`put_rows` caches it (``created_at`` default now)."""
    return reply_response_row(response.cache_key, response, backend=backend, model=model, created_at=created_at)


def reply_response_row(cache_key: str, reply: Any, *, backend: str, model: str, created_at: str | None = None) -> tuple:
    """:func:`response_row` of ``reply`` (anything with the fields of a :class:`CachedResponse` but its key: a
    backend's reply) under ``cache_key``, without making a :class:`CachedResponse` of it first."""
    return (cache_key, backend, model, reply.raw, to_json(reply.usage), reply.latency_s, reply.cost_usd,
            int(reply.refused), created_at or now(), reply.server_model, reply.system_fingerprint, reply.raw_chars,
            reply.reasoning, int(reply.truncated), reply.endpoint)


def put_rows(tx: sqlite3.Connection, rows: list[tuple]) -> None:
    """Cache several responses (:func:`response_row`) in one statement; an existing key is kept as it is."""
    tx.executemany(_PUT, rows)


_PUT = ("INSERT OR IGNORE INTO responses (cache_key, backend, model, raw, usage, latency_s, cost_usd, refused, "
        "created_at, server_model, system_fingerprint, raw_chars, reasoning, truncated, endpoint) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")




def forget(tx: sqlite3.Connection, keys: Sequence[str]) -> int:
    """Drop the cached responses of ``keys`` inside the caller's transaction (the next identical request is sent
    again); returns how many there were."""
    dropped = 0
    for start in range(0, len(keys), 500):
        part = keys[start:start + 500]
        dropped += tx.execute(f"DELETE FROM responses WHERE cache_key IN ({','.join('?' * len(part))})",
                              part).rowcount
    return dropped
