"""The ``reviews`` table: a person's decisions on edits.

Its SQL lives here and nowhere else (the DDL and migrations:
:mod:`cfkit.store.tables.reviews`). A decision belongs to one edit: the
decision on an edit (:func:`on_edit`) is that edit's newest review row, so a
view of an edit never shows the decision another edit of the spec received.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from cfkit.errors import UsageError
from cfkit.store.db import Database, now
from cfkit.store.tables.reviews import DDL as DDL, MIGRATIONS as MIGRATIONS  # the schema (cfkit.store.tables)


DECISIONS = ("accept", "reject", "skip")


@dataclass(frozen=True)
class Decision:
    """One review row."""

    id: int
    spec_id: str
    edit_id: int | None
    decision: str  # accept | reject | skip
    note: str | None
    created_at: str


def _decision(row: sqlite3.Row) -> Decision:
    return Decision(row["id"], row["spec_id"], row["edit_id"], row["decision"], row["note"], row["created_at"])


def record(store: Database, spec_id: str, edit_id: int | None, decision: str, note: str | None = None) -> Decision:
    """Save a person's decision on an edit at once (one short transaction)."""
    if decision not in DECISIONS:
        raise UsageError(f"decision '{decision}' is not one of {', '.join(DECISIONS)}.")
    created = now()
    with store.transaction() as tx:
        cursor = tx.execute("INSERT INTO reviews (spec_id, edit_id, decision, note, created_at) VALUES (?, ?, ?, ?, ?)",
                            (spec_id, edit_id, decision, note or None, created))
    return Decision(int(cursor.lastrowid), spec_id, edit_id, decision, note or None, created)


def on_edit(store: Database, edit_id: int) -> Decision | None:
    """The decision on one edit: its newest review row, or None when nobody decided it."""
    rows = store.query("SELECT * FROM reviews WHERE edit_id = ? ORDER BY id DESC LIMIT 1", (edit_id,))
    return _decision(rows[0]) if rows else None


def decisions_by_edit(store: Database, spec_id: str) -> dict[int, Decision]:
    """The decision on each decided edit of a spec."""
    found: dict[int, Decision] = {}
    for row in store.query("SELECT * FROM reviews WHERE spec_id = ? AND edit_id IS NOT NULL ORDER BY id", (spec_id,)):
        found[row["edit_id"]] = _decision(row)
    return found


def accepted_edit_id(store: Database, spec_id: str) -> int | None:
    """The spec's most recently accepted edit whose own decision is still an accept, or None."""
    current = [d for d in decisions_by_edit(store, spec_id).values() if d.decision == "accept"]
    return max(current, key=lambda d: d.id).edit_id if current else None


def latest_for_spec(store: Database, spec_id: str) -> Decision | None:
    """The newest decision on any edit of a spec."""
    rows = store.query("SELECT * FROM reviews WHERE spec_id = ? ORDER BY id DESC LIMIT 1", (spec_id,))
    return _decision(rows[0]) if rows else None
