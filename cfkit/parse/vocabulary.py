"""The words of one option set: how a reply can name an option, compiled once per set.

A reply names an option by its **label** (the id, case-sensitive and standing
alone: ``B``, ``(B)``, ``[B]``, ``Option B``) or by its **text** (the option's
exact text, in any case and spacing: ``No``, ``a funeral``). A name counts only
where something ends it: the end, punctuation other than ``?``, a bracket, a
dash, a quote, a CJK character, or a connective (``B because …``). So the
article in "A Serene Moment" is not option A, "Yesterday" is not Yes, and
"B?" asks rather than answers.

Every pattern here is built so that scanning a text with it is linear: no two
adjacent quantifiers share characters, and each ``finditer`` pattern starts
with a fixed character or word.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cached_property, lru_cache

from cfkit.parse.text import MASK, WORD, normalize

# Words that may follow an answer without starting a phrase with it ("B because the mood is grim").
_CONNECTIVE = r"(?i:because|since|as[ \t]+(?:it|the|this|there)|given[ \t]+(?:that|the)|due[ \t]+to)\b"
# What may end a name: see the module docstring. A full stop before a digit is a decimal point
# ("1.5"); an apostrophe before a letter is a possessive ("A's colours").
_DELIM = (rf"(?=[ \t]*(?:\Z|[\n,;:!)\]}}\"<–—{MASK}\u3400-\u9fff]|\.(?![0-9])|'(?![A-Za-z]))"
          rf"|[ \t]+[-(]|[ \t]+{_CONNECTIVE})")
# What may come before the first word of a reply or line: spaces, quotes, a quote mark or a bullet.
_OPENING = r"[\s\"'>•\-+]*"
# Words that open a concluding sentence: "So, B.", "Therefore (C)", "Final answer\nB".
_CONCLUDE = (r"(?i:so|thus|hence|therefore|overall|ultimately|finally|actually|in[ \t]+short|in[ \t]+conclusion|"
             r"in[ \t]+summary|on[ \t]+reflection|verdict|conclusion|(?:my[ \t]+)?(?:final[ \t]+)?answer|"
             r"my[ \t]+choice)")
# Phrases that declare the words after them the answer. Each starts with a fixed word, so a scan is linear.
_CUES = (
    # "Answer: B", "Final answer - (B)", "the answer is B", "the correct option is B", '"answer": "B"',
    # "the answer to this question is B"
    (r"(?<![A-Za-z0-9])(?i:final[ \t_]+answer|answer|option|choice|verdict|selection|response|"
     r"(?:final[ \t]+)?decision)[\"']?"
     r"(?:[ \t]+(?i:to|for)[ \t]+(?i:this|the)[ \t]+question)?"
     r"(?:\s*[:=\-–]\s*|[ \t]+(?i:is|would[ \t]+be|will[ \t]+be|should[ \t]+be|must[ \t]+be)(?:[ \t]*:)?\s+)"
     r"[\"']?"),
    # "I choose C", "I'd go with C", "I would say B", "I think B", "we pick A"
    (r"(?<![A-Za-z0-9])(?i:i(?:'d|'ll|[ \t]+would|[ \t]+will)?|we(?:'d|'ll|[ \t]+would|[ \t]+will)?)[ \t]+"
     r"(?i:choose|select|pick|go[ \t]+with|opt[ \t]+for|say|think|believe|answer)[ \t]*:?[ \t]*[\"']?"),
    r"(?<![A-Za-z0-9])(?i:going[ \t]+with)[ \t]+",
    r"<(?i:answer|final_answer)>\s*",
    # 答案：B, 最终答案是B, 我选择B (full-width colons are ASCII by now)
    r"(?:最终答案|正确答案|答案|我选择|我选|选择|答|选)[ \t]*(?:是|为)?[ \t]*[:=]?[ \t]*",
)
# Words that turn a clause to a (new) conclusion: "…, so B", "Actually, yes", "but actually no", "but no".
_TURNING = (r"(?i:(?:but|and)[ \t]+(?:actually|wait|rather|really|in[ \t]+fact|then|on[ \t]+second[ \t]+thought|"
            r"on[ \t]+reflection)|but|actually|wait|so|then|rather|therefore|thus|hence|in[ \t]+fact|"
            r"on[ \t]+second[ \t]+thought|correction)")
_ADVERB = r"(?:(?i:clearly|definitely|probably|likely|obviously|simply|most[ \t]+likely)[ \t]+)?"
# "B is correct", "Option C is the best", "No is the right answer" (not "B is correct?").
# "A would be right for a wedding" is hypothetical, not a verdict.
_VERDICT_TAIL = (r"[ \t]+(?:(?i:is|seems)[ \t]+|(?i:would[ \t]+be)[ \t]+(?!\S+[ \t]+(?i:for|if|in|when)\b))"
                 r"(?:(?i:the|most|more|the[ \t]+better)[ \t]+)?"
                 r"(?i:correct|right|best|better|preferable|suitable|appropriate|fitting|answer|choice)\b"
                 r"(?![ \t]*\?)")
_PREFIX = r"(?:(?i:option|choice)[ \t]+)?"
# What joins two names in a list: "A, B", "A/B", "A and B", "A, or maybe B", "A vs B".
_JOIN = r"[ \t]*(?:[,/&+]|(?i:and|or|vs)\b)(?:[ \t]+(?i:and|or|maybe|perhaps|possibly|even|also)\b)*[ \t]*"
_BULLET = r"(?:[-*•+][ \t]*)?"


def text_key(text: str) -> str:
    """How an option's text is compared: words lower-cased and single-spaced, end punctuation dropped."""
    return " ".join(text.split()).strip(" .!").lower()


class Vocabulary:
    """The patterns for one option set; :func:`vocabulary` caches them per set.

    Each pattern is compiled when first used: a run meets many option sets, and a
    JSON reply needs only a few of the patterns.
    """

    def __init__(self, ids: Sequence[str], texts: Sequence[str]):
        if not ids or len(set(ids)) != len(ids) or any(not i.strip() for i in ids):
            raise ValueError(f"option ids must be unique and non-empty, got {list(ids)}")
        self.ids = tuple(ids)
        self.index = {option_id: n for n, option_id in enumerate(ids)}
        self.longest_id = max(len(i) for i in ids)
        # Option texts a reply can give instead of the id: unique in the set, holding a letter or digit,
        # and not an id themselves (a text "B" would make the label B ambiguous). They are normalised
        # like replies, so markup in an option reads the same.
        keys: dict[str, list[str]] = {}
        for option_id, text in zip(ids, texts):
            key = text_key(normalize(text))
            if any(ch.isalnum() for ch in key) and key not in {i.lower() for i in ids}:
                keys.setdefault(key, []).append(option_id)
        self.text_of = {found[0]: key for key, found in keys.items() if len(found) == 1}
        self._own_text = {i: re.compile(rf"(?i:{_words(key)})") for i, key in self.text_of.items()}
        alternatives = "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True))
        self._ids = f"(?:{alternatives})"
        # A label: the id alone, perhaps bracketed. A closing bracket ends it by itself ("(B) No").
        self._label = rf"[(\[]?(?<![{WORD}])(?P<id>{self._ids})(?![{WORD}])(?:[)\]]|{_DELIM})"
        self._value = rf"{_PREFIX}(?:{self._texts('text')}{_DELIM}|{self._label})"
        # The second name of a list may end in "?" or go on with "or" ("A, B or C?").
        listed_end = rf"(?:{_DELIM}|(?=[ \t]*\?)|(?=[ \t]+(?i:or|and|nor)\b))"
        self._listed_end = listed_end
        self._listed_label = rf"[(\[]?(?<![{WORD}])(?P<id>{self._ids})(?![{WORD}])(?:[)\]]|{listed_end})"

    @property
    def label_pattern(self) -> str:
        """The source of a label pattern (group ``id``) that something ends: "B.", "(B)", "B because …"."""
        return self._label

    @property
    def id_alternatives(self) -> str:
        """The source of a pattern matching any id, longest first."""
        return self._ids

    @cached_property
    def leading(self) -> re.Pattern:
        """A value at a given position (the start of the reply, or just after an echoed list)."""
        return re.compile(_OPENING + self._value)

    @cached_property
    def bare_label(self) -> re.Pattern:
        """A JSON string value that is only a label: "B", "(B)", "Option B.", " B: "."""
        return re.compile(rf"[\s\"']*{_PREFIX}[(\[]?(?P<id>{self._ids})[)\]]?[ \t]*[.:]?[\s\"']*")

    @cached_property
    def follow_label(self) -> re.Pattern:
        """Another label right after one: "A, B", "A/B", "A or B", "A and option B"."""
        return re.compile(rf"{_JOIN}{_PREFIX}{self._listed_label}")

    @cached_property
    def follow_value(self) -> re.Pattern:
        """Another value right after an option text: "Yes, No", "a wedding or a funeral"."""
        return re.compile(rf"{_JOIN}{_PREFIX}(?:{self._texts('text')}{self._listed_end}|{self._listed_label})")

    @cached_property
    def text_after_label(self) -> re.Pattern:
        """An option's text right after a label: "B) No", "A. a wedding" (it must be the label's own)."""
        return re.compile(rf"[ \t]*[.:)\]\-–—,=(]*[ \t]*{self._texts('text')}{_DELIM}")

    @cached_property
    def beside(self) -> re.Pattern:
        """Another name right beside one, past quotes, brackets and punctuation on the same line:
        'A "B"', "A (B)", "A 'No'", "A [B]", "A. No" (version 3: whatever the quotes or brackets)."""
        return re.compile(rf"[ \t\"'(\[{{.:,;=\-–—/]*{_PREFIX}(?:{self._texts('text')}{self._listed_end}"
                          rf"|{self._listed_label})")

    @cached_property
    def clause_value(self) -> re.Pattern:
        """A later clause that opens with an option's name: "No, … — yes." contradicts a leading No,
        "A. Yes would need colour, so B." a leading A."""
        # A turn may also follow a plain space or a hyphen: "Yes but actually no", "Yes - actually no".
        return re.compile(rf"(?:[\n.!?;,:–—{MASK}]|[ \t]-|[ \t](?=(?i:but|and)[ \t]))[ \t\"']*"
                          rf"(?:(?P<turn>{_TURNING})[ \t]*[,:\-–—]?[ \t]*)?{self._value}"
                          rf"(?P<alone>(?=[ \t\"'.!]*(?:[\n{MASK}]|\Z)))?")

    @cached_property
    def closing(self) -> re.Pattern:
        """A whole last sentence that is an answer by itself: "B", "So, no.", "Therefore (C)", "B. No"."""
        return re.compile(rf"{_OPENING}(?:{_CONCLUDE}[ \t]*[,:\-–—]?\s*)?{self._value}"
                          rf"(?:[ \t]*[.:)\]\-–—,=]*[ \t]*{self._texts('after')}{_DELIM})?[\s.!\"'{MASK}]*")

    @cached_property
    def closing_clause(self) -> re.Pattern:
        """A last clause that concludes with a value: "The mood is grim, so B." (after a comma or colon)."""
        return re.compile(rf"[ \t]*(?:(?i:but)[ \t]+)?{_CONCLUDE}[ \t]*[,:\-–—]?\s*{self._value}"
                          rf"[ \t]*[.!]*[\s\"'{MASK}]*")

    @cached_property
    def declaration(self) -> re.Pattern:
        """A declared answer anywhere: a cue phrase, perhaps an adverb, then a value."""
        return re.compile(f"(?:{'|'.join(_CUES)}){_ADVERB}{self._value}")

    @cached_property
    def verdict(self) -> re.Pattern:
        """A value followed by a verdict: "B is correct", "a funeral is the best"."""
        return re.compile(rf"{_PREFIX}(?:{self._texts('text')}|[(\[]?(?<![{WORD}])(?P<id>{self._ids})(?![{WORD}])"
                          rf"[)\]]?){_VERDICT_TAIL}")

    @cached_property
    def mention(self) -> re.Pattern:
        """Any stand-alone id."""
        return re.compile(rf"(?<![{WORD}]){self._ids}(?![{WORD}])")

    @cached_property
    def text_mention(self) -> re.Pattern | None:
        """Any option text, or None when no text is usable."""
        return re.compile(self._texts("text") + rf"(?![{WORD}])") if self.text_of else None

    @cached_property
    def id_at_end(self) -> re.Pattern:
        """Just before a full stop: is it a label's ("B.") rather than a sentence's end?"""
        return re.compile(rf"(?<![{WORD}]){self._ids}\Z")

    # Echoed option lists (see cfkit.parse.echo). Named groups o0, o1, … say which option an item is.

    @cached_property
    def text_item(self) -> re.Pattern | None:
        """An option item with its own text, anywhere: "A. Yes", "(A) Yes", "Option A: Yes", "A (Yes)"."""
        items = []
        for n, option_id in enumerate(self.ids):
            if option_id not in self.text_of:
                continue
            i = re.escape(option_id)
            # The text may be quoted or follow a dash: "A) \"Yes\"", "A) — A wedding".
            own = rf"[ \t]*(?:[\-–—][ \t]*)?[\"']?(?i:{_words(self.text_of[option_id])})(?![{WORD}])[\"']?"
            items.append(rf"(?P<o{n}>(?:(?<![{WORD}])(?i:option)[ \t]+)?"
                         rf"(?:(?:\({i}\)|\[{i}\]|(?<![{WORD}]){i}[ \t]*[.):\-–—=]){own}"
                         rf"|(?<![{WORD}]){i}[ \t]*\({own}[ \t]*\)))")
        return re.compile("|".join(items)) if items else None

    @cached_property
    def line_item(self) -> re.Pattern:
        """A line that opens with a label and a delimiter ("- B: grim"), or is only a label."""
        return re.compile(rf"(?m)^[ \t]*{_BULLET}(?:(?i:option)[ \t]+)?[(\[]?(?P<id>{self._ids})(?![{WORD}])[)\]]?"
                          r"[ \t]*(?:[.):\-–—]|$)")

    @cached_property
    def own_rest(self) -> dict[int, re.Pattern]:
        """By option index: the rest of a line item's line when it is only that option's own text, however
        quoted or dashed ("B) - No", "B) \"No\""), so an echo ends after it, not before it."""
        return {self.index[i]: re.compile(rf"[ \t\"'(\-–—:.=]*(?i:{_words(key)})(?![{WORD}])[ \t\"').!]*(?=\n|\Z)")
                for i, key in self.text_of.items()}

    @cached_property
    def text_line(self) -> re.Pattern | None:
        """A line that is only an option's text ("Yes", "- A funeral")."""
        lines = [rf"(?P<o{self.index[i]}>(?i:{_words(key)}))" for i, key in self.text_of.items()]
        return re.compile(rf"(?m)^[ \t]*{_BULLET}(?:{'|'.join(lines)})[ \t]*[.,;]?[ \t]*$") if lines else None

    def _texts(self, group: str) -> str:
        """A named group matching any option's text (longest first), or nothing when no text is usable."""
        if not self.text_of:
            return f"(?P<{group}>(?!))"
        keys = sorted(self.text_of.values(), key=len, reverse=True)
        return f"(?P<{group}>(?i:{'|'.join(_words(k) for k in keys)}))"

    def option_of(self, match: re.Match, group: str = "text") -> str:
        """The option a match names: its label, else the option whose text the group holds."""
        if match.group("id") is not None:
            return match.group("id")
        return self.option_of_text(match.group(group))

    def option_of_text(self, words: str) -> str:
        for option_id, pattern in self._own_text.items():
            if pattern.fullmatch(words):
                return option_id
        raise LookupError(words)  # unreachable: the group only matches option texts

    def kind_of(self, match: re.Match) -> str:
        """'label', 'yes-no' (the text Yes or No) or 'text'."""
        if match.group("id") is not None:
            return "label"
        return "yes-no" if text_key(match.group("text")) in ("yes", "no") else "text"


def _words(key: str) -> str:
    """A pattern for an option text's words, any spacing between them, not inside a longer word."""
    words = r"\s+".join(re.escape(w) for w in key.split())
    return (rf"(?<![{WORD}])" if re.match(rf"[{WORD}]", key) else "") + words


@lru_cache(maxsize=1024)
def vocabulary(ids: tuple[str, ...], texts: tuple[str, ...]) -> Vocabulary:
    """The :class:`Vocabulary` of an option set (cached: a run asks the same options many times)."""
    return Vocabulary(ids, texts)
