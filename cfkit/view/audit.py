"""The audits a view may show: only complete ones (every item has its final label).

An audit still being labelled shows only how far it is, never a model, a run
or an annotator's label: the blinding rules of ``cfkit audit`` hold in the view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cfkit.report.grounding import EgaSection
    from cfkit.workspace import Workspace


@dataclass(frozen=True)
class PendingAudit:
    """An audit not yet complete: its id and how many items still lack a final label (nothing else)."""

    id: str
    items: int
    pending: int


def completed_audits(ws: Workspace) -> tuple[list[EgaSection], list[PendingAudit]]:
    """The EGA section of every complete audit (with what changed in its inputs since planning), and the bare
    progress of each audit still open."""
    if not ws.db_path.is_file():
        return [], []
    from cfkit.audit.items import load_audit, progress
    from cfkit.report.grounding import ega_section
    from cfkit.store import open_store
    from cfkit.store.audits import list_plans

    done, pending = [], []
    with open_store(ws.db_path) as store:
        for plan in list_plans(store):
            audit = load_audit(store, plan.id)
            state = progress(store, audit)
            if state.pending:
                pending.append(PendingAudit(plan.id, len(audit.items), state.pending))
            else:
                done.append(ega_section(store, plan.id, ws=ws))  # as 'cfkit report --ega' makes it
    return done, pending
