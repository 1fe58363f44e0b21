"""The swap suite: every two-option case asked in both option orders (the position-bias probe).

In ContextCanvas the Yes option is always listed first, so a model that
prefers the first listed option and one that prefers "Yes" answer alike. The
swap suite tells them apart by asking each case twice, from the same
templates and with the same image:

``original-order``  the options as the cases file lists them (the very request
                    the contextcanvas suite sends, so a cached reply is reused);
``swapped-order``   the two option *texts* exchanged between the ids (``A. No``,
                    ``B. Yes``); the gold option and ``yes_option`` follow their
                    texts, so they name the other id.

An answer is always the option id as listed in the prompt it answers; the
report turns it back into the option's text (:func:`answer_text`), so a
model that follows content picks the same text in both orders and one that
follows position picks whichever text comes first.

A case is asked when it has exactly two options with different texts, a
``yes_option`` and one image. The others are skipped and counted, with why:
the paired-image case, three-option cases (whose rotations would need
measures of their own; they are not asked), a two-option case without a
``yes_option`` (it has no Yes rate), and two options with the same text
(exchanging them changes nothing).
"""

from __future__ import annotations

import dataclasses

from cfkit.cases import Case, CaseSet, Option
from cfkit.plural import plural
from cfkit.vocabulary import ORIGINAL_ORDER, SWAP_CONDITIONS, SWAPPED_ORDER

__all__ = ["ORIGINAL_ORDER", "SWAPPED_ORDER", "SWAP_CONDITIONS", "answer_text", "as_listed", "swap_case_ids",
           "swap_problem", "swapped"]


def swap_problem(case: Case) -> str | None:
    """Why the swap suite does not ask ``case`` (a phrase that follows "the case has"), or None when it does."""
    if len(case.options) != 2:
        return (f"{plural(len(case.options), 'option')}; the swap suite asks two-option cases only "
                "(three-option cases are not rotated)")
    if len(case.images) != 1:
        return f"{plural(len(case.images), 'image')} (the paired-image case); the swap suite asks single-image cases"
    if case.yes_option is None:
        return "no yes_option, so no Yes rate in either order; add yes_option to the case to ask it"
    if case.options[0].text == case.options[1].text:
        return f"two options that both read {case.options[0].text!r}; exchanging them would change nothing"
    return None


def swap_case_ids(cases: CaseSet) -> list[str]:
    """The cases the swap suite asks, in file order."""
    return [case.id for case in cases if swap_problem(case) is None]


def swapped(case: Case) -> Case:
    """``case`` with its two option texts exchanged between the ids; gold and ``yes_option`` follow their texts.

    The option ids stay in their order (A, then B), so only the option lines of
    the prompt change. Raises ValueError for a case :func:`swap_problem` refuses.
    """
    problem = swap_problem(case)
    if problem is not None:
        raise ValueError(f"case {case.id} cannot be swapped: {problem}")
    first, second = case.options
    other = {first.id: second.id, second.id: first.id}
    options = [Option(id=first.id, text=second.text), Option(id=second.id, text=first.text)]
    return dataclasses.replace(case, options=options, gold=other[case.gold],
                               yes_option=other[case.yes_option] if case.yes_option is not None else None)


def as_listed(case: Case, condition: str) -> Case:
    """The case as a prompt of ``condition`` (original-order or swapped-order) lists it."""
    if condition == ORIGINAL_ORDER:
        return case
    if condition == SWAPPED_ORDER:
        return swapped(case)
    raise ValueError(f"condition {condition!r} is not one of {', '.join(SWAP_CONDITIONS)}")


def answer_text(case: Case, condition: str, answer: str | None) -> str | None:
    """The text of the option ``answer`` names in the prompt of ``condition``; None for no answer.

    ``case`` is the case as the cases file lists it. Raises ValueError for an
    id that is not one of the case's options.
    """
    if answer is None:
        return None
    listed = as_listed(case, condition)
    for option in listed.options:
        if option.id == answer:
            return option.text
    raise ValueError(f"answer {answer!r} is not an option of case {case.id} ({', '.join(case.option_ids)})")
