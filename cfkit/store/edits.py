"""The ``edits`` table: one row per candidate an editor produced (or failed to produce).

Its SQL lives here and nowhere else (the DDL and migrations:
:mod:`cfkit.store.tables.edits`). An edit's image files are named by paths
relative to the store folder; :class:`EditRecord` gives them absolute. Which
edit stands for a spec (:func:`selected`) is decided here, once, from the
edits, their checks (:mod:`cfkit.store.checks`) and the reviews
(:mod:`cfkit.store.reviews`).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

from cfkit.errors import NotFoundError
from cfkit.store import checks, reviews
from cfkit.store.db import Database, from_json, now, placeholders, to_json
from cfkit.store.tables.edits import DDL as DDL, MIGRATIONS as MIGRATIONS  # the schema (cfkit.store.tables)

#: Every edit carries this label, in the store and in its PNG files.
LABEL = "synthetic counterfactual diagnostic"


@dataclass(frozen=True)
class EditRecord:
    """One row of the ``edits`` table, with output paths made absolute."""

    id: int
    spec_id: str
    candidate: int
    engine: str
    model: str | None
    status: str  # ok | refused | failed
    raw_path: Path | None
    composite_path: Path | None
    params: dict[str, Any]
    seed: int | None
    prompt: str | None
    spec_sha256: str | None
    source_sha256: str | None
    mask_sha256: str | None
    raw_sha256: str | None
    composite_sha256: str | None
    error: str | None
    fallback: str | None
    usage: dict[str, Any] | None
    cost_usd: float | None
    started_at: str
    finished_at: str | None
    label: str

    def as_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["raw_path"] = None if self.raw_path is None else str(self.raw_path)
        data["composite_path"] = None if self.composite_path is None else str(self.composite_path)
        return data

    def image_path(self, variant: str) -> Path | None:
        """The file of one output (``raw`` or ``composite``), or None when it was not recorded."""
        return self.raw_path if variant == "raw" else self.composite_path

    @property
    def variants(self) -> list[str]:
        """The outputs this edit recorded, raw first."""
        return [v for v in ("raw", "composite") if self.image_path(v) is not None]

    def changed_file(self, source: Path, sha256_of: Callable[[Path], str | None],
                     variants: tuple[str, ...] = ("raw", "composite")) -> str | None:
        """Why this edit's files are no longer the ones it was made from and wrote, or None when they are.

        ``source`` is its case's image as the workspace names it now, ``sha256_of`` the SHA-256 of a file's
        bytes as they are now (None when not known). A source image replaced since the edit was made, or an
        output overwritten since it was written, would pair, check or show an image the edit is not.
        """
        if self.source_sha256:
            now_sha = sha256_of(source)
            if now_sha is not None and now_sha != self.source_sha256:
                return (f"the source image {source} has changed since edit {self.id} was made from it (sha256 "
                        f"{self.source_sha256[:12]}… then, {now_sha[:12]}… now): the edit is of the earlier image")
        for variant in variants:
            path = self.image_path(variant)
            recorded = self.raw_sha256 if variant == "raw" else self.composite_sha256
            if path is None or not recorded:
                continue
            now_sha = sha256_of(path)
            if now_sha is not None and now_sha != recorded:
                return (f"edit {self.id}'s {variant} image {path} is not the file it wrote (sha256 {recorded[:12]}… "
                        f"then, {now_sha[:12]}… now)")
        return None


def _record(store: Database, row: sqlite3.Row) -> EditRecord:
    folder = store.path.parent

    def path(value: str | None) -> Path | None:
        if not value:
            return None
        return Path(value) if Path(value).is_absolute() else folder / value

    return EditRecord(
        id=row["id"], spec_id=row["spec_id"], candidate=row["candidate"], engine=row["engine"], model=row["model"],
        status=row["status"], raw_path=path(row["raw_path"]), composite_path=path(row["composite_path"]),
        params=from_json(row["params"], {}), seed=row["seed"], prompt=row["prompt"], spec_sha256=row["spec_sha256"],
        source_sha256=row["source_sha256"], mask_sha256=row["mask_sha256"], raw_sha256=row["raw_sha256"],
        composite_sha256=row["composite_sha256"], error=row["error"], fallback=row["fallback"],
        usage=from_json(row["usage"]), cost_usd=row["cost_usd"], started_at=row["started_at"],
        finished_at=row["finished_at"], label=row["label"],
    )


# ── writing ────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class NewEdit:
    """The provenance of an edit about to be recorded (everything but its files)."""

    spec_id: str
    spec_sha256: str
    engine: str
    model: str | None
    params: dict[str, Any]
    seed: int | None
    prompt: str
    source_sha256: str
    mask_sha256: str
    started_at: str
    candidate: int = 0
    fallback: str | None = None
    usage: dict[str, Any] | None = None
    cost_usd: float | None = None


def _insert(store: Database, new: NewEdit, status: str, error: str | None, finished_at: str | None) -> int:
    with store.transaction() as tx:
        cursor = tx.execute(
            "INSERT INTO edits (spec_id, spec_sha256, candidate, engine, model, params, seed, prompt, source_sha256, "
            "mask_sha256, status, error, fallback, usage, cost_usd, started_at, finished_at, label) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (new.spec_id, new.spec_sha256, new.candidate, new.engine, new.model, to_json(new.params), new.seed,
             new.prompt, new.source_sha256, new.mask_sha256, status, error, new.fallback,
             None if new.usage is None else to_json(new.usage), new.cost_usd, new.started_at, finished_at, LABEL),
        )
        return int(cursor.lastrowid)


def insert_pending(store: Database, new: NewEdit) -> int:
    """Record an edit whose files are not written yet; it reads "failed" until :func:`mark_written`."""
    return _insert(store, new, "failed", "interrupted before its files were written", None)


def insert_without_output(store: Database, new: NewEdit, status: str, error: str) -> int:
    """Record an edit that produced no image (``refused`` or ``failed``), with why."""
    return _insert(store, new, status, error, now())


def mark_written(store: Database, edit_id: int, *, raw_path: str, raw_sha256: str, composite_path: str,
                 composite_sha256: str) -> None:
    """The edit's files exist: record them (paths relative to the store folder) and mark it ``ok``."""
    with store.transaction() as tx:
        tx.execute(
            "UPDATE edits SET status = 'ok', error = NULL, raw_path = ?, raw_sha256 = ?, composite_path = ?, "
            "composite_sha256 = ?, finished_at = ? WHERE id = ?",
            (raw_path, raw_sha256, composite_path, composite_sha256, now(), edit_id),
        )


# ── reading ────────────────────────────────────────────────────────────────


#: SQLite's largest integer; an edit id beyond it cannot exist (and cannot even be asked about).
_MAX_ID = 2**63 - 1


def last_id(store: Database) -> int:
    """The largest edit id recorded (0 for none): the next edit's id follows it, and names its files."""
    return int(store.query("SELECT COALESCE(MAX(id), 0) AS last FROM edits")[0]["last"])


def find(store: Database, edit_id: int) -> EditRecord | None:
    if not 0 < edit_id <= _MAX_ID:
        return None
    rows = store.query("SELECT * FROM edits WHERE id = ?", (edit_id,))
    return _record(store, rows[0]) if rows else None


def get(store: Database, edit_id: int) -> EditRecord:
    """Edit ``edit_id``; an unknown id is an :class:`InputError` saying where to look."""
    record = find(store, edit_id)
    if record is None:
        raise NotFoundError(f"no edit #{edit_id} in {store.path}. See 'cfkit edits list'.")
    return record


def list_edits(store: Database, spec_ids: list[str] | None = None) -> list[EditRecord]:
    """Every recorded edit, oldest first, optionally only of ``spec_ids``."""
    if spec_ids:
        rows = store.query(f"SELECT * FROM edits WHERE spec_id IN ({placeholders(spec_ids)}) ORDER BY id",
                           tuple(spec_ids))
    else:
        rows = store.query("SELECT * FROM edits ORDER BY id")
    return [_record(store, row) for row in rows]


def ok_edits(store: Database, spec_id: str) -> list[EditRecord]:
    """A spec's successful edits (its candidates), oldest first."""
    rows = store.query("SELECT * FROM edits WHERE spec_id = ? AND status = 'ok' ORDER BY id", (spec_id,))
    return [_record(store, row) for row in rows]


def newest_ok(store: Database, spec_id: str) -> EditRecord | None:
    """The newest successful edit of a spec."""
    rows = store.query("SELECT * FROM edits WHERE spec_id = ? AND status = 'ok' ORDER BY id DESC LIMIT 1",
                       (spec_id,))
    return _record(store, rows[0]) if rows else None


def newest(store: Database, spec_id: str) -> EditRecord | None:
    """The newest edit of a spec, whatever its status."""
    rows = store.query("SELECT * FROM edits WHERE spec_id = ? ORDER BY id DESC LIMIT 1", (spec_id,))
    return _record(store, rows[0]) if rows else None


def specs_with_edits(store: Database) -> list[str]:
    """Every spec id with at least one successful edit, sorted."""
    return [r["spec_id"] for r in store.query("SELECT DISTINCT spec_id FROM edits WHERE status = 'ok' ORDER BY spec_id")]


# ── the edit that stands for a spec ────────────────────────────────────────


def selected(store: Database, spec_id: str, *, require_accepted: bool = False) -> EditRecord | None:
    """The edit that stands for ``spec_id`` in probes, reports and sheets.

    The most recently accepted of its edits whose own newest decision is still
    an accept; otherwise (unless ``require_accepted``) the newest successful
    edit whose composite passed its check and that no review rejected;
    otherwise None.
    """
    accepted = reviews.accepted_edit_id(store, spec_id)
    if accepted is not None:
        record = find(store, accepted)
        if record is not None and record.status == "ok":
            return record
    if require_accepted:
        return None
    decisions = reviews.decisions_by_edit(store, spec_id)
    for record in reversed(ok_edits(store, spec_id)):
        decision = decisions.get(record.id)
        if decision is not None and decision.decision == "reject":
            continue
        check = checks.latest(store, record.id)
        if check is not None and check.verdict == "pass":
            return record
    return None


def shown(store: Database, spec_id: str) -> EditRecord | None:
    """The edit a view of the spec shows first: the selected one, else the newest successful one."""
    return selected(store, spec_id) or newest_ok(store, spec_id)
