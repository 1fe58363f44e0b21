"""Notes from the store beside a report: the pairs whose edit a judge model doubts, and runs whose replies an older
parser read."""

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


def older_readings(store: Store, runs: list[Any]) -> list[str]:
    """A note per reported stored run whose replies an older parser version read (``cfkit runs reparse`` reads
    them again): the answers counted are those readings, which the parser in force may read otherwise."""
    from cfkit.parse.result import PARSER_VERSION
    from cfkit.store import runs as runs_table

    notes = []
    for run in runs:
        rows = runs_table.readings_other_than(store, run.id, PARSER_VERSION)
        if rows:
            n = sum(count for _, count in rows)
            versions = ", ".join(str(parser) for parser, _ in rows)
            notes.append(f"{run.suite}: {run.model}'s answers include {n} repl{'y' if n == 1 else 'ies'} of run "
                         f"{run.id} read by an older parser (version {versions}; now {PARSER_VERSION}), which the "
                         f"parser now may read otherwise; 'cfkit runs reparse {run.id}' reads them again and says "
                         "what changed.")
    return notes
