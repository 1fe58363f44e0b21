"""What a judge model's stored replies cost, summed: over its audit labels (:mod:`cfkit.store.prelabels`) or its
screening answers (:mod:`cfkit.store.screens`), each of which keeps its replies' cost (schema 8), and the replies
cut off at the token limit and the attempts abandoned on the way (schema 9)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: The columns of a judge's row that say what its replies cost, added up when a row is stored over another.
COST_FIELDS = ("replies", "priced", "cost_usd", "unreported", "tokens_in", "tokens_out", "cut_off", "abandoned")


@dataclass(frozen=True)
class JudgeSpending:
    """What a judge's stored labels or answers cost, summed over those whose cost is kept."""

    labels: int  # the labels (answers) stored; rows of no answer yet (pending) are not labels, their cost counts
    replies: int  # the replies behind the labels whose cost is kept, cut-off ones included
    priced: bool  # some label was asked of a priced judge
    cost_usd: float | None  # of the replies that reported one (None: none did)
    unreported: int  # replies without a known cost on labels of a priced judge (earlier unpriced ones too)
    unpriced: int  # labels (and rows of no answer yet with replies) asked of the judge while it was not priced
    not_kept: int  # labels stored before cfkit kept what the judge cost (schema 8)
    tokens_in: int | None  # None when some reply did not report its token counts
    tokens_out: int | None
    cut_off: int = 0  # of ``replies``, those cut off at the token limit: paid for, never read
    abandoned: int = 0  # attempts given up after they were sent: a provider may bill them, ``cost_usd`` leaves them out
    abandoned_usd: float | None = None  # what they may have cost at most (None: no priced reply to go by)
    cut_off_not_kept: int = 0  # labels stored before cfkit kept cut-off replies and abandoned attempts (schema 9)


def _plus(a: Any, b: Any) -> Any:
    return None if a is None or b is None else a + b


def _unknown(priced: object, replies: int, unreported: int | None) -> int:
    """How many of ``replies`` have no known cost: those a priced judge's server reported none for, or every one
    when the judge was not priced."""
    return (unreported or 0) if priced else replies


def merged(before: Any, new: dict[str, Any]) -> dict[str, Any]:
    """The cost fields (:data:`COST_FIELDS`) of a row stored over ``before`` (a row, or None) with ``new``'s: the
    earlier replies were paid for too, so both are added up. A priced row over an unpriced one (or the other way)
    keeps the unpriced replies as replies without a known cost (``unreported``), so its cost is never said as
    exact; a count ``before`` did not keep (NULL: stored before cfkit kept it) stays not known."""
    if before is None or before["replies"] is None or new["replies"] is None:
        return {f: new[f] for f in COST_FIELDS}
    priced = bool(before["priced"]) or bool(new["priced"])
    known = [c for c in (before["cost_usd"], new["cost_usd"]) if c is not None]
    return {"replies": before["replies"] + new["replies"], "priced": int(priced),
            "cost_usd": sum(known) if known else None,
            "unreported": (_unknown(before["priced"], before["replies"], before["unreported"])
                           + _unknown(new["priced"], new["replies"], new["unreported"])) if priced else 0,
            **{f: _plus(before[f], new[f]) for f in ("tokens_in", "tokens_out", "cut_off", "abandoned")}}


def spending_of(rows: Iterable) -> JudgeSpending:
    """The sum over ``rows``, records with ``replies`` (None: not kept), ``priced``, ``cost_usd``, ``unreported``,
    ``tokens_in``, ``tokens_out``, ``cut_off`` (None: not kept), ``abandoned`` and ``pending`` (a row of no answer
    yet: its cost counts, it is no label)."""
    rows = list(rows)
    labels = [r for r in rows if not r.pending]
    kept = [r for r in rows if r.replies is not None]
    costs = [r.cost_usd for r in kept if r.cost_usd is not None]
    tokens_in = [r.tokens_in for r in kept]
    tokens_out = [r.tokens_out for r in kept]
    abandoned = sum(r.abandoned or 0 for r in kept)
    # Each abandoned attempt at most about a whole reply: the largest reply cost a row shows (its replies' mean).
    each = [r.cost_usd / r.replies for r in kept if r.cost_usd is not None and r.replies and not r.unreported]
    return JudgeSpending(
        labels=len(labels), replies=sum(r.replies for r in kept), priced=any(r.priced for r in kept),
        cost_usd=sum(costs) if costs else None, unreported=sum(r.unreported for r in kept if r.priced),
        unpriced=sum(not r.priced and bool(not r.pending or r.replies) for r in kept), not_kept=sum(r.replies is None for r in labels),
        tokens_in=None if None in tokens_in else sum(tokens_in),  # type: ignore[arg-type]
        tokens_out=None if None in tokens_out else sum(tokens_out),  # type: ignore[arg-type]
        cut_off=sum(r.cut_off or 0 for r in kept), abandoned=abandoned,
        abandoned_usd=abandoned * max(each) if abandoned and each and max(each) else None,
        cut_off_not_kept=sum(r.replies is not None and r.cut_off is None for r in labels))
