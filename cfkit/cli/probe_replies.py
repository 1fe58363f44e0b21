"""The lines a run ends with on its replies that are not answers: cut off at the token limit, mostly empty, no
option read, or from servers that named different models; and a note when every reply named one model plainly
not the one asked (:mod:`cfkit.servers`).

``probe run``, ``probe collect`` and ``study run`` end with them; ``runs show`` and ``runs import`` say the
same line. A run whose replies were read from a file made elsewhere (a replay, an imported run) is told so: its
replies were cut off when they were made, so only a new file mends them (:func:`cfkit.parse.trouble.reply_trouble`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConditionCounts", "breakdown", "reply_lines", "stored_trouble"]


def reply_lines(ws, summary, again: str | None = None) -> tuple[list[str], list[str]]:
    """The lines on a run's replies: those only said (most without a valid answer: the likely cause and the
    command that shows them; several server builds), and those that make the run not clean, so that the command
    exits 1 (replies cut off or mostly empty; replies from servers that named different models: cfkit.servers).
    ``again``: what raises the token limit and asks again, where not 'probe run' (a study's runs)."""
    from cfkit.parse.trouble import not_clean, reply_trouble
    from cfkit.servers import asked_name, servers_of

    from cfkit.store import open_store
    from cfkit.store.runs import get_run, servers

    command = f"cfkit -w {ws.root} runs unparsed {summary.run_id}" if summary.invalid else ""
    with open_store(ws.db_path) as store:
        run = get_run(store, summary.run_id)
        answered_by = servers_of(servers(store, summary.run_id))
    replies = run.n_done if run is not None else 0  # the replies that came back
    what = f"{summary.model} {summary.suite}"
    line = reply_trouble(what, replies, summary.invalid, summary.empty, summary.truncated, summary.max_tokens, command,
                         replayed=run is not None and run.replayed, **({"again": again} if again else {}))
    said, failing = answered_by.lines(what, summary.run_id, asked_name(summary.model, run is not None and run.replayed)), []
    if answered_by.mixed_models:
        failing.append(said.pop(0))
    if line is not None:
        (failing if not_clean(summary.truncated, summary.empty, replies) else said).insert(0, line)
    return said, failing


def stored_trouble(ws, store, record, counts: tuple[int, int, int] | None = None) -> str | None:
    """The line :func:`reply_lines` starts with, for a stored run ``record`` (``runs show``); None when its
    replies are fine. ``counts``: the run's :func:`~cfkit.store.runs.count_unanswered`, when the caller has them."""
    from cfkit.parse.trouble import reply_trouble
    from cfkit.report.commands import made_by
    from cfkit.store.runs import count_unanswered

    invalid, truncated, empty = counts or count_unanswered(store, record.id)
    command = f"cfkit -w {ws.root} runs unparsed {record.id}" if invalid else ""
    return reply_trouble(f"{record.model} {record.suite}", record.n_done, invalid, empty, truncated,
                         record.made_with_max_tokens, command, made_with=record.made_with_max_tokens,
                         replayed=record.replayed, again=made_by(record, ws.root).raise_limit)


@dataclass(frozen=True)
class ConditionCounts:
    """Replies of one condition of a run."""

    condition: str
    replies: int
    answered: int
    invalid: int  # no valid answer read (parse errors, refusals)
    transport: int  # no reply yet
    answers: dict[str, int]  # option id -> count
    truncated: int = 0  # replies that stopped at the token limit


def breakdown(store, run_id: str) -> list[ConditionCounts]:
    """Per condition: how many replies, answered, invalid, failed, and the answer distribution."""
    from collections import Counter

    from cfkit.store.runs import replies
    from cfkit.vocabulary import condition_rank

    by_condition: dict[str, list] = {}
    for r in replies(store, run_id):
        by_condition.setdefault(r.condition, []).append(r)
    result = []
    for condition in sorted(by_condition, key=condition_rank):
        group = by_condition[condition]
        answers = Counter(r.answer for r in group if r.answer is not None)
        result.append(ConditionCounts(
            condition, len(group), sum(answers.values()),
            sum(r.answer is None and r.error != "transport" for r in group), sum(r.error == "transport" for r in group),
            dict(sorted(answers.items())), sum(r.truncated for r in group)))
    return result
