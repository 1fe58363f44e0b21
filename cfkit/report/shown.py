"""A note from the store on what the reported models were shown: the pairs whose edit a judge model doubts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cfkit.store import Store
    from cfkit.workspace import Workspace


def store_notes(ws: Workspace, report: Any, source: Any) -> list[str]:
    """The judge's doubts about the edits of the pairs a report built from ``source``
    (:class:`~cfkit.report.sources.Sources`) counts, when it has a counterfactual section."""
    if not report.counterfactual:
        return []
    from cfkit.store import Store

    with Store(ws.db_path) as store:
        return judge_doubts(store, {p.pair for p in source.preds if p.pair})


def judge_doubts(store: Store, pairs: set[str]) -> list[str]:
    """A note naming the reported pairs whose selected edit a judge model doubts (``cfkit edits screen``)."""
    from cfkit.store import edits, screens

    shown = {pair: e.id for pair in sorted(pairs) if (e := edits.selected(store, pair)) is not None}
    answers = [a for a in screens.answers(store, list(shown.values())) if a.doubts]
    if not answers:
        return []
    doubted = sorted({a.spec_id for a in answers})
    judges = ", ".join(sorted({a.judge for a in answers}))
    return [f"counterfactual: a judge model ({judges}) doubts the edit of {len(doubted)} pair"
            f"{'' if len(doubted) == 1 else 's'}: {', '.join(doubted)}; 'cfkit edits list' and 'cfkit review' "
            "show them (a flag for a person, not a verdict)"]
