"""The ``leases`` table: which process is sending which request of a run, until when.

Its SQL lives here and nowhere else (the DDL and migrations:
:mod:`cfkit.store.tables.leases`). Two ``cfkit probe run`` processes on the
same run (the same command started twice, or a resume while the first still
runs) share the work through it: a process sends a request only while it holds
the request's lease, and gives the lease up when the reply is stored. A lease
names its owner (host, process id and a random token) and expires, so the
requests of a killed process are taken over by another one; the caller decides
when a lease may be taken (:mod:`cfkit.probe.sharing`). Every function takes
the caller's transaction, so a claim and the check that the request has no
reply yet happen at once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from cfkit.store.tables.leases import DDL as DDL, MIGRATIONS as MIGRATIONS  # the schema (cfkit.store.tables)


#: A request's place in its run: (case id, pair id or '', condition).
Key = tuple[str, str, str]


@dataclass(frozen=True)
class Lease:
    """Who is sending one request, and until when (seconds since the epoch)."""

    key: Key
    owner: str
    expires_at: float
    state: str = "sending"  # "failed": the owner stored a transport failure for it in this invocation


def held(tx: sqlite3.Connection, run_id: str, keys: Iterable[Key]) -> dict[Key, Lease]:
    """The leases on ``keys`` of run ``run_id`` (expired ones too), by key.

    A run's leases are few (the requests in flight, or about to be, in each
    process), so they are read whole and filtered here.
    """
    wanted = set(keys)
    rows = tx.execute("SELECT case_id, pair_id, condition, owner, expires_at, state FROM leases WHERE run_id = ?",
                      (run_id,)).fetchall()
    return {key: Lease(key, owner, expires_at, state) for case_id, pair_id, condition, owner, expires_at, state
            in rows if (key := (case_id, pair_id, condition)) in wanted}


def take(tx: sqlite3.Connection, run_id: str, keys: Iterable[Key], owner: str, expires_at: float) -> None:
    """Give ``owner`` the leases on ``keys`` until ``expires_at``, whoever held them before."""
    tx.executemany("INSERT OR REPLACE INTO leases (run_id, case_id, pair_id, condition, owner, expires_at, state) "
                   "VALUES (?, ?, ?, ?, ?, ?, 'sending')", [(run_id, *key, owner, expires_at) for key in keys])


def release(tx: sqlite3.Connection, run_id: str, keys: Iterable[Key], owner: str) -> None:
    """Give up ``owner``'s leases on ``keys`` (a lease another process took over stays its own)."""
    tx.executemany("DELETE FROM leases WHERE run_id = ? AND case_id = ? AND pair_id = ? AND condition = ? "
                   "AND owner = ?", [(run_id, *key, owner) for key in keys])


def mark_failed(tx: sqlite3.Connection, run_id: str, keys: Iterable[Key], owner: str) -> None:
    """Keep ``owner``'s leases on ``keys`` as failed: tried in this invocation, not to be sent again by another."""
    tx.executemany("UPDATE leases SET state = 'failed' WHERE run_id = ? AND case_id = ? AND pair_id = ? "
                   "AND condition = ? AND owner = ?", [(run_id, *key, owner) for key in keys])


def release_all(tx: sqlite3.Connection, run_id: str, owner: str) -> int:
    """Give up every lease ``owner`` holds on the run; returns how many."""
    return tx.execute("DELETE FROM leases WHERE run_id = ? AND owner = ?", (run_id, owner)).rowcount


def renew(tx: sqlite3.Connection, run_id: str, owner: str, expires_at: float) -> int:
    """Extend every lease ``owner`` holds on the run to ``expires_at``; returns how many."""
    return tx.execute("UPDATE leases SET expires_at = ? WHERE run_id = ? AND owner = ?",
                      (expires_at, run_id, owner)).rowcount


def owners(store, run_id: str) -> dict[str, float]:
    """Each owner holding leases on the run, with the latest expiry among them (:mod:`cfkit.store.liveness`)."""
    return owners_of(store, [run_id]).get(run_id, {})


def owners_of(store, run_ids: list[str]) -> dict[str, dict[str, float]]:
    """:func:`owners` of each of ``run_ids`` that has leases, by run id, in one query."""
    rows = store.query_in("SELECT run_id, owner, MAX(expires_at) AS until FROM leases WHERE run_id IN ({}) "
                          "GROUP BY run_id, owner", run_ids)
    found: dict[str, dict[str, float]] = {}
    for row in rows:
        found.setdefault(row["run_id"], {})[row["owner"]] = row["until"]
    return found
