"""Counts in messages: ``1 pair``, ``2 pairs``, never ``1 pairs``."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``count`` and ``noun`` in the right number; ``many`` when the plural is not ``noun + 's'``."""
    return f"{count} {noun if count == 1 else (many or noun + 's')}"
