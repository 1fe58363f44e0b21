"""Giving a label: one change at a time, each saved at once (the view, ``audit label`` and imports all come here).

"Answer correct" starts as the parser's reading (the reply's answer equals
the gold option) and an annotator may override it: a dispute with the parser
becomes data. ``cue`` and ``link`` stay undecided until given; a label counts
once both are.
"""

from __future__ import annotations

from dataclasses import dataclass

from cfkit.audit.items import Audit, check_annotator
from cfkit.errors import UsageError
from cfkit.store import Store, audit_labels
from cfkit.store.audit_labels import Judgement, Label
from cfkit.store.audits import AuditItem


class _Keep:
    """Leave a field as it is."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP = _Keep()

#: The word forms a yes/no flag may take on the command line and in worksheets.
YES_WORDS = ("yes", "y", "true", "1")
NO_WORDS = ("no", "n", "false", "0")


def parse_flag(value: str, what: str) -> bool:
    """``yes``/``no`` (and y/n, true/false, 1/0) as a bool; anything else is a :class:`UsageError`."""
    word = value.strip().lower()
    if word in YES_WORDS:
        return True
    if word in NO_WORDS:
        return False
    raise UsageError(f"{what} {value!r}: give yes or no.")


@dataclass(frozen=True)
class LabelState:
    """An annotator's label of an item as the view shows it (the pre-fill when nothing is saved yet)."""

    judgement: Judgement
    unsure: bool = False
    note: str | None = None
    saved: bool = False


def state_of(item: AuditItem, label: Label | None) -> LabelState:
    if label is None:
        return LabelState(Judgement(item.parser_correct, None, None))
    return LabelState(label.judgement, label.unsure, label.note, True)


def update_label(store: Store, audit: Audit, item: AuditItem, annotator: str, *, answer_ok: bool | _Keep = KEEP,
                 cue: bool | None | _Keep = KEEP, link: bool | None | _Keep = KEEP, unsure: bool | _Keep = KEEP,
                 note: str | None | _Keep = KEEP) -> Label:
    """Change some fields of ``annotator``'s label of ``item`` (the rest kept) and save it at once."""
    annotator = check_annotator(annotator)
    if item.audit_id != audit.id:
        raise UsageError(f"item {item.id} belongs to audit {item.audit_id}, not {audit.id}.")
    current = state_of(item, audit_labels.labels_by(store, audit.id, annotator).get(item.id))
    old = current.judgement
    judgement = Judgement(old.answer_ok if isinstance(answer_ok, _Keep) else answer_ok,
                          old.cue if isinstance(cue, _Keep) else cue,
                          old.link if isinstance(link, _Keep) else link)
    return audit_labels.save_label(
        store, audit.id, item.id, annotator, judgement,
        unsure=current.unsure if isinstance(unsure, _Keep) else unsure,
        note=current.note if isinstance(note, _Keep) else (note.strip() or None if note else None),
        places=audit.plan.annotators,
    )
