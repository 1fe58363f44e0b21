"""Answers given without naming an option: a polarity on a Yes/No question, or a rejection on two options.

Three findings, each from plain (normalised) text:

- **polarity** — on an option set whose texts include Yes and No, a reply that
  opens with a sentence that only says yes or no in other words: ``Not
  suitable.``, ``Definitely not.``, ``It is not appropriate.``, ``Certainly.``,
  or yes/no in another language (``Nein.``, ``Oui``, ``いいえ``). It reads the
  option whose text is that word.
- **contradiction** — a leading Yes or No whose own sentence then says the
  opposite about the question's predicate: ``Yes, it is not suitable.``, ``No,
  it is suitable.``, ``No, it is.``. It blocks any answer (``conflicting``).
- **rejection** — on two options, a label that is rejected (``Not A.``, ``The
  answer is not A``, ``A is wrong``) reads the other option, provided the
  rejected option is named nowhere else, the other is not rejected too, and the
  sentence is neither a question nor a condition.

Every pattern starts with a fixed word or is anchored at a given position, and
no two adjacent quantifiers share characters, so each scan is linear.
"""

from __future__ import annotations

import bisect
import re
from functools import lru_cache

from cfkit.parse.text import MASK, WORD
from cfkit.parse.vocabulary import Vocabulary

_ADVERB = (r"(?:(?:definitely|certainly|clearly|absolutely|surely|obviously|of[ \t]+course|really|probably|"
           r"most[ \t]+likely|likely|simply|just|quite|entirely|fully|very|perfectly)[ \t]+)")
# What a Yes/No question in these suites asks: whether an image suits, fits or matches a use.
_GOOD = (r"(?:suitable|appropriate|fitting|suited|acceptable|compatible|consistent|apt|"
         r"a[ \t]+(?:good[ \t]+|great[ \t]+)?(?:fit|match|choice))")
_BAD = (r"(?:unsuitable|inappropriate|unfitting|unsuited|ill-suited|unacceptable|incompatible|inconsistent|"
        r"a[ \t]+(?:poor|bad)[ \t]+(?:fit|match|choice)|a[ \t]+mismatch)")
_SUBJECT = (r"(?:(?:it|this|that|the[ \t]+image|the[ \t]+picture|the[ \t]+photo)"
            r"(?:[ \t]+is|'s|[ \t]+would[ \t]+be)[ \t]+)")
_SUBJECT_NOT = (r"(?:(?:it|this|that|the[ \t]+image|the[ \t]+picture|the[ \t]+photo)"
                r"(?:[ \t]+is[ \t]+not|[ \t]+isn't|'s[ \t]+not|[ \t]+would[ \t]+not[ \t]+be|"
                r"[ \t]+wouldn't[ \t]+be)[ \t]+)")
# What may follow the predicate in the same sentence: "Not suitable for a children's book."
_COMPLEMENT = r"(?:[ \t]+(?:for|as|in|to|with)[ \t][^.!?;,\n" + MASK + r"]{0,120})?"
_END = rf"(?:[ \t]*(?:[.!;,:\n{MASK}]|\Z)|[ \t]+[-–—])"

# Yes and No in other languages (and informal English). A word in a Latin or Cyrillic script counts when
# punctuation or the end follows it ("Nein.", "Oui, …"); a CJK word only when the sentence is that word.
_FOREIGN = {
    "yes": ("oui", "ja", "jawohl", "sí", "si", "sim", "да", "sì", "evet", "tak", "yep", "yeah", "yup"),
    "no": ("non", "nein", "não", "nao", "нет", "nee", "nie", "hayır", "nope", "nah"),
}
_CJK = {
    "yes": ("はい", "是的", "是", "对", "對", "네", "예"),
    "no": ("いいえ", "不是", "不对", "不對", "否", "不", "아니요", "아니오", "아니"),
}


def _alternatives(words: tuple[str, ...]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


@lru_cache(maxsize=None)
def _polarity() -> re.Pattern:
    """The polarity pattern, compiled when first needed (it is large; ``import cfkit.parse`` stays quick)."""
    return re.compile(
        r"[\s\"'>•\-+]*(?i:"
        rf"(?P<no>{_SUBJECT_NOT}{_ADVERB}?{_GOOD}{_COMPLEMENT}"
        rf"|{_SUBJECT}?{_ADVERB}?{_BAD}{_COMPLEMENT}"
        rf"|{_SUBJECT}?{_ADVERB}?not(?:[ \t]+(?:at[ \t]+all|really|{_ADVERB}?{_GOOD}{_COMPLEMENT}))?"
        r"|no[ \t]+way|by[ \t]+no[ \t]+means|of[ \t]+course[ \t]+not"
        rf"|(?<![{WORD}])(?:{_alternatives(_FOREIGN['no'])})(?![{WORD}])"
        rf"|(?:{_alternatives(_CJK['no'])})(?=[ \t]*(?:[.!,\n{MASK}]|\Z)))"
        rf"|(?P<yes>{_SUBJECT}?{_ADVERB}?{_GOOD}{_COMPLEMENT}"
        rf"|(?<![{WORD}])(?:{_alternatives(_FOREIGN['yes'])})(?![{WORD}])"
        rf"|(?:{_alternatives(_CJK['yes'])})(?=[ \t]*(?:[.!,\n{MASK}]|\Z)))"
        r")" + _END)


# A statement about the question's predicate inside a leading Yes/No's sentence.
@lru_cache(maxsize=None)
def _statement() -> re.Pattern:
    return re.compile(
        r"(?i:"
        rf"(?P<bad>(?<![{WORD}]){_BAD}(?![{WORD}]))"
        rf"|(?P<good>(?<![{WORD}]){_GOOD}(?![{WORD}]))"
        rf"|(?P<verb>(?<![{WORD}])(?:fits?|suits?|matches)(?![{WORD}]))"
        rf"|(?P<short>(?<![{WORD}])(?:it|this|that)[ \t]+(?:is|does|would|will|can)(?:[ \t]+not|n't)?"
        rf"|(?<![{WORD}])(?:it|this|that)[ \t]+(?:isn't|doesn't|won't|wouldn't|can't|cannot))(?=[ \t]*(?:[.!;,\n]|\Z))"
        r")")
_NEGATED = re.compile(r"(?i)\b(?:not|never|hardly|barely|nor|neither|nothing|no[ \t]+longer)\b|n't\b|\bcannot\b")
_CONDITION = re.compile(r"(?i)\b(?:if|unless|whether|suppose|assuming|only[ \t]+(?:if|when|for|as))\b")
_CONDITION_AFTER = re.compile(r"[ \t]*(?i:if|unless|only[ \t]+(?:if|when|for|as))\b")
_SENTENCE_END = re.compile(rf"[.!?;\n{MASK}]")
_REACH = 80  # characters looked back from a statement for its negation


def read_polarity(text: str, position: int, vocab: Vocabulary) -> tuple[str, str, int] | None:
    """At ``position``, a sentence that says yes or no in other words, on an option set with Yes and No:
    (the option, the word it means, where the phrase ends), else None."""
    words = yes_no_options(vocab)
    if not words:
        return None
    match = _polarity().match(text, position)
    if not match:
        return None
    word = "no" if match.group("no") is not None else "yes"
    end = match.end("no") if word == "no" else match.end("yes")
    return words[word], word, end


def yes_no_options(vocab: Vocabulary) -> dict[str, str]:
    """{'yes': id, 'no': id} when the options' texts include both Yes and No, else {}."""
    words = {t: i for i, t in vocab.text_of.items() if t in ("yes", "no")}
    return words if len(words) == 2 else {}


def contradiction(text: str, start: int, word: str) -> str | None:
    """Whether the sentence that a leading ``word`` (yes or no) opens, from ``start``, says the opposite
    ("Yes, it is not suitable"); returns what it says, else None. Conditions ("only if …") are not read."""
    stop = _SENTENCE_END.search(text, start)
    end = stop.start() if stop else len(text)
    for match in _statement().finditer(text, start, end):
        low = max(start, match.start() - _REACH)  # bounded, so an endless sentence stays linear
        clause = max(low, max(text.rfind(ch, low, match.start()) for ch in ",:–—(") + 1)
        before = text[clause:match.start()]
        if _CONDITION.search(before) or _CONDITION_AFTER.match(text, match.end()):
            continue
        if match.group("short") is not None:
            negative = _NEGATED.search(match.group("short")) is not None
        else:
            negative = (match.group("bad") is not None) != (_NEGATED.search(before) is not None)
        if ("no" if negative else "yes") != word:
            return " ".join(text[clause:match.end()].split())
    return None


class Rejections:
    """Rejected labels in a text: ``Not A.``, ``The answer is not A``, ``It's not (A)``, ``A is wrong``.

    A rejection inside a question or a condition ("Is it not A?", "If it is not A, …"), one that is
    itself negated ("Nothing about A is wrong", "I don't think A is wrong"), or one that covers two
    options ("not A or B", "A or B is wrong"), is not one.
    """

    def __init__(self, text: str, vocab: Vocabulary):
        self.spans: dict[str, list[tuple[int, int]]] = {}
        self.words: dict[str, str] = {}
        self.vague = False  # a rejection that covers several options, or sits in a question or condition
        not_label, label_wrong = _rejection_patterns(vocab)
        seen = 0
        for pattern in (not_label, label_wrong):
            for match in pattern.finditer(text):
                seen += 1
                if seen > _MOST:  # a reply of endless rejections singles nothing out; stop looking
                    self.vague = True
                    break
                joined = (vocab.follow_label.match(text, match.end()) is not None if pattern is not_label
                          else _JOINED_BEFORE.search(text, max(0, match.start() - 12), match.start()) is not None)
                clause = max(text.rfind(ch, max(0, match.start() - 60), match.start()) for ch in ",;:.!?\n") + 1
                negated = _NEGATED.search(text, max(clause, match.start() - 60), match.start()) is not None
                if joined or negated or _questioned_or_conditional(text, match.start(), match.end()):
                    self.vague = True
                    continue
                option_id = match.group("id")
                self.spans.setdefault(option_id, []).append(match.span())
                self.words.setdefault(option_id, " ".join(match.group(0).split()))
        for spans in self.spans.values():
            spans.sort()

    def alternative(self, text: str, vocab: Vocabulary) -> tuple[str, str] | None:
        """On two options, (the other option, the rejected one) when exactly one option is rejected and it is
        named nowhere but in its rejections; else None."""
        if len(vocab.ids) != 2 or len(self.spans) != 1 or self.vague:
            return None
        [(rejected, where)] = self.spans.items()
        mentions = [m.span() for m in vocab.mention.finditer(text) if m.group(0) == rejected]
        if vocab.text_mention is not None:
            mentions += [m.span() for m in vocab.text_mention.finditer(text)
                         if vocab.option_of_text(m.group("text")) == rejected]
        starts = [span[0] for span in where]  # in order: each pattern's matches are, and they are merged
        for m0, m1 in mentions:
            n = bisect.bisect_right(starts, m0) - 1
            if n < 0 or where[n][1] < m1:  # named outside every rejection
                return None
        other = next(i for i in vocab.ids if i != rejected)
        # "Not A, not B", "Not A, neither B": the other option is rejected too, in words the patterns miss.
        others = [m.start() for m in vocab.mention.finditer(text) if m.group(0) == other]
        if vocab.text_mention is not None:
            others += [m.start() for m in vocab.text_mention.finditer(text)
                       if vocab.option_of_text(m.group("text")) == other]
        for start in others:
            clause = max(text.rfind(ch, max(0, start - 40), start) for ch in ",;:.!?\n") + 1
            if _NEGATED.search(text, max(clause, start - 40), start):
                return None
        return other, rejected


#: Rejections looked at in one reply; more make it vague (a grader would not pick an answer out of them).
_MOST = 20
_JOINED_BEFORE = re.compile(r"(?i:[,/&+]|\band|\bor|\bnor)[ \t]*\Z")
_PATTERNS: dict[tuple[str, ...], tuple[re.Pattern, re.Pattern]] = {}


def _rejection_patterns(vocab: Vocabulary) -> tuple[re.Pattern, re.Pattern]:
    cached = _PATTERNS.get(vocab.ids)
    if cached is not None:
        return cached
    label = vocab.label_pattern  # a label that something ends: "A.", "(A)", "A because …"
    bare = rf"[(\[]?(?<![{WORD}])(?P<id>{vocab.id_alternatives})(?![{WORD}])[)\]]?"
    cue = (rf"(?<![{WORD}])(?i:(?:final[ \t]+)?(?:answer|option|choice)[ \t]+(?:is|would[ \t]+be)|it[ \t]+is|it's"
           r"|this[ \t]+is)[ \t]+")
    opening = rf"(?:(?<=[.!;\n{MASK}])|^)[ \t\"'>•\-+]*"
    # "The answer is not A", "the correct option is definitely not (A)", "It's not A", "Not A." opening a sentence
    not_label = re.compile(rf"(?:{cue}|{opening})(?i:{_ADVERB})?(?i:not)[ \t]+(?:(?i:option)[ \t]+)?{label}")
    label_wrong = re.compile(
        # "A is wrong", "Option A is not correct", "A is incorrect because …" (not "A is wrong?")
        rf"(?:(?<![{WORD}])(?i:option)[ \t]+)?{bare}[ \t]+(?i:is|would[ \t]+be)[ \t]+(?i:{_ADVERB}?"
        r"(?:not[ \t]+(?:the[ \t]+)?(?:correct|right|answer|best)|incorrect|wrong))(?![ \t]*\?)")
    _PATTERNS[vocab.ids] = (not_label, label_wrong)
    return not_label, label_wrong


def _questioned_or_conditional(text: str, start: int, end: int) -> bool:
    sentence_start = max(text.rfind(ch, max(0, start - 120), start) for ch in ".!?;\n") + 1
    stop = _STOP.search(text, end)
    return (stop is not None and stop.group(0) == "?") or _CONDITION.search(text, sentence_start, start) is not None


_STOP = re.compile(rf"[.!?;\n{MASK}]")
