"""Split reasoning blocks off a reply: they are kept, never graded."""

from __future__ import annotations

import re

# Tags reasoning models wrap their thinking in. Matched case-insensitively, by name.
_TAG = re.compile(r"<(/?)(think|thinking|reasoning)>", re.IGNORECASE)


def split_reasoning(raw: str) -> tuple[str, str | None]:
    """Split ``raw`` into the text to grade and the text of its reasoning blocks (None when it has none).

    A block is ``<think>…</think>``, ``<thinking>…</thinking>`` or
    ``<reasoning>…</reasoning>``, in any case. A block never closed runs to the
    end of the reply (a reply cut off while thinking has nothing to grade). A
    closing tag before any opening one means the chat template opened the block,
    so everything before it is reasoning. Other tags inside a block are part of
    it; a stray closing tag after the blocks is dropped. One pass over the tags.

    >>> split_reasoning("<think>a funeral?</think>No.")
    ('No.', 'a funeral?')
    """
    graded: list[str] = []
    reasoning: list[str] = []
    position = 0  # where the next graded piece starts
    open_name: str | None = None
    open_end = 0
    found = False
    for match in _TAG.finditer(raw):
        closing, name = match.group(1) == "/", match.group(2).lower()
        if open_name is not None:
            if closing and name == open_name:
                reasoning.append(raw[open_end:match.start()])
                open_name, position = None, match.end()
            continue
        if not closing:
            graded.append(raw[position:match.start()])
            open_name, open_end = name, match.end()
        elif not found:  # the template opened the block: everything so far is reasoning
            reasoning.append(raw[:match.start()])
            position = match.end()
        else:  # a stray closing tag: drop the tag, keep the text around it
            graded.append(raw[position:match.start()])
            position = match.end()
        found = True
    if not found:
        return raw, None
    if open_name is not None:
        reasoning.append(raw[open_end:])
    else:
        graded.append(raw[position:])
    return "".join(graded), "\n\n".join(part.strip() for part in reasoning if part.strip())
