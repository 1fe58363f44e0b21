"""Classes of reply, as templates a careful grader has labelled once, instantiated over option sets and forms.

A template names options through placeholders: ``{x}`` and ``{y}`` are two
different options, written as their id or their text (the *form*); ``{X}`` and
``{Y}`` always as their id; ``{xt}`` and ``{yt}`` always as their text; ``{yes}``
and ``{no}`` are the words Yes and No (templates using them need a Yes/No option
set). The label says what the template asserts:

- ``"x"`` / ``"y"``: that option is the answer;
- ``"yes"`` / ``"no"``: the option whose text is that word;
- ``None``: a careful grader could not decide (two answers, a self-correction,
  a contradiction), so the parser must abstain;
- ``"x?"`` / ``"y?"`` / ``"no?"``: a grader reads that option, and the parser
  may also abstain (a known conservative miss), never give another option.

Used by tests/parse/test_parse_classes.py (the labelled table and the generated
property) and by benchmarks/bench_parse.py.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from cfkit.cases import Option


@dataclass(frozen=True)
class Template:
    cls: str
    text: str
    label: str | None
    two_only: bool = False  # asserts its label only on two options (a rejection leaves one other)
    yes_no: bool = False  # needs an option set whose texts are Yes and No


def _t(cls: str, label: str | None, *texts: str, two_only: bool = False, yes_no: bool = False) -> list[Template]:
    return [Template(cls, text, label, two_only=two_only, yes_no=yes_no) for text in texts]


TEMPLATES: list[Template] = [
    # ── self-corrections: two answers in one reply, the second correcting the first → conflicting ──
    *_t("self-correction", None,
        "{x}, but actually {y}", "{x}, but actually {y}.", "{x}, but {y}", "{x}, but {y}.", "{x}. Actually, {y}.",
        "{x}, wait, {y}.", "{x} - actually {y}.", "{x}. On second thought, {y}.", "{x}, but on reflection {y}.",
        "The answer is {x}, but actually {y}.", "Answer: {x}. Actually, the answer is {y}.",
        "{x}\n\nActually, {y}.", "{x}. Correction: {y}."),
    # ── a label with another option right beside it, whatever the quotes or brackets ──
    *_t("label beside another option", None,
        '{X} "{Y}"', "{X} ({Y})", "{X} '{Y}'", "{X} [{Y}]", "{X} **{Y}**", '{X} "{yt}"', "{X} ({yt})",
        "{X} '{yt}'", "{X} [{yt}]", "{X} **{yt}**", '{X}: "{yt}"', "{X}. {yt}", '{X} "{Y}", {X} "{Y}", {X} "{Y}"',
        'Answer: {X} "{Y}"', "The answer is {X} ({Y}).", '{X} "{Y}"\nThe scene is quiet.'),
    *_t("label beside its own text", "x",
        '{X} "{xt}"', "{X} ({xt})", "{X}. {xt}", "{X}: {xt}, the scene says so.", "Answer: {X} ({xt})"),
    # ── one-sentence contradictions on a Yes/No question ──
    *_t("one-sentence contradiction", None,
        "{yes}, it is not suitable.", "{no}, it is suitable.", "{yes}, it isn't.", "{no}, it is.",
        "{yes}, the image is inappropriate for this use.", "{no}, it fits the poster well.",
        "{yes}, it does not fit the poster.", "{no}, this is a good fit.", "{yes} - it's unsuitable here.",
        yes_no=True),
    *_t("one-sentence agreement", "yes",
        "{yes}, it is suitable.", "{yes}, it fits the poster.", "{yes}, it is.", yes_no=True),
    *_t("one-sentence agreement", "no",
        "{no}, it is not suitable.", "{no}, it isn't.", "{no}, it is inappropriate here.",
        "{no}, it does not fit the poster.", "{no}, the image is hardly suitable.", yes_no=True),
    # ── a negated label: the alternative on two options, nothing on more ──
    *_t("negated label", "y",
        "Not {X}. It's {Y}.", "The answer is not {X}.", "Not {X}.", "It's not {X}.",
        "The answer is definitely not {X}.",
        "{X} is wrong.", "Option {X} is not correct.", "{X} is incorrect.", two_only=True),
    *_t("negated label, then a reason", "y",
        "Not {X}: the mood is grim.", "The answer is not {X}, because the mood is grim.", two_only=True),
    *_t("negated label contradicted", None,
        "Not {X}. The answer is {X}.", "The answer is not {X}. Answer: {X}", "Is it not {X}?",
        "If it is not {X}, the poster fails.", "It's not {X} or {Y}.", "Nothing about option {X} is wrong.",
        "I don't think {X} is wrong.", "If {X} is wrong, the poster fails.", "Why would {X} be wrong?",
        "Is the answer not {X}?", "Not {X}, not {Y}.", "Not {X}, neither {Y}.", "The answer is not {X}; also not {Y}.",
        "Not {X} nor {Y}.", "Not {X} and not {Y} either."),
    # ── Yes/No questions answered in other words ──
    *_t("polarity", "no",
        "Not suitable.", "Definitely not.", "Not at all.", "Absolutely not - the mood is grim.",
        "It is not appropriate.", "Certainly not.", "Not really.", "Unsuitable.", "It's not suitable for the poster.",
        "Not suitable. The letter is a condolence note.", "No way.", yes_no=True),
    *_t("polarity", "yes",
        "Suitable.", "It is suitable for the poster.", "Appropriate.", "It's a good fit.", yes_no=True),
    *_t("polarity contradicted in its sentence", None,
        "Not suitable for a funeral notice, but suitable for the wedding poster.",
        "Definitely not, it is a good fit.", "Suitable, but it is not appropriate here.", yes_no=True),
    *_t("polarity, not an answer", None,
        "Not sure.", "Certainly! Let me look at the image.", "Not A serene scene.", "Definitely a hard one.",
        yes_no=True),
    # ── yes/no in other languages ──
    *_t("other languages", "no", "Nein.", "Non.", "いいえ", "いいえ。", "Нет.", "不是。", "否",
        "Nein, es ist eine Trauerfeier.",
        "Nope.", yes_no=True),
    *_t("other languages", "yes", "Oui", "Ja.", "はい。", "Sí.", "是的。", "Oui, c'est une fête.", yes_no=True),
    *_t("other languages, declared", "x", "答案是{X}。", "答案：{X}", "我选择{X}。"),
    # ── decisions in Markdown lists ──
    *_t("markdown decision", "x",
        "- **Scene:** mourners in dark clothing\n- **Decision: {X}**",
        "1. The scene is quiet.\n2. The light is low.\n3. **Decision:** {X}",
        "**Final decision:** {X}", "## Decision\n{X}", "- Evidence: muted colours\n- Verdict: {x}"),
    # ── comparisons that end in one option ──
    *_t("comparison", "y",
        "Both {X} and {Y} are plausible, but {Y} is better.", "{Y} is better than {X}.",
        "{X} and {Y} both fit somewhat; {Y} is more suitable.", "{Y} is the better choice."),
    *_t("comparison without a choice", None,
        "Both {X} and {Y} are plausible.", "{X} or {Y} is better, hard to say.", "Is {Y} better?"),
    # ── guards: forms earlier versions read, which version 3 must keep reading ──
    *_t("plain answers", "x",
        "{X}", "{x}", "({X})", "Answer: {x}", "The answer is {x}.", "{X} because the mood is grim.",
        "{x}, because the mood is grim.", '{{"answer": "{X}"}}', "**{X}**", "Final answer: {X}",
        "<think>maybe {Y}</think>{X}", "The scene is grim. So, {x}."),
    *_t("plain Yes/No with a reason", "yes",
        "{yes}, but only for adults.", "{yes} - the palette is festive.", "{yes}, no doubt.", yes_no=True),
    *_t("plain Yes/No with a reason", "no",
        "{no}, the drink is espresso, not tea.", "{no}. Although the composition is beautiful, it is funereal.",
        "{no}, no, it is a funeral.", yes_no=True),
    *_t("two options named", None,
        "{x} or {y}", "{X}, {Y}", "{X}/{Y}", "{x} and {y} - it depends.", "Neither {X} nor {Y} is correct."),
]

#: The examples the issue lists, with their option sets by name and a grader's label.
ISSUE_EXAMPLES: list[tuple[str, str, str | None]] = [
    ("Yes, but actually No", "yes-no", None), ("Yes, but no", "yes-no", None),
    ("No, but actually Yes", "yes-no", None), ("Yes, but actually No", "no-yes", None),
    ('A "B"', "yes-no", None), ("A (B)", "yes-no", None), ('A "No"', "yes-no", None),
    ('A "Funeral notice"', "notice", None), ("A 'B'", "yes-no", None), ("A [B]", "yes-no", None),
    ("A **B**", "yes-no", None), ("A (No)", "yes-no", None),
    ('A "B", A "B", A "B", A "B", A "B", A "B", A "B"', "yes-no", None),
    ("Yes, it is not suitable.", "yes-no", None), ("No, it is suitable.", "yes-no", None),
    ("Not A. It's B.", "yes-no", "B"), ("The answer is not A.", "yes-no", "B"),
    ("Not suitable.", "yes-no", "B"), ("Definitely not.", "yes-no", "B"),
    ("Not suitable.", "no-yes", "A"), ("Definitely not.", "no-yes", "A"),
    ("- **Scene:** a funeral procession\n- **Mood:** grim\n- **Decision: B**", "yes-no", "B"),
    ("Both A and B are plausible, but B is better.", "yes-no", "B"),
    ("Nein.", "yes-no", "B"), ("Oui", "yes-no", "A"), ("いいえ", "yes-no", "B"), ("答案是B。", "yes-no", "B"),
]

#: Replies written out whole, by class: (class, reply, option set name, a grader's label).
LITERAL: list[tuple[str, str, str, str | None]] = [
    *[("echo with quoted or dashed texts", reply, name, None) for name, reply in [
        ("yes-no", 'A) "Yes"\nB) "No"'), ("yes-no", "A) - Yes\nB) - No"), ("yes-no", "A. 'Yes', B. 'No'"),
        ("no-yes", 'A) "No"\nB) "Yes"'), ("no-yes", "A) - No\nB) - Yes"), ("notice", 'A) "Wedding announcement"\n'
                                                                                 'B) "Funeral notice"'),
        ("three", 'A) "A wedding"\nB) "A funeral"\nC) "A race"'),
        ("three", "A) — A wedding\nB) — A funeral\nC) — A race"),
        ("harbour", "(A) 'Calm harbour'\n(B) 'Stormy sea'\n(C) 'Busy market'")]],
    *[("echo with quoted or dashed texts, then an answer", reply, name, label) for name, reply, label in [
        ("yes-no", 'A) "Yes"\nB) "No"\n\nB', "B"), ("yes-no", "A) - Yes\nB) - No\n\nAnswer: A", "A"),
        ("no-yes", 'A) "No"\nB) "Yes"\n\nThe answer is B.', "B"),
        ("three", 'A) "A wedding"\nB) "A funeral"\nC) "A race"\n\nC', "C")]],
]

YES_NO = [Option(id="A", text="Yes"), Option(id="B", text="No")]
NO_YES = [Option(id="A", text="No"), Option(id="B", text="Yes")]
NOTICE = [Option(id="A", text="Wedding announcement"), Option(id="B", text="Funeral notice")]
THREE = [Option(id="A", text="A wedding"), Option(id="B", text="A funeral"), Option(id="C", text="A race")]
HARBOUR = [Option(id="A", text="Calm harbour"), Option(id="B", text="Stormy sea"), Option(id="C", text="Busy market")]
YES_NO_MAYBE = [Option(id="A", text="Yes"), Option(id="B", text="No"), Option(id="C", text="Cannot tell")]
OPTION_SETS = {"yes-no": YES_NO, "no-yes": NO_YES, "notice": NOTICE, "three": THREE, "harbour": HARBOUR,
               "yes-no-maybe": YES_NO_MAYBE}


def is_yes_no(options: list[Option]) -> bool:
    return {o.text.lower() for o in options} >= {"yes", "no"}


def fill(template: Template, options: list[Option], x: Option, y: Option, form: str) -> str:
    """The reply a template gives with ``x`` and ``y``, each named by id or by text as ``form`` says."""
    words = {o.text.lower(): o for o in options}
    values = {"x": x.id if form == "id" else x.text, "y": y.id if form == "id" else y.text,
              "X": x.id, "Y": y.id, "xt": x.text, "yt": y.text}
    if template.yes_no:
        values.update(yes=words["yes"].text, no=words["no"].text)
    return template.text.format(**values)


def expected(template: Template, options: list[Option], x: Option, y: Option) -> tuple[str | None, bool]:
    """The option a template asserts on these options (None: none), and whether abstaining is allowed."""
    label = template.label
    if label is None:
        return None, True
    if template.two_only and len(options) != 2:
        return None, True
    maybe = label.endswith("?")
    label = label.rstrip("?")
    if label in ("yes", "no"):
        return next(o.id for o in options if o.text.lower() == label), maybe
    return (x if label == "x" else y).id, maybe


def applicable(template: Template, options: list[Option]) -> bool:
    if template.yes_no and not is_yes_no(options):
        return False
    return True


def table() -> list[tuple[str, str, str, list[Option], str | None, bool]]:
    """Every template on every option set it applies to, with every ordered pair of options (at most
    three pairs) and both forms when the template has a form: (class, reply, set name, options, answer,
    abstaining allowed). Duplicates are dropped."""
    rows, seen = [], set()
    for template in TEMPLATES:
        has_form = "{x}" in template.text or "{y}" in template.text
        for name, options in OPTION_SETS.items():
            if not applicable(template, options):
                continue
            pairs = list(itertools.permutations(options, 2))[:3]
            for (x, y), form in itertools.product(pairs, ("id", "text") if has_form else ("id",)):
                reply = fill(template, options, x, y, form)
                answer, may_abstain = expected(template, options, x, y)
                if (reply, name) in seen:
                    continue
                seen.add((reply, name))
                rows.append((template.cls, reply, name, options, answer, may_abstain))
    for cls, reply, name, answer in LITERAL:
        seen.add((reply, name))
        rows.append((cls, reply, name, OPTION_SETS[name], answer, False))
    for reply, name, answer in ISSUE_EXAMPLES:
        if (reply, name) not in seen:
            seen.add((reply, name))
            rows.append(("issue 26 example", reply, name, OPTION_SETS[name], answer, False))
    return rows
