"""The rules that read an answer from plain text (after JSON and markup are gone).

Each rule adds what it reads to a :class:`Findings`; the decision
(:mod:`cfkit.parse.decision`) then accepts one option only when every reading
agrees and nothing blocks. In the order they are tried:

1. **leading** — the reply (or the text just after an echoed option list) opens
   with a value: a label (``B``, ``(B) No``, ``Option B``: rule ``leading-id``),
   exactly Yes/No (``yes-no``), Yes/No followed by a reason (``No, the drink is
   espresso…``: ``leading-yes-no``), or an option's text (``option-text``).
2. **declarations** — anywhere, a cue then a value (``Answer: B``, ``the answer
   is No``, ``I'd go with C``, ``答案：B``) or a value then a verdict (``B is
   correct``): rule ``field``. Skipped when negated or conditional.
3. **closing** — the last sentence is a value by itself (``…\\n\\nB``, ``So,
   no.``, ``Therefore (C)``) or ends in a bracketed id (``… a race (C).``).

4. **polarity** and **rejection** (:mod:`cfkit.parse.polarity`) — ``Not
   suitable.``/``Nein.`` on a Yes/No question; ``Not A.`` on two options.

Checks that block any answer: a second option right after a value (``A, B``:
ambiguous), another option beside a name whatever the quotes or brackets
(``A "B"``: ambiguous; ``A "No"``, ``A. No``: conflicting), a self-correction
(``Yes, but actually No``, ``The answer is A, but actually B``: conflicting), a
leading Yes/No whose own sentence says the opposite (``Yes, it is not
suitable``: conflicting), and a leading Yes/No or option text contradicted by a
later clause that opens with another option's text (``No, … Yes, it works``).
"""

from __future__ import annotations

import re

from cfkit.parse.echo import cut_echoes
from cfkit.parse.polarity import Rejections, contradiction, read_polarity
from cfkit.parse.result import Findings, Reading, Rule
from cfkit.parse.text import MASK
from cfkit.parse.vocabulary import Vocabulary, text_key

_TRAILER = re.compile(rf"[\s.!\"'{MASK}]*")
_SENTENCE_END = re.compile(r"[.!?;]")
_CLAUSE_MARKS = "\n.!?;,:–—" + MASK
_SENTENCE_MARKS = "\n.!?;" + MASK
# Words that make a following declaration a rejection ("I don't think the answer is A", "not B is correct").
_NEGATION = re.compile(r"(?i)\b(?:not|never|nor|neither|rather[ \t]+than|instead[ \t]+of|except)\b|n't\b"
                       r"|\bno\b(?![ \t]+doubt)")
# Words that make a declaration conditional ("If it were a wedding, the answer would be A").
_CONDITION = re.compile(r"(?i)\b(?:if|whether|unless|suppose|supposing|assuming|assume|wonder(?:ing)?)\b")
_TURN = re.compile(r"(?i)\b(?:but|however|yet|still|otherwise)\b")
# A leading Yes/No that then declines to commit: "No, I can't tell from the image".
_UNSURE = re.compile(r"(?i)\b(?:can(?:'t|not)|unable[ \t]+to|hard[ \t]+to|difficult[ \t]+to|impossible[ \t]+to)"
                     r"[ \t]+(?:tell|say|determine|know|judge|decide)\b"
                     r"|\bnot[ \t]+sure\b|\bunsure\b|\bit[ \t]+depends\b")
# A closing clause that corrects what came before ("…, but actually B", "Actually, B.").
_CORRECTION = re.compile(r"[\s\"'>•\-+,]*(?i:but|actually|wait|rather|correction|in[ \t]+fact|"
                         r"on[ \t]+second[ \t]+thought)\b")
_REACH = 80  # characters looked at around a declaration for negation and conditions


def read_prose(text: str, vocab: Vocabulary, found: Findings) -> None:
    """Apply every rule above to normalised ``text``, adding readings and blocks to ``found``."""
    text, openings = cut_echoes(text, vocab, found)
    # The reply may open at its start, or single out an answer right after an echoed list: after the
    # first and after the last (three positions at most, so a reply of many lists stays linear).
    for position in dict.fromkeys(openings[:2] + openings[-1:]):
        leading(text, position, vocab, found)
    _declarations(text, vocab, found)
    _closing(text, vocab, found)
    _bracketed_end(text, vocab, found)
    _rejections(text, vocab, found)


def _rejections(text: str, vocab: Vocabulary, found: Findings) -> None:
    """A rejected label ("Not A.", "The answer is not A") is never the answer; on two options, when nothing
    else names it, the reply gives the other one."""
    rejections = Rejections(text, vocab)
    found.rejected.update(rejections.words)
    alternative = rejections.alternative(text, vocab)
    if alternative is not None:
        other, rejected = alternative
        found.readings.append(Reading(other, "rejection", f"the reply rejects {rejected} "
                                                          f"('{rejections.words[rejected]}'), leaving {other}"))


def leading(text: str, position: int, vocab: Vocabulary, found: Findings) -> None:
    """Rule 1 at ``position``: a value that opens the text there."""
    match = vocab.leading.match(text, position)
    if not match:
        _leading_polarity(text, position, vocab, found)
        return
    answer, kind = vocab.option_of(match), vocab.kind_of(match)
    exact = _TRAILER.fullmatch(text, match.end()) is not None
    said = _snippet(text, _value_start(match), match.end())
    if kind == "label":
        _check_label(text, match, answer, vocab, found)
        rule: Rule = "leading-id"
    else:
        _check_text(text, match, answer, vocab, found)
        rule = ("yes-no" if exact else "leading-yes-no") if kind == "yes-no" else "option-text"
    if not exact:
        if kind == "yes-no":
            _check_contradiction(text, match.end(), text_key(match.group("text")), said, found)
        _check_later_clauses(text, said, match.end(), answer, vocab, kind, found)
    mapped = "" if kind == "label" else f" (the text of option {answer})"
    found.readings.append(Reading(answer, rule, f"the reply {'is' if exact else 'opens with'} '{said}'{mapped}"))


def _leading_polarity(text: str, position: int, vocab: Vocabulary, found: Findings) -> None:
    """Rule ``polarity``: on a Yes/No question, a reply opening with "Not suitable.", "Definitely not.",
    "Nein." reads the option whose text is that word (docs/parsing.md)."""
    read = read_polarity(text, position, vocab)
    if read is None:
        return
    answer, word, end = read
    said = _snippet(text, position, end)
    _check_contradiction(text, end, word, said, found)
    _check_later_clauses(text, said, end, answer, vocab, "yes-no", found)
    found.readings.append(Reading(answer, "polarity", f"the reply opens with '{said}', which says {word} "
                                                      f"(option {answer} is '{word.capitalize()}')"))


def _check_contradiction(text: str, end: int, word: str, said: str, found: Findings) -> None:
    """"Yes, it is not suitable.": a leading yes or no whose own sentence says the opposite."""
    opposite = contradiction(text, end, word)
    if opposite is not None:
        found.blocks.append(("conflicting", f"the reply opens with '{said}' but its sentence says '{opposite}'"))


def _check_label(text: str, match: re.Match, answer: str, vocab: Vocabulary, found: Findings) -> None:
    if _check_beside(text, match, answer, vocab, found):
        return
    following = vocab.follow_label.match(text, match.end())
    if following and following.group("id") != answer:
        found.blocks.append(("ambiguous", (f"the reply names {answer} and {following.group('id')}: "
                                           f"'{_snippet(text, match.start(), following.end())}'")))
    text_after = vocab.text_after_label.match(text, match.end())
    if text_after and vocab.option_of_text(text_after.group("text")) != answer:
        other = vocab.option_of_text(text_after.group("text"))
        found.blocks.append(("conflicting", (f"the reply gives {answer} with the text of option {other}: "
                                             f"'{_snippet(text, match.start(), text_after.end())}'")))


def _check_beside(text: str, match: re.Match, answer: str, vocab: Vocabulary, found: Findings) -> bool:
    """A name right beside another one, whatever the quotes or brackets: 'A "B"', "A (B)", 'A "No"',
    "Yes 'No'". Beside a label, another label is ambiguous and another option's text conflicting."""
    beside = vocab.beside.match(text, match.end())
    if not beside or vocab.option_of(beside) == answer:
        return False
    other = vocab.option_of(beside)
    by_text = beside.group("id") is None
    error = "conflicting" if by_text and vocab.kind_of(match) == "label" else "ambiguous"
    named = f"the text of option {other}" if by_text else other
    end = beside.end() + (text[beside.end():beside.end() + 1] in tuple("\"')]"))  # show a closing quote
    found.blocks.append((error, f"the reply gives {answer} with {named} beside it: "
                                f"'{_snippet(text, match.start(), end)}'"))
    return True


def _check_text(text: str, match: re.Match, answer: str, vocab: Vocabulary, found: Findings) -> None:
    if _check_beside(text, match, answer, vocab, found):
        return
    following = vocab.follow_value.match(text, match.end())
    if following and vocab.option_of(following) != answer:
        found.blocks.append(("ambiguous", (f"the reply names {answer} and {vocab.option_of(following)}: "
                                           f"'{_snippet(text, match.start(), following.end())}'")))


def _check_later_clauses(text: str, said: str, end: int, answer: str, vocab: Vocabulary, kind: str,
                         found: Findings) -> None:
    """A leading answer holds unless a later clause opens with another option ("No, wait — yes", "Yes, but
    actually no"), or, for Yes/No, the reply goes on to say it cannot tell ("No, I can't tell")."""
    first_sentence = text[end:end + 200]
    if kind == "yes-no" and _UNSURE.search(first_sentence.split(".")[0]):
        found.blocks.append(("unparseable", f"the reply opens with '{said}' but then says it cannot tell"))
    for later in vocab.clause_value.finditer(text, end):
        # A clause that only discusses another option ("B.\nA. A wedding would need colour") does not
        # contradict a label; one that concludes ("so A", "Actually, A.") does. After a leading Yes/No
        # or option text, any clause opening with another option's text does ("No, … Yes, it works").
        concludes = later.group("turn") is not None or later.group("alone") is not None
        by_text = later.group("text") is not None and kind != "label"
        if (concludes or by_text) and vocab.option_of(later) != answer:
            found.blocks.append(("conflicting", (f"the reply opens with '{said}' but later says "
                                                 f"'{_snippet(text, later.start() + 1, later.end())}'")))
            return


def _declarations(text: str, vocab: Vocabulary, found: Findings) -> None:
    """Rule 2: cue + value ("the answer is B") and value + verdict ("B is correct")."""
    checked = False
    for pattern in (vocab.declaration, vocab.verdict):
        for match in pattern.finditer(text):
            if _qualified(text, match.start(), match.end()):
                continue
            answer = vocab.option_of(match)
            if pattern is vocab.verdict:
                other = _listed_before(text, match.start(), answer, vocab)
                if other:
                    found.blocks.append(("ambiguous", (f"the reply names {other} and {answer}: "
                                                       f"'{_snippet(text, max(0, match.start() - 20), match.end())}'")))
                    continue
            elif vocab.kind_of(match) == "label":
                _check_label(text, match, answer, vocab, found)
            else:
                _check_text(text, match, answer, vocab, found)
            # "The answer is A, but actually B. …": a self-correction. Checked after the first declaration
            # only: its scan covers every later clause, so the whole check stays linear.
            if pattern is vocab.declaration and not checked:
                checked = True
                _check_later_clauses(text, _snippet(text, match.start(), match.end()), match.end(), answer, vocab,
                                     "label", found)
            mapped = "" if vocab.kind_of(match) == "label" else f" (the text of option {answer})"
            found.readings.append(Reading(answer, "field", f"the reply declares "
                                                           f"'{_snippet(text, match.start(), match.end())}'{mapped}"))


def _closing(text: str, vocab: Vocabulary, found: Findings) -> None:
    """Rule 3: the last sentence is an answer by itself."""
    end = len(text.rstrip(" \t\n.!\"'" + MASK))
    if end == 0:
        return
    start = _sentence_start(text, end, vocab)
    match = vocab.closing.fullmatch(text, start)
    if not match:  # "The mood is grim, so B.": the last clause, when it opens with a concluding word
        clause = max(text.rfind(ch, start, end) for ch in ",:–—") + 1
        match = vocab.closing_clause.fullmatch(text, clause) if clause > start else None
        if not match:
            return
    answer = vocab.option_of(match)
    said = _snippet(text, match.start(), match.end())
    if _CORRECTION.match(text, match.start()):  # "…\n\nA, but actually B": a self-correction, not a conclusion
        earlier = _other_named(text, match.start(), answer, vocab)
        if earlier is not None:
            found.blocks.append(("conflicting", f"the reply names {earlier}, then corrects itself: '{said}'"))
            return
    after = match.group("after") if "after" in match.re.groupindex else None  # closing_clause has none
    if after is not None and vocab.option_of_text(after) != answer:
        found.blocks.append(("conflicting", (f"the reply ends with '{said}', giving {answer} with the text of "
                                             f"option {vocab.option_of_text(after)}")))
        return
    mapped = "" if vocab.kind_of(match) == "label" else f" (the text of option {answer})"
    found.readings.append(Reading(answer, "closing", f"the reply ends with '{said}'{mapped}"))


def _other_named(text: str, end: int, answer: str, vocab: Vocabulary) -> str | None:
    """An option other than ``answer`` that ``text[:end]`` names, by id or by text."""
    for match in vocab.mention.finditer(text, 0, end):
        if match.group(0) != answer:
            return match.group(0)
    if vocab.text_mention is not None:
        for match in vocab.text_mention.finditer(text, 0, end):
            if vocab.option_of_text(match.group("text")) != answer:
                return vocab.option_of_text(match.group("text"))
    return None


def _bracketed_end(text: str, vocab: Vocabulary, found: Findings) -> None:
    """Rule 3: "… so it shows a race (C)." — no other option named in that sentence, nothing negated."""
    end = len(text.rstrip(" \t\n.!" + MASK))
    if end < 4 or text[end - 1] != ")":
        return
    opening = text.rfind("(", max(0, end - vocab.longest_id - 3), end)
    answer = text[opening + 1:end - 1].strip() if opening > 0 else ""
    if answer not in vocab.ids or text[opening - 1] not in " \t":
        return
    sentence = _sentence_start(text, opening, vocab)
    clause = max(text.rfind(ch, sentence, opening) for ch in _CLAUSE_MARKS) + 1
    if _NEGATION.search(text, max(clause, sentence), opening) or _qualified(text, opening, end):
        return
    named = {m.group(0) for m in vocab.mention.finditer(text, sentence, end)}
    if vocab.text_mention is not None:
        named |= {vocab.option_of_text(m.group("text")) for m in vocab.text_mention.finditer(text, sentence, end)}
    if named - {answer}:
        return
    found.readings.append(Reading(answer, "closing", f"the reply ends with '{_snippet(text, sentence, end)}'"))


def _sentence_start(text: str, end: int, vocab: Vocabulary) -> int:
    """Where the sentence holding ``end`` starts: after a line break, a cut, or ``.!?;`` — but not after
    a label's full stop ("B. No" is one sentence)."""
    line = max(text.rfind("\n", 0, end), text.rfind(MASK, 0, end)) + 1
    start = line
    for mark in _SENTENCE_END.finditer(text, line, end):
        i = mark.start()
        if text[i] == "." and vocab.id_at_end.search(text, max(line, i - vocab.longest_id - 1), i):
            continue
        start = i + 1
    return start


def _qualified(text: str, start: int, end: int) -> bool:
    """Whether a declaration at ``text[start:end]`` is negated (in its clause) or conditional (in its sentence)."""
    low, high = max(0, start - _REACH), min(len(text), end + _REACH)
    sentence_start = max(text.rfind(ch, low, start) for ch in _SENTENCE_MARKS) + 1
    clause_start = max(text.rfind(ch, low, start) for ch in _CLAUSE_MARKS) + 1
    ends = [i for i in (text.find(ch, end, high) for ch in _SENTENCE_MARKS) if i != -1]
    sentence_end = min(ends) if ends else high
    # "If it were a wedding, A; but the answer is B": a "but" ends the condition's reach.
    turns = [m.end() for m in _TURN.finditer(text, max(low, sentence_start), start)]
    condition_start = turns[-1] if turns else max(low, sentence_start)
    return (_NEGATION.search(text, max(low, clause_start), start) is not None
            or _CONDITION.search(text, condition_start, start) is not None
            or _CONDITION.search(text, end, sentence_end) is not None)


def _listed_before(text: str, start: int, answer: str, vocab: Vocabulary) -> str | None:
    """Another option joined to a value by "or"/"and"/","/"/" just before it ("A or B is correct")."""
    before = text[max(0, start - 40):start]
    joined = re.search(r"(?i:[,/&+]|\band|\bor|\bnor)[ \t]*\Z", before)
    if not joined:
        return None
    head = before[:joined.start()].rstrip(" \t)]")
    for match in vocab.mention.finditer(head):
        if match.end() == len(head) and match.group(0) != answer:
            return match.group(0)
    if vocab.text_mention is not None:
        for match in vocab.text_mention.finditer(head):
            if match.end() == len(head) and vocab.option_of_text(match.group("text")) != answer:
                return vocab.option_of_text(match.group("text"))
    return None


def _value_start(match: re.Match) -> int:
    """Where the option's name begins in a match (past opening quotes and bullets)."""
    return match.start("text") if match.group("text") is not None else match.start("id")


def _snippet(text: str, start: int, end: int) -> str:
    piece = " ".join(text[start:end].replace(MASK, " ").split())
    return piece if len(piece) <= 60 else piece[:57] + "…"
