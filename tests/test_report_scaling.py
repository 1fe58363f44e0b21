"""The shortcuts that keep a study-sized report fast give what the plain path gives, values and errors alike.

Reading predictions takes each line through a JSON scanner without
``json.loads``'s per-call overhead, checks a case's options once per case, and
holds the cycle collector off; the report takes present answers without the
per-answer checks. None of that may change a value or the first error named.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from cfkit.dataset import load_cases
from cfkit.errors import PredictionError
from cfkit.predictions import Prediction, _object, check_predictions, load_predictions, paused_collection


def _outcome(fn, line):
    try:
        return ("value", fn(line))
    except BaseException as exc:  # noqa: BLE001 - the class and the message are what is compared
        return ("error", type(exc), str(exc))


LINES = [
    '{"a": 1}', '{}', '{"a": 1} ', ' {"a": 1}', '\ufeff{"a": 1}', '{"a": 1}{"b": 2}', '{"a": 1}, {"b": 2}',
    '{"a": 1}}', '{"a": NaN, "b": -Infinity}', '{"a": "\\ud800"}', '{"a": "x\ty"}', '{"a": "\u00e9\u2028"}',
    '{"a": 1, "a": 2}', '{"a": 1e400}', '{"a": 12345678901234567890123}', '{"a": [1, {"b": null}]}',
    '{"a": tru}', '{"a" 1}', '{', '}', '{"a": "}', '{"a": "x"} }', "{'a': 1}", '{"a": 1,}',
    '{"x": ' * 50 + '1' + '}' * 50, '{"x": ' * 100_000 + '1' + '}' * 100_000,
]


@pytest.mark.parametrize("line", LINES, ids=range(len(LINES)))
def test_a_line_reads_as_json_loads_reads_it(line):
    fast, plain = _outcome(_object, line), _outcome(json.loads, line)
    if plain[0] == "value" and isinstance(plain[1], dict):
        # NaN != NaN: compared as re-encoded text, which keeps key order too
        assert fast[0] == "value" and json.dumps(fast[1]) == json.dumps(plain[1])
    else:
        assert fast[:2] == plain[:2] and fast[2] == plain[2]


def _line(**fields) -> str:
    record = {"model": "m", "suite": "contextcanvas", "case": "T001", "condition": "image", "answer": "B"} | fields
    return json.dumps(record)


@pytest.fixture
def cases(tiny_ws: Path):
    return load_cases(tiny_ws / "data" / "cases.jsonl", tiny_ws / "data" / "images")


@pytest.mark.parametrize("lines, message", [
    ([_line(), _line(case="T002", answer="Z"), _line(case="NOPE")],
     r"p\.jsonl:2: answer 'Z' is not an option of case T002 \(A, B\); write null"),
    ([_line(), _line(case="NOPE"), _line(case="T002", answer="Z")], r"p\.jsonl:2: unknown case 'NOPE'; it is not in"),
    ([_line(), _line(case="T001", answer="Z")], r"p\.jsonl:2: answer 'Z' is not an option of case T001"),
    ([_line(), "", _line()], r"p\.jsonl:3: a second answer from model 'm' for case T001, condition image "
                             r"\(the first is at .*p\.jsonl:1\)"),
    ([_line(), _line(case="T002") + " x"], rf"p\.jsonl:2: not valid JSON \(Extra data at column {len(_line(case='T002')) + 2}\)"),
])
def test_the_first_problem_is_named_with_its_line(tmp_path, cases, lines, message):
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(PredictionError, match=message):
        load_predictions([path], cases=cases)


def test_stored_records_name_the_first_record_of_a_repeated_answer(cases):
    preds = [Prediction.model_validate(json.loads(_line(case=c))) for c in ("T001", "T002", "T001")]
    with pytest.raises(PredictionError) as caught:
        check_predictions(preds, "store x.db", cases=cases)
    assert str(caught.value) == ("store x.db, record 3 (model m, contextcanvas): a second answer for case T001, "
                                 "condition image (the first is store x.db, record 1 (model m, contextcanvas)).")
    bad = [preds[0], Prediction.model_validate(json.loads(_line(case="T002", answer="Z")))]
    with pytest.raises(PredictionError, match=r"^store x\.db, record 2 \(model m, contextcanvas\): answer 'Z' is not"):
        check_predictions(bad, "store x.db", cases=cases)


def test_the_cycle_collector_comes_back_as_it_was(tmp_path, cases):
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text(_line() + "\n")
    bad.write_text(_line(case="NOPE") + "\n")
    assert gc.isenabled()
    assert len(load_predictions([good], cases=cases)) == 1
    assert gc.isenabled()
    with pytest.raises(PredictionError):
        load_predictions([bad], cases=cases)
    assert gc.isenabled()  # also after an error
    gc.disable()
    try:
        with paused_collection():
            pass
        assert not gc.isenabled()  # a caller that held it off keeps it off
    finally:
        gc.enable()
