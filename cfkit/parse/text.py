"""What a grader looks at: the reply as plain text, and only a bounded part of a huge one."""

from __future__ import annotations

import re
import unicodedata

#: Longest text graded, in characters (after the reasoning split). A longer reply
#: is graded on its first and last ``GRADED_CAP // 2`` characters (see :func:`window`).
GRADED_CAP = 65_536

#: Stands where the rules cut something out (a JSON object, an echoed option list):
#: a boundary that reads as neither text nor an answer. U+FFFC is neither whitespace
#: (``\s`` matches control characters such as U+001E) nor a word character, and NFKC keeps it.
MASK = "\ufffc"

# Characters that continue a word: an option id touching one is part of a word
# ("AB", "Ä"). CJK is not among them, so 答案B reads as 答案 then B.
WORD = "A-Za-z0-9_\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff"

# Quotes straight, CJK full stops and commas to ASCII (NFKC keeps them), zero-width marks gone.
_PUNCT = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u3002": ".",
                        "\u3001": ",", "\u200b": None, "\u200c": None, "\u200d": None, "\u2060": None,
                        "\ufeff": None, "\r": "\n"})
# LaTeX wrappers a model puts around its answer: \boxed{B}, \text{B}. Bounded, so a
# wrapper that never closes costs at most 200 characters of scanning.
_LATEX_WRAPPER = re.compile(r"\\(?:boxed|fbox|text|textbf|textrm|mathrm|mathbf|mbox)\s*\{([^{}\n]{0,200})\}")
# Emphasis and math marks: **B**, __B__, `B`, $B$, \(B\), <b>B</b>.
_MARKS = re.compile(r"\*+|__+|`+|\$+|\\[()\[\]]|</?(?i:b|strong|em|i|u|code)>")
_HEADING = re.compile(r"(?m)^[ \t]*#{1,6}[ \t]*")
# How far a cut may move to land on whitespace instead of inside a word.
_CUT_SLACK = 256


def normalize(text: str) -> str:
    """Full-width forms to ASCII (NFKC), curly quotes straight, markup removed: what a grader reads.

    >>> normalize("**答案：Ｂ**")
    '答案:B'
    """
    text = unicodedata.normalize("NFKC", text).translate(_PUNCT)
    for _ in range(3):  # \boxed{\text{B}}: innermost first
        text = _LATEX_WRAPPER.sub(r" \1 ", text)
    return _HEADING.sub("", _MARKS.sub("", text))


def window(text: str, cap: int = GRADED_CAP) -> tuple[str, bool]:
    """The graded part of ``text``: all of it, or, when longer than ``cap``, its two ends.

    Answers stand at the start of a reply (a label, Yes/No) or at its end (a
    final answer line), so the middle is what is dropped. Each cut moves back to
    whitespace within 256 characters so no word or option id is split; the two
    ends are joined by :data:`MASK`, a boundary. Returns the text and whether it
    was cut.
    """
    if len(text) <= cap:
        return text, False
    half = cap // 2
    head_end = max(text.rfind(" ", half - _CUT_SLACK, half), text.rfind("\n", half - _CUT_SLACK, half))
    head_end = head_end if head_end > 0 else half
    tail_start = len(text) - half
    spaces = [i for i in (text.find(" ", tail_start, tail_start + _CUT_SLACK),
                          text.find("\n", tail_start, tail_start + _CUT_SLACK)) if i != -1]
    tail_start = min(spaces) + 1 if spaces else tail_start
    return text[:head_end] + "\n" + MASK + "\n" + text[tail_start:], True
