"""The ``audit_annotators``, ``audit_labels`` and ``audit_finals`` tables: who labels, their labels, final labels.

Their SQL lives here and nowhere else (the DDL and migrations:
:mod:`cfkit.store.tables.audit_labels`). An annotator takes one of an audit's
places (numbered 1, 2, … in the order they first saved a label: adjudication
shows "Annotator 1/2", never names). A label is one annotator's current
judgement of one item, saved decision by decision: ``cue`` and ``link`` stay
NULL until decided, and a label counts once both are.

The final label of an item has a basis: ``agreed`` (every place filled, every
label complete, identical on answer, cue and link, none marked unsure) is
written and withdrawn by :func:`save_label` itself, in the label's
transaction, so it can never disagree with the labels; ``resolved`` is an
adjudicator's decision with a note (:func:`resolve`), after which the item's
labels are frozen.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from cfkit.errors import UsageError
from cfkit.plural import plural
from cfkit.store.db import Database, now
from cfkit.store.tables.audit_labels import DDL as DDL, MIGRATIONS as MIGRATIONS  # the schema (cfkit.store.tables)


@dataclass(frozen=True)
class Annotator:
    audit_id: str
    name: str
    number: int
    joined_at: str


@dataclass(frozen=True)
class Judgement:
    """The three criteria of one judgement; ``cue``/``link`` are None while undecided."""

    answer_ok: bool
    cue: bool | None
    link: bool | None

    @property
    def complete(self) -> bool:
        return self.cue is not None and self.link is not None

    @property
    def ega(self) -> bool:
        """Correct, grounded and linked: the composite evidence-grounded judgement."""
        return bool(self.answer_ok and self.cue and self.link)


@dataclass(frozen=True)
class Label:
    """One annotator's current label of one item."""

    audit_id: str
    item_id: str
    annotator: str
    judgement: Judgement
    unsure: bool
    note: str | None
    created_at: str
    updated_at: str

    @property
    def complete(self) -> bool:
        return self.judgement.complete


@dataclass(frozen=True)
class Final:
    """The final label of an item and its basis (agreed or resolved), with who and when."""

    audit_id: str
    item_id: str
    judgement: Judgement
    basis: str  # agreed | resolved
    decided_by: str
    note: str | None
    decided_at: str


def _flag(value: int | None) -> bool | None:
    return None if value is None else bool(value)


def _label(row: sqlite3.Row) -> Label:
    return Label(row["audit_id"], row["item_id"], row["annotator"],
                 Judgement(bool(row["answer_ok"]), _flag(row["cue"]), _flag(row["link"])),
                 bool(row["unsure"]), row["note"], row["created_at"], row["updated_at"])


def _final(row: sqlite3.Row) -> Final:
    return Final(row["audit_id"], row["item_id"],
                 Judgement(bool(row["answer_ok"]), bool(row["cue"]), bool(row["link"])),
                 row["basis"], row["decided_by"], row["note"], row["decided_at"])


def _bit(value: bool | None) -> int | None:
    return None if value is None else int(bool(value))


# ── annotators ─────────────────────────────────────────────────────────────


def annotators(store: Database, audit_id: str) -> list[Annotator]:
    """The audit's annotators by number."""
    rows = store.query("SELECT * FROM audit_annotators WHERE audit_id = ? ORDER BY number", (audit_id,))
    return [Annotator(r["audit_id"], r["name"], r["number"], r["joined_at"]) for r in rows]


def _take_place(tx: sqlite3.Connection, audit_id: str, name: str, places: int) -> None:
    if tx.execute("SELECT 1 FROM audit_annotators WHERE audit_id = ? AND name = ?", (audit_id, name)).fetchone():
        return
    taken = tx.execute("SELECT COUNT(*) FROM audit_annotators WHERE audit_id = ?", (audit_id,)).fetchone()[0]
    if taken >= places:
        raise UsageError(f"audit {audit_id} already has its {plural(places, 'annotator')} and '{name}' is not one of them; "
                         "label under your own annotator name, or resolve disagreements with "
                         f"'cfkit audit adjudicate --as {name}'.")
    tx.execute("INSERT INTO audit_annotators (audit_id, name, number, joined_at) VALUES (?, ?, ?, ?)",
               (audit_id, name, taken + 1, now()))


# ── labels ─────────────────────────────────────────────────────────────────


def labels(store: Database, audit_id: str) -> list[Label]:
    """Every label of an audit."""
    return [_label(r) for r in store.query("SELECT * FROM audit_labels WHERE audit_id = ? ORDER BY item_id, annotator",
                                           (audit_id,))]


def labels_by(store: Database, audit_id: str, annotator: str) -> dict[str, Label]:
    """One annotator's labels, by item id (nobody else's)."""
    rows = store.query("SELECT * FROM audit_labels WHERE audit_id = ? AND annotator = ?", (audit_id, annotator))
    return {r["item_id"]: _label(r) for r in rows}


def save_label(store: Database, audit_id: str, item_id: str, annotator: str, judgement: Judgement, *,
               unsure: bool, note: str | None, places: int) -> Label:
    """Save an annotator's label of an item at once, and keep the item's agreed final label in step.

    The first label an annotator saves takes one of the audit's ``places``;
    a label of an item that was adjudicated is refused (the resolution stands).
    """
    stamp = now()
    with store.transaction() as tx:
        resolved = tx.execute("SELECT decided_by, decided_at FROM audit_finals WHERE item_id = ? AND basis = 'resolved'",
                              (item_id,)).fetchone()
        if resolved is not None:
            raise UsageError(f"item {item_id} was adjudicated on {resolved['decided_at']}; its final label stands "
                             "and its labels can no longer change.")
        _take_place(tx, audit_id, annotator, places)
        tx.execute(
            "INSERT INTO audit_labels (audit_id, item_id, annotator, answer_ok, cue, link, unsure, note, created_at, "
            "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(item_id, annotator) DO UPDATE SET "
            "answer_ok = excluded.answer_ok, cue = excluded.cue, link = excluded.link, unsure = excluded.unsure, "
            "note = excluded.note, updated_at = excluded.updated_at",
            (audit_id, item_id, annotator, int(judgement.answer_ok), _bit(judgement.cue), _bit(judgement.link),
             int(unsure), note or None, stamp, stamp),
        )
        _keep_agreement(tx, audit_id, item_id, places, stamp)
        row = tx.execute("SELECT * FROM audit_labels WHERE item_id = ? AND annotator = ?",
                         (item_id, annotator)).fetchone()
    return _label(row)


def _keep_agreement(tx: sqlite3.Connection, audit_id: str, item_id: str, places: int, stamp: str) -> None:
    """Write the agreed final label when every label of the item agrees, withdraw it when they no longer do."""
    rows = tx.execute("SELECT l.*, a.number FROM audit_labels AS l, audit_annotators AS a "
                      "WHERE l.item_id = ? AND a.audit_id = l.audit_id AND a.name = l.annotator ORDER BY a.number",
                      (item_id,)).fetchall()
    values = {(r["answer_ok"], r["cue"], r["link"]) for r in rows}
    agreed = (len(rows) >= places and len(values) == 1 and None not in next(iter(values))
              and not any(r["unsure"] for r in rows))
    if not agreed:
        tx.execute("DELETE FROM audit_finals WHERE item_id = ? AND basis = 'agreed'", (item_id,))
        return
    answer_ok, cue, link = next(iter(values))
    current = tx.execute("SELECT answer_ok, cue, link FROM audit_finals WHERE item_id = ?", (item_id,)).fetchone()
    if current is not None and tuple(current) == (answer_ok, cue, link):
        return  # already agreed on these values: keep when it was reached
    tx.execute("INSERT OR REPLACE INTO audit_finals (item_id, audit_id, answer_ok, cue, link, basis, decided_by, note, "
               "decided_at) VALUES (?, ?, ?, ?, ?, 'agreed', ?, NULL, ?)",
               (item_id, audit_id, answer_ok, cue, link, ", ".join(r["annotator"] for r in rows), stamp))


# ── final labels ───────────────────────────────────────────────────────────


def finals(store: Database, audit_id: str) -> dict[str, Final]:
    """The final label of every finally labelled item of an audit, by item id."""
    return {r["item_id"]: _final(r) for r in store.query("SELECT * FROM audit_finals WHERE audit_id = ?", (audit_id,))}


def resolve(store: Database, audit_id: str, item_id: str, adjudicator: str, judgement: Judgement, note: str) -> Final:
    """Record an adjudicator's final label of an item, with the note that says why."""
    if not judgement.complete:
        raise UsageError("a resolution decides both the cue and the link; give --cue and --link.")
    if not note or not note.strip():
        raise UsageError(f"a resolution of item {item_id} needs a note saying why; give --note \"…\".")
    stamp = now()
    with store.transaction() as tx:
        tx.execute("INSERT OR REPLACE INTO audit_finals (item_id, audit_id, answer_ok, cue, link, basis, decided_by, "
                   "note, decided_at) VALUES (?, ?, ?, ?, ?, 'resolved', ?, ?, ?)",
                   (item_id, audit_id, int(judgement.answer_ok), int(bool(judgement.cue)), int(bool(judgement.link)),
                    adjudicator, note.strip(), stamp))
    return Final(audit_id, item_id, Judgement(judgement.answer_ok, bool(judgement.cue), bool(judgement.link)),
                 "resolved", adjudicator, note.strip(), stamp)
