"""What the contact sheet shows of a pair, shared by its HTML (:mod:`cfkit.review.sheet`) and PNG
(:mod:`cfkit.review.sheet_png`) renderers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: Longest side of each picture on the sheet, in pixels.
THUMB = 256
#: How an answer box reads: agrees with the image's gold label, disagrees (a null answer too), is about another
#: edit than the one shown, or was never given (the model has no prediction for that image).
STATES = ("ok", "bad", "stale", "absent")


@dataclass(frozen=True)
class ModelAnswer:
    model: str
    before: str | None  # the option text answered on the original (None: no valid answer)
    after: str | None
    before_ok: bool
    after_ok: bool
    after_edit_id: int | None = None  # the edit the 'after' answer was given on, when recorded
    stale: bool = False  # the 'after' answer is about another edit than the one the sheet shows
    before_given: bool = True  # a prediction exists for the original (False: the model was not asked it)
    after_given: bool = True

    @property
    def before_state(self) -> str:
        return "absent" if not self.before_given else "ok" if self.before_ok else "bad"

    @property
    def after_state(self) -> str:
        if not self.after_given:
            return "absent"
        return "stale" if self.stale else "ok" if self.after_ok else "bad"


@dataclass(frozen=True)
class SheetPair:
    spec_id: str
    title: str
    case_id: str
    question: str
    cue: str
    replacement: str
    gold_before: str  # "No" / "Yes", from the spec's labels
    gold_after: str
    edit_id: int | None
    pictures: dict[str, np.ndarray]  # original / edit / difference thumbnails (uint8 RGB); empty without an edit
    verdict: str | None
    decision: str | None
    note: str | None
    answers: list[ModelAnswer] = field(default_factory=list)
    problem: str | None = None  # why the pair could not be drawn
    selected: bool = False  # the edit shown is the spec's selected edit (else no edit is selected: the newest is shown)
    judge: str | None = None  # which judge models doubt the edit shown, on which questions ('cfkit edits screen')

    @property
    def edit_label(self) -> str:
        """``edit #12 (selected)`` / ``edit #14 (none selected; the newest)`` / ``no edit``."""
        if self.edit_id is None:
            return "no edit"
        return f"edit #{self.edit_id} " + ("(selected)" if self.selected else "(none selected; the newest)")


def answer_text(a: ModelAnswer, side: str) -> str:
    """What a box says: the answer, 'no valid answer', 'not asked', or the stale answer and its edit."""
    given, value = (a.before_given, a.before) if side == "before" else (a.after_given, a.after)
    if not given:
        return "not asked"
    text = value or "no valid answer"
    if side == "after" and a.stale:
        return f"{text} (stale: about edit #{a.after_edit_id}, not this one)"
    return text
