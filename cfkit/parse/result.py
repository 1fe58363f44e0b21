"""What reading one reply returns, and the names a reading uses.

The rule and error names are part of the predictions format: a stored reply
records ``rule`` as its ``parse`` value and :data:`PARSER_VERSION` beside it, so
replies read by an older parser can be found and re-read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

#: Changes whenever some reply may be read differently; store it with every reading.
#: Version 1 was the single-module parser (rules json, field, leading-id, yes-no).
#: Version 2 (issue 20) added reasoning blocks, echoes, option texts and closing sentences; version 3
#: (issue 26) reads self-corrections, a label with another option beside it and one-sentence
#: contradictions as conflicting, and adds the rules ``polarity`` and ``rejection``.
PARSER_VERSION = "3"

Rule = Literal["json", "field", "leading-id", "yes-no", "option-text", "leading-yes-no", "closing", "polarity",
               "rejection"]
ParseFailure = Literal["missing", "ambiguous", "conflicting", "unparseable", "refused"]

#: Every ``rule`` value, strongest first: when several rules read the same answer,
#: the result names the first of them in this order.
RULES: tuple[str, ...] = get_args(Rule)
#: Every ``error`` value of a reply that gives no answer.
FAILURES: tuple[str, ...] = get_args(ParseFailure)


@dataclass(frozen=True)
class ParsedAnswer:
    """What was read from one reply.

    ``answer`` is an option id, or None when no single option could be read;
    ``rule`` names the rule that read it (one of :data:`RULES`); ``error`` says
    why nothing was read (one of :data:`FAILURES`); ``detail`` explains either in
    words. ``reason`` and ``confidence`` come from a JSON answer and never change
    the grade. ``reasoning`` is the reasoning split off the reply (and any passed
    beside it), never graded. ``windowed`` is True when the reply was longer than
    the graded cap and only its two ends were graded (docs/parsing.md).
    """

    answer: str | None
    rule: Rule | None = None
    error: ParseFailure | None = None
    reason: str | None = None
    confidence: str | None = None
    detail: str = ""
    reasoning: str | None = None
    windowed: bool = False


@dataclass(frozen=True)
class Reading:
    """One rule's finding: an option it read (``answer``), or why the value it found is not one."""

    answer: str | None
    rule: Rule
    detail: str
    error: ParseFailure | None = None


@dataclass
class Findings:
    """Everything the rules found in one reply, gathered before the decision."""

    readings: list[Reading] = field(default_factory=list)
    #: Findings that forbid any answer ("A, B", "A. No"), with their error and detail.
    blocks: list[tuple[ParseFailure, str]] = field(default_factory=list)
    #: Option ids seen in an echoed option list that was cut out.
    echoed: list[str] = field(default_factory=list)
    #: Options the reply rejects ("Not A.", "A is wrong"), with the words: never its answer.
    rejected: dict[str, str] = field(default_factory=dict)
    reason: str | None = None
    confidence: str | None = None

    def add(self, other: Findings) -> None:
        self.readings += other.readings
        self.blocks += other.blocks
        self.reason = self.reason or other.reason
        self.confidence = self.confidence or other.confidence
        self.rejected.update(other.rejected)
