"""Answer fields of JSON objects: which option a JSON answer value names."""

from __future__ import annotations

from typing import Any

from cfkit.parse.prose import leading
from cfkit.parse.result import Findings, Reading, Rule
from cfkit.parse.text import GRADED_CAP, normalize, window
from cfkit.parse.vocabulary import Vocabulary, text_key
from cfkit.plural import plural

#: Keys read as the answer of a JSON object (compared case-insensitively, ignoring spaces at the ends).
ANSWER_KEYS = ("answer", "final_answer", "final answer", "finalanswer", "choice", "option", "selected_option",
               "label")
#: Keys kept as the reason (never graded).
REASON_KEYS = ("reason", "rationale", "explanation", "justification")


def read_object(obj: dict, vocab: Vocabulary, *, rule: Rule) -> Findings:
    """The answer fields of ``obj`` (or, when it has none, of the objects directly inside it), its reason
    and confidence. Only one level is looked into, so nothing walks a deep object."""
    found = _fields(obj, vocab, rule=rule)
    if not found.readings and not found.blocks:
        for value in obj.values():
            if isinstance(value, dict):
                found.add(_fields(value, vocab, rule=rule))
    return found


def _fields(obj: dict, vocab: Vocabulary, *, rule: Rule) -> Findings:
    found = Findings()
    if not obj:  # a reply of many "{}" must stay cheap
        return found
    lowered = {str(k).strip().lower(): v for k, v in obj.items()}
    for key in ANSWER_KEYS:
        if key in lowered:
            reading = read_value(lowered[key], vocab, rule=rule, key=key)
            if reading.error == "conflicting":
                found.blocks.append(("conflicting", reading.detail))
            else:
                found.readings.append(reading)
    for key in REASON_KEYS:
        if isinstance(lowered.get(key), str):
            found.reason = lowered[key]
            break
    confidence = lowered.get("confidence")
    if confidence is not None and not isinstance(confidence, (dict, list)):
        found.confidence = str(confidence)
    return found


def read_value(value: Any, vocab: Vocabulary, *, rule: Rule, key: str = "answer") -> Reading:
    """Read one JSON answer value: an id ("B", "(B)", "Option B"), an option's exact text ("No"), a
    boolean (true is the option whose text is Yes), a number equal to an id, or one such item in a list.
    A value naming two options is ``conflicting``; any other value is ``unparseable``."""
    if isinstance(value, list):
        if not value:
            return Reading(None, rule, f"'{key}' is an empty list", error="missing")
        if len(value) > 1:
            return _read_several(value, vocab, rule=rule, key=key)
        value = value[0]
        if isinstance(value, (list, dict)):  # never walked: it may be deep
            return Reading(None, rule, f"'{key}' holds a nested value", error="unparseable")
    if value is None or (isinstance(value, str) and not value.strip()):
        return Reading(None, rule, f"'{key}' is empty", error="missing")
    if isinstance(value, bool):
        word = "yes" if value else "no"
        option_id = next((i for i, t in vocab.text_of.items() if t == word), None)
        if option_id is None:
            return Reading(None, rule, f"'{key}' is {str(value).lower()} but no option's text is '{word}'",
                           error="unparseable")
        return Reading(option_id, rule, f"'{key}' is {str(value).lower()} (option {option_id} is '{word}')")
    if isinstance(value, int) and str(value) in vocab.ids:
        return Reading(str(value), rule, f"'{key}' is {value}")
    if not isinstance(value, str):
        return Reading(None, rule, f"'{key}' is {_short(value)}; expected one of {', '.join(vocab.ids)}",
                       error="unparseable")
    return _read_string(value, vocab, rule=rule, key=key)


def _read_several(values: list, vocab: Vocabulary, *, rule: Rule, key: str) -> Reading:
    """A list of values: one option when every item names it, conflicting when items name two options."""
    items = [read_value(v, vocab, rule=rule, key=key) if not isinstance(v, (list, dict)) else None
             for v in values[:20]]  # nested items are never walked; twenty are plenty to see a conflict
    answers = list(dict.fromkeys(r.answer for r in items if r is not None and r.answer is not None))
    if len(answers) > 1:
        return Reading(None, rule, f"'{key}' lists several answers: {', '.join(answers[:3])}", error="conflicting")
    if answers and len(values) <= 20 and all(r is not None and r.answer == answers[0] for r in items):
        return Reading(answers[0], rule, f"'{key}' lists {answers[0]} {plural(len(values), 'time')}")
    return Reading(None, rule, f"'{key}' is {_short(values)}, not one of the options {', '.join(vocab.ids)}",
                   error="unparseable")


def _read_string(value: str, vocab: Vocabulary, *, rule: Rule, key: str) -> Reading:
    if value.strip() in vocab.ids:
        return Reading(value.strip(), rule, f"'{key}' is '{value.strip()}'")
    plain = normalize(window(value, GRADED_CAP)[0]).strip()
    bare = vocab.bare_label.fullmatch(plain)
    if bare:
        return Reading(bare.group("id"), rule, f"'{key}' is '{_short(value)}'")
    by_text = next((i for i, t in vocab.text_of.items() if t == text_key(plain)), None)
    if by_text is not None:
        return Reading(by_text, rule, f"'{key}' is '{_short(value)}' (the text of option {by_text})")
    inner = Findings()
    leading(plain, 0, vocab, inner)  # "B, because …", "No - a funeral"
    if inner.blocks:
        return Reading(None, rule, f"'{key}': {inner.blocks[0][1]}", error="conflicting")
    if inner.readings:
        return Reading(inner.readings[0].answer, rule, f"'{key}' is '{_short(value)}'")
    named = list(dict.fromkeys(m.group(0) for m in vocab.mention.finditer(plain)))
    if len(named) > 1:
        return Reading(None, rule, f"'{key}' names {' and '.join(named[:3])}", error="conflicting")
    return Reading(None, rule, f"'{key}' is '{_short(value)}', which is not one of the options "
                               f"{', '.join(vocab.ids)}", error="unparseable")


def _short(value: Any) -> str:
    """A value as shown in a detail: at most 60 characters; containers by size (repr may recurse too deep)."""
    if isinstance(value, (list, dict)):
        return f"a {'list' if isinstance(value, list) else 'object'} of {plural(len(value), 'item')}"
    shown = value if isinstance(value, str) else repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "…"
