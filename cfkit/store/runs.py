"""The ``runs`` and ``replies`` tables: probe runs and the parsed answer of each of their requests.

Their SQL lives here and nowhere else (the DDL and migrations:
:mod:`cfkit.store.tables.runs`). A run is one model on one suite with one set
of settings and inputs (its id is derived from them, see
:mod:`cfkit.probe.identity`); a reply is keyed by (run, case, pair, condition).
A run records what it was asked with (``settings``: backend, model, endpoint,
generation settings, answer-changing options; ``selection``; ``protocol``), the
library versions it ran with, and why it failed if it did; a reply records the
edit and image it was about and the model id and build the server reported.
Writes that must land together with a cached response take the caller's
transaction (``tx``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from cfkit.errors import NotFoundError, UsageError
from cfkit.plural import plural
from cfkit.store.db import Database, from_json, now, placeholders, to_json
from cfkit.store.records.runs import (  # the records (cfkit.store.records.runs), read and written here
    ReplyFields as ReplyFields, ReplyKey as ReplyKey, ReplyProvenance as ReplyProvenance, ReplyRecord as ReplyRecord,
    RunRecord as RunRecord, RunSettings as RunSettings,
)
from cfkit.suggest import did_you_mean
from cfkit.store.tables.runs import DDL as DDL, MIGRATIONS as MIGRATIONS  # the schema (cfkit.store.tables)

#: The runs' rows. A run's replies, failures and cost are recorded when an invocation of it ends; while one is
#: sending (or after it was killed) they are counted from the replies stored so far, so nothing shown is stale.
_LIVE = "CASE WHEN status = 'running' THEN (SELECT {} FROM replies WHERE run_id = runs.id{}) END AS {}"
_RUNS = "SELECT *, " + ", ".join([_LIVE.format("COUNT(*)", " AND error IS NOT 'transport'", "live_done"),
                                  _LIVE.format("COUNT(*)", " AND error = 'transport'", "live_errors"),
                                  _LIVE.format("SUM(cost_usd)", "", "live_cost")]) + " FROM runs"


def _run(row: sqlite3.Row) -> RunRecord:
    parsed = ("options", "notes", "settings", "versions", "selection")  # JSON columns
    fields = {name: from_json(row[name], {}) if name in parsed else row[name]
              for name in RunRecord.__dataclass_fields__}
    if row["live_done"] is not None:
        fields.update(n_done=row["live_done"], n_errors=row["live_errors"])
    if row["live_cost"] is not None:
        fields["cost_usd"] = row["live_cost"]
    return RunRecord(**fields)


#: The replies table's columns in :class:`ReplyRecord`'s field order: a row is read by position (looking each of a
#: study's rows up by name, 23 columns a row, was most of a stored report's reading).
_REPLY_FIELDS = tuple(ReplyRecord.__dataclass_fields__)
_REPLIES = "SELECT " + ", ".join(_REPLY_FIELDS) + " FROM replies"


def _reply(row: sqlite3.Row) -> ReplyRecord:
    """A row of :data:`_REPLIES` as its record (``truncated`` as a bool): the fields set at once, as the frozen
    class's ``__init__`` would set them one ``object.__setattr__`` at a time."""
    made = _new(ReplyRecord)
    fields = made.__dict__
    fields.update(zip(_REPLY_FIELDS, row))
    fields["truncated"] = bool(fields["truncated"])
    return made


_new = object.__new__


# ── runs ───────────────────────────────────────────────────────────────────


def open_run(store: Database, run_id: str, *, model: str, suite: str, options: dict[str, Any], cfkit_version: str,
             templates_sha256: str, n_requests: int, notes: dict[str, Any],
             recorded: RunSettings | None = None, selection: dict[str, Any] | None = None) -> None:
    """Create the run, or mark an existing one running again (its replies stay).

    ``recorded`` is what the run was asked with; a resumed run keeps what it
    first recorded, except the versions, which are those of the newest
    invocation (the runner notes a change). ``selection``, without
    ``recorded``: the part of the suite a run read from a file asked, as it
    recorded it (``cfkit runs import``).
    """
    r = recorded
    with store.transaction() as tx:
        tx.execute(
            "INSERT INTO runs (id, model, suite, options, cfkit_version, templates_sha256, started_at, status, "
            "n_requests, notes, settings, settings_sha256, requests_sha256, endpoint, versions, protocol, selection) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET status = 'running', finished_at = NULL, n_requests = excluded.n_requests, "
            "cfkit_version = excluded.cfkit_version, notes = excluded.notes, versions = excluded.versions, "
            "error = NULL",
            (run_id, model, suite, to_json(options), cfkit_version, templates_sha256, now(), n_requests,
             to_json(notes), to_json(r.settings if r else {}), r.settings_sha256 if r else None,
             r.requests_sha256 if r else None, r.endpoint if r else None, to_json(r.versions if r else {}),
             r.protocol if r else None, to_json(r.selection if r else selection or {})),
        )


def finish_run(store: Database, run_id: str, *, status: str, n_done: int, n_errors: int,
               notes: dict[str, Any], inputs_sha256: str | None = None, error: str | None = None,
               inputs_manifest: dict[str, Any] | None = None) -> None:
    """Record how an invocation of the run ended; the cost is summed from the replies that carry one.

    ``inputs_sha256`` and ``inputs_manifest`` are kept only on a run that ended
    complete; ``error`` says why a failed run stopped.
    """
    with store.transaction() as tx:
        total = tx.execute("SELECT SUM(cost_usd), COUNT(cost_usd), MAX(cost_usd) FROM replies WHERE run_id = ?",
                           (run_id,)).fetchone()
        # A priced run (this invocation's prices, or replies an earlier one priced): the replies without a cost (no
        # usable token counts, or sent without prices when the run was resumed without them), and the largest
        # reply cost (what each attempt abandoned after it was sent may have cost: RunRecord.abandoned_attempts).
        if notes.get("prices") or total[1]:
            notes = {**notes, "cost_unreported": tx.execute(
                "SELECT COUNT(*) FROM replies WHERE run_id = ? AND cost_usd IS NULL AND error IS NOT 'transport'",
                (run_id,)).fetchone()[0], "largest_reply_usd": total[2]}
        # Replies stored without prices keep the cost recorded before; a priced invocation that stored no reply
        # with a cost (stopped or failed before one came) records $0.00 known, not no cost (RunRecord.priced).
        cost_sql = "?" if total[1] else "COALESCE(cost_usd, 0.0)" if notes.get("prices") else "cost_usd"
        params = (status, now(), n_done, n_errors, *((total[0],) if total[1] else ()), to_json(notes),
                  inputs_sha256, error, to_json(inputs_manifest) if inputs_manifest else None, run_id)
        tx.execute(f"UPDATE runs SET status = ?, finished_at = ?, n_done = ?, n_errors = ?, cost_usd = {cost_sql}, "
                   "notes = ?, inputs_sha256 = ?, error = ?, inputs_manifest = ? WHERE id = ?", params)


def delete_run(store: Database, run_id: str, *, drop_cached: bool = False) -> tuple[int, int]:
    """Remove a run and its replies; with ``drop_cached`` also the cached responses its replies were stored under
    (else they stay, and the same command rebuilds the run without asking the model). Returns (replies removed,
    cached responses dropped)."""
    from cfkit.store import responses

    with store.transaction() as tx:
        keys = [k for (k,) in tx.execute("SELECT DISTINCT cache_key FROM replies WHERE run_id = ? AND cache_key IS "
                                         "NOT NULL", (run_id,))] if drop_cached else []
        dropped = responses.forget(tx, keys) if keys else 0
        removed = tx.execute("DELETE FROM replies WHERE run_id = ?", (run_id,)).rowcount
        tx.execute("DELETE FROM runs WHERE id = ?", (run_id,))
    return removed, dropped


def finished_run(store: Database, suite: str, settings_sha256: str, inputs_sha256: str) -> RunRecord | None:
    """The newest run of ``suite`` with these settings that ended complete from inputs with this digest."""
    rows = store.query(f"{_RUNS} WHERE suite = ? AND settings_sha256 = ? AND inputs_sha256 = ? "
                       "ORDER BY started_at DESC, rowid DESC", (suite, settings_sha256, inputs_sha256))
    found = [_run(r) for r in rows]
    return next((r for r in found if r.complete), None)


def complete_with_manifest(store: Database, suite: str, settings_sha256: str,
                           limit: int = 5) -> list[tuple[RunRecord, dict[str, Any]]]:
    """The newest complete runs of ``suite`` with these settings that recorded an inputs manifest."""
    rows = store.query(f"{_RUNS} WHERE suite = ? AND settings_sha256 = ? AND inputs_manifest IS NOT NULL "
                       "ORDER BY started_at DESC, rowid DESC LIMIT ?", (suite, settings_sha256, limit))
    return [(run, from_json(row["inputs_manifest"], {})) for row in rows if (run := _run(row)).complete]


def record_manifest(store: Database, run_id: str, manifest: dict[str, Any]) -> None:
    """Replace a complete run's inputs manifest (its inputs were found unchanged by content, with new mtimes)."""
    with store.transaction() as tx:
        tx.execute("UPDATE runs SET inputs_manifest = ? WHERE id = ?", (to_json(manifest), run_id))


def get_run(store: Database, run_id: str) -> RunRecord | None:
    return _run(rows[0]) if (rows := store.query(f"{_RUNS} WHERE id = ?", (run_id,))) else None


def list_runs(store: Database) -> list[RunRecord]:
    """Every run, newest first (runs started in the same second: the one recorded last first)."""
    return [_run(r) for r in store.query(f"{_RUNS} ORDER BY started_at DESC, rowid DESC")]


def find_run(store: Database, ref: str) -> RunRecord:
    """The run whose id is ``ref`` or starts with it (when only one does)."""
    if not ref.strip():
        raise UsageError("run id is empty; give a run id or its start. See 'cfkit runs list'.")
    rows = store.query(f"{_RUNS} WHERE id = ?", (ref,))
    if not rows:
        rows = store.query(f"{_RUNS} WHERE substr(id, 1, ?) = ? ORDER BY id", (len(ref), ref))
    if len(rows) == 1:
        return _run(rows[0])
    if not rows:
        every = [r["id"] for r in store.query("SELECT id FROM runs ORDER BY started_at DESC")]
        hint = did_you_mean(ref, every)
        listing = ", ".join(every[:5]) if every else "none yet; start one with 'cfkit probe run'"
        raise NotFoundError(f"no run '{ref}' in {store.path}.{hint or f' Recent runs: {listing}.'} "
                            "See 'cfkit runs list'.")
    shown = ", ".join(r["id"] for r in rows[:5]) + (f" and {len(rows) - 5} more" if len(rows) > 5 else "")
    raise UsageError(f"run '{ref}' matches {plural(len(rows), 'run')} ({shown}); give more of the id.")


def latest_run_ids(store: Database) -> list[str]:
    """The newest run of each model and suite in the store."""
    latest: dict[tuple[str, str], str] = {}
    for row in store.query("SELECT id, model, suite FROM runs ORDER BY started_at DESC, rowid DESC"):
        latest.setdefault((row["model"], row["suite"]), row["id"])
    return list(latest.values())


# ── replies ────────────────────────────────────────────────────────────────


_REPLY_COLUMNS = ("run_id", "case_id", "pair_id", "condition", "cache_key", "answer", "parse", "error", "reason",
                  "confidence", "raw", "detail", "created_at", "cost_usd", "edit_id", "image_sha256", "server_model",
                  "system_fingerprint", "raw_chars", "reasoning", "parser", "truncated", "endpoint")
_WRITE_REPLY = (f"INSERT OR REPLACE INTO replies ({', '.join(_REPLY_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(_REPLY_COLUMNS))})")


def write_reply(tx: sqlite3.Connection, run_id: str, key: ReplyKey, *, cache_key: str | None, raw: str | None,
                fields: ReplyFields, cost_usd: float | None = None,
                provenance: ReplyProvenance = ReplyProvenance(), raw_chars: int | None = None,
                created_at: str | None = None) -> None:
    """Store (or replace) one reply of a run inside the caller's transaction.

    ``raw_chars`` is the reply's full length when ``raw`` was cut to the storage cap; ``created_at`` (default
    now) is kept as given when a reply recorded elsewhere is imported (``cfkit runs import``).
    """
    tx.execute(_WRITE_REPLY, reply_row(run_id, key, cache_key=cache_key, raw=raw, fields=fields, cost_usd=cost_usd,
                                       provenance=provenance, raw_chars=raw_chars, created_at=created_at))


def reply_row(run_id: str, key: ReplyKey, *, cache_key: str | None, raw: str | None, fields: ReplyFields,
              cost_usd: float | None = None, provenance: ReplyProvenance = ReplyProvenance(),
              raw_chars: int | None = None, created_at: str | None = None) -> tuple:
    """One reply as :func:`write_replies` stores it (the arguments of :func:`write_reply`)."""
    p, f = provenance, fields
    return (run_id, *key, cache_key, f.answer, f.parse, f.error, f.reason, f.confidence, raw, f.detail,
            created_at or now(), cost_usd, p.edit_id, p.image_sha256, p.server_model, p.system_fingerprint, raw_chars,
            f.reasoning, f.parser, int(p.truncated), p.endpoint)


def write_replies(tx: sqlite3.Connection, rows: list[tuple]) -> None:
    """Store (or replace) several replies (:func:`reply_row`) in the caller's transaction, in one statement."""
    tx.executemany(_WRITE_REPLY, rows)


def reread_reply(tx: sqlite3.Connection, run_id: str, key: ReplyKey, fields: ReplyFields) -> None:
    """Replace the reading of one stored reply (answer, rule, error, reason, confidence, detail, reasoning,
    parser version); its raw text and provenance stay."""
    case_id, pair_id, condition = key
    tx.execute("UPDATE replies SET answer = ?, parse = ?, error = ?, reason = ?, confidence = ?, detail = ?, "
               "reasoning = ?, parser = ? WHERE run_id = ? AND case_id = ? AND pair_id = ? AND condition = ?",
               (fields.answer, fields.parse, fields.error, fields.reason, fields.confidence, fields.detail,
                fields.reasoning, fields.parser, run_id, case_id, pair_id, condition))


def answered(tx: sqlite3.Connection, run_id: str, wanted: dict[ReplyKey, str | None]) -> set[ReplyKey]:
    """Which of ``wanted`` (key -> the cache key its reply must have; None: any, the key not known yet) have a
    stored reply made from that very request that is not a transport failure. Read inside the caller's
    transaction."""
    found: set[ReplyKey] = set()
    case_ids = list(dict.fromkeys(case_id for case_id, _, _ in wanted))
    for start in range(0, len(case_ids), 500):  # by case id (the key's prefix after the run), checked here
        chunk = case_ids[start:start + 500]
        rows = tx.execute(f"SELECT case_id, pair_id, condition, cache_key FROM replies WHERE run_id = ? AND error IS "
                          f"NOT 'transport' AND case_id IN ({','.join('?' * len(chunk))})", (run_id, *chunk))
        found.update(key for c, p, k, cache_key in rows if (key := (c, p, k)) in wanted
                     and wanted[key] in (None, cache_key))
    return found


def replies(store: Database, run_id: str) -> list[ReplyRecord]:
    """A run's replies in the order they were stored."""
    return [_reply(r) for r in store.query(f"{_REPLIES} WHERE run_id = ? ORDER BY rowid", (run_id,))]


def reply_units(store: Database, run_id: str) -> list[tuple]:
    """(case, pair, condition, answer, parse rule, error, edit id, image digest) of a run's replies in the order
    they were stored: what tells a stale answer, without the raw replies and what is stored beside them."""
    return store.query("SELECT case_id, pair_id, condition, answer, parse, error, edit_id, image_sha256 "
                       "FROM replies WHERE run_id = ? ORDER BY rowid", (run_id,))


def reply_states(store: Database, run_id: str) -> list[tuple[ReplyKey, bool, str | None, str | None, bool, bool]]:
    """(key, has an answer, error, a transport failure's detail, stopped at the token limit, no text at all) of
    a run's replies in the order they were stored: what closing a run counts, without every raw reply."""
    rows = store.query("SELECT case_id, pair_id, condition, answer IS NOT NULL, error, CASE WHEN error = 'transport' "
                       "THEN detail END, truncated, (raw IS NULL OR trim(raw) = '') AND parser IS NOT NULL "
                       "FROM replies WHERE run_id = ? ORDER BY rowid", (run_id,))
    return [((c, p, k), bool(answered), error, detail, bool(cut), bool(empty))
            for c, p, k, answered, error, detail, cut, empty in rows]


def settled_keys(store: Database, run_id: str) -> dict[ReplyKey, str]:
    """The cache key of each of a run's replies that is not a transport failure, by the reply's key."""
    rows = store.query("SELECT case_id, pair_id, condition, cache_key FROM replies WHERE run_id = ? "
                       "AND error IS NOT 'transport'", (run_id,))
    return {(c, p, k): cache_key for c, p, k, cache_key in rows}


def with_replies(store: Database, run_ids: Sequence[str]) -> set[str]:
    """Those of ``run_ids`` that have at least one stored reply (one look-up a run, on the replies' key)."""
    return {r for r in run_ids if store.query("SELECT 1 FROM replies WHERE run_id = ? LIMIT 1", (r,))}


def count_unanswered(store: Database, run_id: str) -> tuple[int, int, int]:
    """Of the replies that came back (a run's ``n_done``; failed requests are its ``n_errors``): (those without an
    answer: parse errors, refusals; those cut at the token limit; those the parser read with no text at all)."""
    row = store.query("SELECT SUM(answer IS NULL), SUM(truncated), SUM((raw IS NULL OR trim(raw) = '') AND parser "
                      "IS NOT NULL) FROM replies WHERE run_id = ? AND error IS NOT 'transport'", (run_id,))[0]
    return row[0] or 0, row[1] or 0, row[2] or 0


def unanswered(store: Database, run_id: str) -> list[ReplyRecord]:
    """Replies without a valid answer, by case, pair and condition."""
    return [_reply(r) for r in store.query(f"{_REPLIES} WHERE run_id = ? AND answer IS NULL "
                                           "ORDER BY case_id, pair_id, condition", (run_id,))]


def servers(store: Database, run_id: str) -> list[tuple[str | None, str | None, str | None, int]]:
    """(server model id, system fingerprint, endpoint, replies) of the replies of ``run_id`` the server named a
    model or build for (:func:`cfkit.servers.servers_of`)."""
    return [tuple(r) for r in store.query(
        "SELECT server_model, system_fingerprint, endpoint, COUNT(*) FROM replies WHERE run_id = ? AND "
        "(server_model IS NOT NULL OR system_fingerprint IS NOT NULL) GROUP BY 1, 2, 3", (run_id,))]


def image_digests(store: Database, run_ids: Sequence[str]) -> list[tuple[str, str]]:
    """The distinct (case, image SHA-256) the replies of ``run_ids`` record about each case's own image (an edit's
    image is not the case's)."""
    if not run_ids:
        return []
    return [tuple(r) for r in store.query(
        f"SELECT DISTINCT case_id, image_sha256 FROM replies WHERE run_id IN ({placeholders(run_ids)}) "
        "AND condition != 'edit' AND image_sha256 IS NOT NULL AND image_sha256 != ''", tuple(run_ids))]


def image_replies(store: Database, run_ids: Sequence[str], case_ids: Sequence[str]) -> list[tuple[str, str, str, str]]:
    """(run, case, condition, image SHA-256) of the replies of ``run_ids`` about the images of ``case_ids``."""
    if not run_ids or not case_ids:
        return []
    return [tuple(r) for r in store.query(
        f"SELECT run_id, case_id, condition, image_sha256 FROM replies WHERE run_id IN ({placeholders(run_ids)}) "
        f"AND case_id IN ({placeholders(case_ids)}) AND condition != 'edit' AND image_sha256 IS NOT NULL "
        "AND image_sha256 != ''", (*run_ids, *case_ids))]


def readings_other_than(store: Database, run_id: str, parser: int) -> list[tuple[Any, int]]:
    """(parser version, replies) of the replies of ``run_id`` a parser other than ``parser`` read (replies a
    backend gave already read record none)."""
    return [tuple(r) for r in store.query("SELECT parser, COUNT(*) FROM replies WHERE run_id = ? AND parser IS NOT "
                                          "NULL AND parser != ? GROUP BY parser ORDER BY parser", (run_id, parser))]
