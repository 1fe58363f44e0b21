"""``cfkit report --reviewed-only``: the modality rows over the subset cases whose captions a person wrote or
reviewed.

The Neutral and Evidence conditions show a case's caption. Where a caption is
still a model's draft no person has reviewed, those answers rest on a text
nobody checked; this view leaves such cases out of the modality rows (the
caption files as they are now decide, read as the report compares them,
:func:`cfkit.caption_digests.caption_now`), says which in one note, and reads a
model's ``probe run --reviewed-only`` run as a run of the whole suite where
it has no full run (:func:`cfkit.report.sources.choose_runs`). A full run
answers the reviewed cases too, so no run need be made for this view.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from cfkit.plural import plural
from cfkit.report.gold import Gold
from cfkit.workspace import Workspace

if TYPE_CHECKING:
    from cfkit.store.runs import RunRecord


def reviewed_gold(ws: Workspace, gold: Gold) -> Gold:
    """``gold`` with the modality cases whose caption is an unreviewed draft now left out (named in
    ``unreviewed_left_out``). A caption missing or unreadable stays in: its answers are stale, and said so."""
    from cfkit.caption_digests import caption_now

    if gold.modality_cases is None:
        return gold
    drafts = [c for c in gold.modality_cases if caption_now(ws.captions_dir / f"{c}.yaml").unreviewed_draft]
    kept = [c for c in gold.modality_cases if c not in set(drafts)]
    return dataclasses.replace(gold, modality_cases=kept, unreviewed_left_out=tuple(drafts))


def reviewed_note(gold: Gold) -> list[str]:
    """One note: how many subset cases ``--reviewed-only`` left out of the modality rows, and which."""
    left = gold.unreviewed_left_out
    if not left:
        return []
    shown = ", ".join(left[:10]) + (f" and {len(left) - 10} more" if len(left) > 10 else "")
    return [f"modality: --reviewed-only: the rows are over the {plural(len(gold.modality_cases or ()), 'subset case')} "
            f"whose captions a person wrote or reviewed; {plural(len(left), 'case')} whose caption is still a "
            f"model's draft no person has reviewed {'is' if len(left) == 1 else 'are'} left out ({shown}): read "
            "each and set 'reviewed: true' to count it."]


def partial_run(record: RunRecord, reviewed_only: bool) -> bool:
    """Whether ``record`` asked only part of what the report counts: a subset run, except, in the ``--reviewed-only``
    view (this module), a modality run that left out only the cases with unreviewed captions."""
    return record.subset and not (reviewed_only and record.suite == "modality" and reviewed_only_run(record))


def reviewed_only_run(record: RunRecord) -> bool:
    """A modality run made with ``--reviewed-only`` alone (no ``--limit``, no ``--cases``)."""
    chosen = record.selection
    return bool(chosen.get("reviewed_only")) and not chosen.get("limit") and not chosen.get("cases")
