"""Find JSON in a reply: the whole reply as JSON, or objects embedded in text — in linear time.

Nothing here recurses over the reply: braces are paired in one pass with an
explicit stack, and ``json.loads`` (whose own nesting limit raises
RecursionError, caught here) is tried on each candidate object at most
:data:`_DESCENT` levels down, so every character is decoded a bounded number of
times.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from cfkit.parse.text import MASK

#: Returned by :func:`loads` when the text is not JSON (None is JSON null).
NOTHING = object()

# Levels of nested braces tried when an outer object does not decode ("Note {x} {"answer": "B"}" decodes
# at level 1; prose braces around an object need level 2).
_DESCENT = 3
_STRUCTURE = re.compile(r"[{}\"'\\]")
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?|```")
# A truncated object's complete answer pair; the value is bounded so a missing close quote costs little.
_TRUNCATED = re.compile(r"[\"'](answer|final_answer|choice|option)[\"']\s*:\s*"
                        r"(\"[^\"\n]{0,200}\"|'[^'\n]{0,200}'|null)",
                        re.IGNORECASE)
_SINGLE_QUOTED = re.compile(r"'([^'\"\\]*)'")
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_TRAILING_COMMA_TEST = re.compile(r",\s*[}\]]")


def loads(text: str) -> Any:
    """``text`` decoded as JSON, or :data:`NOTHING`; never raises (deep nesting is simply not JSON here).

    A key given twice with different values keeps both, as a list, so that
    ``{"answer": "B", "answer": "A"}`` reads as two answers rather than the last.
    """
    try:
        return _DECODER.decode(text)
    except (ValueError, RecursionError):  # ValueError also covers integers too long to convert
        return NOTHING


def _keep_repeated_keys(pairs: list[tuple[str, Any]]) -> dict:
    obj: dict = {}
    for key, value in pairs:
        if key in obj and obj[key] != value:
            previous = obj[key]
            obj[key] = (previous if isinstance(previous, _Repeated) else _Repeated([previous])) + [value]
        else:
            obj[key] = value
    return obj


class _Repeated(list):
    """The values of a key repeated in one object."""

    def __add__(self, other: list) -> _Repeated:
        return _Repeated(list(self) + other)


# One decoder for every call: json.loads with a hook would build a new one each time.
_DECODER = json.JSONDecoder(object_pairs_hook=_keep_repeated_keys)


def unfence(text: str) -> str:
    """The text with Markdown code fences (```json … ```) turned into line breaks."""
    return _FENCE.sub("\n", text)


@dataclass
class _Braces:
    start: int
    end: int
    children: list[_Braces] = field(default_factory=list)


def _brace_forest(text: str) -> tuple[list[_Braces], int | None]:
    """The matched ``{…}`` pairs of ``text`` as a forest, and where an unclosed ``{`` begins (or None).

    Quotes open strings only inside braces, so an apostrophe in the prose around
    an object does not hide it; inside braces an apostrophe opens a string only
    after ``{[,:`` or a space (single-quoted JSON), not in a word ("it's").
    """
    roots: list[_Braces] = []
    stack: list[tuple[int, list[_Braces]]] = []
    quote: str | None = None
    escaped_at = -1
    for match in _STRUCTURE.finditer(text):
        i = match.start()
        if i == escaped_at:
            continue
        ch = text[i]
        if quote is not None:
            if ch == "\\":
                escaped_at = i + 1
            elif ch == quote:
                quote = None
        elif ch == "{":
            stack.append((i, []))
        elif not stack:
            continue
        elif ch == "}":
            start, children = stack.pop()
            (stack[-1][1] if stack else roots).append(_Braces(start, i + 1, children))
        elif ch == '"' or (ch == "'" and text[i - 1] in "{[,: "):
            quote = ch
    unclosed = stack[0][0] if stack else None
    while stack:  # objects inside an unclosed brace are still objects
        _, children = stack.pop()
        (stack[-1][1] if stack else roots).extend(children)
    return roots, unclosed


def embedded_objects(text: str) -> tuple[list[dict], str]:
    """JSON objects inside ``text`` (tolerating single quotes and trailing commas), and the text without them.

    Each object found is replaced by :data:`MASK`, so the text around it reads as
    two separate parts. An object cut off at the end (a token limit) counts when
    its ``"answer": "X"`` pair is complete.
    """
    roots, unclosed = _brace_forest(text)
    spans: list[tuple[int, int, dict]] = []
    work = [(node, 1) for node in reversed(roots)]
    while work:
        node, level = work.pop()
        obj = _lenient_object(text[node.start:node.end])
        if obj is not None:
            spans.append((node.start, node.end, obj))
        elif level < _DESCENT:
            work += [(child, level + 1) for child in reversed(node.children)]
    if unclosed is not None and (not spans or unclosed >= spans[-1][1]):
        obj = _truncated_object(text, unclosed)
        if obj is not None:
            spans.append((unclosed, len(text), obj))
    pieces, position = [], 0
    for start, end, _ in spans:
        pieces += [text[position:start], MASK]
        position = end
    pieces.append(text[position:])
    return [obj for _, _, obj in spans], "".join(pieces)


def _lenient_object(candidate: str) -> dict | None:
    value = loads(candidate)
    if value is NOTHING and ("'" in candidate or _TRAILING_COMMA_TEST.search(candidate)):
        value = loads(_TRAILING_COMMA.sub(r"\1", _SINGLE_QUOTED.sub(r'"\1"', candidate)))
    return value if isinstance(value, dict) else None


def _truncated_object(text: str, start: int) -> dict | None:
    match = _TRUNCATED.search(text, start)
    if not match:
        return None
    raw = match.group(2)
    return {match.group(1): None if raw == "null" else raw[1:-1]}
