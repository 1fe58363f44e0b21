"""Echoed option lists: a reply that repeats the options ("A. Yes\\nB. No") has not answered yet.

An **item** is an option's label with its own text ("A) Yes", "(B) No", "Option
C: A race", "A (Yes)"), a line that opens with a label and a delimiter ("- B: grim
colours"), a line that is only a label, or a line that is only an option's text
("Yes"). Items form a **list** when each follows the previous one directly —
only spaces, commas, slashes or "or" between them, or the next item opening the
next non-blank line — and names a later option than it, in the order the
options were given (that is how options are listed; "B. No" then "A. Yes is
wrong" is an answer followed by a remark). A list of two or more items is an
echo: it is cut out, and the reply may single out an answer after it.
"""

from __future__ import annotations

import re

from cfkit.parse.result import Findings
from cfkit.parse.text import MASK
from cfkit.parse.vocabulary import Vocabulary

# What may stand between two listed items on one line: spaces, punctuation, a bullet, "or".
_SEPARATOR = re.compile(r"[\s,;|/\-•*+]*(?:(?i:or|and)\b[\s,\-•*+]*)?")

_Item = tuple[int, int, int]  # start, end, option index


def cut_echoes(text: str, vocab: Vocabulary, found: Findings) -> tuple[str, list[int]]:
    """``text`` with each echoed list masked out, and the positions where an answer may open.

    The positions are 0 and the end of each echoed list; the ids of echoed
    options are recorded in ``found.echoed``. Masking keeps every position.
    """
    items = _items(text, vocab)
    lists: list[list[_Item]] = []
    for item in items:
        if lists and item[2] > lists[-1][-1][2] and _adjacent(text, lists[-1][-1], item):
            lists[-1].append(item)
        else:
            lists.append([item])
    echoes = [run for run in lists if len(run) > 1]
    if not echoes:
        return text, [0]
    pieces, position, openings = [], 0, [0]
    for run in echoes:
        for start, end, _ in run:
            pieces += [text[position:start], MASK * (end - start)]
            position = end
        openings.append(run[-1][1])
        found.echoed += [vocab.ids[n] for _, _, n in run if vocab.ids[n] not in found.echoed]
    pieces.append(text[position:])
    return "".join(pieces), openings


def _items(text: str, vocab: Vocabulary) -> list[_Item]:
    """Every item, in order. Overlapping items of one option merge ("- A. Yes" is a line item "- A." and a
    text item "A. Yes"); of an item overlapping one of another option, the first is kept."""
    found: list[_Item] = []
    for pattern in (vocab.text_item, vocab.text_line):
        if pattern is not None:
            found += [(m.start(), m.end(), int(m.lastgroup[1:])) for m in pattern.finditer(text)]
    for m in vocab.line_item.finditer(text):
        n = vocab.index[m.group("id")]
        rest = vocab.own_rest[n].match(text, m.end()) if n in vocab.own_rest else None  # "B) - No": all of it
        found.append((m.start(), rest.end() if rest else m.end(), n))
    found.sort(key=lambda item: (item[0], -item[1]))
    items: list[_Item] = []
    for item in found:
        if not items or item[0] >= items[-1][1]:
            items.append(item)
        elif item[2] == items[-1][2]:
            items[-1] = (items[-1][0], max(items[-1][1], item[1]), item[2])
    return items


def _adjacent(text: str, previous: _Item, item: _Item) -> bool:
    gap = text[previous[1]:item[0]]
    if _SEPARATOR.fullmatch(gap):
        return True
    newline = gap.find("\n")
    return newline != -1 and not gap[newline:].strip()
