"""The decision: read a reply by every rule, then accept one option only when all agree.

Steps (docs/parsing.md gives them with examples):

1. Split reasoning blocks off (kept, never graded); an empty rest is ``missing``.
2. A reply that is JSON as a whole is read by its answer field alone (rule ``json``).
3. Otherwise, on a window of at most :data:`~cfkit.parse.text.GRADED_CAP`
   characters: embedded JSON objects are read and cut out (rule ``field``), the
   rest is normalised (full-width forms, markup), echoed option lists are cut
   out, and the prose rules run (:mod:`cfkit.parse.prose`).
4. Anything that blocks (two options named together, a label with another
   option's text, a contradiction) gives no answer; readings of two different
   options are ``conflicting``; one option read by one or more rules is the
   answer, recorded with the strongest rule that read it (:data:`RULES` order).
5. With no reading: ``refused``, ``ambiguous`` (an echo, or several options
   named), ``missing`` (JSON without an answer) or ``unparseable`` — never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

from cfkit.parse import jsonscan
from cfkit.parse.fields import read_object, read_value
from cfkit.parse.prose import read_prose
from cfkit.parse.reasoning import split_reasoning
from cfkit.parse.result import RULES, Findings, ParsedAnswer, ParseFailure
from cfkit.parse.text import GRADED_CAP, normalize, window
from cfkit.parse.vocabulary import Vocabulary, vocabulary

_REFUSAL = re.compile(
    r"(?i)\b(?:i'?m sorry|i am sorry|i apologi[sz]e|i can(?:'|no)?t (?:help|assist|answer|determine|provide|tell|say)|"
    r"i cannot|i'?m (?:not able|unable)|i am (?:not able|unable)|unable to (?:help|assist|answer|determine)|"
    r"i won'?t|as an ai\b)"
)
_YES_OR_NO = re.compile(r"[\s\"'>•\-]*(?i:(yes|no))(?![A-Za-z])")


class OptionLike(Protocol):
    id: str
    text: str


def parse_answer(raw: str | None, options: Sequence[OptionLike], *, reasoning: str | None = None) -> ParsedAnswer:
    """Read the single option a reply gives as its answer (the rules: docs/parsing.md).

    ``raw`` is the reply's content; ``options`` the case's options (ids unique,
    matched case-sensitively). ``reasoning`` is reasoning text a server returned
    beside the content (e.g. ``reasoning_content``): it is kept in the result's
    ``reasoning`` with any reasoning blocks split off ``raw``, and never graded.
    Raises ValueError only for an empty option list or duplicate ids.

    Examples
    --------
    >>> from cfkit.cases import Option
    >>> yes_no = [Option(id="A", text="Yes"), Option(id="B", text="No")]
    >>> parse_answer('{"answer": "B", "reason": "a funeral scene"}', yes_no).answer
    'B'
    >>> parse_answer("<think>a letter of condolence…</think>No, it is a funeral.", yes_no).rule
    'leading-yes-no'
    >>> parse_answer("A. Yes\\nB. No", yes_no).error
    'ambiguous'
    >>> parse_answer("A Serene Moment in a Chinese Landscape", yes_no).error
    'unparseable'
    """
    vocab = vocabulary(tuple(o.id for o in options), tuple(o.text for o in options))
    graded, inline = split_reasoning(raw or "")
    kept = "\n\n".join(p.strip() for p in (reasoning, inline) if p and p.strip()) or None
    text = graded.strip()
    if not text:
        detail = ("the reply holds only reasoning, with no answer after it" if inline is not None
                  else "the reply is empty")
        return ParsedAnswer(None, error="missing", detail=detail, reasoning=kept)
    strict = jsonscan.loads(text) if text[:1] in "{[" or text == "null" else jsonscan.NOTHING
    if strict is not jsonscan.NOTHING:
        return _from_json(strict, vocab, kept)
    shown, windowed = window(text)
    found = Findings()
    objects, outside = jsonscan.embedded_objects(jsonscan.unfence(shown))
    for obj in objects:
        found.add(read_object(obj, vocab, rule="field"))
    plain, _ = window(normalize(outside), 2 * GRADED_CAP)  # NFKC can lengthen a text; keep it bounded
    read_prose(plain, vocab, found)
    result = _decide(found, plain, vocab, had_json=bool(objects))
    if windowed:
        result = _with(result, detail=f"{result.detail} (graded on the first and last {GRADED_CAP // 2:,} "
                                      f"characters of {len(text):,})")
    return _with(result, reasoning=kept, windowed=windowed)


def _from_json(value: Any, vocab: Vocabulary, kept: str | None) -> ParsedAnswer:
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
        value = value[0]
    if isinstance(value, dict):
        found = read_object(value, vocab, rule="json")
        if not found.readings and not found.blocks:
            return ParsedAnswer(None, error="missing", detail="the JSON object has no answer field",
                                reason=found.reason, confidence=found.confidence, reasoning=kept)
    elif value is None:
        return ParsedAnswer(None, error="missing", detail="the reply is JSON null", reasoning=kept)
    else:
        found = Findings(readings=[read_value(value, vocab, rule="json")])
    return _with(_decide(found, "", vocab, had_json=True), reasoning=kept)


def _decide(found: Findings, text: str, vocab: Vocabulary, *, had_json: bool) -> ParsedAnswer:
    meta = {"reason": found.reason, "confidence": found.confidence}
    if found.blocks:
        error, detail = found.blocks[0]
        return ParsedAnswer(None, error=error, detail=detail, **meta)
    valid = [r for r in found.readings if r.answer is not None]
    distinct = list(dict.fromkeys(r.answer for r in valid))
    if len(distinct) > 1:
        said = "; ".join(f"{a}: {next(r.detail for r in valid if r.answer == a)}" for a in distinct[:3])
        return ParsedAnswer(None, error="conflicting", detail=f"the reply gives {' and '.join(distinct)} "
                                                              f"as its answer ({said})", **meta)
    if distinct and distinct[0] in found.rejected:
        return ParsedAnswer(None, error="conflicting", detail=f"the reply rejects {distinct[0]} "
                                                              f"('{found.rejected[distinct[0]]}') and also gives it "
                                                              "as its answer", **meta)
    if distinct:
        best = valid[0] if len(valid) == 1 else min(valid, key=lambda r: RULES.index(r.rule))
        return ParsedAnswer(best.answer, rule=best.rule, detail=best.detail, **meta)
    if found.readings:  # only values that are not options ('"answer": "maybe"')
        bad = found.readings[0]
        return ParsedAnswer(None, error=bad.error or "unparseable", detail=bad.detail, **meta)
    return _nothing(text, found, vocab, had_json=had_json, **meta)


def _nothing(text: str, found: Findings, vocab: Vocabulary, *, had_json: bool, **meta: Any) -> ParsedAnswer:
    def failure(error: ParseFailure, detail: str) -> ParsedAnswer:
        return ParsedAnswer(None, error=error, detail=detail, **meta)

    if _REFUSAL.search(text):
        return failure("refused", "the model declined to answer")
    if found.echoed:
        return failure("ambiguous", f"the reply lists the options ({', '.join(found.echoed)}) "
                                    "without singling one out")
    mentioned = _named(text, vocab)
    named = list(mentioned)
    if len(named) > 1:
        return failure("ambiguous", f"the reply names {', '.join(named)} without declaring one the answer")
    if had_json:
        return failure("missing", "the JSON object has no answer field")
    if named:
        option_id, words = named[0], mentioned[named[0]]
        shown = f"'{option_id}'" if words is None else f"the text of option {option_id} ('{words}')"
        return failure("unparseable", f"{shown} appears but is not given as the answer")
    word = _YES_OR_NO.match(text)
    if word:
        said = word.group(1).lower()
        return failure("unparseable", f"the reply says '{said}' but no single option's text is '{said}'")
    return failure("unparseable", "no option id, option text, answer field or Yes/No found")


def _named(text: str, vocab: Vocabulary) -> dict[str, str | None]:
    """Options the text names, by id (value None) or by text (the words), ids first; stops once all are seen."""
    named: dict[str, str | None] = {}
    for match in vocab.mention.finditer(text):
        named.setdefault(match.group(0), None)
        if len(named) == len(vocab.ids):
            return named
    if vocab.text_mention is not None:
        for match in vocab.text_mention.finditer(text):
            named.setdefault(vocab.option_of_text(match.group("text")), match.group("text"))
            if len(named) == len(vocab.ids):
                break
    return named


def _with(result: ParsedAnswer, **changes: Any) -> ParsedAnswer:
    """``result`` with ``changes``; the very object when they change nothing (most replies: no reasoning, not
    windowed), which spares a copy made for every reply a run stores."""
    if all(getattr(result, name) == value for name, value in changes.items()):
        return result
    from dataclasses import replace

    return replace(result, **changes)
