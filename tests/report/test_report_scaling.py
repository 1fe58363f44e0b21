"""The shortcuts that keep a study-sized report fast give what the plain path gives, values and errors alike.

Reading predictions takes each line through pydantic's JSON reading in one
pass (``json.loads`` then the model for a line it refuses), checks a case's options once per case, and
holds the cycle collector off; the report takes present answers without the
per-answer checks. None of that may change a value or the first error named.
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path

import pytest

from cfkit.dataset import load_cases
from cfkit.errors import PredictionError
from cfkit import predictions
from cfkit.predictions import Prediction, check_predictions, load_predictions, parse_predictions
from cfkit.predictions_schema import PredictionModel
from cfkit.vocabulary import SUITE_CONDITIONS


BASE = '{"model": "m", "suite": "contextcanvas", "case": "T1", "condition": "image"'
#: Lines that differ in how JSON may be written or read: escapes, numbers, duplicates, stray text, types.
TAILS = [
    '}', ', "answer": "A"}', ', "answer": "A", "answer": "B"}', ', "answer": "\\ud800"}', ', "raw": "a\tb"}',
    ', "raw": "a\\u0000b"}', ', "raw": "\\udc80\\ud800"}', ', "raw": "\\ud83d\\ude00"}', ', "raw": "x\\u2028y\x7f"}',
    ', "raw": "x\x1fy"}', ', "raw": "\\/"}', ', "raw": "\\x"}', ', "raw": "\\u12"}', ', "raw": "a"b"}', ", \"raw\": 'x'}",
    ', "edit_id": 1.0}', ', "edit_id": true}', ', "edit_id": "1"}', ', "edit_id": 1e2}', ', "edit_id": 1E+2}',
    ', "edit_id": 1.5}', ', "edit_id": -0}', ', "edit_id": 01}', ', "edit_id": +1}', ', "edit_id": .5}', ', "edit_id": 1.}',
    ', "edit_id": 0x1}', ', "edit_id": 1e400}', ', "edit_id": Infinity}', ', "edit_id": 12345678901234567890123}',
    ', "truncated": 1}', ', "truncated": "true"}', ', "truncated": "yes"}', ', "truncated": True}', ', "truncated": null}',
    ', "answer": NaN}', ', "answer": 1}', ', "answer": undefined}', ', "answer": null,}', ', "suite": "modality"}',
    ', "nested": {"a": [1, 2]}}', '} ', '}x', '}}', '}, {}', ', "raw": "' + "}" + '"}', ', "answer": ["A"]}',
    ', "parse": {"json": 1}}',
]
LINES = [BASE + tail for tail in TAILS] + ["\ufeff" + BASE + "}", " " + BASE + "}", "[" + BASE + "}]", "{}", "1", '"x"',
                                          '{"raw": ' * 100_000 + "1" + "}" * 100_000]


def _plain(line):
    """How a line read before the one-pass reading: json.loads, then the model."""
    raw = json.loads(line)
    if not isinstance(raw, dict):
        raise TypeError(type(raw).__name__)
    return PredictionModel.model_validate(raw)


def _outcome(read, line):
    try:
        pred = read(line)
    except (ValueError, TypeError, RecursionError, PredictionError) as exc:
        return "refused", exc
    return "read", pred.model_dump()


@pytest.fixture(params=["orjson", "json"])
def json_reader(request, monkeypatch):
    """The plain reading with each JSON parser it may use: orjson where installed, else json's own."""
    if request.param == "json":
        monkeypatch.setitem(sys.modules, "orjson", None)  # as if not installed
        assert predictions._array_loads() == (json.loads, False)
    else:
        pytest.importorskip("orjson")
        assert predictions._array_loads()[1]
    return request.param


@pytest.mark.parametrize("line", LINES, ids=range(len(LINES)))
def test_a_line_reads_as_it_read_before(line, json_reader):
    """A line the one-pass reading accepts gives what json.loads and the model gave; the others go the plain way."""
    one_pass = _outcome(PredictionModel.__pydantic_validator__.validate_json, line)
    plain = _outcome(_plain, line)
    if one_pass[0] == "read":
        assert one_pass == plain
    loaded = _outcome(lambda text: parse_predictions(text, "p.jsonl")[0], line)
    assert loaded[0] == plain[0]
    if plain[0] == "read":
        assert loaded == plain
    else:  # refused with the plain reading's words
        assert isinstance(loaded[1], PredictionError) and str(loaded[1]).startswith("p.jsonl:1: ")


GOOD = [BASE.replace('"T1"', f'"T{n}"') + ', "answer": "A", "raw": "A é"}' for n in range(2, 7)]


@pytest.mark.parametrize("line", LINES, ids=range(len(LINES)))
def test_a_line_among_good_lines_reads_or_is_refused_as_before(line, json_reader):
    """Each line of LINES as the fourth of six: the file reads (without pydantic where all is plain) to what the
    line-by-line reading gives, or is refused with the message that reading gives for that line, its number
    included."""
    text = "\n".join([*GOOD[:3], line, *GOOD[3:]]) + "\n"
    alone = _outcome(lambda one: parse_predictions(one, "p.jsonl")[0], line)
    got = _outcome(lambda whole: parse_predictions(whole, "p.jsonl")[3], text)
    if alone[0] == "refused":
        assert got[0] == "refused" and str(got[1]) == str(alone[1]).replace("p.jsonl:1: ", "p.jsonl:4: ", 1)
    else:
        preds = parse_predictions(text, "p.jsonl")
        assert [p.model_dump() for p in preds] == [
            _outcome(_plain, one)[1] for one in [*GOOD[:3], line, *GOOD[3:]]]


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


def test_the_units_written_straight_as_json_read_as_the_report_object_writes_them():
    """The JSON report writes each case's record after its id once per distinct (answers, golds, reasons) and reuses
    it; the text is still the one the report object gives, whatever the ids, answers, golds and reasons hold."""
    from cfkit.report import to_json
    from cfkit.report.exports import indented_json
    from cfkit.report.rows import Report
    from cfkit.report.units import ModelUnits, UnitOutcome

    conditions = ("text", "neutral", "evidence", "image")
    answers = [None, "A", "B", "é\"\\\n", "\u2028"]

    def case_unit(i: int, shift: int) -> UnitOutcome:
        got = {c: answers[(i + shift + k) % len(answers)] for k, c in enumerate(conditions)}
        gold = {c: (None if i % 7 == 0 else "AB"[(i + k) % 2]) for k, c in enumerate(conditions)}
        missing = {c: f"absent: «{i % 3}» \"x\"" for c in conditions if got[c] is None and i % 2}
        return UnitOutcome.made(f"C{i % 9}’\"{i}", None, got, gold, missing)

    groups = [ModelUnits(model, "modality", [case_unit(i, shift) for i in range(60)])
              for shift, model in enumerate(("m/ü", 'q"1', "m/ü"))]
    groups.append(ModelUnits("m/ü", "contextcanvas",
                             [UnitOutcome.made(f"K{i}", None, {"image": "AB"[i % 2]}, {"image": "A"}, {})
                              for i in range(5)]))
    groups.append(ModelUnits("p", "counterfactual",
                             [UnitOutcome.made("K1", "CF1", {"original": "B", "edit": "A"},
                                               {"original": "B", "edit": "A"}, {}),
                              UnitOutcome.made("K1", "CF2", {"original": None, "edit": "A"},
                                               {"original": "B", "edit": "A"}, {"original": "transport"})]))
    groups.append(ModelUnits("none", "modality", []))
    report = Report([], [], [], [], [], units=groups)
    assert to_json(report) == indented_json(report.to_dict()) + "\n"
    assert json.loads(to_json(report))["units"] == [g.to_dict() for g in groups]
    assert to_json(Report([], [], [], [], [])) == indented_json(Report([], [], [], [], []).to_dict()) + "\n"


def test_plain_files_skip_the_full_check_and_doubtful_ones_go_to_it(json_reader):
    """The column-wise reading takes a plainly right file itself and leaves a file with anything pydantic would
    convert or refuse (here as its last line) to the line-by-line reading."""
    from cfkit.predictions import _read_whole

    def read(lines):
        return _read_whole("\n".join(lines) + "\n", "p.jsonl", None, None, {})

    assert [p.case for p in read(GOOD)] == ["T2", "T3", "T4", "T5", "T6"]
    assert [p.case for p in _read_whole("\r\n".join(GOOD), "p.jsonl", None, None, {})] == ["T2", "T3", "T4", "T5", "T6"]
    for tail in (', "edit_id": 1.0}', ', "truncated": 1}', ', "raw": "\\ud800"}', ', "nested": {}}', ', "raw": 1}',
                 ', "suite": "counterfactual"}', ', "pair": ""}', ', "parse": "nope"}', ', "answer": "A", "error": "refused"}',
                 ', "model": ""}', ', "raw": ["A"]}', ', "error": "late"}'):
        assert read([*GOOD, BASE + tail]) is None, tail
    assert read([*GOOD, ""]) is None  # a blank line: read line by line
    # Two suites in one file: each line's condition is looked for among its own suite's.
    modality = BASE.replace("contextcanvas", "modality").replace('"T1"', '"T9"').replace('"image"', '"text"') + "}"
    assert len(read([*GOOD, modality])) == 6
    assert read([*GOOD, modality, BASE + ', "condition": "text"}']) is None
    assert read([*GOOD, modality.replace('"text"', '"edit"')]) is None
    assert read([*GOOD[:2], GOOD[2].replace(", ", ",\r ", 1), *GOOD[3:]]) is None  # a line split by a lone "\r"
    assert read([GOOD[0].replace('"A \u00e9"', '"A\u2028"'), *GOOD[1:]]) is None  # … or by U+2028


def _record(line):
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


KWARGS = [record for record in map(_record, LINES[:-1]) if record is not None] + [
    {"model": "m", "suite": "counterfactual", "case": "T1", "pair": "CF01", "condition": "edit", "edit_id": edit_id,
     "image_sha256": sha, "truncated": truncated, "endpoint": endpoint}
    for edit_id in (None, 1, 0, 2**63, True, 2.0) for sha in (None, "a" * 64, "A" * 64, "a" * 63)
    for truncated in (None, True, 1) for endpoint in (None, "http://x", "\ud800", 3)]


@pytest.mark.parametrize("fields", KWARGS, ids=range(len(KWARGS)))
def test_a_prediction_made_from_fields_is_the_models_or_refused_in_its_words(fields):
    """``Prediction(**fields)`` (records from the store, other harnesses' files): the same values as the model's,
    or pydantic's own ValidationError with the model's errors; a record read plainly one at a time is also read
    plainly as part of a column."""
    from pydantic import ValidationError

    from cfkit.prediction_record import FIELDS, _row_passes, _rows_pass

    try:
        expected = PredictionModel(**fields).model_dump()
    except ValidationError as exc:
        with pytest.raises(ValidationError) as caught:
            Prediction(**fields)
        assert caught.value.errors(include_context=False) == exc.errors(include_context=False)
    else:
        assert Prediction(**fields).model_dump() == expected
    row = tuple(map(fields.get, FIELDS))
    if fields.keys() <= set(FIELDS):
        assert _row_passes(row) == _rows_pass([row]), fields


def test_the_plain_record_has_the_models_fields_and_values():
    """The plain record and the full check name the same fields in the same order (the order lines are written
    in), the same errors, and the same defaults (null)."""
    import typing

    from cfkit.prediction_record import ERRORS, FIELDS

    assert FIELDS == tuple(PredictionModel.model_fields)
    error = PredictionModel.model_fields["error"].annotation
    assert set(ERRORS) == set(typing.get_args(typing.get_args(error)[0]))
    required = [name for name, info in PredictionModel.model_fields.items() if info.is_required()]
    assert required == ["model", "suite", "case", "condition"]
    assert all(PredictionModel.model_fields[name].default is None for name in FIELDS if name not in required)


#: A file's bytes that its text would not show alike: encoded line breaks inside strings, a lone "\r", a byte
#: order mark, bytes that are not UTF-8 (alone and as an encoded surrogate), and "\r\n" line ends.
BYTE_FILES = [
    "\n".join(GOOD).encode() + b"\n",
    ("\n".join(GOOD[:2] + [GOOD[2].replace("A \u00e9", "A\u2028B\x85C\u2029")] + GOOD[3:]) + "\n").encode(),
    ("\n".join(GOOD[:2] + [GOOD[2].replace(", ", ",\r ", 1)] + GOOD[3:]) + "\n").encode(),
    "\ufeff".encode() + "\n".join(GOOD).encode(),
    "\n".join(GOOD).encode().replace(b"A \xc3\xa9", b"A \xe9", 1),
    "\n".join(GOOD).encode().replace(b"A \xc3\xa9", b"A \xed\xa0\x80", 1),
    "\r\n".join(GOOD).encode() + b"\r\n",
    b"", b"\n", "\n".join(GOOD).encode() + b"\n\n",
]


@pytest.mark.parametrize("data", [*BYTE_FILES, *(("\n".join([*GOOD[:3], line, *GOOD[3:]]) + "\n").encode()
                                                 for line in LINES[:-1])])
def test_a_file_read_from_its_bytes_gives_what_its_text_gives(tmp_path, data, json_reader):
    """A predictions file is read whole from its bytes (decoded only for the line-by-line reading): it gives the
    predictions, or the first error, that reading its text gives, whatever its bytes hold."""
    path = tmp_path / "p.jsonl"
    path.write_bytes(data)
    from_file = _all(lambda p: load_predictions([p]), path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        assert from_file[0] == "refused" and "not UTF-8 text" in str(from_file[1])
        return
    from_text = _all(lambda t: parse_predictions(t, path), text)
    assert from_file[0] == from_text[0]
    if from_file[0] == "read":
        assert from_file == from_text
    else:
        assert str(from_file[1]) == str(from_text[1])


def _all(read, source):
    try:
        return "read", [p.model_dump() for p in read(source)]
    except PredictionError as exc:
        return "refused", exc


@pytest.mark.parametrize("part", [1, 40, 250, 1 << 21])
def test_a_file_read_a_part_at_a_time_gives_what_reading_it_whole_gives(tmp_path, monkeypatch, part, json_reader):
    """A file is read whole lines at a time, about ``predictions._PART`` bytes each (so that its records are never
    all in memory at once): whatever the parts, the predictions are those of the line-by-line reading, a unit
    answered twice in two parts is refused with both lines named, and a problem is named at its own line."""
    monkeypatch.setattr(predictions, "_PART", part)
    lines = [BASE.replace('"T1"', f'"T{n}"').replace('"m"', f'"m{n % 3}"') + ', "answer": "A", "raw": "é"}'
             for n in range(40)]
    path = tmp_path / "p.jsonl"
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode())
    assert [p.model_dump() for p in load_predictions([path])] == [_plain(line).model_dump() for line in lines]
    seen: dict = {}
    assert predictions._read_whole(path.read_text(), path, None, None, seen) is not None and len(seen) == 40
    assert seen[("m2", "contextcanvas", "T38", None, "image")] == (str(path), 39)
    path.write_text("\n".join([*lines, lines[3]]) + "\n")
    with pytest.raises(PredictionError, match=r"p\.jsonl:41: a second answer .* at .*p\.jsonl:4\)"):
        load_predictions([path])
    path.write_text("\n".join([*lines[:30], BASE + ', "answer": "A", "truncated": 1}', *lines[30:]]) + "\n")
    assert len(load_predictions([path])) == 41  # the line pydantic converts is read by the full check
    path.write_text("\n".join([*lines[:30], BASE + ', "answer": 1}', *lines[30:]]) + "\n")
    with pytest.raises(PredictionError, match=r"p\.jsonl:31: "):
        load_predictions([path])


@pytest.mark.parametrize("part", [1, 200, 1 << 21])
def test_a_case_looked_up_in_an_earlier_part_is_still_checked_in_a_later_one(tmp_path, monkeypatch, cases, part,
                                                                             json_reader):
    """Each case's options are looked up once for all the parts of a file: an answer that is not among them, or a
    case the workspace lacks, in any later part is still refused at its own line, as the line-by-line reading
    refuses it."""
    monkeypatch.setattr(predictions, "_PART", part)
    good = [BASE.replace('"T1"', f'"{case}"').replace('"m"', f'"m{n}"') + f', "answer": "{answer}"}}'
            for n in range(12) for case, answer in (("T001", "A"), ("T002", "B"), ("T003", "C"))]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(good) + "\n")
    assert [p.model_dump() for p in load_predictions([path], cases=cases)] == [_plain(line).model_dump()
                                                                                for line in good]
    for bad, message in ((BASE.replace('"T1"', '"T001"').replace('"m"', '"x"') + ', "answer": "C"}', "answer 'C' is not an "
                          "option of case T001"), (BASE.replace('"T1"', '"T404"') + "}", "unknown case 'T404'")):
        path.write_text("\n".join([*good[:30], bad, *good[30:]]) + "\n")
        with pytest.raises(PredictionError, match=rf"p\.jsonl:31: {message}"):
            load_predictions([path], cases=cases)
        with pytest.raises(PredictionError, match=rf"p\.jsonl:31: {message}"):
            parse_predictions(path.read_text(), path, cases=cases)


def test_a_pair_written_empty_outside_the_counterfactual_suite_is_scored_as_none(tiny_ws):
    """Only the counterfactual suite has pairs: an answer of another suite written with ``"pair": ""`` is the same
    unit as one written with null, in every section and in the units."""
    from cfkit.report import build_report, to_json
    from cfkit.report.gold import load_gold
    from cfkit.workspace import load_workspace

    gold = load_gold(load_workspace(tiny_ws), all_cases=True)
    answers = {"T001": "B", "T002": "A", "T003": "A"}

    def preds(pair):
        made = [Prediction(model="m", suite="contextcanvas", case=c, pair=pair, condition="image", answer=a)
                for c, a in answers.items()]
        return made + [Prediction(model="m", suite="modality", case=c, pair=pair, condition=condition,
                                  answer=a if condition != "text" else "A")
                       for condition in ("text", "neutral", "evidence", "image") for c, a in answers.items()]

    written_null = json.loads(to_json(build_report(gold, preds(None), n_resamples=100)))
    written_empty = json.loads(to_json(build_report(gold, preds(""), n_resamples=100)))
    assert written_empty == written_null
    assert not written_null["missing"] and written_null["contextcanvas"][0]["accuracy"] == pytest.approx(200 / 3)


def test_a_report_finds_a_unit_answered_twice_by_counting_and_names_both_lines(tmp_path, tiny_ws):
    """A report reads its files without looking for repeats (build_report counts the units it indexes anyway);
    one unit answered twice, in one file or across two, is still refused with both lines named, and
    build_report given such predictions refuses them itself."""
    from cfkit.report import build_report, make_report
    from cfkit.report.build import RepeatedAnswer
    from cfkit.report.gold import load_gold
    from cfkit.workspace import load_workspace

    ws = load_workspace(tiny_ws)
    lines = [_line(case=case) for case in ("T001", "T002", "T003")]
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    one.write_text("\n".join([*lines, lines[1]]) + "\n")
    assert len(load_predictions([one], repeats=False)) == 4  # let through, for a caller that counts
    with pytest.raises(PredictionError, match=r"one\.jsonl:4: a second answer .* at .*one\.jsonl:2\)"):
        make_report(ws, [one], n_resamples=50)
    one.write_text("\n".join(lines) + "\n")
    two.write_text(lines[2] + "\n")
    with pytest.raises(PredictionError, match=r"two\.jsonl:1: a second answer .* at .*one\.jsonl:3\)"):
        make_report(ws, [one, two], n_resamples=50)
    preds = load_predictions([one]) + load_predictions([two])
    with pytest.raises(RepeatedAnswer, match=r"model 'm' answered case T003 condition image \(contextcanvas\) twice"):
        build_report(load_gold(ws, all_cases=True), preds, n_resamples=50)
    assert len(make_report(ws, [one], n_resamples=50).contextcanvas) == 1


@pytest.mark.parametrize("part", [200, 1 << 21])
def test_repeated_values_are_kept_once_and_cases_are_the_workspaces_own_ids(tmp_path, monkeypatch, cases, part,
                                                                            json_reader):
    """A study's lines repeat a few values (models, suites, conditions, answers, parse rules, case ids under each
    condition): read whole, each value is held once whatever part of the file it is in, and a case id is the
    workspace's own string (a suite or condition, the vocabulary's), so that memory grows with the distinct values
    rather than the lines and a report's look-ups find the very strings of its keys. The values are the
    line-by-line reading's."""
    monkeypatch.setattr(predictions, "_PART", part)
    lines = [json.dumps({"model": f"model-{m}", "suite": suite, "case": case, "condition": condition,
                         "answer": "AB"[(m + n) % 2], "parse": "json", "raw": f"reply {n}"})
             for m in range(3) for suite, conditions in (("modality", ("text", "image")), ("contextcanvas", ("image",)))
             for condition in conditions for n, case in enumerate(("T001", "T002", "T003"))]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(lines) + "\n")
    preds = load_predictions([path], cases=cases)
    assert [p.model_dump() for p in preds] == [_plain(line).model_dump() for line in lines]
    for field in ("model", "suite", "case", "condition", "answer", "parse"):
        values = [getattr(p, field) for p in preds]
        assert len({id(v) for v in values}) == len(set(values)), field
    own = {case.id: case.id for case in cases}
    assert all(p.case is own[p.case] for p in preds)
    vocabulary = {name: name for name in SUITE_CONDITIONS} | {c: c for cs in SUITE_CONDITIONS.values() for c in cs}
    assert all(p.suite is vocabulary[p.suite] and p.condition is vocabulary[p.condition] for p in preds)
