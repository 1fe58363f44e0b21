"""The ``audit_plans`` and ``audit_items`` tables: frozen evidence-grounding audits and their items.

Their SQL lives here and nowhere else (the DDL and migrations:
:mod:`cfkit.store.tables.audits`). A plan is written once, with all of its
items, in one transaction, and never changed: each item holds a copy of what
the annotators judge (the case's question, options, gold and rationale, the
reply's parsed answer and its masked text, the images' hashes), so a later
rerun of the run or an edit of the cases file cannot change an audited item.
Labels and final labels are :mod:`cfkit.store.audit_labels`.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from typing import Any

from cfkit.errors import NotFoundError, UsageError
from cfkit.plural import plural
from cfkit.store.db import Database, from_json, to_json
from cfkit.store.tables.audits import DDL as DDL, MIGRATIONS as MIGRATIONS  # the schema (cfkit.store.tables)


@dataclass(frozen=True)
class AuditPlan:
    """One frozen audit."""

    id: str
    created_at: str
    seed: int
    annotators: int
    selection: dict[str, Any]
    inputs: dict[str, Any]
    notes: list[str]


@dataclass(frozen=True)
class ItemImage:
    """An image of an audited case, as it was when the audit was planned."""

    path: str  # relative to the workspace's image root
    sha256: str


@dataclass(frozen=True)
class AuditItem:
    """One (run, case) reply frozen for annotation. ``run_id`` and ``model`` never reach an annotator."""

    id: str
    audit_id: str
    position: int
    run_id: str
    model: str
    case_id: str
    question: str
    options: tuple[tuple[str, str], ...]  # (option id, text)
    gold: str
    yes_option: str | None
    rationale: str | None
    images: tuple[ItemImage, ...]
    answer: str | None
    parse: str | None
    error: str | None
    response: str
    masked: int
    content_sha256: str

    @property
    def parser_correct(self) -> bool:
        """Whether the parser's reading equals the gold option (a null answer is wrong)."""
        return self.answer is not None and self.answer == self.gold


def content_digest(*, case_id: str, question: str, options: tuple[tuple[str, str], ...], gold: str,
                   yes_option: str | None, rationale: str | None, images: tuple[ItemImage, ...],
                   answer: str | None, parse: str | None, error: str | None, response: str) -> str:
    """SHA-256 of everything an annotator is shown about an item (canonical JSON)."""
    payload = {"case": case_id, "question": question, "options": [list(o) for o in options], "gold": gold,
               "yes_option": yes_option, "rationale": rationale,
               "images": [[i.path, i.sha256] for i in images], "answer": answer, "parse": parse, "error": error,
               "response": response}
    return hashlib.sha256(to_json(payload).encode("utf-8")).hexdigest()


def _plan(row: sqlite3.Row) -> AuditPlan:
    return AuditPlan(id=row["id"], created_at=row["created_at"], seed=row["seed"], annotators=row["annotators"],
                     selection=from_json(row["selection"], {}), inputs=from_json(row["inputs"], {}),
                     notes=from_json(row["notes"], []))


def _item(row: sqlite3.Row) -> AuditItem:
    return AuditItem(
        id=row["id"], audit_id=row["audit_id"], position=row["position"], run_id=row["run_id"], model=row["model"],
        case_id=row["case_id"], question=row["question"],
        options=tuple((o["id"], o["text"]) for o in from_json(row["options"], [])), gold=row["gold"],
        yes_option=row["yes_option"], rationale=row["rationale"],
        images=tuple(ItemImage(i["path"], i["sha256"]) for i in from_json(row["images"], [])),
        answer=row["answer"], parse=row["parse"], error=row["error"], response=row["response"],
        masked=row["masked"], content_sha256=row["content_sha256"],
    )


def create(store: Database, plan: AuditPlan, items: list[AuditItem]) -> None:
    """Write a plan and all of its items at once (one transaction): an audit is never half planned."""
    with store.transaction() as tx:
        tx.execute("INSERT INTO audit_plans (id, created_at, seed, annotators, selection, inputs, notes) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (plan.id, plan.created_at, plan.seed, plan.annotators, to_json(plan.selection),
                    to_json(plan.inputs), to_json(plan.notes)))
        tx.executemany(
            "INSERT INTO audit_items (id, audit_id, position, run_id, model, case_id, question, options, gold, "
            "yes_option, rationale, images, answer, parse, error, response, masked, content_sha256) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(i.id, plan.id, i.position, i.run_id, i.model, i.case_id, i.question,
              to_json([{"id": o, "text": t} for o, t in i.options]), i.gold, i.yes_option, i.rationale,
              to_json([{"path": im.path, "sha256": im.sha256} for im in i.images]), i.answer, i.parse, i.error,
              i.response, i.masked, i.content_sha256) for i in items],
        )


def item_ids_taken(store: Database, ids: list[str]) -> set[str]:
    """Which of ``ids`` already name an item (of any audit)."""
    taken: set[str] = set()
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        rows = store.query(f"SELECT id FROM audit_items WHERE id IN ({','.join('?' * len(chunk))})", tuple(chunk))
        taken.update(r["id"] for r in rows)
    return taken


def list_plans(store: Database) -> list[AuditPlan]:
    """Every audit, newest first."""
    return [_plan(r) for r in store.query("SELECT * FROM audit_plans ORDER BY created_at DESC, rowid DESC")]


def find_plan(store: Database, ref: str | None = None) -> AuditPlan:
    """The audit whose id is ``ref`` or starts with it; the newest audit when ``ref`` is None."""
    if ref is None:
        rows = store.query("SELECT * FROM audit_plans ORDER BY created_at DESC, rowid DESC LIMIT 1")
        if not rows:
            raise NotFoundError(f"no audit in {store.path} yet; plan one with 'cfkit audit plan --run RUN --run RUN'.")
        return _plan(rows[0])
    if not ref.strip():
        raise UsageError("--audit is empty; give an audit id or its start (see 'cfkit audit status').")
    rows = store.query("SELECT * FROM audit_plans WHERE id = ?", (ref,))
    if not rows:
        rows = store.query("SELECT * FROM audit_plans WHERE substr(id, 1, ?) = ? ORDER BY id", (len(ref), ref))
    if len(rows) == 1:
        return _plan(rows[0])
    if not rows:
        known = ", ".join(p.id for p in list_plans(store)[:5]) or "none yet"
        raise NotFoundError(f"no audit '{ref}' in {store.path} (audits: {known}).")
    raise UsageError(f"audit '{ref}' matches {plural(len(rows), 'audit')}; give more of the id.")


def items(store: Database, audit_id: str) -> list[AuditItem]:
    """An audit's items in the plan's (shuffled) order."""
    return [_item(r) for r in store.query("SELECT * FROM audit_items WHERE audit_id = ? ORDER BY position",
                                          (audit_id,))]


def find_item(store: Database, audit_id: str, ref: str) -> AuditItem:
    """The item of an audit whose id is ``ref`` or starts with it (case-insensitive)."""
    ref = ref.strip().lower()
    if not ref:
        raise UsageError("item id is empty; give an item id or its start (see 'cfkit audit items --as NAME').")
    rows = store.query("SELECT * FROM audit_items WHERE audit_id = ? AND substr(id, 1, ?) = ? ORDER BY id",
                       (audit_id, len(ref), ref))
    exact = [r for r in rows if r["id"] == ref]
    if exact or len(rows) == 1:
        return _item((exact or rows)[0])
    if not rows:
        raise NotFoundError(f"no item '{ref}' in audit {audit_id}; list them with 'cfkit audit items --as NAME'.")
    raise UsageError(f"item '{ref}' matches {plural(len(rows), 'item')} of audit {audit_id}; give more of the id.")
