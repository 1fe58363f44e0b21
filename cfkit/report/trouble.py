"""Replies that are not answers: per model and suite, how many came back empty, cut off at the token limit, or
with no option the parser could read, and one sentence naming the likely cause.

A broken chat template reads as a model that is always wrong; a token limit set
too low, as one that cannot decide. Both leave the figures looking clean, so
the report says so, once per model and suite (or per modality condition when
only some conditions are affected), whenever replies were cut off at the token
limit or most replies have no valid option. Units with no reply at all (failed
requests, runs that stopped) are counted under ``missing`` instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import Any

from cfkit.predictions import Prediction
from cfkit.parse.trouble import RAISE_LIMIT, reply_trouble


@dataclass(frozen=True)
class ReplyTrouble:
    """Replies of one model on one suite (one condition of it, or all: ``condition`` None) that are not answers."""

    model: str
    suite: str
    condition: str | None
    replies: int  # replies that came back (failed requests left out)
    invalid: int  # of them, with no valid option
    empty: int  # of them, with no text at all
    truncated: int  # of them, cut off at the token limit
    run: str | None  # the stored run they belong to; None for a predictions file
    message: str  # the one line the report prints

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _counts(preds: Iterable[Prediction]) -> dict[str, list[int]]:
    """By condition: [replies, with no valid option, empty, cut off] among the predictions that came back (a
    transport failure is no reply; its condition is still listed, with zeros). Conditions in the order they first
    occur."""
    preds = list(preds)
    # The usual replies (no error: each is None or a word; none cut off): counted per condition in C, and those
    # without an answer, looked at only when there are some.
    if not any(map(_ERROR, preds)) and not any(map(_TRUNCATED, preds)):
        conditions = list(map(_CONDITION, preds))
        counts = {condition: [k, 0, 0, 0] for condition, k in Counter(conditions).items()}
        unanswered = list(map(is_, map(_ANSWER, preds), repeat(None)))
        if True in unanswered:
            for condition, k in Counter(compress(conditions, unanswered)).items():
                counts[condition][1] = k
            for p in compress(preds, unanswered):  # empty: no answer and no text
                if not (p.raw or "").strip():
                    counts[p.condition][2] += 1
        return counts
    # Counted by their few distinct (condition, error, answer, cut off) in C, not one reply at a time.
    kinds = Counter(map(_KIND, preds))
    counts = {condition: [0, 0, 0, 0] for condition, _, _, _ in kinds}
    for (condition, error, answer, cut), k in kinds.items():
        if error != "transport":
            row = counts[condition]
            row[0] += k
            row[1] += k if answer is None else 0
            row[3] += k if cut else 0
    for p in preds:  # empty: no answer and no text (not refused, not failed)
        if p.answer is None and p.error != "transport" and p.error != "refused" and not (p.raw or "").strip():
            counts[p.condition][2] += 1
    return counts


_KIND = attrgetter("condition", "error", "answer", "truncated")
_CONDITION, _ANSWER, _ERROR, _TRUNCATED = (attrgetter(name) for name in ("condition", "answer", "error", "truncated"))


def reply_troubles(answers: Mapping[str, Mapping[str, Mapping[Any, Prediction]]],
                   runs: Mapping[tuple[str, str], Any], max_tokens: Mapping[tuple[str, str], int | None],
                   again: str | Callable[[Any], str] = RAISE_LIMIT) -> list[ReplyTrouble]:
    """One record per model and suite whose replies were cut off or are mostly not answers.

    ``answers`` is suite → model → predictions; ``runs`` (model, suite) → the
    run (with an ``id``) they came from; ``max_tokens`` the token limit the replies were made with, where known
    (:attr:`~cfkit.report.sources.RunInfo.max_tokens`: never a replaying run's own).
    ``again``: what raises the limit and asks again, or what says it of each run (its study's commands for a run a
    study sent: :meth:`cfkit.report.sources.Sources.raise_limit`).
    Replies of a predictions file (no run) or of a replayed or imported run
    were made elsewhere: their line says to raise the limit there.
    When a suite's replies as a whole are fine, each of its conditions is
    looked at alone (a modality model that answers every condition but one).
    """
    found = []
    for suite, models in answers.items():
        for model, got in models.items():
            run = runs.get((model, suite))
            run_id = run.id if run is not None else None
            command = f"cfkit runs unparsed {run_id}" if run_id else ""
            limit = max_tokens.get((model, suite))
            by_condition = _counts(got.values())  # one pass over the replies; the suite's counts are the sums
            whole = [sum(column) for column in zip(*by_condition.values())] or [0, 0, 0, 0]
            groups: list[tuple[str | None, list[int]]] = [(None, whole)]
            if len(by_condition) > 1:
                groups += [(c, by_condition[c]) for c in sorted(by_condition)]
            for condition, (n, invalid, empty, truncated) in groups:
                what = f"{model} {suite}" + (f" ({condition})" if condition else "")
                line = reply_trouble(what, n, invalid, empty, truncated, limit, command if invalid else "",
                                     replayed=run is None or bool(getattr(run, "replayed", False)),
                                     again=again(run) if callable(again) else again,
                                     made_with=limit)
                if line:
                    found.append(ReplyTrouble(model, suite, condition, n, invalid, empty, truncated, run_id, line))
                    if condition is None:
                        break  # the whole suite's line stands for its conditions
    return found
