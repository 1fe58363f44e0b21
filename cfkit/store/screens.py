"""The ``screens`` table: a judge model's answers to the fixed screening questions about one edit.

Its SQL lives here and nowhere else (the DDL and migrations:
:mod:`cfkit.store.tables.screens`). One row per (edit, judge, prompt version,
question): asking again with the same judge and questions finds the row and
sends nothing (resumable); another judge or an edited question file adds rows
beside it. A screen flags an edit for a person; it never decides it. A reply cut
off at the token limit, or a failed request's abandoned attempts, leave a
*pending* row (:func:`save_unread`, schema 9): no answer (:func:`answers` skips
it unless asked), only what it cost, added to the answer once one is read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from cfkit.store.db import Database, now
from cfkit.store.records.judge import COST_FIELDS, merged
from cfkit.store.tables.screens import DDL as DDL, MIGRATIONS as MIGRATIONS  # the schema (cfkit.store.tables)


@dataclass(frozen=True)
class ScreenAnswer:
    """One stored answer of a judge to one screening question about one edit."""

    edit_id: int
    spec_id: str
    judge: str
    prompt_version: str
    question: str
    expected: str
    answer: str | None
    parse: str | None
    prompt: str
    raw: str | None
    server_model: str | None
    created_at: str
    # What the reply behind the answer cost (schema 8): ``replies`` None when it was stored before cfkit kept this.
    replies: int | None = None
    priced: bool | None = None  # the judge was priced (-o price_in/price_out, cfkit.toml [probe.prices])
    cost_usd: float | None = None  # None: not priced, or no cost reported
    unreported: int = 0  # 1 when a priced judge's reply reported no cost
    tokens_in: int | None = None  # None when the reply did not report its token counts
    tokens_out: int | None = None
    cut_off: int | None = 0  # of ``replies``, those cut off at the token limit (None: stored before cfkit kept them)
    abandoned: int | None = 0  # attempts given up after they were sent (a provider may bill them)
    pending: bool = False  # no reply read yet: only what cut-off replies and abandoned attempts cost, no answer

    @property
    def doubts(self) -> bool:
        """The answer is not the one a good edit gets (no valid answer counts as a doubt)."""
        return self.answer != self.expected

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"doubts": self.doubts}


_COLUMNS = ("edit_id", "spec_id", "judge", "prompt_version", "question", "expected", "answer", "parse", "prompt",
            "raw", "server_model", "created_at", "replies", "priced", "cost_usd", "unreported", "tokens_in", "tokens_out",
            "cut_off", "abandoned", "pending")
_KEY = "edit_id = ? AND judge = ? AND prompt_version = ? AND question = ?"


def _row(row: sqlite3.Row) -> ScreenAnswer:
    values = {c: row[c] for c in _COLUMNS}
    values["priced"] = None if values["priced"] is None else bool(values["priced"])
    values["unreported"] = values["unreported"] or 0
    values["pending"] = bool(values["pending"])
    return ScreenAnswer(**values)


def _values(answer: ScreenAnswer) -> dict:
    values = asdict(answer) | {"created_at": now()}
    for flag in ("priced", "pending"):
        values[flag] = None if values[flag] is None else int(values[flag])
    return values


def _key(answer: ScreenAnswer) -> tuple:
    return answer.edit_id, answer.judge, answer.prompt_version, answer.question


def save(store: Database, answer: ScreenAnswer) -> ScreenAnswer:
    """Store ``answer`` (its ``created_at`` is set now), replacing one for the same edit, judge, version and
    question, or its pending row, whose replies, attempts and their cost are added to the answer's; the answer as
    stored (with them) is returned."""
    values = _values(answer)
    with store.transaction() as tx:
        before = tx.execute(f"SELECT {', '.join(COST_FIELDS)} FROM screens WHERE {_KEY}", _key(answer)).fetchone()
        values |= merged(before, values)
        tx.execute(f"INSERT OR REPLACE INTO screens ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                   [values[c] for c in _COLUMNS])
        return _row(tx.execute(f"SELECT * FROM screens WHERE {_KEY}", _key(answer)).fetchone())


def save_unread(store: Database, answer: ScreenAnswer) -> None:
    """Keep what a reply that was not read (cut off at the token limit) or a failed request's abandoned attempts
    cost: added to the stored answer of the same edit, judge, version and question, which stays as it is; where
    there is none, in a pending row (``answer`` as it is given: no answer, ``pending`` set)."""
    values = _values(answer)
    with store.transaction() as tx:
        before = tx.execute(f"SELECT {', '.join(COST_FIELDS)} FROM screens WHERE {_KEY}", _key(answer)).fetchone()
        if before is None:
            tx.execute(f"INSERT INTO screens ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                       [values[c] for c in _COLUMNS])
        else:
            tx.execute(f"UPDATE screens SET {', '.join(f'{c} = ?' for c in COST_FIELDS)} WHERE {_KEY}",
                       [*merged(before, values).values(), *_key(answer)])


def answers(store: Database, edit_ids: Sequence[int] | None = None, *, judge: str | None = None,
            prompt_version: str | None = None, pending: bool = False) -> list[ScreenAnswer]:
    """Stored answers, optionally of some edits, one judge and one prompt version; by edit, judge, question. With
    ``pending``, the pending rows too (what replies not read cost, no answer)."""
    clauses, params = [] if pending else ["(pending IS NULL OR pending = 0)"], []
    if judge is not None:
        clauses.append("judge = ?")
        params.append(judge)
    if prompt_version is not None:
        clauses.append("prompt_version = ?")
        params.append(prompt_version)
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = [_row(r) for r in store.query(f"SELECT * FROM screens{where} ORDER BY edit_id, judge, question", tuple(params))]
    if edit_ids is not None:
        wanted = set(edit_ids)
        rows = [r for r in rows if r.edit_id in wanted]
    return rows
