"""The workspace's SQLite store (``.cfkit/cfkit.db``).

One file holds edits and their provenance, preservation checks, review
decisions, probe runs, parsed replies, cached model responses and the
evidence-grounding audits (plans, items, labels, final labels). It runs in
WAL mode with a busy timeout so two cfkit processes can share it; every write
happens in a short ``BEGIN IMMEDIATE`` transaction, so a killed process loses at
most the write it was making. Secrets never enter the store.

Each table has exactly one owner module, which holds all of its SQL (its DDL
and migrations in the owner's schema module, below) and returns typed, frozen
records; every other module goes through it:

=====================  ==========================================
table                  owner
=====================  ==========================================
``edits``              :mod:`cfkit.store.edits`
``checks``             :mod:`cfkit.store.checks`
``reviews``            :mod:`cfkit.store.reviews`
``runs``, ``replies``  :mod:`cfkit.store.runs`
``responses``          :mod:`cfkit.store.responses`
``file_digests``       :mod:`cfkit.store.digests`
``leases``             :mod:`cfkit.store.leases`
``batches``            :mod:`cfkit.store.batches`
``audit_plans``,       :mod:`cfkit.store.audits`
``audit_items``
``audit_annotators``,  :mod:`cfkit.store.audit_labels`
``audit_labels``,
``audit_finals``
=====================  ==========================================

Each owner's DDL and migrations sit in a module of their own under
:mod:`cfkit.store.tables` (named as the owner is), which the owner re-exports:
a new store is created without importing the owners.
:mod:`cfkit.store.db` is the connection underneath and knows no table.
"""

from __future__ import annotations

from pathlib import Path

import importlib
from types import ModuleType

from cfkit.store.db import Database, from_json, now, to_json

#: Bumped whenever an owner adds a migration step.
SCHEMA_VERSION = 9  # 3: run identity and provenance; 4: the audit tables; 5: replies' length, reasoning, parser; file digests, leases, batches; 6: batches' server_id, screens, prelabels; 7: truncated replies and responses, and the endpoint that answered them; 8: what the judge's replies cost (prelabels, screens); 9: the judge's cut-off replies, abandoned attempts and rows of no answer yet

#: The owner modules, in the order their tables are created. Each is imported when first used: a store is
#: created or migrated from their schema modules alone (cfkit.store.tables, named as the owners are), so
#: neither opening a store nor making a new one defines every table's records.
OWNER_NAMES = ("edits", "checks", "reviews", "runs", "responses", "digests", "leases", "batches", "audits",
               "audit_labels", "screens", "prelabels")


def _schemas() -> list[ModuleType]:
    """Each owner's schema module (its DDL and migrations), in :data:`OWNER_NAMES` order."""
    return [importlib.import_module(f"cfkit.store.tables.{name}") for name in OWNER_NAMES]


def schema() -> str:
    """The DDL of every table (idempotent ``CREATE … IF NOT EXISTS``)."""
    return "\n".join(owner.DDL for owner in _schemas())


def _migrations() -> dict[int, list[str]]:
    steps: dict[int, list[str]] = {}
    for owner in _schemas():
        for version, statements in owner.MIGRATIONS.items():
            steps.setdefault(version, []).extend(statements)
    return steps


def __getattr__(name: str) -> ModuleType:
    if name in OWNER_NAMES:  # ``cfkit.store.runs`` without an import of it
        return importlib.import_module(f"cfkit.store.{name}")
    raise AttributeError(f"module 'cfkit.store' has no attribute {name!r}")


class Store(Database):
    """A connection to one workspace's store, with every owner's schema applied."""

    def __init__(self, path: Path, *, timeout: float = 30.0):
        super().__init__(path, schema=schema, version=SCHEMA_VERSION, migrations=_migrations, timeout=timeout)

    def __enter__(self) -> "Store":
        return self


def open_store(db_path: Path) -> Store:
    return Store(db_path)


__all__ = ["SCHEMA_VERSION", "Store", "audit_labels", "audits", "batches", "checks", "digests", "edits", "leases", "from_json", "now", "open_store", "responses", "reviews",
           "runs", "prelabels", "screens", "to_json"]
