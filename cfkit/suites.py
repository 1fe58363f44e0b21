"""Suite and condition names: the vocabulary of the predictions contract.

Every module that names a suite or a condition takes it from here (see
docs/formats.md, "Predictions").
"""

from __future__ import annotations

from typing import Literal

Suite = Literal["contextcanvas", "counterfactual", "modality"]
Condition = Literal["image", "original", "edit", "text", "neutral", "evidence"]

#: The conditions each suite asks under, in report order.
SUITE_CONDITIONS: dict[str, tuple[str, ...]] = {
    "contextcanvas": ("image",),
    "counterfactual": ("original", "edit"),
    "modality": ("text", "neutral", "evidence", "image"),
}

SUITES: tuple[str, ...] = tuple(SUITE_CONDITIONS)

#: The modality conditions, in the order the paper's Table S9 lists them.
MODALITY_CONDITIONS: tuple[str, ...] = SUITE_CONDITIONS["modality"]

#: Every condition in report order (a condition shared by two suites appears once).
CONDITION_ORDER: tuple[str, ...] = tuple(dict.fromkeys(c for cs in SUITE_CONDITIONS.values() for c in cs))


def condition_rank(condition: str) -> tuple[int, str]:
    """A sort key putting conditions in report order, unknown ones last."""
    order = CONDITION_ORDER
    return (order.index(condition) if condition in order else len(order), condition)
