"""The ``prelabels`` table: a judge model's labels of an audit's items (cue, link), kept apart from people's.

Its SQL lives here and nowhere else (the DDL and migrations:
:mod:`cfkit.store.tables.prelabels`). A judge is not an annotator of the plan:
its labels never count toward an audit's progress, its agreement or its final
labels; they are compared with people's and, when asked, fill in for them in
the EGA section (marked). One row per (audit, item, judge, prompt version,
criterion), so a second run asks only what is missing. Each row keeps what the judge's replies behind the label
cost (schema 8; :func:`spending` sums them): a reply that replaces a label (``prelabel --retry-unanswered``) adds
its cost to the earlier replies', which were paid for too; so do replies cut off at the token limit and attempts
abandoned on the way (schema 9). A cut-off reply or a failed request with abandoned attempts where no label is
stored yet leaves a *pending* row (:func:`save_unread`): no label (every reader but :func:`spending` skips it),
only its cost, until a reply is read.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass

from cfkit.store.db import Database, now
from cfkit.store.records.judge import COST_FIELDS, JudgeSpending, merged, spending_of
from cfkit.store.tables.prelabels import DDL as DDL, MIGRATIONS as MIGRATIONS  # the schema (cfkit.store.tables)


_COLUMNS = ("audit_id", "item_id", "judge", "prompt_version", "criterion", "value", "parse", "prompt", "raw",
            "server_model", "created_at", "replies", "priced", "cost_usd", "unreported", "tokens_in", "tokens_out",
            "cut_off", "abandoned", "pending")
_KEY = "audit_id = ? AND item_id = ? AND judge = ? AND prompt_version = ? AND criterion = ?"
_LABELS = "(pending IS NULL OR pending = 0)"  # rows that are labels: not a pending row's cost alone


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
    cut_off: int | None = 0  # of ``replies``, those cut off at the token limit (None: stored before cfkit kept them)
    abandoned: int | None = 0  # attempts given up after they were sent (a provider may bill them)
    pending: bool = False  # no reply read yet: only what cut-off replies and abandoned attempts cost, no label


def _row(row: sqlite3.Row) -> Prelabel:
    values = {c: row[c] for c in _COLUMNS}
    for flag in ("value", "priced", "pending"):
        values[flag] = None if values[flag] is None else bool(values[flag])
    values["unreported"] = values["unreported"] or 0
    values["pending"] = bool(values["pending"])
    return Prelabel(**values)


def _values(label: Prelabel) -> dict:
    values = asdict(label) | {"created_at": now()}
    for flag in ("value", "priced", "pending"):
        values[flag] = None if values[flag] is None else int(values[flag])
    return values


def _before(tx, label: Prelabel):
    return tx.execute(f"SELECT {', '.join(COST_FIELDS)} FROM prelabels WHERE {_KEY}",
                      (label.audit_id, label.item_id, label.judge, label.prompt_version, label.criterion)).fetchone()


def _put(tx, values: dict) -> None:
    tx.execute(f"INSERT OR REPLACE INTO prelabels ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
               [values[c] for c in _COLUMNS])


def save(store: Database, label: Prelabel) -> None:
    """Store ``label`` (its ``created_at`` set now), replacing the one of the same item, judge, prompt version and
    criterion, or its pending row; the replaced row's replies, attempts and their cost are added to the new one's
    (they were paid for: :func:`cfkit.store.records.judge.merged`)."""
    values = _values(label)
    with store.transaction() as tx:
        _put(tx, values | merged(_before(tx, label), values))


def save_unread(store: Database, label: Prelabel) -> None:
    """Keep what a reply that was not read (cut off at the token limit) or a failed request's abandoned attempts
    cost: added to the stored label of the same item, judge, prompt version and criterion, which stays as it is;
    where there is none, in a pending row (``label`` as it is given: no value, ``pending`` set)."""
    values = _values(label)
    with store.transaction() as tx:
        before = _before(tx, label)
        if before is None:
            _put(tx, values)
            return
        tx.execute(f"UPDATE prelabels SET {', '.join(f'{c} = ?' for c in COST_FIELDS)} WHERE {_KEY}",
                   [*merged(before, values).values(), label.audit_id, label.item_id, label.judge,
                    label.prompt_version, label.criterion])


def prelabels(store: Database, audit_id: str, *, judge: str | None = None, pending: bool = False) -> list[Prelabel]:
    """A judge's (or every judge's) labels of one audit, by item and criterion; with ``pending``, the pending rows
    too (what replies not read cost, no label)."""
    sql, params = "SELECT * FROM prelabels WHERE audit_id = ?" + ("" if pending else f" AND {_LABELS}"), [audit_id]
    if judge is not None:
        sql, params = sql + " AND judge = ?", params + [judge]
    return [_row(r) for r in store.query(sql + " ORDER BY item_id, criterion, created_at", tuple(params))]


def judges(store: Database, audit_id: str) -> list[str]:
    """Every judge with a row in the audit: a label, or a pending row's cost."""
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
        f"SELECT DISTINCT prompt_version FROM prelabels WHERE audit_id = ? AND judge = ? AND {_LABELS} "
        "ORDER BY prompt_version",
        (audit_id, judge))]



def spending(store: Database, audit_id: str, judge: str) -> JudgeSpending:
    """What the judge's labels of the audit cost, every prompt version's (stale labels and pending rows too)."""
    return spending_of(prelabels(store, audit_id, judge=judge, pending=True))
