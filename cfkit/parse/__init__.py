"""Read one answer from a model's raw reply, given the case's options.

``parse_answer(raw, options, *, reasoning=None)`` returns a :class:`ParsedAnswer`:
the option id the reply gives as its answer and the rule that read it, or no
answer and an error (missing, ambiguous, conflicting, unparseable, refused). A
reply is read as a careful human grader would read it and never guessed: a
reply that only echoes the option list, names two options, rejects one ("not
B") or opens with the article "A" gives no answer; lower-case "a" is never
option A. Reasoning blocks (``<think>…</think>``) are split off first and never
graded. Store :data:`PARSER_VERSION` with every reading.

The rules in order, examples of what is and is not read, the size cap and the
version: docs/parsing.md. The modules: :mod:`~cfkit.parse.reasoning` (the
split), :mod:`~cfkit.parse.jsonscan` (JSON in linear time),
:mod:`~cfkit.parse.fields` (JSON answer values), :mod:`~cfkit.parse.vocabulary`
(how a reply names an option), :mod:`~cfkit.parse.echo` (echoed option lists),
:mod:`~cfkit.parse.prose` (the rules on text), :mod:`~cfkit.parse.polarity` (yes/no in other words,
rejected labels, one-sentence contradictions), :mod:`~cfkit.parse.decision`.
"""

from typing import Any

from cfkit.parse.result import FAILURES, PARSER_VERSION, RULES, ParsedAnswer

#: The parser itself, imported when first asked for: reading predictions back (a report) needs only the names of
#: the rules and failures above, not the rules' patterns.
_LAZY = {"parse_answer": "decision", "split_reasoning": "reasoning", "GRADED_CAP": "text"}

__all__ = ["FAILURES", "GRADED_CAP", "PARSER_VERSION", "RULES", "ParsedAnswer", "parse_answer", "split_reasoning"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"cfkit.parse.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'cfkit.parse' has no attribute {name!r}")
