"""Agreement of the two annotators before adjudication, per criterion and for the composite EGA judgement.

An item counts when both annotators (places 1 and 2) have a complete label
of it. Criteria: ``answer`` (the response selected the correct answer),
``cue`` (it identified the decisive visible cue or a warranted equivalent),
``link`` (it linked that cue to the stated use) and ``ega`` (all three). Each
gets raw agreement, Cohen's κ and Gwet's AC1 with bootstrap intervals from
:func:`cfkit.stats.agreement`, over one shared set of resamples of the items.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cfkit import stats
from cfkit.audit.items import Audit, label_dict
from cfkit.errors import Incomplete
from cfkit.plural import agree, plural
from cfkit.store import Store, audit_labels
from cfkit.store.audit_labels import Judgement, Label
from cfkit.store.audits import AuditItem
from cfkit.vocabulary import AUDIT_CRITERIA


def criterion(judgement: Judgement, name: str) -> bool:
    """One criterion of a complete judgement."""
    if name == "ega":
        return judgement.ega
    return bool({"answer": judgement.answer_ok, "cue": judgement.cue, "link": judgement.link}[name])


@dataclass(frozen=True)
class LabelPair:
    """The complete labels of one item by annotator 1 and annotator 2."""

    item: AuditItem
    first: Label
    second: Label

    @property
    def differs(self) -> tuple[str, ...]:
        """The criteria on which the two labels differ (``ega`` included when it differs)."""
        return tuple(c for c in AUDIT_CRITERIA
                     if criterion(self.first.judgement, c) != criterion(self.second.judgement, c))

    @property
    def unsure(self) -> bool:
        return self.first.unsure or self.second.unsure

    def to_dict(self) -> dict[str, Any]:
        """The pair as "Annotator 1/2", never by name."""
        return {"item": self.item.id, "case": self.item.case_id, "differs": list(self.differs),
                "unsure": self.unsure, "annotator_1": _anonymous(self.first), "annotator_2": _anonymous(self.second)}


def _anonymous(label: Label) -> dict[str, Any]:
    shown = label_dict(label) or {}
    return {k: shown[k] for k in ("answer_ok", "cue", "link", "ega", "unsure", "note")}


def label_pairs(store: Store, audit: Audit) -> list[LabelPair]:
    """Items both annotators have labelled completely, in plan order."""
    people = {a.number: a.name for a in audit_labels.annotators(store, audit.id)}
    if 1 not in people or 2 not in people:
        return []
    first = audit_labels.labels_by(store, audit.id, people[1])
    second = audit_labels.labels_by(store, audit.id, people[2])
    return [LabelPair(item, first[item.id], second[item.id]) for item in audit.items
            if item.id in first and item.id in second and first[item.id].complete and second[item.id].complete]


def pair_agreement(pairs: Sequence[LabelPair], name: str, *, resamples: stats.Resamples) -> stats.Agreement:
    """Agreement on one criterion over ``pairs`` (``resamples`` drawn over exactly these pairs)."""
    return stats.agreement([criterion(p.first.judgement, name) for p in pairs],
                           [criterion(p.second.judgement, name) for p in pairs], resamples=resamples)


def agreement_dict(result: stats.Agreement) -> dict[str, Any]:
    return {"n": result.n, "raw": result.raw, "kappa": result.kappa,
            "kappa_ci": None if result.kappa_ci is None else result.kappa_ci.as_list(),
            "ac1": result.ac1, "ac1_ci": result.ac1_ci.as_list(), "table": result.table.as_list(),
            "kappa_undefined": result.kappa_undefined}


@dataclass(frozen=True)
class AuditAgreement:
    """Agreement before adjudication, and the items the annotators disagree on or want discussed."""

    audit: Audit
    pairs: list[LabelPair]
    criteria: dict[str, stats.Agreement]

    @property
    def disagreements(self) -> list[LabelPair]:
        return [p for p in self.pairs if p.differs]

    @property
    def unsure(self) -> list[LabelPair]:
        """Items on which the annotators agree but at least one marked unsure."""
        return [p for p in self.pairs if p.unsure and not p.differs]

    def to_dict(self) -> dict[str, Any]:
        return {"audit": self.audit.id, "items": len(self.audit.items), "labelled_by_both": len(self.pairs),
                "criteria": {name: agreement_dict(a) for name, a in self.criteria.items()},
                "disagreements": [p.to_dict() for p in self.disagreements],
                "unsure": [p.to_dict() for p in self.unsure]}


def audit_agreement(store: Store, audit: Audit, *, unblind: bool = False, n_resamples: int = stats.N_RESAMPLES,
                    seed: int | None = stats.SEED) -> AuditAgreement:
    """Agreement over every item both annotators labelled.

    Before every item is, the result (per-item labels and notes of both
    annotators) would un-blind whoever is still labelling: refused unless
    ``unblind``.
    """
    pairs = label_pairs(store, audit)
    if not pairs:
        raise Incomplete(f"audit {audit.id}: no item is labelled by both annotators yet; see 'cfkit audit status'.")
    if len(pairs) < len(audit.items) and not unblind:
        raise Incomplete(f"audit {audit.id}: {len(pairs)} of {plural(len(audit.items), 'item')} "
                         f"{agree(len(pairs), 'are')} labelled by both "
                         "annotators, and the agreement shows each one's labels and notes; see 'cfkit audit status' "
                         "for progress, or pass --unblind to un-blind now.")
    resamples = stats.Resamples(len(pairs), n_resamples=n_resamples, seed=seed)
    return AuditAgreement(audit, pairs, {c: pair_agreement(pairs, c, resamples=resamples) for c in AUDIT_CRITERIA})
