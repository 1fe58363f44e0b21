"""The ``prelabels`` table: a judge model's labels of an audit's items (cue, link), kept apart from people's.

Its SQL lives here and nowhere else (the DDL and migrations:
:mod:`cfkit.store.tables.prelabels`). A judge is not an annotator of the plan:
its labels never count toward an audit's progress, its agreement or its final
labels; they are compared with people's and, when asked, fill in for them in
the EGA section (marked). One row per (audit, item, judge, prompt version,
criterion), so a second run asks only what is missing.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass

from cfkit.store.db import Database, now
from cfkit.store.tables.prelabels import DDL as DDL, MIGRATIONS as MIGRATIONS  # the schema (cfkit.store.tables)


_COLUMNS = ("audit_id", "item_id", "judge", "prompt_version", "criterion", "value", "parse", "prompt", "raw",
            "server_model", "created_at")


@dataclass(frozen=True)
class Prelabel:
    """A judge's answer on one criterion of one audit item."""

    audit_id: str
    item_id: str
    judge: str
    prompt_version: str
    criterion: str
    value: bool | None
    parse: str | None
    prompt: str
    raw: str | None
    server_model: str | None
    created_at: str


def _row(row: sqlite3.Row) -> Prelabel:
    values = {c: row[c] for c in _COLUMNS}
    values["value"] = None if values["value"] is None else bool(values["value"])
    return Prelabel(**values)


def save(store: Database, label: Prelabel) -> None:
    values = asdict(label) | {"created_at": now()}
    values["value"] = None if label.value is None else int(label.value)
    with store.transaction() as tx:
        tx.execute(f"INSERT OR REPLACE INTO prelabels ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                   [values[c] for c in _COLUMNS])


def prelabels(store: Database, audit_id: str, *, judge: str | None = None) -> list[Prelabel]:
    """A judge's (or every judge's) labels of one audit, by item and criterion."""
    sql, params = "SELECT * FROM prelabels WHERE audit_id = ?", [audit_id]
    if judge is not None:
        sql, params = sql + " AND judge = ?", params + [judge]
    return [_row(r) for r in store.query(sql + " ORDER BY item_id, criterion, created_at", tuple(params))]


def judges(store: Database, audit_id: str) -> list[str]:
    return [r["judge"] for r in store.query("SELECT DISTINCT judge FROM prelabels WHERE audit_id = ? ORDER BY judge",
                                            (audit_id,))]


def latest(store: Database, audit_id: str, judge: str,
           prompt_version: str | None = None) -> dict[str, dict[str, bool | None]]:
    """The judge's newest label of each item, by item id and criterion: under ``prompt_version`` only when given
    (labels asked with other questions are then left out), else of any prompt version."""
    found: dict[str, dict[str, bool | None]] = {}
    for label in prelabels(store, audit_id, judge=judge):  # within an item and criterion, oldest first
        if prompt_version is None or label.prompt_version == prompt_version:
            found.setdefault(label.item_id, {})[label.criterion] = label.value
    return found


def prompt_versions(store: Database, audit_id: str, judge: str) -> list[str]:
    """The prompt versions the judge has labels of in the audit."""
    return [r["prompt_version"] for r in store.query(
        "SELECT DISTINCT prompt_version FROM prelabels WHERE audit_id = ? AND judge = ? ORDER BY prompt_version",
        (audit_id, judge))]
