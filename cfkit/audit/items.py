"""An audit as annotators see it: blinded items, each annotator's own order, and the un-blinded record.

Blindness is a type: :class:`BlindItem` has no run and no model, and the
annotation view, ``audit items --as NAME`` and the worksheets are built from
it alone. An annotator's listing carries only that annotator's labels.
:func:`revealed_items` (model, run, the parser's correctness, every label) is
refused until every planned label is in, unless un-blinded on purpose.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from cfkit.errors import Incomplete, UsageError
from cfkit.plural import agree, plural
from cfkit.store import Store, audit_labels, audits
from cfkit.store.audit_labels import Final, Judgement, Label
from cfkit.store.audits import AuditItem, AuditPlan

#: An annotator's name: 1-40 letters, digits, spaces or . _ - @ (it is stored and shown to that annotator).
NAME_PATTERN = r"[^\W_][\w .@-]{0,39}"
_NAME = re.compile(NAME_PATTERN)


def check_annotator(name: str) -> str:
    """``name`` stripped, if it is an acceptable annotator name; else a :class:`UsageError`."""
    name = name.strip()
    if not _NAME.fullmatch(name):
        raise UsageError(f"--as {name!r}: an annotator name is 1-40 letters, digits, spaces or . _ - @, "
                         "starting with a letter or digit; e.g. --as alice.")
    return name


@dataclass(frozen=True)
class Audit:
    """A plan with its items (plan order)."""

    plan: AuditPlan
    items: list[AuditItem]

    @property
    def id(self) -> str:
        return self.plan.id

    @cached_property
    def by_id(self) -> dict[str, AuditItem]:
        return {i.id: i for i in self.items}

    @property
    def planned_labels(self) -> int:
        return len(self.items) * self.plan.annotators


def load_audit(store: Store, ref: str | None = None) -> Audit:
    """The audit ``ref`` (an id or its start), or the newest audit."""
    plan = audits.find_plan(store, ref)
    return Audit(plan, audits.items(store, plan.id))


def annotator_order(audit: Audit, name: str) -> list[AuditItem]:
    """The items in ``name``'s own order: a permutation seeded by the audit, its seed and the name."""
    digest = hashlib.sha256(f"{audit.id}\0{audit.plan.seed}\0{name}".encode("utf-8")).digest()
    permutation = np.random.default_rng(int.from_bytes(digest[:8], "big")).permutation(len(audit.items))
    return [audit.items[i] for i in permutation]


@dataclass(frozen=True)
class BlindItem:
    """What an annotator is shown of an item: the case, the gold, the rationale and the masked response."""

    id: str
    case_id: str
    question: str
    options: tuple[tuple[str, str], ...]
    gold: str
    yes_option: str | None
    rationale: str | None
    images: tuple[tuple[str, str], ...]  # (path under the image root, sha256 at planning)
    answer: str | None  # the parser's reading of the reply
    response: str

    @property
    def parser_correct(self) -> bool:
        """The pre-filled "answer correct": the parser's reading equals the gold option."""
        return self.answer is not None and self.answer == self.gold

    def option_text(self, option_id: str | None) -> str | None:
        return next((text for oid, text in self.options if oid == option_id), None)

    def to_dict(self) -> dict[str, Any]:
        return {"item": self.id, "case": self.case_id, "question": self.question,
                "options": [{"id": o, "text": t} for o, t in self.options], "gold": self.gold,
                "yes_option": self.yes_option, "rationale": self.rationale, "images": [p for p, _ in self.images],
                "answer": self.answer, "answer_ok_prefill": self.parser_correct, "response": self.response}


def blind(item: AuditItem) -> BlindItem:
    return BlindItem(item.id, item.case_id, item.question, item.options, item.gold, item.yes_option, item.rationale,
                     tuple((i.path, i.sha256) for i in item.images), item.answer, item.response)


def judgement_dict(judgement: Judgement) -> dict[str, Any]:
    return {"answer_ok": judgement.answer_ok, "cue": judgement.cue, "link": judgement.link,
            "ega": judgement.ega if judgement.complete else None}


def label_dict(label: Label | None) -> dict[str, Any] | None:
    if label is None:
        return None
    return {**judgement_dict(label.judgement), "unsure": label.unsure, "note": label.note,
            "complete": label.complete, "updated_at": label.updated_at}


def final_dict(final: Final | None) -> dict[str, Any] | None:
    if final is None:
        return None
    return {**judgement_dict(final.judgement), "basis": final.basis, "by": final.decided_by, "note": final.note,
            "at": final.decided_at}


def blinded_items(store: Store, audit: Audit, annotator: str) -> list[dict[str, Any]]:
    """``annotator``'s listing, in their order: blinded items with their own label (or null), nobody else's."""
    own = audit_labels.labels_by(store, audit.id, annotator)
    return [{"order": n, **blind(item).to_dict(), "label": label_dict(own.get(item.id))}
            for n, item in enumerate(annotator_order(audit, annotator), start=1)]


def labels_in(store: Store, audit: Audit) -> int:
    """How many of the planned labels are complete."""
    return sum(1 for label in audit_labels.labels(store, audit.id) if label.complete)


def labelling_complete(store: Store, audit: Audit) -> bool:
    """Whether every planned label is in: until then the audit is blind."""
    return labels_in(store, audit) >= audit.planned_labels


def check_blind(store: Store, audit: Audit, what: str, *, unblind: bool) -> bool:
    """Refuse ``what`` (something that names models, runs or another annotator's labels) while labelling is
    under way, unless ``unblind``; True when it goes ahead un-blinded (the caller says so).
    """
    done = labels_in(store, audit)
    if done >= audit.planned_labels:
        return False
    if not unblind:
        raise Incomplete(f"audit {audit.id}: {done} of {plural(audit.planned_labels, 'planned label')} "
                         f"{agree(done, 'are')} in, so {what} would "
                         "un-blind annotators still at work; see 'cfkit audit status' for progress, or pass "
                         "--unblind to un-blind now.")
    return True


def revealed_items(store: Store, audit: Audit, *, unblind: bool = False) -> list[dict[str, Any]]:
    """Every item un-blinded (model, run, the parser's correctness, every label, the final label), plan order.

    Refused with :class:`Incomplete` until every planned label is in, unless ``unblind``.
    """
    check_blind(store, audit, "revealing the items", unblind=unblind)
    by_item: dict[str, dict[str, Any]] = {}
    for label in audit_labels.labels(store, audit.id):
        by_item.setdefault(label.item_id, {})[label.annotator] = label_dict(label)
    final = audit_labels.finals(store, audit.id)
    return [{**blind(item).to_dict(), "model": item.model, "run": item.run_id, "correct": item.parser_correct,
             "labels": by_item.get(item.id, {}), "final": final_dict(final.get(item.id))} for item in audit.items]


@dataclass(frozen=True)
class AnnotatorProgress:
    name: str
    number: int
    labelled: int  # complete labels
    partial: int  # started, cue or link still open
    unsure: int


@dataclass(frozen=True)
class Progress:
    """Where an audit stands."""

    audit: Audit
    annotators: list[AnnotatorProgress]
    open_places: int
    agreed: int
    resolved: int
    pending: int  # items without a final label

    def to_dict(self) -> dict[str, Any]:
        plan = self.audit.plan
        return {"audit": plan.id, "created_at": plan.created_at, "seed": plan.seed, "items": len(self.audit.items),
                "models": len({i.model for i in self.audit.items}),
                "cases": len({i.case_id for i in self.audit.items}), "selection": plan.selection,
                "annotators": [a.__dict__.copy() for a in self.annotators], "open_places": self.open_places,
                "final": {"agreed": self.agreed, "resolved": self.resolved, "pending": self.pending},
                "notes": list(plan.notes)}


def progress(store: Store, audit: Audit) -> Progress:
    every = audit_labels.labels(store, audit.id)
    people = audit_labels.annotators(store, audit.id)
    rows = []
    for person in people:
        own = [label for label in every if label.annotator == person.name]
        rows.append(AnnotatorProgress(person.name, person.number, sum(1 for label in own if label.complete),
                                      sum(1 for label in own if not label.complete),
                                      sum(1 for label in own if label.unsure)))
    final = audit_labels.finals(store, audit.id)
    agreed = sum(1 for f in final.values() if f.basis == "agreed")
    return Progress(audit, rows, max(0, audit.plan.annotators - len(people)), agreed, len(final) - agreed,
                    len(audit.items) - len(final))
