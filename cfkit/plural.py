"""Counts in messages: ``1 pair``, ``2 pairs``, never ``1 pairs``; and the verb after a count, and the pronoun for what
it counts: ``1 of 3 has``, ``1 draft failed; retry it``."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None, *, spec: str = "") -> str:
    """``count`` and ``noun`` in the right number; ``many`` when the plural is not ``noun + 's'``; ``spec`` formats
    the count (``spec=","``: ``12,345 bytes``)."""
    return f"{count:{spec}} {noun if count == 1 else (many or noun + 's')}"


def plural_list(counts: list[int], noun: str, many: str | None = None) -> str:
    """Several counts of one noun, the noun in the number of the last: ``1 pair``, ``3, 4 pairs``."""
    return "".join(f"{c}, " for c in counts[:-1]) + plural(counts[-1], noun, many)


#: The plural verbs messages write after a count, and the pronouns that stand for what it counts, and their form
#: for one.
_ONE = {"have": "has", "are": "is", "were": "was", "do": "does", "use": "uses",
        "them": "it", "they": "it", "their": "its"}


def agree(count: int, word: str) -> str:
    """Plural verb (have, are, were, do, use) or pronoun (them, they, their) ``word`` agreeing with a count of
    ``count``: ``1 of 3 replies has``, ``2 of 3 replies have``; ``1 draft failed; retry it``, ``2 …; retry them``."""
    return _ONE[word] if count == 1 else word
