"""The rule of ``baseline:majority``: a suite's gold labels counted, the majority taken, and the answer it gives.

One rule for the backend that answers by it (:mod:`cfkit.backends.baseline`)
and the report that checks, against the gold labels now, that a stored
majority run still answers as the rule would (:mod:`cfkit.report.majority`):
its answers rest on every gold label of its suite, so a gold changed since
makes them another rule's answers. No pydantic, no backend.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Protocol

#: The model name of the baseline whose answers follow from the suite's gold labels.
MAJORITY_MODEL = "baseline:majority"


class _Listed(Protocol):
    yes_option: str | None


def gold_label(case: _Listed, option_id: str) -> str:
    """"yes"/"no" for a two-option case's option, else the option id itself."""
    if case.yes_option is None:
        return option_id
    return "yes" if option_id == case.yes_option else "no"


def majority_choice(gold_labels: Counter) -> tuple[str | None, str | None]:
    """(majority of "yes"/"no", majority option id of the other cases); ties go to "no" and the lowest id."""
    yes, no = gold_labels.get("yes", 0), gold_labels.get("no", 0)
    label = None if yes == no == 0 else ("yes" if yes > no else "no")
    others = {k: v for k, v in gold_labels.items() if k not in ("yes", "no")}
    other = min(others, key=lambda k: (-others[k], k)) if others else None
    return label, other


def majority_answer(choice: tuple[str | None, str | None], yes_option: str | None,
                    option_ids: Sequence[str]) -> str | None:
    """The option the majority ``choice`` answers for a request listing ``option_ids`` whose Yes option is
    ``yes_option`` (None: a case without Yes/No, answered the majority option id when it is listed); None: none."""
    label, other = choice
    if yes_option is None:
        return other if other in option_ids else None
    if label == "yes":
        return yes_option
    return next((o for o in option_ids if o != yes_option), None)
