"""A case record read without pydantic gives what the full check gives: the same Case, or the full check's refusal.

Commands that only read a cases file (a report, a rerun) skip pydantic when a
record is plainly right (cfkit.cases.plain_case); every other record goes
through cfkit.cases_schema, which converts and words refusals as pydantic
always did. Each record below, every rule broken one at a time, is read both ways.
"""

from __future__ import annotations

import copy
import json

import pytest
from pydantic import ValidationError

from cfkit.cases import Case, Option, Provenance, parse_case, plain_case
from cfkit.cases_schema import validated

BASE = {"id": "T001", "images": ["a/T001.png"], "question": "Is this suitable?",
        "options": [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}], "gold": "B", "yes_option": "A",
        "rationale": "r", "domain": "school",
        "provenance": {"title": "t", "creator": None, "url": "https://x", "original_id": "o-1", "notes": [1, {"a": 2}]}}
OTHERS = [1, 1.5, True, None, [], {}, "", " ", "x", ["x"], ("x",), "\x00", "é\u2028"]


def _variants():
    yield BASE
    yield {k: v for k, v in BASE.items() if k in ("id", "images", "question", "options", "gold")}
    for key in BASE:
        yield {k: v for k, v in BASE.items() if k != key}  # each key missing
        for other in OTHERS:
            yield BASE | {key: other}  # each key of every other type
    yield BASE | {"extra": 1}
    yield BASE | {"Id": "x"}
    for case_id in ["T", "t-1.x_y", "1" * 64, "1" * 65, ".T", "-T", "T/1", "T 1", "Té", "T\x00", "T\n", "Ｔ1"]:
        yield BASE | {"id": case_id}
    for images in [[], ["a.png", "b.png"], ["a.png", "b.png", "c.png"], ["a.png", 1], ["/abs.png"], ["C:x.png"],
                   ["a\\b.png"], ["../x.png"], ["a/../x.png"], ["a/./x.png"], [" "], ["a\tb.png"], ["a\x7f.png"],
                   ["é/ü.png"], ["a.png", "a.png"], ["..."], ["a..b.png"], ("a.png",), ["\ud800.png"]]:
        yield BASE | {"images": images}
    for question in ["?", "a\x00b", "\x00", " ", "\ud800", "\ud83d\ude00 ok", "a\x1b[31mred", "x" * 100_000]:
        yield BASE | {"question": question}
    yes, no = {"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}
    for options in [[yes], [yes, no, {"id": "C", "text": "Maybe"}], [yes, yes], [yes, {"id": "", "text": "No"}],
                    [yes, {"id": "B", "text": "N\x00o"}], [yes, {"id": "B", "text": ""}], [yes, {"id": "B"}],
                    [yes, {"text": "No"}], [yes, {"id": "B", "text": "No", "x": 1}], [yes, {"id": 2, "text": "No"}],
                    [yes, {"id": "B", "text": 2}], [yes, ["B", "No"]], [yes, "B"], [yes, None], (yes, no),
                    [yes, {"id": "B", "text": "\ud800"}], [yes, {"id": " ", "text": "No"}]]:
        record = BASE | {"options": options}
        if isinstance(options, list) and len(options) != 2:
            record.pop("yes_option")
        yield record
    for gold in ["A", "C", "a", " B", ""]:
        yield BASE | {"gold": gold}
    for yes_option in ["B", "C", None, ""]:
        yield BASE | {"yes_option": yes_option}
    yield BASE | {"options": [yes, no, {"id": "C", "text": "Maybe"}]}  # yes_option with three options
    for provenance in [{}, {"title": 1}, {"license": ["x"]}, {"_private": 1}, {"model_x": 1}, {"a b": 1}, {"1x": 1},
                       {"title": "\x00"}, {"redistribution": None, "x": None}, [], "x", {"title": "t", "title2": "u"}]:
        yield BASE | {"provenance": provenance}
    yield BASE | {"rationale": "\x00", "domain": ""}
    yield [("id", "T")]
    yield "T001"


RECORDS = [copy.deepcopy(r) for r in _variants()]


def _full(record):
    try:
        values = validated(copy.deepcopy(record))
    except ValidationError as exc:
        return None, exc.errors(include_context=False)
    values["options"] = [Option(i, t) for i, t in values["options"]]
    values["provenance"] = None if values["provenance"] is None else Provenance(**values["provenance"])
    return Case(**values), None


@pytest.mark.parametrize("record", RECORDS, ids=range(len(RECORDS)))
def test_both_readings_agree(record):
    full, errors = _full(record)
    plain = plain_case(copy.deepcopy(record))
    if plain is not None:  # accepted plainly: exactly what the full check gives
        assert full is not None, errors
        assert plain == full
        for name in ("images", "options"):
            assert type(getattr(plain, name)) is type(getattr(full, name)) is list
        if full.provenance is not None:
            assert list(plain.provenance.model_dump().items()) == list(full.provenance.model_dump().items())
    if errors is not None:  # refused: never plainly, and parse_case gives the full check's own words
        assert plain is None
        with pytest.raises(ValidationError) as caught:
            parse_case(copy.deepcopy(record))
        assert caught.value.errors(include_context=False) == errors
    else:
        assert parse_case(copy.deepcopy(record)) == full


def test_the_corpus_exercises_both_readings():
    plain = [r for r in RECORDS if plain_case(copy.deepcopy(r)) is not None]
    refused = [r for r in RECORDS if _full(r)[1] is not None]
    assert len(plain) >= 30 and len(refused) >= 60, (len(plain), len(refused))


def test_provenance_keeps_its_extra_keys_as_attributes():
    case = plain_case(copy.deepcopy(BASE))
    assert case.provenance.original_id == "o-1" and case.provenance.notes == [1, {"a": 2}]
    assert case.provenance.provider is None
    assert case.provenance.model_extra == {"original_id": "o-1", "notes": [1, {"a": 2}]}
    with pytest.raises(AttributeError):
        case.provenance.nothing_here
    with pytest.raises(AttributeError):
        case.provenance.title = "x"


def test_a_json_record_read_plainly_is_what_a_cases_file_line_gives():
    """The records of a cases file come from json.loads: their exact types are the ones plain_case accepts."""
    record = json.loads(json.dumps(BASE))
    assert plain_case(record) == parse_case(record)
    assert plain_case(record) is not None


def test_cases_listing_the_same_option_share_one_object_either_way():
    # A large run keeps every case in memory: an option listed by many cases is held once, whichever reading made
    # the case, and an option with other text is its own.
    plain = [plain_case(BASE | {"id": f"T{i}"}) for i in range(3)]
    listed = BASE | {"images": ("a/T001.png",)}  # a tuple: converted by the full check, not read plainly
    assert plain_case(listed) is None
    checked = parse_case(listed)
    for case in plain[1:] + [checked]:
        assert all(a is b for a, b in zip(case.options, plain[0].options))
    other = plain_case(BASE | {"options": [{"id": "A", "text": "Yes."}, {"id": "B", "text": "No"}]})
    assert other.options[0] is not plain[0].options[0]
    assert other.options[0] == Option("A", "Yes.") and other.options[1] is plain[0].options[1]
