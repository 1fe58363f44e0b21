"""The ``runs`` and ``replies`` tables: probe runs and the parsed answer of each of their requests.

Their SQL lives here and nowhere else. A run is one model on one suite; a
reply is keyed by (run, case, pair, condition). Writes that must land
together with a cached response take the caller's transaction (``tx``).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cfkit.errors import NotFoundError, UsageError
from cfkit.store.db import Database, from_json, now, to_json
from cfkit.vocabulary import condition_rank

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
    notes           TEXT NOT NULL DEFAULT '{}'     -- JSON: skipped pairs, backend fallbacks, why it stopped
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
    PRIMARY KEY (run_id, case_id, pair_id, condition)
);
"""

MIGRATIONS: dict[int, list[str]] = {
    2: ["ALTER TABLE replies ADD COLUMN cost_usd REAL"],
}

#: A reply's place in its run: (case id, pair id or '', condition).
ReplyKey = tuple[str, str, str]


@dataclass(frozen=True)
class RunRecord:
    """One row of the runs table."""

    id: str
    model: str
    suite: str
    status: str
    started_at: str
    finished_at: str | None
    n_requests: int
    n_done: int
    n_errors: int
    cost_usd: float | None
    cfkit_version: str
    templates_sha256: str | None
    options: dict[str, Any]
    notes: dict[str, Any]

    @property
    def complete(self) -> bool:
        return self.status == "done" and self.n_done == self.n_requests and self.n_errors == 0


@dataclass(frozen=True)
class ReplyRecord:
    """One row of the replies table."""

    run_id: str
    case_id: str
    pair_id: str
    condition: str
    cache_key: str | None
    answer: str | None
    parse: str | None
    error: str | None
    reason: str | None
    confidence: str | None
    raw: str | None
    detail: str | None
    created_at: str
    cost_usd: float | None

    @property
    def key(self) -> ReplyKey:
        return (self.case_id, self.pair_id, self.condition)


@dataclass(frozen=True)
class ReplyFields:
    """What the runner stores for one reply (the parsed reading and why)."""

    answer: str | None
    parse: str | None
    error: str | None
    reason: str | None
    confidence: str | None
    detail: str | None


def _run(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        id=row["id"], model=row["model"], suite=row["suite"], status=row["status"], started_at=row["started_at"],
        finished_at=row["finished_at"], n_requests=row["n_requests"], n_done=row["n_done"],
        n_errors=row["n_errors"], cost_usd=row["cost_usd"], cfkit_version=row["cfkit_version"],
        templates_sha256=row["templates_sha256"], options=from_json(row["options"], {}),
        notes=from_json(row["notes"], {}),
    )


def _reply(row: sqlite3.Row) -> ReplyRecord:
    return ReplyRecord(**{name: row[name] for name in ReplyRecord.__dataclass_fields__})


# ── runs ───────────────────────────────────────────────────────────────────


def open_run(store: Database, run_id: str, *, model: str, suite: str, options: dict[str, Any], cfkit_version: str,
             templates_sha256: str, n_requests: int, notes: dict[str, Any]) -> None:
    """Create the run, or mark an existing one running again (its replies stay)."""
    with store.transaction() as tx:
        tx.execute(
            "INSERT INTO runs (id, model, suite, options, cfkit_version, templates_sha256, started_at, status, "
            "n_requests, notes) VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET status = 'running', finished_at = NULL, n_requests = excluded.n_requests, "
            "cfkit_version = excluded.cfkit_version, notes = excluded.notes",
            (run_id, model, suite, to_json(options), cfkit_version, templates_sha256, now(), n_requests,
             to_json(notes)),
        )


def finish_run(store: Database, run_id: str, *, status: str, n_done: int, n_errors: int,
               notes: dict[str, Any]) -> None:
    """Record how an invocation of the run ended; the cost is summed from the replies that carry one."""
    with store.transaction() as tx:
        total = tx.execute("SELECT SUM(cost_usd), COUNT(cost_usd) FROM replies WHERE run_id = ?", (run_id,)).fetchone()
        # Replies stored without prices keep the cost recorded before.
        cost_sql = "?" if total[1] else "cost_usd"
        params = (status, now(), n_done, n_errors, *((total[0],) if total[1] else ()), to_json(notes), run_id)
        tx.execute(f"UPDATE runs SET status = ?, finished_at = ?, n_done = ?, n_errors = ?, cost_usd = {cost_sql}, "
                   "notes = ? WHERE id = ?", params)


def get_run(store: Database, run_id: str) -> RunRecord | None:
    rows = store.query("SELECT * FROM runs WHERE id = ?", (run_id,))
    return _run(rows[0]) if rows else None


def list_runs(store: Database) -> list[RunRecord]:
    """Every run, newest first."""
    return [_run(r) for r in store.query("SELECT * FROM runs ORDER BY started_at DESC, id")]


def find_run(store: Database, ref: str) -> RunRecord:
    """The run whose id is ``ref`` or starts with it (when only one does)."""
    if not ref.strip():
        raise UsageError("run id is empty; give a run id or its start. See 'cfkit runs list'.")
    rows = store.query("SELECT * FROM runs WHERE id = ?", (ref,))
    if not rows:
        rows = store.query("SELECT * FROM runs WHERE substr(id, 1, ?) = ? ORDER BY id", (len(ref), ref))
    if len(rows) == 1:
        return _run(rows[0])
    if not rows:
        known = [r["id"] for r in store.query("SELECT id FROM runs ORDER BY started_at DESC LIMIT 5")]
        listing = ", ".join(known) if known else "none yet; start one with 'cfkit probe run'"
        raise NotFoundError(f"no run '{ref}' in {store.path} (recent runs: {listing}). See 'cfkit runs list'.")
    shown = ", ".join(r["id"] for r in rows[:5]) + (f" and {len(rows) - 5} more" if len(rows) > 5 else "")
    raise UsageError(f"run '{ref}' matches {len(rows)} runs ({shown}); give more of the id.")


def latest_run_ids(store: Database) -> list[str]:
    """The newest run of each model and suite in the store."""
    latest: dict[tuple[str, str], str] = {}
    for row in store.query("SELECT id, model, suite FROM runs ORDER BY started_at DESC, rowid DESC"):
        latest.setdefault((row["model"], row["suite"]), row["id"])
    return list(latest.values())


# ── replies ────────────────────────────────────────────────────────────────


def write_reply(tx: sqlite3.Connection, run_id: str, key: ReplyKey, *, cache_key: str | None, raw: str | None,
                fields: ReplyFields, cost_usd: float | None = None) -> None:
    """Store (or replace) one reply of a run inside the caller's transaction."""
    case_id, pair_id, condition = key
    tx.execute(
        "INSERT OR REPLACE INTO replies (run_id, case_id, pair_id, condition, cache_key, answer, parse, error, "
        "reason, confidence, raw, detail, created_at, cost_usd) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (run_id, case_id, pair_id, condition, cache_key, fields.answer, fields.parse, fields.error, fields.reason,
         fields.confidence, raw, fields.detail, now(), cost_usd),
    )


def delete_replies(store: Database, run_id: str, keys: Iterable[ReplyKey]) -> None:
    """Remove replies of a run (e.g. of pairs that left the suite); cached responses stay."""
    with store.transaction() as tx:
        tx.executemany("DELETE FROM replies WHERE run_id = ? AND case_id = ? AND pair_id = ? AND condition = ?",
                       [(run_id, *key) for key in keys])


def replies(store: Database, run_id: str) -> list[ReplyRecord]:
    """A run's replies in the order they were stored."""
    return [_reply(r) for r in store.query("SELECT * FROM replies WHERE run_id = ? ORDER BY rowid", (run_id,))]


def reply_index(store: Database, run_id: str) -> dict[ReplyKey, ReplyRecord]:
    """A run's replies by key."""
    return {r.key: r for r in replies(store, run_id)}


def count_unanswered(store: Database, run_id: str) -> int:
    """Replies of a run without an answer (parse errors, refusals and transport failures)."""
    return store.query("SELECT COUNT(*) FROM replies WHERE run_id = ? AND answer IS NULL", (run_id,))[0][0]


@dataclass(frozen=True)
class ConditionCounts:
    """Replies of one condition of a run."""

    condition: str
    replies: int
    answered: int
    invalid: int  # no valid answer read (parse errors, refusals)
    transport: int  # no reply yet
    answers: dict[str, int]  # option id -> count


def breakdown(store: Database, run_id: str) -> list[ConditionCounts]:
    """Per condition: how many replies, answered, invalid, failed, and the answer distribution."""
    by_condition: dict[str, list[ReplyRecord]] = {}
    for r in replies(store, run_id):
        by_condition.setdefault(r.condition, []).append(r)
    result = []
    for condition in sorted(by_condition, key=condition_rank):
        group = by_condition[condition]
        answers = Counter(r.answer for r in group if r.answer is not None)
        result.append(ConditionCounts(
            condition=condition, replies=len(group), answered=sum(answers.values()),
            invalid=sum(1 for r in group if r.answer is None and r.error != "transport"),
            transport=sum(1 for r in group if r.error == "transport"), answers=dict(sorted(answers.items())),
        ))
    return result


def unanswered(store: Database, run_id: str) -> list[ReplyRecord]:
    """Replies without a valid answer, by case, pair and condition."""
    rows = store.query("SELECT * FROM replies WHERE run_id = ? AND answer IS NULL "
                       "ORDER BY case_id, pair_id, condition", (run_id,))
    return [_reply(r) for r in rows]
