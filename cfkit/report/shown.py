"""Notes from the store on what the reported models were shown: the same image of each case, and edits a judge
doubts.

Every stored reply records the SHA-256 of the image file it was about. A case
image replaced between two models' runs (a file re-exported, a copy from
another machine) leaves the models answering different pictures under the same
case id: their rows and paired comparisons would set them side by side as if
they had seen one input. The report says so in one line, naming the cases and
which models saw the file as it is now.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cfkit.cases import CaseSet

if TYPE_CHECKING:
    from cfkit.store import Store
    from cfkit.workspace import Workspace

#: Cases named in the line (the JSON's notes name as many; the rest are counted).
NAMED = 3


def store_notes(ws: Workspace, report: Any, source: Any, cases: CaseSet, *, from_store: bool) -> list[str]:
    """The notes of this module for a report built from ``source`` (:class:`~cfkit.report.sources.Sources`): the
    images (``from_store``: the report's rows come from stored runs), then the judge's doubts."""
    from cfkit.store import Store

    notes = []
    with Store(ws.db_path) as store:
        if from_store:
            notes += image_notes(store, ((i.id, i.model, i.suite) for i in source.runs.values()), cases)
        if report.counterfactual:
            notes += judge_doubts(store, {p.pair for p in source.preds if p.pair})
    return notes


def image_notes(store: Store, run_models: Iterable[tuple[str, str, str]], cases: CaseSet) -> list[str]:
    """A note when the replies of the runs ``run_models`` ((run id, model shown, suite)) record more than one
    image digest for a case; empty when every case was shown as one file. A model is named with the suite of
    the run where its own runs saw the case as different files."""
    from cfkit.store import runs

    model_of = {run_id: (model, suite) for run_id, model, suite in run_models}
    rows = runs.images_differing(store, sorted(model_of))
    if not rows:
        return []
    by_case: dict[str, list[tuple[str, str, str]]] = {}  # case -> (digest, model, suite)
    for case_id, run_id, digest in rows:
        by_case.setdefault(case_id, []).append((digest, *model_of[run_id]))
    seen: dict[str, dict[str, set[str]]] = {}  # case -> digest -> models (with the suite where needed)
    for case_id, found in by_case.items():
        digests_of: dict[str, set[str]] = {}
        for digest, model, _ in found:
            digests_of.setdefault(model, set()).add(digest)
        for digest, model, suite in found:
            shown = model if len(digests_of[model]) == 1 else f"{model} ({suite})"
            seen.setdefault(case_id, {}).setdefault(digest, set()).add(shown)
    named = []
    for case_id in sorted(seen)[:NAMED]:
        now = _digest_now(cases, case_id)
        parts = [f"{', '.join(sorted(models))} saw {digest[:12]}…{' (the file now)' if digest == now else ''}"
                 for digest, models in sorted(seen[case_id].items(), key=lambda kv: sorted(kv[1]))]
        named.append(f"{case_id} ({'; '.join(parts)})")
    more = len(seen) - len(named)
    n = len(seen)
    return [f"{n} case{'' if n == 1 else 's'} {'was' if n == 1 else 'were'} shown as different image files to "
            f"different models (the file changed between their runs), so they are not compared on the same input "
            f"there: {'; '.join(named)}{f'; and {more} more' if more else ''}. Run again the models that saw another "
            "file than the one now ('cfkit probe run'; the response cache answers every request that did not change)."]


def _digest_now(cases: CaseSet, case_id: str) -> str | None:
    """The SHA-256 of the case's image as the workspace holds it now (None: not one readable image)."""
    if case_id not in cases:
        return None
    paths = cases.image_paths(cases.get(case_id))
    if len(paths) != 1:
        return None
    try:
        return hashlib.sha256(paths[0].read_bytes()).hexdigest()
    except OSError:
        return None


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
