"""Read one answer from a model's raw reply, given the case's options.

The rules (``rule`` records which one read the answer):

``json``
    The whole reply is a JSON object whose ``answer`` is one of the option ids.
    ``reason`` and ``confidence`` are kept.
``field``
    One unambiguous answer field: in JSON embedded in other text (code fences,
    trailing text, a truncated object), or stated in words — ``Answer: B``,
    ``the answer is B``, ``I choose option B``.
``leading-id``
    The reply is a bare label or opens with one followed by a delimiter:
    ``B``, ``(B)``, ``B.``, ``**B**``, ``Option B``, ``B) No``.
``yes-no``
    The reply is exactly Yes or No (or a JSON answer is), mapped to the one
    option whose text is that word.

A strict JSON reply is read by ``json`` alone. Otherwise every fallback is
applied and all must agree: an embedded JSON field is recorded as ``field``,
else a leading label as ``leading-id``, else a declaration as ``field``; the
exact Yes/No rule applies only when nothing else read an answer.

Anything else yields no answer and an error: ``missing`` (empty, or JSON
without an answer), ``ambiguous`` (several options named and none declared:
``A/B``, ``Option A or B``), ``conflicting`` (JSON naming two options; JSON and
text, or two declarations, that disagree), ``refused``, ``unparseable``. Option
ids are matched case-sensitively and must stand alone: a reply that opens with
the article "A" ("A Serene Moment in a Chinese Landscape") is not option A, and
lower-case "a" is never option A. There is never a random pick.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Rule = Literal["json", "field", "leading-id", "yes-no"]
ParseFailure = Literal["missing", "ambiguous", "conflicting", "unparseable", "refused"]

#: Keys read as the answer of a JSON object (compared case-insensitively).
ANSWER_KEYS = ("answer", "final_answer", "final answer", "choice", "option", "label")
REASON_KEYS = ("reason", "rationale", "explanation")


class OptionLike(Protocol):
    id: str
    text: str


@dataclass(frozen=True)
class ParsedAnswer:
    """What was read from one reply.

    ``answer`` is an option id or None; ``rule`` says which rule read it;
    ``error`` says why nothing was read; ``detail`` explains either in words.
    """

    answer: str | None
    rule: Rule | None = None
    error: ParseFailure | None = None
    reason: str | None = None
    confidence: str | None = None
    detail: str = ""


def parse_answer(raw: str | None, options: Sequence[OptionLike]) -> ParsedAnswer:
    """Read the single option a reply gives as its answer (see the module docstring for the rules).

    Examples
    --------
    >>> from cfkit.cases import Option
    >>> yes_no = [Option(id="A", text="Yes"), Option(id="B", text="No")]
    >>> parse_answer('{"answer": "B", "reason": "a funeral scene"}', yes_no).answer
    'B'
    >>> parse_answer("A Serene Moment in a Chinese Landscape", yes_no).error
    'unparseable'
    """
    reader = _Reader([o.id for o in options], [o.text for o in options])
    return reader.read(raw or "")


# ── implementation ─────────────────────────────────────────────────────────

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?|```")
_REFUSAL = re.compile(
    r"(?i)\b(i'?m sorry|i am sorry|i apologi[sz]e|i can(?:'|no)?t (?:help|assist|answer|determine|provide|tell|say)|"
    r"i cannot|i'?m (?:not able|unable)|i am (?:not able|unable)|unable to (?:help|assist|answer|determine)|"
    r"i won'?t|as an ai\b)"
)
# Words that may follow a declared label without making it the start of a phrase ("A because …").
_CONNECTIVES = r"(?i:because\b|since\b|as\s+(?:it|the|this)\b|given\s+(?:that|the)\b|due\s+to\b)"


class _Reader:
    def __init__(self, ids: list[str], texts: list[str]):
        if len(set(ids)) != len(ids) or not ids:
            raise ValueError(f"option ids must be unique and non-empty, got {ids}")
        self.ids = ids
        self.texts = texts
        alternatives = "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True))
        # A label: the id, optionally bracketed or bold, standing alone.
        self.label = (
            rf"[\(\[]?\**(?<![A-Za-z0-9_])(?P<id>{alternatives})\**[\)\]]?"
            rf"(?![A-Za-z0-9_])(?=\s*$|\s*[.,;:!?\n)\]}}\"'*]|\s+[-–—(]|\s+{_CONNECTIVES})"
        )
        self.leading = re.compile(
            r"^\s*(?:\**(?i:final\s+answer|answer|option|choice)\**(?:\s*[:\-=]\s*|\s+)(?i:option\s+)?)?"
            + self.label
            + r"\s*(?P<rest>.*)$",
            re.DOTALL,
        )
        words = r"(?i:answer|option|choice)"
        self.declarations = [
            re.compile(rf"\b{words}\**(?:\s*[:=]\s*|\s+(?i:is|would\s+be|will\s+be)(?:\s*:\s*|\s+))\**(?i:option\s+)?"
                       + self.label),
            re.compile(r"\b(?i:I\s+(?:would\s+)?(?:choose|select|pick|go\s+with))\s+(?i:option\s+)?" + self.label),
            re.compile(r"[\"']" + words + r"[\"']\s*:\s*[\"']?" + self.label),
        ]
        self.standalone = re.compile(rf"(?<![A-Za-z0-9_])(?:{alternatives})(?![A-Za-z0-9_])")

    # 1. decide ------------------------------------------------------------

    def read(self, raw: str) -> ParsedAnswer:
        text = raw.strip()
        if not text:
            return ParsedAnswer(None, error="missing", detail="the reply is empty")
        strict = _loads(text)
        if strict is not _NOTHING:
            return self._from_strict_json(strict)
        return self._from_text(text)

    def _from_strict_json(self, value: Any) -> ParsedAnswer:
        if not isinstance(value, dict):
            found = self._value(value)
            return self._verdict([found] if found else [], rule="json", meta=(None, None))
        meta = _meta(value)
        found = self._fields(value)
        if not found:
            return ParsedAnswer(None, error="missing", detail="the JSON object has no 'answer' field",
                                reason=meta[0], confidence=meta[1])
        return self._verdict(found, rule="json", meta=meta)

    def _from_text(self, text: str) -> ParsedAnswer:
        unfenced = _FENCE.sub("\n", text)
        objects, outside = _embedded_objects(unfenced)
        meta: tuple[str | None, str | None] = (None, None)
        readings: list[_Reading] = []
        for obj in objects:
            readings += self._fields(obj)
            meta = tuple(a or b for a, b in zip(meta, _meta(obj)))  # type: ignore[assignment]
        leading = self._leading(outside)
        declared = self._declared(outside)
        rule: Rule = "field" if readings else ("leading-id" if leading else "field")
        readings += leading + declared
        if not readings:
            yes_no = self._yes_no(outside)
            if yes_no is not None:
                return self._verdict([yes_no], rule="yes-no", meta=meta)
            return self._nothing(outside, had_json=bool(objects), meta=meta)
        return self._verdict(readings, rule=rule, meta=meta)

    def _verdict(self, readings: list["_Reading"], *, rule: Rule, meta: tuple[str | None, str | None]) -> ParsedAnswer:
        reason, confidence = meta
        blocking = next((r for r in readings if r.block), None)
        if blocking is not None:
            return ParsedAnswer(None, error=blocking.block, detail=blocking.detail, reason=reason, confidence=confidence)
        valid = [r for r in readings if r.answer is not None]
        distinct = list(dict.fromkeys(r.answer for r in valid))
        if len(distinct) > 1:
            return ParsedAnswer(None, error="conflicting", reason=reason, confidence=confidence,
                                detail=f"the reply gives {' and '.join(distinct)} as its answer")
        if not distinct:
            bad = readings[0]
            return ParsedAnswer(None, error=bad.error or "unparseable", detail=bad.detail,
                                reason=reason, confidence=confidence)
        first = valid[0]
        return ParsedAnswer(distinct[0], rule="yes-no" if first.rule == "yes-no" else rule,
                            reason=reason, confidence=confidence, detail=first.detail)

    def _nothing(self, text: str, *, had_json: bool, meta: tuple[str | None, str | None]) -> ParsedAnswer:
        reason, confidence = meta
        named = list(dict.fromkeys(self.standalone.findall(text)))
        if _REFUSAL.search(text):
            return ParsedAnswer(None, error="refused", detail="the model declined to answer",
                                reason=reason, confidence=confidence)
        if len(named) > 1:
            return ParsedAnswer(None, error="ambiguous", reason=reason, confidence=confidence,
                                detail=f"the reply names {', '.join(named)} without declaring one the answer")
        if had_json:
            return ParsedAnswer(None, error="missing", detail="the JSON object has no 'answer' field",
                                reason=reason, confidence=confidence)
        detail = (f"'{named[0]}' appears but is not given as the answer" if named
                  else "no option id, answer field or Yes/No found")
        return ParsedAnswer(None, error="unparseable", detail=detail, reason=reason, confidence=confidence)

    # 2. the rules ---------------------------------------------------------

    def _fields(self, obj: dict) -> list["_Reading"]:
        readings = []
        for key, value in obj.items():
            if isinstance(key, str) and key.strip().lower() in ANSWER_KEYS:
                readings.append(self._value(value, key=key))
        return readings

    def _value(self, value: Any, *, key: str = "answer") -> "_Reading":
        """Read a JSON answer value: an option id, a Yes/No text, or something that is neither."""
        if value is None or (isinstance(value, str) and not value.strip()):
            return _Reading(None, "field", error="missing", detail=f"'{key}' is empty")
        if isinstance(value, list):
            items = [self._value(v, key=key) for v in value]
            ids = list(dict.fromkeys(r.answer for r in items if r.answer is not None))
            if len(ids) == 1 and len(items) == 1:
                return items[0]
            return _Reading(None, "field", block="conflicting", detail=f"'{key}' lists several answers: {value}")
        if not isinstance(value, str):
            return _Reading(None, "field", error="unparseable",
                            detail=f"'{key}' is {value!r}; expected one of {', '.join(self.ids)}")
        cleaned = value.strip().strip("*").strip()
        if cleaned in self.ids:
            return _Reading(cleaned, "json")
        match = re.fullmatch(r"\s*[\(\[]?\s*(\S+?)\s*[\)\]]?\s*[.:]?\s*", cleaned)
        if match and match.group(1) in self.ids:
            return _Reading(match.group(1), "json")
        mapped = self._yes_no(cleaned)
        if mapped is not None:
            return mapped
        leading = self._leading(cleaned)
        if leading:
            return leading[0]
        named = list(dict.fromkeys(self.standalone.findall(cleaned)))
        if len(named) > 1:
            return _Reading(None, "field", block="conflicting", detail=f"'{key}' names {' and '.join(named)}")
        return _Reading(None, "field", error="unparseable",
                        detail=f"'{key}' is '{value}', which is not one of the options {', '.join(self.ids)}")

    def _leading(self, text: str) -> list["_Reading"]:
        match = self.leading.match(_unbold(text))
        if not match:
            return []
        answer, rest = match.group("id"), match.group("rest")
        readings = [_Reading(answer, "leading-id")]
        following = self.leading.match(re.sub(r"^[\s.,;:/|)\-–—]+", "", _unbold(rest)))
        if following and following.group("id") != answer:
            readings.append(_Reading(None, "leading-id", block="ambiguous",
                                     detail=f"the reply lists {answer} and {following.group('id')}"))
        contradicted = self._starts_with_other_text(rest, answer)
        if contradicted:
            readings.append(_Reading(None, "leading-id", block="conflicting",
                                     detail=f"the reply opens with {answer} but then says '{contradicted}'"))
        return readings

    def _declared(self, text: str) -> list["_Reading"]:
        plain = _unbold(text)
        spans: dict[int, str] = {}
        for pattern in self.declarations:
            for match in pattern.finditer(plain):
                spans.setdefault(match.start("id"), match.group("id"))
        return [_Reading(answer, "field") for _, answer in sorted(spans.items())]

    def _yes_no(self, text: str) -> "_Reading | None":
        word = re.sub(r"^[\s*_\"'`]+|[\s*_\"'`.!]+$", "", text).lower()
        if word not in ("yes", "no"):
            return None
        matches = [i for i, t in zip(self.ids, self.texts) if t.strip().strip(".").lower() == word]
        if len(matches) != 1:
            return _Reading(None, "yes-no", error="unparseable",
                            detail=f"the reply is '{word}' but no single option's text is '{word}'")
        return _Reading(matches[0], "yes-no")

    def _starts_with_other_text(self, rest: str, answer: str) -> str | None:
        """The text of another option, when the words after a leading label are exactly that option's text."""
        words = re.sub(r"^[\s.:)\-–—,]+|[\s.!]+$", "", rest).lower()
        if not words:
            return None
        for option_id, option_text in zip(self.ids, self.texts):
            if option_id != answer and option_text.strip().lower() == words:
                return option_text
        return None


@dataclass(frozen=True)
class _Reading:
    answer: str | None
    rule: Rule
    error: ParseFailure | None = None
    block: ParseFailure | None = None  # a finding that forbids any answer
    detail: str = ""


_NOTHING = object()


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return _NOTHING


def _unbold(text: str) -> str:
    return text.replace("**", "").replace("__", "")


def _meta(obj: dict) -> tuple[str | None, str | None]:
    lowered = {str(k).strip().lower(): v for k, v in obj.items()}
    reason = next((lowered[k] for k in REASON_KEYS if isinstance(lowered.get(k), str)), None)
    confidence = lowered.get("confidence")
    return reason, None if confidence is None else str(confidence)


def _embedded_objects(text: str) -> tuple[list[dict], str]:
    """JSON objects inside ``text`` (tolerating single quotes and trailing commas) and the text around them."""
    objects: list[dict] = []
    outside: list[str] = []
    decoder = json.JSONDecoder()
    position = 0
    index = text.find("{")
    while index != -1:
        end = _matching_brace(text, index)
        candidate = text[index:end] if end else text[index:]
        obj = _lenient_object(candidate, decoder)
        if obj is None and end is None:
            obj = _truncated_object(candidate)
        if obj is not None:
            outside.append(text[position:index])
            objects.append(obj)
            position = end or len(text)
            index = text.find("{", position)
        else:
            index = text.find("{", index + 1)
    outside.append(text[position:])
    return objects, " ".join(part.strip() for part in outside if part.strip())


def _matching_brace(text: str, start: int) -> int | None:
    depth = 0
    in_string: str | None = None
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == in_string:
                in_string = None
        elif ch in "\"'" and (ch == '"' or text[i - 1] in "{[,: "):
            in_string = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _lenient_object(candidate: str, decoder: json.JSONDecoder) -> dict | None:
    for attempt in (candidate, _repair(candidate)):
        try:
            value, _ = decoder.raw_decode(attempt)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    return None


def _repair(candidate: str) -> str:
    """Single-quoted keys and strings to double quotes; trailing commas removed."""
    repaired = re.sub(r"'([^'\"\\]*)'", r'"\1"', candidate)
    return re.sub(r",\s*([}\]])", r"\1", repaired)


def _truncated_object(candidate: str) -> dict | None:
    """An object cut off mid-way (a token limit): read its complete ``"answer": "X"`` pair, if any."""
    match = re.search(r"[\"'](answer|final_answer|choice|option)[\"']\s*:\s*(\"[^\"]*\"|'[^']*'|null)", candidate,
                      re.IGNORECASE)
    if not match:
        return None
    raw = match.group(2)
    return {match.group(1): None if raw == "null" else raw[1:-1]}
