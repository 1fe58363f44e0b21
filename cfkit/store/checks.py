"""The ``checks`` table: preservation metrics of one output (raw or composite) of one edit.

Its SQL lives here and nowhere else (the DDL and migrations:
:mod:`cfkit.store.tables.checks`). "The latest check of an edit" is
:func:`latest` and comes back in one shape, :class:`CheckResult`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from cfkit.store.db import Database, from_json, now, to_json
from cfkit.vocabulary import verdict_label
from cfkit.store.tables.checks import DDL as DDL, MIGRATIONS as MIGRATIONS  # the schema (cfkit.store.tables)


#: The outputs of an edit a check measures, in the order they are shown.
VARIANTS = ("raw", "composite")


@dataclass(frozen=True)
class CheckResult:
    """One stored check of one output (``raw`` or ``composite``) of one edit."""

    id: int
    edit_id: int
    spec_id: str
    variant: str
    metrics: dict[str, Any]
    verdict: str  # pass | fail
    reasons: list[str]
    lpips_measured: bool
    created_at: str

    @property
    def label(self) -> str:
        return verdict_label(self.verdict, self.lpips_measured)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"label": self.label}


@dataclass(frozen=True)
class NewCheck:
    """A check about to be stored."""

    variant: str
    metrics: dict[str, Any]
    verdict: str
    reasons: list[str]
    lpips_measured: bool


def _result(row: sqlite3.Row) -> CheckResult:
    return CheckResult(id=row["id"], edit_id=row["edit_id"], spec_id=row["spec_id"], variant=row["variant"],
                       metrics=from_json(row["metrics"], {}), verdict=row["verdict"],
                       reasons=from_json(row["reasons"], []), lpips_measured=bool(row["lpips"]),
                       created_at=row["created_at"])


def insert(store: Database, edit_id: int, spec_id: str, new: Sequence[NewCheck]) -> list[CheckResult]:
    """Store the checks of one edit together (one transaction)."""
    created = now()
    ids = []
    with store.transaction() as tx:
        for check in new:
            cursor = tx.execute(
                "INSERT INTO checks (edit_id, spec_id, variant, metrics, verdict, reasons, lpips, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (edit_id, spec_id, check.variant, to_json(check.metrics), check.verdict, to_json(check.reasons),
                 int(check.lpips_measured), created),
            )
            ids.append(int(cursor.lastrowid))
    return [CheckResult(id=i, edit_id=edit_id, spec_id=spec_id, variant=c.variant, metrics=c.metrics,
                        verdict=c.verdict, reasons=c.reasons, lpips_measured=c.lpips_measured, created_at=created)
            for i, c in zip(ids, new, strict=True)]


def latest_by_variant(store: Database, edit_id: int) -> dict[str, CheckResult]:
    """The newest stored check of each output of an edit."""
    rows = store.query("SELECT * FROM checks WHERE edit_id = ? ORDER BY id", (edit_id,))
    return {row["variant"]: _result(row) for row in rows}


def latest(store: Database, edit_id: int, variant: str | None = "composite") -> CheckResult | None:
    """The latest check of an edit's ``variant``; with ``variant=None`` the composite's, else the raw's."""
    found = latest_by_variant(store, edit_id)
    if variant is not None:
        return found.get(variant)
    return found.get("composite") or found.get("raw")
