"""What a judge model's stored replies cost, summed: over its audit labels (:mod:`cfkit.store.prelabels`) or its
screening answers (:mod:`cfkit.store.screens`), each of which keeps its replies' cost (schema 8)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class JudgeSpending:
    """What a judge's stored labels or answers cost, summed over those whose cost is kept."""

    labels: int
    replies: int  # the replies behind the labels whose cost is kept
    priced: bool  # some label was asked of a priced judge
    cost_usd: float | None  # of the replies that reported one (None: none did)
    unreported: int  # replies without a known cost on labels of a priced judge (earlier unpriced ones too)
    unpriced: int  # labels asked of the judge while it was not priced
    not_kept: int  # labels stored before cfkit kept what the judge cost (schema 8)
    tokens_in: int | None  # None when some reply did not report its token counts
    tokens_out: int | None


def spending_of(rows: Iterable) -> JudgeSpending:
    """The sum over ``rows``, records with ``replies`` (None: not kept), ``priced``, ``cost_usd``, ``unreported``,
    ``tokens_in`` and ``tokens_out``."""
    rows = list(rows)
    kept = [r for r in rows if r.replies is not None]
    costs = [r.cost_usd for r in kept if r.cost_usd is not None]
    tokens_in = [r.tokens_in for r in kept]
    tokens_out = [r.tokens_out for r in kept]
    return JudgeSpending(
        labels=len(rows), replies=sum(r.replies for r in kept), priced=any(r.priced for r in kept),
        cost_usd=sum(costs) if costs else None, unreported=sum(r.unreported for r in kept if r.priced),
        unpriced=sum(not r.priced for r in kept), not_kept=len(rows) - len(kept),
        tokens_in=None if None in tokens_in else sum(tokens_in),  # type: ignore[arg-type]
        tokens_out=None if None in tokens_out else sum(tokens_out))  # type: ignore[arg-type]
