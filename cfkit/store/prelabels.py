"""The ``prelabels`` table: a judge model's labels of an audit's items (cue, link), kept apart from people's.

Its SQL lives here and nowhere else (the DDL and migrations:
:mod:`cfkit.store.tables.prelabels`). A judge is not an annotator of the plan:
its labels never count toward an audit's progress, its agreement or its final
labels; they are compared with people's and, when asked, fill in for them in
the EGA section (marked). One row per (audit, item, judge, prompt version,
criterion), so a second run asks only what is missing. Each row keeps what the judge's replies behind the label
cost (schema 8; :func:`spending` sums them): a reply that replaces a label (``prelabel --retry-unanswered``) adds
its cost to the earlier replies', which were paid for too.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass

from cfkit.store.db import Database, now
from cfkit.store.records.judge import JudgeSpending, spending_of
from cfkit.store.tables.prelabels import DDL as DDL, MIGRATIONS as MIGRATIONS  # the schema (cfkit.store.tables)


_COLUMNS = ("audit_id", "item_id", "judge", "prompt_version", "criterion", "value", "parse", "prompt", "raw",
            "server_model", "created_at", "replies", "priced", "cost_usd", "unreported", "tokens_in", "tokens_out")


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
    # What the replies behind the label cost: ``replies`` None when it was stored before cfkit kept this.
    replies: int | None = None
    priced: bool | None = None  # the judge was priced (-o price_in/price_out, cfkit.toml [probe.prices])
    cost_usd: float | None = None  # of the replies that reported a cost (None: none did, or not priced)
    unreported: int = 0  # replies without a known cost, of a priced judge's label (earlier unpriced ones too)
    tokens_in: int | None = None  # None when some reply did not report its token counts
    tokens_out: int | None = None


def _row(row: sqlite3.Row) -> Prelabel:
    values = {c: row[c] for c in _COLUMNS}
    for flag in ("value", "priced"):
        values[flag] = None if values[flag] is None else bool(values[flag])
    values["unreported"] = values["unreported"] or 0
    return Prelabel(**values)


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _unknown(priced: object, replies: int, unreported: int | None) -> int:
    """How many of ``replies`` have no known cost: those a priced judge's server reported none for, or every one
    when the judge was not priced."""
    return (unreported or 0) if priced else replies


def save(store: Database, label: Prelabel) -> None:
    """Store ``label`` (its ``created_at`` set now), replacing the one of the same item, judge, prompt version and
    criterion; the replaced label's replies and their cost are added to the new one's (they were paid for). A
    label asked of a priced judge over one asked while it was not priced keeps the earlier replies as replies
    without a known cost (``unreported``), so that its cost is never said as exact."""
    values = asdict(label) | {"created_at": now()}
    values["value"] = None if label.value is None else int(label.value)
    values["priced"] = None if label.priced is None else int(label.priced)
    with store.transaction() as tx:
        before = tx.execute("SELECT replies, cost_usd, unreported, tokens_in, tokens_out, priced FROM prelabels "
                            "WHERE audit_id = ? AND item_id = ? AND judge = ? AND prompt_version = ? AND criterion = ?",
                            (label.audit_id, label.item_id, label.judge, label.prompt_version,
                             label.criterion)).fetchone()
        if before is not None and before[0] is not None and label.replies is not None:
            values["replies"] = before[0] + label.replies
            priced = bool(before[5]) or bool(label.priced)
            values["priced"] = int(priced)
            values["unreported"] = (_unknown(before[5], before[0], before[2])
                                    + _unknown(label.priced, label.replies, label.unreported)) if priced else 0
            values["tokens_in"], values["tokens_out"] = _plus(before[3], label.tokens_in), _plus(before[4],
                                                                                                 label.tokens_out)
            if before[1] is not None or label.cost_usd is not None:
                values["cost_usd"] = (before[1] or 0.0) + (label.cost_usd or 0.0)
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



def spending(store: Database, audit_id: str, judge: str) -> JudgeSpending:
    """What the judge's labels of the audit cost, every prompt version's (stale labels too)."""
    return spending_of(prelabels(store, audit_id, judge=judge))
