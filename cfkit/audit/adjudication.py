"""Adjudication: the items the annotators disagree on (or one marked unsure) get a final label with a note.

The paper resolved disagreements through discussion; here an adjudicator
records the outcome with a note saying why. The two labels are shown as
"Annotator 1" and "Annotator 2", never by name. An item whose labels agree
(and nobody marked unsure) has its final label already (basis ``agreed``).
"""

from __future__ import annotations

from cfkit.audit.agreement import LabelPair, label_pairs
from cfkit.audit.items import Audit, check_annotator, check_blind
from cfkit.errors import Incomplete, UsageError
from cfkit.store import Store, audit_labels
from cfkit.store.audit_labels import Final, Judgement
from cfkit.store.audits import AuditItem


def needs_resolution(store: Store, audit: Audit) -> list[LabelPair]:
    """Items labelled by both annotators that differ on a criterion or were marked unsure, not yet resolved."""
    final = audit_labels.finals(store, audit.id)
    return [p for p in label_pairs(store, audit) if (p.differs or p.unsure)
            and not (p.item.id in final and final[p.item.id].basis == "resolved")]


def agreed_answer(pair: LabelPair) -> bool | None:
    """The annotators' shared "answer correct" judgement, or None when they differ."""
    first, second = pair.first.judgement.answer_ok, pair.second.judgement.answer_ok
    return first if first == second else None


def resolve_item(store: Store, audit: Audit, item: AuditItem, adjudicator: str, *, cue: bool, link: bool,
                 note: str, answer_ok: bool | None = None, force: bool = False, unblind: bool = False) -> Final:
    """Record the final label of a disputed item; ``answer_ok`` may be left out when the annotators agree on it.

    While labelling is under way this is refused unless ``unblind``: what it
    answers (agreed, or which criterion differs) tells another annotator's label.
    """
    adjudicator = check_annotator(adjudicator)
    pair = next((p for p in label_pairs(store, audit) if p.item.id == item.id), None)
    if pair is None:
        raise Incomplete(f"item {item.id} is not labelled by both annotators yet; it can be resolved once it is "
                         "(see 'cfkit audit status').")
    check_blind(store, audit, "resolving an item", unblind=unblind)
    current = audit_labels.finals(store, audit.id).get(item.id)
    if current is not None and current.basis == "resolved" and not force:
        raise UsageError(f"item {item.id} was resolved by {current.decided_by} on {current.decided_at}; "
                         "pass --force to replace that resolution.")
    if not (pair.differs or pair.unsure) and not force:
        raise UsageError(f"item {item.id}: both annotators gave the same label and neither marked it unsure, so its "
                         "final label is agreed; pass --force to overrule it.")
    if answer_ok is None:
        answer_ok = agreed_answer(pair)
        if answer_ok is None:
            raise UsageError(f"item {item.id}: the annotators differ on whether the answer is correct; "
                             "give --answer-ok yes|no.")
    return audit_labels.resolve(store, audit.id, item.id, adjudicator, Judgement(answer_ok, cue, link), note)
