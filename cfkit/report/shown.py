"""Notes from the store beside a report: the pairs whose edit a judge model doubts, and runs (stored, or read from
export files) whose replies an older parser read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cfkit.plural import agree, plural

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

    return [older_note(run, rows) for run in runs
            if (rows := runs_table.readings_other_than(store, run.id, PARSER_VERSION))]


def file_older_readings(file_runs: list[Any]) -> list[str]:
    """:func:`older_readings` for runs read from ``cfkit runs export`` files
    (:class:`~cfkit.report.sources.FileRun`), whose rows carry the parser version of each reading."""
    from cfkit.parse.result import PARSER_VERSION

    return [older_note(run.info, rows, run.info.imported) for run in file_runs
            if (rows := [(parser, n) for parser, n in run.parsers if parser != PARSER_VERSION])]


def older_note(run: Any, rows: list[tuple[Any, int]], source: str | None = None) -> str:
    """The note on ``run``'s replies that parsers other than the one in force read (``rows``: each version and
    how many it read); ``source``: the export file the run was read from, which has to be imported to read them
    again."""
    from cfkit.parse.result import PARSER_VERSION

    n = sum(count for _, count in rows)
    versions = ", ".join(str(parser) for parser, _ in rows)
    them = agree(n, "them")
    again = (f"'cfkit runs reparse {run.id}' reads {them} again and says what changed." if source is None else
             f"'cfkit runs import {source}' then 'cfkit runs reparse {run.id}' read {them} again and say what "
             "changed.")
    return (f"{run.suite}: {run.model}'s answers include {plural(n, 'reply', 'replies')} of run {run.id} read by "
            f"an older parser (version {versions}; now {PARSER_VERSION}), which the parser now may read otherwise; "
            + again)
