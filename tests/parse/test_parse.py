"""Answer parsing: a table of realistic replies with a careful grader's label, and properties.

Every row of CASES is a reply a model could give, the label a careful human
grader gives it (None where a human would say "cannot tell"), and the rule
that reads it (or the error). CONSERVATIVE lists replies a human could read but
the parser may leave unanswered: never read as another option.
"""

from __future__ import annotations

import json
import re
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cfkit.cases import Option
from cfkit.parse import FAILURES, GRADED_CAP, PARSER_VERSION, RULES, ParsedAnswer, parse_answer, split_reasoning
from cfkit.predictions import Prediction

YES_NO = [Option(id="A", text="Yes"), Option(id="B", text="No")]
NO_YES = [Option(id="A", text="No"), Option(id="B", text="Yes")]
THREE = [Option(id="A", text="A wedding"), Option(id="B", text="A funeral"), Option(id="C", text="A race")]
CONTEXT = [Option(id="A", text="Suitable for the classroom"), Option(id="B", text="Not suitable")]
NUMBERED = [Option(id="1", text="Yes"), Option(id="2", text="No")]

GRIM = "The mourners in dark clothing and the condolence letter make the mood funereal."

# reply, options, the grader's answer, the rule that reads it (answer given) or the error (no answer)
CASES = [
    # ── strict JSON: the whole reply is JSON ──
    ('{"answer": "B", "reason": "a funeral scene", "confidence": "high"}', YES_NO, "B", "json"),
    ('{"answer": "A"}', THREE, "A", "json"),
    ('{"Answer": "C", "reason": "runners at a finish line"}', THREE, "C", "json"),
    ('{"Answer ": "B"}', YES_NO, "B", "json"),
    ('{"answer": "(B)"}', YES_NO, "B", "json"),
    ('{"answer": "Option B"}', YES_NO, "B", "json"),
    ('{"answer": "B. No"}', YES_NO, "B", "json"),
    ('{"answer": "Yes"}', YES_NO, "A", "json"),
    ('{"answer": "Yes"}', NO_YES, "B", "json"),
    ('{"answer": "No"}', YES_NO, "B", "json"),
    ('{"answer": "no."}', YES_NO, "B", "json"),
    ('{"answer": "Not suitable"}', CONTEXT, "B", "json"),
    ('{"answer": "a funeral"}', THREE, "B", "json"),
    ('{"answer": "No, it is a funeral"}', YES_NO, "B", "json"),
    ('{"answer": true}', YES_NO, "A", "json"),
    ('{"answer": false}', NO_YES, "A", "json"),
    ('{"answer": ["B"]}', YES_NO, "B", "json"),
    ('[{"answer": "B"}]', YES_NO, "B", "json"),
    ('{"result": {"answer": "C"}}', THREE, "C", "json"),
    ('{"final_answer": "B", "rationale": "grim"}', YES_NO, "B", "json"),
    ('{"answer": "B", "reason": "Option A would suit a wedding, not this."}', YES_NO, "B", "json"),
    ('{"answer": "C"}', YES_NO, None, "unparseable"),  # outside the options
    ('{"answer": "maybe"}', YES_NO, None, "unparseable"),
    ('{"answer": "not B"}', YES_NO, None, "unparseable"),
    ('{"answer": true}', CONTEXT, None, "unparseable"),  # no option's text is Yes
    ('{"answer": ["A", "B"]}', YES_NO, None, "conflicting"),
    ('{"answer": ["B", "B"]}', YES_NO, "B", "json"),
    ('{"answer": ["B", "maybe"]}', YES_NO, None, "unparseable"),
    ("[1, 2]", YES_NO, None, "unparseable"),
    ('{"answer": "A or B"}', YES_NO, None, "conflicting"),
    ('{"answer": "A. No"}', YES_NO, None, "conflicting"),  # label and text disagree
    ('{"answer": "A", "final_answer": "B"}', YES_NO, None, "conflicting"),
    ('{"answer": "B", "answer": "A"}', YES_NO, None, "conflicting"),  # a repeated key is not "the last wins"
    ('{"answer": null, "reason": "unclear"}', YES_NO, None, "missing"),
    ('{"answer": ""}', YES_NO, None, "missing"),
    ('{"reason": "the poster needs a calm image"}', YES_NO, None, "missing"),
    ('{"answer": 1}', YES_NO, None, "unparseable"),
    ('{"answer": "a"}', YES_NO, None, "unparseable"),  # lower case is not an id
    ("null", YES_NO, None, "missing"),
    # ── JSON inside text: code fences, prose around it, truncation, sloppy quoting ──
    ('```json\n{"answer": "A", "reason": "bright and festive"}\n```', YES_NO, "A", "field"),
    ('```json\n{"answer": "No", "confidence": 0.9}\n```', YES_NO, "B", "field"),
    ('{"answer": "B"} Hope this helps!', YES_NO, "B", "field"),
    ('Here is my verdict: {"answer": "B", "reason": "too somber"}', YES_NO, "B", "field"),
    ('Output: {"answer": "B"}', YES_NO, "B", "field"),
    ('Sure! {"answer": "B"}\n\nExplanation: the letter is a condolence note, so A is wrong.', YES_NO, "B", "field"),
    ('{"answer": "B", "reason": "the figures look distressed and the let', YES_NO, "B", "field"),
    ("{'answer': 'A', 'reason': 'cheerful',}", YES_NO, "A", "field"),
    ("{answer: B}", YES_NO, "B", "field"),
    ('{"answer": "A"}\nOn reflection, the answer is B.', YES_NO, None, "conflicting"),  # JSON vs text
    ('```json\n{"answer": "A"}\n```\n```json\n{"answer": "B"}\n```', YES_NO, None, "conflicting"),
    # ── bare labels and leading labels ──
    ("B", YES_NO, "B", "leading-id"),
    ("(B)", YES_NO, "B", "leading-id"),
    ("B.", YES_NO, "B", "leading-id"),
    ("**B**", YES_NO, "B", "leading-id"),
    ("$B$", YES_NO, "B", "leading-id"),
    ("\\boxed{B}", YES_NO, "B", "leading-id"),
    ("$\\boxed{\\text{C}}$", THREE, "C", "leading-id"),
    ("`B`", YES_NO, "B", "leading-id"),
    ("Ｂ", YES_NO, "B", "leading-id"),  # full-width letter
    ("（B）", YES_NO, "B", "leading-id"),
    ("B。", YES_NO, "B", "leading-id"),
    ("- B", YES_NO, "B", "leading-id"),
    ("Option B", YES_NO, "B", "leading-id"),
    ("B) No", YES_NO, "B", "leading-id"),
    ("(B) No, it is a funeral.", YES_NO, "B", "leading-id"),
    ("B (No) — the cup holds espresso.", YES_NO, "B", "leading-id"),
    ("A. Yes, because the palette is festive.", YES_NO, "A", "leading-id"),
    ("B because the mood is grim", YES_NO, "B", "leading-id"),
    ("B: the letter signals bad news.", YES_NO, "B", "leading-id"),
    ("B\nThe letter in her hand signals bad news.", YES_NO, "B", "leading-id"),
    ("B\n\nA would require a festive mood.", YES_NO, "B", "leading-id"),
    ("B.\nA. A wedding would need brighter colours.", THREE, "B", "leading-id"),
    ("C - the runners and the finish tape", THREE, "C", "leading-id"),
    ("C, not B.", THREE, "C", "leading-id"),
    ("(C) A race, not (B) a funeral.", THREE, "C", "leading-id"),
    ("Option B.\nExplanation: Option A would require a festive mood.", YES_NO, "B", "leading-id"),
    ("B\n\nA. Yes\nB. No", YES_NO, "B", "leading-id"),
    ("C) A race - runners at the finish line.", THREE, "C", "leading-id"),
    ("(B) A funeral", THREE, "B", "leading-id"),
    ("A: the bride and the flowers.", THREE, "A", "leading-id"),
    ("B. Not suitable", CONTEXT, "B", "leading-id"),
    ("A. No", YES_NO, None, "conflicting"),  # label and option text disagree
    ("A (No)", YES_NO, None, "conflicting"),
    ("B. A wedding", THREE, None, "conflicting"),
    ("A. Not suitable", CONTEXT, None, "conflicting"),
    ("A, B", YES_NO, None, "ambiguous"),
    ("A, B or C?", THREE, None, "ambiguous"),
    ("A, or maybe B.", YES_NO, None, "ambiguous"),
    ("A. Yes would require a festive mood, so B. No.", YES_NO, None, "conflicting"),
    # ── declarations in words ──
    ("Answer: B", YES_NO, "B", "field"),
    ("Answer: (A)", YES_NO, "A", "field"),
    ("Final answer: **C**", THREE, "C", "field"),
    ("**Answer:** B", YES_NO, "B", "field"),
    ("ANSWER: B", YES_NO, "B", "field"),
    ("Answer:\nB", YES_NO, "B", "field"),
    ("Answer: No", YES_NO, "B", "field"),
    ("Final answer: No", YES_NO, "B", "field"),
    ("The answer is No.", YES_NO, "B", "field"),
    ("The answer is B", YES_NO, "B", "field"),
    ("the answer is B because the mood is grim", YES_NO, "B", "field"),
    ("The answer is $\\boxed{B}$.", YES_NO, "B", "field"),
    ("The answer is **B**.\n\nExplanation: A would require a festive mood.", YES_NO, "B", "field"),
    ("After weighing the scene, my answer is (A).", YES_NO, "A", "field"),
    ("After weighing the scene, my answer: **B**", YES_NO, "B", "field"),
    ("The answer to this question is (C).", THREE, "C", "field"),
    ("The answer is a funeral.", THREE, "B", "field"),
    ("Answer: Not suitable", CONTEXT, "B", "field"),
    (f"{GRIM}\n\nAnswer: B", YES_NO, "B", "field"),
    (("Looking at the image, the bright colours might suggest a celebration, but the letter in her hand is "
      "a condolence note. Therefore, the image is not suitable.\n\nFinal answer: No"), YES_NO, "B", "field"),
    ("**Reasoning:** The cup holds espresso, not tea.\n**Answer:** B (No)", YES_NO, "B", "field"),
    ("The mourners and the coffin make this a funeral. Answer: (B) A funeral", THREE, "B", "field"),
    ("The image depicts a funeral procession; hence the answer must be B.", YES_NO, "B", "field"),
    ("The correct option is A: Yes.", YES_NO, "A", "field"),
    ("Option A would suit a wedding, but the correct option is B.", THREE, "B", "field"),
    ("Option A would be right for a wedding. The answer is B.", YES_NO, "B", "field"),
    ("If it were a wedding the answer would be A, but the answer is B.", YES_NO, "B", "field"),
    ("Initially I considered A, but the answer is B.", YES_NO, "B", "field"),
    ("There is no doubt the answer is B.", YES_NO, "B", "field"),
    ("The answer is B, not A.", YES_NO, "B", "field"),
    ("Reasoning first.\n\nAnswer: B", YES_NO, "B", "field"),
    ("Answer: B\nAnswer: B", YES_NO, "B", "field"),
    ("<answer>B</answer>", YES_NO, "B", "field"),
    ("I choose option C.", THREE, "C", "field"),
    ("I'd go with C.", THREE, "C", "field"),
    ("I'd go with B, not A.", YES_NO, "B", "field"),
    ("Between A and B, I choose B.", YES_NO, "B", "field"),
    ("I think B.", YES_NO, "B", "field"),
    ("I would say no.", YES_NO, "B", "field"),
    ("I'd say a race.", THREE, "C", "field"),
    ("I'm sorry, but the answer is B.", YES_NO, "B", "field"),
    ('Based on the visual evidence, I would answer "No".', YES_NO, "B", "field"),
    ("Response: B", YES_NO, "B", "field"),
    ("Correct answer: B", YES_NO, "B", "field"),
    ("Therefore, the final answer is $\\boxed{B}$.", YES_NO, "B", "field"),
    ("A is incorrect because the mood is grim. B is correct.", YES_NO, "B", "field"),
    ("A wedding and a funeral are both wrong; a race is right.", THREE, "C", "field"),
    ("B or C, I think C.", THREE, "C", "field"),
    ("Option A is tempting, but I'll pick B.", YES_NO, "B", "field"),
    (("**Analysis**\n\n1. The scene: mourners around a coffin.\n2. The context: a festive poster.\n\n"
      "**Conclusion:** The image is **not suitable**.\n\n**Answer: B**"), YES_NO, "B", "field"),
    (("Let's think step by step. The poster is for a wedding fair. The image shows a funeral. A funeral image "
      "would not suit a wedding fair. So the answer is B."), YES_NO, "B", "field"),
    ("B is correct.", YES_NO, "B", "field"),
    ("Option B is the best fit.", YES_NO, "B", "field"),
    ("答案：B", YES_NO, "B", "field"),
    ("答案是：B，因为画面是葬礼。", YES_NO, "B", "field"),
    ("最终答案：Ｂ", YES_NO, "B", "field"),
    ("答：B", YES_NO, "B", "field"),
    ("我选择B。", YES_NO, "B", "field"),
    ("The answer is A. Actually, the answer is B.", YES_NO, None, "conflicting"),
    ("Answer: B. Final answer: A.", YES_NO, None, "conflicting"),
    ("The answer is not A", YES_NO, "B", "rejection"),  # two options: rejecting one gives the other
    ("The answer is definitely not A.", YES_NO, "B", "rejection"),
    ("The answer is not A", THREE, None, "unparseable"),  # three options: rejecting one gives none
    ("Answer: A Serene Moment in a Chinese Landscape", YES_NO, None, "unparseable"),
    ("A or B is correct.", YES_NO, None, "ambiguous"),
    ("Neither A nor B is correct.", YES_NO, None, "ambiguous"),
    ("B is not correct.", YES_NO, "A", "rejection"),
    ("B is not correct.", THREE, None, "unparseable"),
    ("Is B correct?", YES_NO, None, "unparseable"),
    ("I would not choose A.", YES_NO, None, "unparseable"),
    ("I would choose A if it were a wedding.", YES_NO, None, "unparseable"),
    ("The answer is yes or no depending on the audience.", YES_NO, None, "ambiguous"),
    ("I think C, or maybe B.", THREE, None, "ambiguous"),
    # ── Yes / No and option texts ──
    ("Yes", YES_NO, "A", "yes-no"),
    ("no.", YES_NO, "B", "yes-no"),
    ("NO.", YES_NO, "B", "yes-no"),
    ("Yes!", YES_NO, "A", "yes-no"),
    ('"Yes."', YES_NO, "A", "yes-no"),
    ("> No", YES_NO, "B", "yes-no"),
    ("No", NO_YES, "A", "yes-no"),
    ("<think>The letter suggests grief.</think>\n\nNo", YES_NO, "B", "yes-no"),
    ("No, the drink is espresso, not tea.", YES_NO, "B", "leading-yes-no"),
    ("Yes, the palette is festive and bright.", YES_NO, "A", "leading-yes-no"),
    ("No. Although the composition is beautiful, the symbolism is funereal.", YES_NO, "B", "leading-yes-no"),
    ("No.\n\nThe letter she holds is a condolence note.", YES_NO, "B", "leading-yes-no"),
    ("Yes - the image suits the wedding brochure.", YES_NO, "A", "leading-yes-no"),
    ("Yes (the colours are festive).", YES_NO, "A", "leading-yes-no"),
    ("No: the mood is sombre.", YES_NO, "B", "leading-yes-no"),
    ("Yes, but only for adults.", YES_NO, "A", "leading-yes-no"),
    ("No, no, it is a funeral.", YES_NO, "B", "leading-yes-no"),
    ("Yes, no doubt.", YES_NO, "A", "leading-yes-no"),
    ("No, the drink is espresso. Yes, it could work.", YES_NO, None, "conflicting"),
    ("No, wait — yes.", YES_NO, None, "conflicting"),
    ("No; the figures are in mourning.\nYes, the colours are bright, but it does not matter.", YES_NO, None,
     "conflicting"),
    ("No, I can't tell from this image.", YES_NO, None, "unparseable"),
    ("Yes, no.", YES_NO, None, "ambiguous"),
    ("Yes and no — it depends on the audience.", YES_NO, None, "ambiguous"),
    ("Yes or no?", YES_NO, None, "ambiguous"),
    ("Yes? The colours are festive.", YES_NO, None, "unparseable"),  # a question, not an answer
    ("No idea.", YES_NO, None, "unparseable"),
    ("No doubt this suits a wedding poster.", YES_NO, None, "unparseable"),
    ("Yesterday's photo, maybe.", YES_NO, None, "unparseable"),
    ("Yes", CONTEXT, None, "unparseable"),  # no option's text is "Yes"
    ("Yes", THREE, None, "unparseable"),
    ("A funeral", THREE, "B", "option-text"),
    ("a funeral.", THREE, "B", "option-text"),
    ("A wedding — the bride and the flowers.", THREE, "A", "option-text"),
    ("A race (C)", THREE, "C", "option-text"),
    ("A race, not a funeral.", THREE, "C", "option-text"),
    ("Not suitable", CONTEXT, "B", "option-text"),
    ("Suitable for the classroom.", CONTEXT, "A", "option-text"),
    ("A wedding, a funeral or a race — the image is too dark to tell.", THREE, None, "ambiguous"),
    ("A race or a funeral, hard to say.", THREE, None, "ambiguous"),
    # ── closing sentences ──
    ("### Final answer\nB", YES_NO, "B", "closing"),
    ("Is it suitable? No.", YES_NO, "B", "closing"),
    ("The colours are lovely. However the letter is a condolence note. So, no.", YES_NO, "B", "closing"),
    ("A: festive colours\nB: a letter of condolence\nSo B.", YES_NO, "B", "closing"),
    ("Not A; B.", YES_NO, "B", "closing"),
    ("Answer B", YES_NO, "B", "closing"),
    ("The runners are crossing the finish line, so it is a race (C).", THREE, "C", "closing"),
    ("Suitable for the classroom? Not really. Not suitable.", CONTEXT, "B", "closing"),
    (f"{GRIM} Therefore (B).", YES_NO, "B", "closing"),
    ("The mood is grim, so B.", YES_NO, "B", "closing"),
    ("The mood is grim, therefore no.", YES_NO, "B", "closing"),
    ("Step 1: Identify the scene. It is a funeral.\nStep 2: Compare with the use.\nConclusion: B", YES_NO,
     "B", "closing"),
    ("The image is best described by option (B).", YES_NO, "B", "closing"),
    ("A is incorrect. B.", YES_NO, "B", "closing"),
    # ── echoed option lists: not an answer unless one option is singled out afterwards ──
    ("A. Yes\nB. No", YES_NO, None, "ambiguous"),
    ("A) Yes B) No", YES_NO, None, "ambiguous"),
    ("A. Yes, B. No", YES_NO, None, "ambiguous"),
    ("(A) Yes\n(B) No", YES_NO, None, "ambiguous"),
    ("Option A: Yes\nOption B: No", YES_NO, None, "ambiguous"),
    ("A. A wedding\nB. A funeral\nC. A race", THREE, None, "ambiguous"),
    ("(A) A wedding (B) A funeral (C) A race", THREE, None, "ambiguous"),
    ("- A: Suitable for the classroom\n- B: Not suitable", CONTEXT, None, "ambiguous"),
    ("Yes\nNo", YES_NO, None, "ambiguous"),
    ("A: festive colours\nB: a letter of condolence", YES_NO, None, "ambiguous"),
    ("Question: Is the image suitable?\nA. Yes\nB. No", YES_NO, None, "ambiguous"),
    ("A. A wedding\nB. A funeral\nC. A race\n\nThe mourners in black point to B.", THREE, None, "ambiguous"),
    ("A. Yes\nB. No\n\nB", YES_NO, "B", "leading-id"),
    ("A) Yes B) No B", YES_NO, "B", "leading-id"),
    ("A. Yes\nB. No\nA. Yes", YES_NO, "A", "leading-id"),
    ("A. Yes\nB. No\nAnswer: B", YES_NO, "B", "field"),
    ("Question: Is the image suitable?\nOptions:\nA. Yes\nB. No\nAnswer: B", YES_NO, "B", "field"),
    ("A. A wedding\nB. A funeral\nC. A race\n\nThe answer is C.", THREE, "C", "field"),
    ("A. Yes\nB. No\n\nNo, it is a funeral.", YES_NO, "B", "leading-yes-no"),
    ("The options are A (Yes) and B (No). The image shows a funeral, so B.", YES_NO, "B", "closing"),
    ("A (Yes) or B (No)? B.", YES_NO, "B", "closing"),
    ("1. Yes\n2. No", NUMBERED, None, "ambiguous"),
    ("1. Yes\n2. No\n\n2", NUMBERED, "2", "leading-id"),
    ("There are 2 people in the image. Answer: 1", NUMBERED, "1", "field"),
    ("1. The scene is a funeral.\n2. The poster is festive.\nAnswer: 2", NUMBERED, "2", "field"),
    ("The 2 figures are mourning.", NUMBERED, None, "unparseable"),
    ("1.5", NUMBERED, None, "unparseable"),
    ('{"answer": 2}', NUMBERED, "2", "json"),
    # ── reasoning blocks ──
    ("<think>The letter suggests grief.</think>B", YES_NO, "B", "leading-id"),
    ("The letter suggests grief, so the answer is A?</think>\n\nB", YES_NO, "B", "leading-id"),
    ("<think>Answer: A. No wait.</think>\nAnswer: B", YES_NO, "B", "field"),
    ("<reasoning>Option A fits a wedding.</reasoning>\n\nThe answer is B.", YES_NO, "B", "field"),
    ("<think>The letter suggests grief and the answer is", YES_NO, None, "missing"),
    ("<think>B</think>", YES_NO, None, "missing"),
    # ── the article "A", lower case, several options, negation, empty, refusal ──
    ("A Serene Moment in a Chinese Landscape", YES_NO, None, "unparseable"),
    ("A quiet harbour at dusk with fishing boats.", YES_NO, None, "unparseable"),
    ("A given scene can suit many posters.", YES_NO, None, "unparseable"),
    ("A bride stands under an arch of flowers.", THREE, None, "unparseable"),
    ("a", YES_NO, None, "unparseable"),
    ("a serene landscape", YES_NO, None, "unparseable"),
    ("answer: b", YES_NO, None, "unparseable"),
    ("B.5", YES_NO, None, "unparseable"),
    ("A/B", YES_NO, None, "ambiguous"),
    ("Option A or B", YES_NO, None, "ambiguous"),
    ("A or B", YES_NO, None, "ambiguous"),
    ("Both A and B could work here.", THREE, None, "ambiguous"),
    ("It is neither (A) nor (B).", YES_NO, None, "ambiguous"),
    ("I'm not sure. It could be A or B.", YES_NO, None, "ambiguous"),
    ("Not A", YES_NO, "B", "rejection"),
    ("Not B.", YES_NO, "A", "rejection"),
    ("Not B.", THREE, None, "unparseable"),
    ("Not A. The answer is A.", YES_NO, None, "conflicting"),  # a rejected option is never the answer
    ("Not suitable.", YES_NO, "B", "polarity"),
    ("Definitely not.", NO_YES, "A", "polarity"),
    ("Nein.", YES_NO, "B", "polarity"),
    ("", YES_NO, None, "missing"),
    ("   \n\t ", YES_NO, None, "missing"),
    ("I'm sorry, but I can't help with that request.", YES_NO, None, "refused"),
    ("I cannot determine the answer from this image.", YES_NO, None, "refused"),
    ("Unable to determine from the image.", YES_NO, None, "refused"),
    ("As an AI, I do not judge art.", YES_NO, None, "refused"),
    ("The image shows a quiet lake at sunset.", YES_NO, None, "unparseable"),
    ("Both options have merit.", YES_NO, None, "unparseable"),
]

# Replies a human could read, which the parser may leave unanswered (it never reads them as another option):
# an answer stated only as a claim ("It is a funeral"), a rejection followed by a choice, self-corrections.
CONSERVATIVE = [
    ("Q: Is the image suitable?\nA: No", YES_NO, "B"),  # "A:" read as a label, so conflicting
    ("The image is suitable: yes.", YES_NO, "A"),
    ("Definitely yes.", YES_NO, "A"),
    ("Answer: A, B, or C? C.", THREE, "C"),
    ("B? No, C.", THREE, "C"),
    ("This is a race (C), not a funeral (B).", THREE, "C"),
    ("It is a funeral.", THREE, "B"),
    ("This is clearly a funeral.", THREE, "B"),
    ("It is not suitable.", CONTEXT, "B"),
    ("Not suitable for the classroom.", CONTEXT, "B"),
    ("It shows a funeral, not a wedding (B).", THREE, "B"),
    ("Not A but B.", YES_NO, "B"),
    ("The answer is not A but B.", YES_NO, "B"),
    ("I considered A, but B.", YES_NO, "B"),
    ("Between A and B, B.", YES_NO, "B"),
    ("I don't think A is correct; B is.", YES_NO, "B"),
    ("Option A (Yes) fits a tourist brochure; option B (No) fits here. My answer is B.", YES_NO, "B"),
    ("A. Yes would require a festive mood, so B. No.", YES_NO, "B"),
    ("A wedding? No — the black veils make it a funeral.", THREE, "B"),
    ("The answer is A. Actually, the answer is B.", YES_NO, "B"),
    ("No, wait — yes.", YES_NO, "A"),
    ("Nope.", YES_NO, "B"),
    ("答案：否", YES_NO, "B"),
    ("Definitely a race.", THREE, "C"),
    ("A funeral procession.", THREE, "B"),
]


@pytest.mark.parametrize("reply,options,answer,outcome", CASES,
                         ids=[f"{i:03d}:{c[0][:30]!r}" for i, c in enumerate(CASES)])
def test_replies_read_as_a_careful_grader_reads_them(reply, options, answer, outcome):
    parsed = parse_answer(reply, options)
    assert parsed.answer == answer, parsed.detail
    assert parsed.detail  # every reading and every failure says why
    if answer is None:
        assert parsed.error == outcome, parsed.detail
        assert parsed.rule is None
    else:
        assert parsed.rule == outcome, parsed.detail
        assert parsed.error is None


@pytest.mark.parametrize("reply,options,human", CONSERVATIVE, ids=[c[0][:30] for c in CONSERVATIVE])
def test_conservative_misses_are_never_another_option(reply, options, human):
    assert parse_answer(reply, options).answer in (None, human)


def test_table_is_large_and_covers_every_rule_and_error():
    assert len(CASES) >= 120
    two = sum(1 for c in CASES if len(c[1]) == 2)
    assert two >= 60 and len(CASES) - two >= 25  # two- and three-option cases
    assert {c[3] for c in CASES if c[2] is not None} == set(RULES)
    assert {c[3] for c in CASES if c[2] is None} == set(FAILURES)


def test_names_match_the_predictions_format():
    assert PARSER_VERSION == "3"
    assert RULES[:1] == ("json",) and {"json", "field", "leading-id", "yes-no"} <= set(RULES)
    for rule in ("json", "field", "leading-id", "yes-no"):  # today's predictions accept these
        Prediction(model="m", suite="contextcanvas", case="C1", condition="image", answer="A", parse=rule)
    for error in FAILURES:
        Prediction(model="m", suite="contextcanvas", case="C1", condition="image", error=error)


def test_the_strongest_agreeing_rule_is_recorded():
    assert parse_answer("B\n\nAnswer: B", YES_NO).rule == "field"
    assert parse_answer('{"answer": "B"}\nB', YES_NO).rule == "field"
    assert parse_answer("No.\n\nSo, no.", YES_NO).rule == "leading-yes-no"


def test_reason_and_confidence_are_kept():
    parsed = parse_answer('{"answer": "B", "reason": "a funeral procession", "confidence": 0.8}', YES_NO)
    assert (parsed.answer, parsed.reason, parsed.confidence) == ("B", "a funeral procession", "0.8")
    fenced = parse_answer('```json\n{"answer": "A", "reason": "bright", "confidence": "low"}\n```', YES_NO)
    assert (fenced.answer, fenced.reason, fenced.confidence) == ("A", "bright", "low")
    missing = parse_answer('{"reason": "calm"}', YES_NO)
    assert (missing.error, missing.reason) == ("missing", "calm")


def test_none_reply_is_missing():
    assert parse_answer(None, YES_NO).error == "missing"


def test_option_ids_must_be_unique_and_present():
    with pytest.raises(ValueError, match="unique"):
        parse_answer("A", [Option(id="A", text="Yes"), Option(id="A", text="No")])
    with pytest.raises(ValueError, match="unique"):
        parse_answer("A", [])


# ── reasoning ──────────────────────────────────────────────────────────────

def test_reasoning_blocks_are_kept_apart_and_never_graded():
    parsed = parse_answer("<think>Option A fits a wedding. Answer: A</think>\n\nB", YES_NO)
    assert (parsed.answer, parsed.reasoning) == ("B", "Option A fits a wedding. Answer: A")
    both = parse_answer("<THINKING>first</THINKING> B <reasoning>second</reasoning>", YES_NO)
    assert (both.answer, both.reasoning) == ("B", "first\n\nsecond")
    assert parse_answer("B", YES_NO).reasoning is None


def test_reasoning_passed_beside_the_reply_is_kept_and_never_graded():
    parsed = parse_answer("B", YES_NO, reasoning="The answer is A, surely.")
    assert (parsed.answer, parsed.reasoning) == ("B", "The answer is A, surely.")
    only = parse_answer("", YES_NO, reasoning="Answer: A")
    assert (only.answer, only.error, only.reasoning) == (None, "missing", "Answer: A")
    joined = parse_answer("<think>inline</think>No", YES_NO, reasoning="beside")
    assert (joined.answer, joined.reasoning) == ("B", "beside\n\ninline")


def test_split_reasoning_forms():
    assert split_reasoning("no tags") == ("no tags", None)
    assert split_reasoning("<think>cut off") == ("", "cut off")
    assert split_reasoning("opened by the template</think>B") == ("B", "opened by the template")
    assert split_reasoning("<think>x</think>B</think>") == ("B", "x")  # a stray closing tag is dropped
    assert split_reasoning("<think>a <reasoning>b</think>C") == ("C", "a <reasoning>b")


# ── the size cap ───────────────────────────────────────────────────────────

def test_a_reply_over_the_cap_is_graded_on_its_two_ends():
    filler = "The figures stand in a grey field. " * (GRADED_CAP // 20)
    assert len(filler) > GRADED_CAP
    end = parse_answer(filler + "\n\nAnswer: B", YES_NO)
    assert (end.answer, end.windowed) == ("B", True)
    assert f"{GRADED_CAP // 2:,}" in end.detail
    start = parse_answer("No, it is a funeral. " + filler, YES_NO)
    assert (start.answer, start.rule, start.windowed) == ("B", "leading-yes-no", True)
    middle = parse_answer(filler + " Answer: B. " + filler, YES_NO)
    assert (middle.answer, middle.windowed) == (None, True)  # the middle is not graded
    assert parse_answer("Answer: B", YES_NO).windowed is False


def test_a_long_strict_json_reply_is_read_whole():
    reply = json.dumps({"reason": "x" * (3 * GRADED_CAP), "answer": "B"})
    parsed = parse_answer(reply, YES_NO)
    assert (parsed.answer, parsed.rule, parsed.windowed) == ("B", "json", False)


# ── deep nesting and pathological input never raise ────────────────────────

@pytest.mark.parametrize("reply", [
    "[" * 100_000,
    "{" * 100_000,
    '{"answer": ' * 50_000,
    '{"answer": "B", "reason": ' + "[" * 5_000 + "]" * 5_000 + "}",
    "(" * 50_000 + "B" + ")" * 50_000,
    "A. " * 50_000,
    "\\boxed{" * 20_000,
    "<think>" * 20_000,
])
def test_pathological_replies_do_not_raise(reply):
    parsed = parse_answer(reply, YES_NO)
    assert isinstance(parsed, ParsedAnswer)
    assert (parsed.answer is None) != (parsed.error is None)


def test_deep_nesting_beyond_the_recursion_limit_is_not_json():
    depth = sys.getrecursionlimit() * 2
    parsed = parse_answer('{"answer": "B", "reason": ' + "[" * depth + "]" * depth + "}", YES_NO)
    assert parsed.answer == "B"  # the answer field is still read, as text
    assert parse_answer("[" * depth + '"B"' + "]" * depth, YES_NO).answer is None


# ── properties ─────────────────────────────────────────────────────────────

option_sets = st.integers(min_value=2, max_value=5).flatmap(
    lambda n: st.tuples(
        st.just([chr(ord("A") + i) for i in range(n)]),
        # Any option text a cases file can hold: every character but NUL, which cfkit.cases refuses.
        st.lists(st.text(st.characters(blacklist_characters="\x00"), min_size=1, max_size=20), min_size=n, max_size=n),
    )
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(option_sets, st.data(), st.text(max_size=200), st.one_of(st.none(), st.sampled_from(["low", "medium", "high"])))
def test_well_formed_json_answer_is_read_exactly(opts, data, reason, confidence):
    ids, texts = opts
    options = [Option(id=i, text=t) for i, t in zip(ids, texts)]
    answer = data.draw(st.sampled_from(ids))
    record = {"answer": answer, "reason": reason}
    if confidence is not None:
        record["confidence"] = confidence
    parsed = parse_answer(json.dumps(record, ensure_ascii=data.draw(st.booleans())), options)
    assert parsed.answer == answer
    assert parsed.rule == "json"
    assert parsed.reason == reason
    assert parsed.confidence == confidence


def names(reply: str, option: Option) -> bool:
    """Whether ``reply`` holds the option's id as a stand-alone token, or its text (any case)."""
    if re.search(rf"(?<![A-Za-z0-9_]){re.escape(option.id)}(?![A-Za-z0-9_])", reply):
        return True
    words = r"\s+".join(re.escape(w) for w in option.text.lower().split())
    return bool(words) and re.search(words, " ".join(reply.lower().split())) is not None


words = st.sampled_from(["the", "a", "answer", "is", "option", "not", "image", "poster", "Answer:", "A", "B", "C",
                         "(B)", "yes", "No", "suitable", "{", "}", '"answer":', '"A"', "'B'", ",", ".", "\n", "```",
                         "because", "or", "/", "A.", "I", "choose", "Serene", "null", "final", "**", "so", "funeral",
                         "race", "wedding", "<think>", "</think>", "答案：", "$", "\\boxed{", "Yes,", "No.", "is correct"])


@settings(max_examples=400, deadline=None)
@given(st.lists(words, max_size=14), st.sampled_from([YES_NO, NO_YES, THREE, CONTEXT]), st.text(max_size=12))
def test_never_reads_an_option_the_reply_does_not_name(tokens, options, noise):
    reply = " ".join(tokens) + noise
    parsed = parse_answer(reply, options)
    if parsed.answer is not None:
        chosen = next(o for o in options if o.id == parsed.answer)
        graded, _ = split_reasoning(reply)
        if parsed.rule == "rejection":  # "Not A" on two options gives B: the reply names the other one
            chosen = next(o for o in options if o.id != parsed.answer)
        elif parsed.rule == "polarity":  # "Definitely not" gives the option whose text is No, whatever its id
            swapped = [Option(id=o.id, text=t.text) for o, t in zip(options, reversed(options))]
            again = parse_answer(reply, swapped)
            assert chosen.text.lower() in ("yes", "no"), (reply, parsed)
            assert next(o.text for o in swapped if o.id == again.answer) == chosen.text, (reply, parsed, again)
            return
        assert names(graded, chosen), (reply, parsed)
    else:
        assert parsed.error in FAILURES


# Sentences that mention an option without giving it as the answer.
REJECTIONS = ["{x} is not correct.", "Not {x}.", "It is not {x}.", "I would not choose {x}.",
              "The answer is not {x}.", "{x} would be wrong here.", "Option {x} would suit a wedding.",
              "If it were a wedding, the answer would be {x}.", "Is it {x}?", "Neither {x} nor the rest fits.",
              "I don't think {x} is correct.", "Whether {x} fits is unclear.", "Some would say {x}, wrongly."]
DECLARATIONS = ["Answer: {y}", "The answer is {y}.", "{y}", "I choose {y}.", "Final answer: ({y})",
                '{{"answer": "{y}"}}', "So, {y}.", "{y} is correct."]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([YES_NO, THREE, CONTEXT]), st.data())
def test_rejected_alternatives_are_never_the_answer(options, data):
    rejected = data.draw(st.sampled_from(options))
    others = [o for o in options if o.id != rejected.id]
    sentences = data.draw(st.lists(st.sampled_from(REJECTIONS), min_size=1, max_size=3))
    name = data.draw(st.sampled_from([rejected.id, rejected.text]))
    reply = " ".join(s.format(x=name) for s in sentences)
    if data.draw(st.booleans()):
        chosen = data.draw(st.sampled_from(others))
        reply += "\n\n" + data.draw(st.sampled_from(DECLARATIONS)).format(y=chosen.id)
    parsed = parse_answer(reply, options)
    assert parsed.answer != rejected.id, (reply, parsed)


ECHO_FORMS = ["{i}. {t}", "{i}) {t}", "({i}) {t}", "Option {i}: {t}", "{i}: {t}", "- {i}. {t}", "{i} - {t}"]
ECHO_JOINS = ["\n", " ", ", ", "\n\n", "; "]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([YES_NO, NO_YES, THREE, CONTEXT]), st.sampled_from(ECHO_FORMS), st.sampled_from(ECHO_JOINS),
       st.sampled_from(["", "Options:\n", "Is the image suitable?\n", "Question: which event is shown?\n"]),
       st.data())
def test_echoed_option_lists_never_yield_an_answer_unless_one_is_singled_out(options, form, join, intro, data):
    echo = intro + join.join(form.format(i=o.id, t=o.text) for o in options)
    parsed = parse_answer(echo, options)
    assert (parsed.answer, parsed.error) == (None, "ambiguous"), (echo, parsed)
    chosen = data.draw(st.sampled_from(options))
    after = data.draw(st.sampled_from(["\n\n{i}", "\nAnswer: {i}", "\n\nThe answer is {i}.", "\n\n({i})"]))
    singled = parse_answer(echo + after.format(i=chosen.id), options)
    assert singled.answer == chosen.id, (echo + after, singled)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_crashes(reply):
    parsed = parse_answer(reply, THREE)
    assert (parsed.answer is None) != (parsed.error is None)


nested = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
                      lambda inner: st.one_of(st.lists(inner, max_size=3),
                                              st.dictionaries(st.sampled_from(["answer", "reason", "x"]), inner,
                                                              max_size=3)),
                      max_leaves=30)


@settings(max_examples=200, deadline=None)
@given(nested, st.integers(min_value=0, max_value=3000), st.sampled_from(["[", "{\"answer\": ", "{\"a\": ["]))
def test_arbitrary_and_deeply_nested_json_never_crashes(value, depth, opener):
    for reply in (json.dumps(value), opener * depth + json.dumps(value)):
        parsed = parse_answer(reply, YES_NO)
        assert (parsed.answer is None) != (parsed.error is None)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["serene", "moment", "in", "a", "landscape", "quiet", "harbour", "with", "boats",
                                 "Chinese", "Landscape", "Moment", "Quiet"]), min_size=1, max_size=10))
def test_opening_article_is_never_option_a(rest):
    reply = "A " + " ".join(rest)
    assert parse_answer(reply, YES_NO).answer is None


def test_docstring_examples_hold():
    import doctest
    import importlib

    for name in ("decision", "reasoning", "text"):
        module = importlib.import_module(f"cfkit.parse.{name}")
        result = doctest.testmod(module)
        assert result.attempted and not result.failed, name


def _doc_rows(heading: str) -> list[list[str]]:
    """The rows of the table under ``heading`` in docs/parsing.md, cells stripped, the reply unquoted."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "parsing.md").read_text(encoding="utf-8")
    section = text.split(f"\n{heading}\n", 1)[1].split("\n#", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]  # no documented reply holds a "|"
        if line.startswith("| `"):
            rows.append([cells[0].strip("`").replace("\\n", "\n"), *cells[1:]])
    return rows


DOC_OPTIONS = {"": YES_NO, "three": THREE, "context": CONTEXT}


def test_the_documented_examples_hold():
    read, unread = _doc_rows("### Read"), _doc_rows("### Not read")
    assert len(read) >= 25 and len(unread) >= 20
    for reply, options, answer, rule in read:
        parsed = parse_answer(reply, DOC_OPTIONS[options])
        assert (parsed.answer, parsed.rule) == (answer, rule), reply
    for reply, options, error in unread:
        parsed = parse_answer(reply, DOC_OPTIONS[options])
        assert (parsed.answer, parsed.error) == (None, error), reply
