"""Answer parsing: an adversarial table of replies and property-based tests."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cfkit.cases import Option
from cfkit.parse import parse_answer

YES_NO = [Option(id="A", text="Yes"), Option(id="B", text="No")]
NO_YES = [Option(id="A", text="No"), Option(id="B", text="Yes")]
THREE = [Option(id="A", text="A wedding"), Option(id="B", text="A funeral"), Option(id="C", text="A race")]
CONTEXT = [Option(id="A", text="Suitable for the classroom"), Option(id="B", text="Not suitable")]

# reply, options, expected answer, expected rule (answer given) or error (no answer)
CASES = [
    # strict JSON
    ('{"answer": "B", "reason": "a funeral scene", "confidence": "high"}', YES_NO, "B", "json"),
    ('{"answer": "A"}', THREE, "A", "json"),
    ('{"Answer": "C", "reason": "runners at a finish line"}', THREE, "C", "json"),
    ('{"answer": "(B)"}', YES_NO, "B", "json"),
    ('{"answer": "Yes"}', YES_NO, "A", "yes-no"),
    ('{"answer": "Yes"}', NO_YES, "B", "yes-no"),
    ('{"answer": "C"}', YES_NO, None, "unparseable"),  # outside the options
    ('{"answer": "maybe"}', YES_NO, None, "unparseable"),
    ('{"answer": ["A", "B"]}', YES_NO, None, "conflicting"),  # two options in JSON
    ('{"answer": "A or B"}', YES_NO, None, "conflicting"),
    ('{"answer": "A", "final_answer": "B"}', YES_NO, None, "conflicting"),
    ('{"answer": null, "reason": "unclear"}', YES_NO, None, "missing"),
    ('{"reason": "the poster needs a calm image"}', YES_NO, None, "missing"),
    ('{"answer": 1}', YES_NO, None, "unparseable"),
    ('{"answer": "a"}', YES_NO, None, "unparseable"),  # lower case is not an id
    # near-JSON: code fences, trailing text, truncation, sloppy quoting
    ('```json\n{"answer": "A", "reason": "bright and festive"}\n```', YES_NO, "A", "field"),
    ('{"answer": "B"} Hope this helps!', YES_NO, "B", "field"),
    ('Here is my verdict: {"answer": "B", "reason": "too somber"}', YES_NO, "B", "field"),
    ('{"answer": "B", "reason": "the figures look distressed and the let', YES_NO, "B", "field"),
    ("{'answer': 'A', 'reason': 'cheerful',}", YES_NO, "A", "field"),
    ("{answer: B}", YES_NO, "B", "field"),
    ('{"answer": "A"}\nOn reflection, the answer is B.', YES_NO, None, "conflicting"),  # JSON vs text
    ('```json\n{"answer": "A"}\n```\n```json\n{"answer": "B"}\n```', YES_NO, None, "conflicting"),
    # bare labels
    ("B", YES_NO, "B", "leading-id"),
    ("(B)", YES_NO, "B", "leading-id"),
    ("B.", YES_NO, "B", "leading-id"),
    ("**B**", YES_NO, "B", "leading-id"),
    ("Answer: B", YES_NO, "B", "leading-id"),
    ("Answer: (A)", YES_NO, "A", "leading-id"),
    ("Final answer: **C**", THREE, "C", "leading-id"),
    ("Option B", YES_NO, "B", "leading-id"),
    ("B) No", YES_NO, "B", "leading-id"),
    ("A. Yes, because the palette is festive.", YES_NO, "A", "leading-id"),
    ("B\nThe letter in her hand signals bad news.", YES_NO, "B", "leading-id"),
    ("C - the runners and the finish tape", THREE, "C", "leading-id"),
    ("A. No", YES_NO, None, "conflicting"),  # label and option text disagree
    ("A, B", YES_NO, None, "ambiguous"),
    # declarations
    ("The answer is B", YES_NO, "B", "field"),
    ("the answer is B because the mood is grim", YES_NO, "B", "field"),
    ("After weighing the scene, my answer is (A).", YES_NO, "A", "field"),
    ("I choose option C.", THREE, "C", "field"),
    ("The answer is: **A**", YES_NO, "A", "field"),
    ("Reasoning first.\n\nAnswer: B", YES_NO, "B", "field"),
    ("Option A would suit a wedding, but the correct option is B.", THREE, "B", "field"),
    ("The answer is A. Actually, the answer is B.", YES_NO, None, "conflicting"),
    ("The answer is not A", YES_NO, None, "unparseable"),
    ("Answer: A Serene Moment in a Chinese Landscape", YES_NO, None, "unparseable"),
    # Yes / No
    ("Yes", YES_NO, "A", "yes-no"),
    ("no.", YES_NO, "B", "yes-no"),
    ("No", NO_YES, "A", "yes-no"),
    ("Yes", CONTEXT, None, "unparseable"),  # no option's text is "Yes"
    ("Yes", THREE, None, "unparseable"),
    ("Yes, but only for adults", YES_NO, None, "unparseable"),  # not an exact Yes
    # the article "A", lower case, several options, negation, empty, refusal
    ("A Serene Moment in a Chinese Landscape", YES_NO, None, "unparseable"),
    ("A quiet harbour at dusk with fishing boats.", YES_NO, None, "unparseable"),
    ("A given scene can suit many posters.", YES_NO, None, "unparseable"),
    ("a", YES_NO, None, "unparseable"),
    ("a serene landscape", YES_NO, None, "unparseable"),
    ("A/B", YES_NO, None, "ambiguous"),
    ("Option A or B", YES_NO, None, "ambiguous"),
    ("A or B", YES_NO, None, "ambiguous"),
    ("Both A and B could work here.", THREE, None, "ambiguous"),
    ("Not A", YES_NO, None, "unparseable"),
    ("", YES_NO, None, "missing"),
    ("   \n\t ", YES_NO, None, "missing"),
    ("I'm sorry, but I can't help with that request.", YES_NO, None, "refused"),
    ("I cannot determine the answer from this image.", YES_NO, None, "refused"),
    ("As an AI, I do not judge art.", YES_NO, None, "refused"),
    ("The image shows a quiet lake at sunset.", YES_NO, None, "unparseable"),
    ("null", YES_NO, None, "missing"),
]


@pytest.mark.parametrize("reply,options,answer,outcome", CASES, ids=[f"{i:02d}:{c[0][:30]!r}" for i, c in enumerate(CASES)])
def test_adversarial_replies(reply, options, answer, outcome):
    parsed = parse_answer(reply, options)
    assert parsed.answer == answer, parsed.detail
    if answer is None:
        assert parsed.error == outcome, parsed.detail
        assert parsed.rule is None
        assert parsed.detail  # every failure says why
    else:
        assert parsed.rule == outcome
        assert parsed.error is None


def test_table_is_large_enough():
    assert len(CASES) >= 40


def test_reason_and_confidence_are_kept():
    parsed = parse_answer('{"answer": "B", "reason": "a funeral procession", "confidence": 0.8}', YES_NO)
    assert (parsed.answer, parsed.reason, parsed.confidence) == ("B", "a funeral procession", "0.8")
    fenced = parse_answer('```json\n{"answer": "A", "reason": "bright", "confidence": "low"}\n```', YES_NO)
    assert (fenced.answer, fenced.reason, fenced.confidence) == ("A", "bright", "low")


def test_none_reply_is_missing():
    assert parse_answer(None, YES_NO).error == "missing"


# ── properties ─────────────────────────────────────────────────────────────

option_sets = st.integers(min_value=2, max_value=5).flatmap(
    lambda n: st.tuples(
        st.just([chr(ord("A") + i) for i in range(n)]),
        st.lists(st.text(min_size=1, max_size=20), min_size=n, max_size=n),
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


def names_as_answer(reply: str, option: Option) -> bool:
    """Whether ``reply`` contains the option's id as a stand-alone token, or is exactly its text."""
    if re.search(rf"(?<![A-Za-z0-9_]){re.escape(option.id)}(?![A-Za-z0-9_])", reply):
        return True
    word = re.sub(r"^[\s*_\"'`]+|[\s*_\"'`.!]+$", "", reply).lower()
    return word in ("yes", "no") and option.text.strip().strip(".").lower() == word


words = st.sampled_from(["the", "a", "answer", "is", "option", "not", "image", "poster", "Answer:", "A", "B", "C",
                         "(B)", "yes", "No", "suitable", "{", "}", '"answer":', '"A"', "'B'", ",", ".", "\n", "```",
                         "because", "or", "/", "A.", "I", "choose", "Serene", "null", "final", "**"])


@settings(max_examples=400, deadline=None)
@given(st.lists(words, max_size=14), st.sampled_from([YES_NO, NO_YES, THREE, CONTEXT]), st.text(max_size=12))
def test_never_reads_an_option_the_reply_does_not_name(tokens, options, noise):
    reply = " ".join(tokens) + noise
    parsed = parse_answer(reply, options)
    if parsed.answer is not None:
        chosen = next(o for o in options if o.id == parsed.answer)
        assert names_as_answer(reply, chosen), (reply, parsed)
    else:
        assert parsed.error in ("missing", "ambiguous", "conflicting", "unparseable", "refused")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["serene", "moment", "in", "a", "landscape", "quiet", "harbour", "with", "boats",
                                 "Chinese", "Landscape", "Moment", "Quiet"]), min_size=1, max_size=10))
def test_opening_article_is_never_option_a(rest):
    reply = "A " + " ".join(rest)
    assert parse_answer(reply, YES_NO).answer is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_crashes(reply):
    parsed = parse_answer(reply, THREE)
    assert (parsed.answer is None) != (parsed.error is None)
