"""Did-you-mean suggestions for ids and names a user typed (``ex01`` → ``EX01``, ``CF1`` → ``CF01``)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from cfkit.visible import invisible_in

#: How alike two spellings must be (difflib's ratio) before one is offered for the other.
CUTOFF = 0.75


def _key(text: str) -> str:
    # Case and zero-padding are the commonest slips: "cf1" and "CF01" are the same id.
    return re.sub(r"\d+", lambda m: str(int(m.group(0))), text.casefold())


def closest(value: str, choices: Iterable[str]) -> str | None:
    """The choice ``value`` most likely meant, or None when none is close or two are equally close."""
    options = [c for c in dict.fromkeys(choices) if c != value]
    same = [c for c in options if _key(c) == _key(value)]
    if len(same) == 1:
        return same[0]
    import difflib  # here: only a refusal suggests, and most commands refuse nothing

    scored = sorted(((difflib.SequenceMatcher(None, _key(value), _key(c)).ratio(), c) for c in options), reverse=True)
    if not scored or scored[0][0] < CUTOFF or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return None
    return scored[0][1]


def did_you_mean(value: str, choices: Iterable[str]) -> str:
    """`` Did you mean 'EX01'?`` for an error message, or an empty string when nothing is clearly meant.

    A value holding characters nobody can see (a zero-width space pasted with an id) is told so: the id
    would otherwise look exactly like the one it fails to match.
    """
    hidden = invisible_in(value)
    if hidden:
        what = "an invisible character" if len(hidden) == 1 else "invisible characters"
        return f" It holds {what} ({', '.join(hidden)})."
    match = closest(value, choices)
    return f" Did you mean '{match}'?" if match is not None else ""
