"""Predictions JSONL: loading, checks with file and line, export, and reading stored runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cfkit.dataset import load_cases
from cfkit.errors import PredictionError
from cfkit.predictions import (
    Prediction,
    check_predictions,
    dump_predictions,
    load_predictions,
    predictions_from_store,
)
from cfkit.store import Store, now
from cfkit.store.runs import latest_run_ids
from support.store_sql import insert_rows

PAIRS = {"TX01": "T001"}


def line(**fields) -> str:
    record = {"model": "openai:gpt-5.5", "suite": "contextcanvas", "case": "T001", "condition": "image",
              "answer": "B", "parse": "json", "error": None, "raw": '{"answer": "B"}', "reason": "r",
              "confidence": "high"}
    record.update(fields)
    return json.dumps(record)


@pytest.fixture
def cases(tiny_ws: Path):
    return load_cases(tiny_ws / "data" / "cases.jsonl", tiny_ws / "data" / "images")


def write(path: Path, *lines: str) -> Path:
    path.write_text("".join(item + "\n" for item in lines), encoding="utf-8")
    return path


def test_round_trip_keeps_every_field(tmp_path, cases):
    src = write(tmp_path / "p.jsonl",
                line(),
                line(case="T003", answer=None, parse=None, error="ambiguous", raw="A/B", reason=None),
                line(suite="counterfactual", pair="TX01", condition="edit", answer="A"),
                "",
                line(suite="modality", condition="neutral", case="T002", answer="A", confidence=None))
    preds = load_predictions([src], cases=cases, pairs=PAIRS)
    assert [p.condition for p in preds] == ["image", "image", "edit", "neutral"]
    assert preds[2].pair == "TX01" and preds[1].pair is None
    text = dump_predictions(preds)
    first = json.loads(text.splitlines()[0])
    assert list(first) == ["model", "suite", "case", "pair", "condition", "answer", "parse", "error", "raw", "reason",
                           "confidence"]
    again = load_predictions([write(tmp_path / "again.jsonl", *text.splitlines())], cases=cases, pairs=PAIRS)
    assert again == preds


#: A line of each kind the reading refuses, and what it says about it as the second line of p.jsonl.
MALFORMED = [
        ("{not json", r"p\.jsonl:2: not valid JSON"),
        ("[1, 2]", r"p\.jsonl:2: expected a JSON object"),
        (line(case="ZZ99"), r"p\.jsonl:2: unknown case 'ZZ99'"),
        (line(suite="counterfactual", pair="CF99", condition="edit"), r"p\.jsonl:2: unknown pair 'CF99'"),
        (line(suite="counterfactual", pair="TX01", case="T002", condition="edit"),
         r"p\.jsonl:2: pair TX01 is made from case T001, but the line names case T002"),
        (line(condition="sideways"), r"p\.jsonl:2: field 'condition'"),
        (line(suite="modality", condition="edit"), r"p\.jsonl:2: .*condition 'edit' is not one of suite modality's"),
        (line(suite="counterfactual", condition="edit"), r"p\.jsonl:2: .*needs 'pair'"),
        (line(pair="TX01"), r"p\.jsonl:2: .*'pair' is only for the counterfactual suite"),
        (line(answer="D"), r"p\.jsonl:2: answer 'D' is not an option of case T001 \(A, B\)"),
        (line(answer="A", error="refused"), r"p\.jsonl:2: .*an answer has no error"),
        (line(parse="guess"), r"p\.jsonl:2: .*'guess' is not a parser rule"),
        (line(edit_id=3), r"p\.jsonl:2: .*'edit_id' is only for counterfactual 'edit' answers"),
        (line(suite="counterfactual", pair="TX01", condition="original", image_sha256="a" * 64),
         r"p\.jsonl:2: .*'image_sha256' is only for counterfactual 'edit' answers"),
        (line(suite="benchmark"), r"p\.jsonl:2: field 'suite'"),
        (line(extra=1), r"p\.jsonl:2: unknown field 'extra'"),
        (line(answer="A"), r"p\.jsonl:2: a second answer from model 'openai:gpt-5.5' for case T001, condition image "
                           r"\(the first is at .*p\.jsonl:1\)"),
        (line(pair=""), r"p\.jsonl:2: unknown pair ''"),
]


@pytest.mark.parametrize("bad, message", MALFORMED)
def test_malformed_lines_name_file_and_line(tmp_path, cases, bad, message):
    src = write(tmp_path / "p.jsonl", line(), bad)
    with pytest.raises(PredictionError, match=message):
        load_predictions([src], cases=cases, pairs=PAIRS)


@pytest.mark.parametrize("bad, message", MALFORMED)
def test_a_bad_line_among_many_good_ones_is_named_at_its_line(tmp_path, cases, bad, message):
    """A file is first read whole, its checks made once per distinct value; whatever is wrong in it, anywhere, is
    still reported at its own line, as the line-by-line reading says it (a blank line still counts as a line)."""
    good = [line(model=f"m{i:02d}", answer="AB"[i % 2]) for i in range(60)]
    src = write(tmp_path / "p.jsonl", line(), *good[:30], "", *good[30:45], bad, *good[45:])
    with pytest.raises(PredictionError, match=message.replace(r"jsonl:2:", r"jsonl:48:")):
        load_predictions([src], cases=cases, pairs=PAIRS)


def test_an_empty_pair_is_no_pair_when_a_repeat_is_looked_for(tmp_path):
    for first, second in ((line(), line(pair="")), (line(pair=""), line())):
        with pytest.raises(PredictionError, match=r"p\.jsonl:2: a second answer .*p\.jsonl:1"):
            load_predictions([write(tmp_path / "p.jsonl", first, second)])
    with pytest.raises(PredictionError, match=r"two\.jsonl:1: a second answer .*one\.jsonl:1"):
        load_predictions([write(tmp_path / "one.jsonl", line(pair="")), write(tmp_path / "two.jsonl", line())])


def test_a_file_read_whole_gives_what_reading_it_line_by_line_gives(tmp_path, cases):
    lines = [line(model=f"m{i}", case=case, answer=answer, suite=suite, condition=condition,
                  **({"pair": "TX01"} if suite == "counterfactual" else {}))
             for i in range(3) for case in ("T001", "T002") for answer in ("A", "B", None)
             for suite, condition in (("contextcanvas", "image"), ("modality", "text"), ("counterfactual", "edit"))
             if suite != "counterfactual" or (case == "T001" and answer == "A")]
    lines = [text for text in lines if lines.count(text) == 1]
    lines = list({(r := json.loads(text))["model"] + r["suite"] + r["case"] + r["condition"]: text
                  for text in lines}.values())  # one answer a unit
    whole = load_predictions([write(tmp_path / "p.jsonl", *lines)], cases=cases, pairs=PAIRS)
    one_by_one = [load_predictions([write(tmp_path / f"{n}.jsonl", text)], cases=cases, pairs=PAIRS)[0]
                  for n, text in enumerate(lines)]
    assert whole == one_by_one and len(whole) == len(lines) > 10


def test_duplicate_across_files_names_both(tmp_path, cases):
    one = write(tmp_path / "one.jsonl", line())
    two = write(tmp_path / "two.jsonl", line(model="other"), line())
    with pytest.raises(PredictionError, match=r"two\.jsonl:2: a second answer .*one\.jsonl:1"):
        load_predictions([one, two], cases=cases)


def test_a_unit_repeated_in_any_later_file_names_both_lines(tmp_path, cases):
    """Every file's units are kept for the files after it (the last file's need not be): a repeat in the last file
    of a unit from any earlier one, or twice within the last, is refused with both lines named."""
    one = write(tmp_path / "one.jsonl", line(model="a"), line())
    two = write(tmp_path / "two.jsonl", line(model="b"), line(model="c"))
    for last, first in (((line(model="d"), line(model="c")), r"two\.jsonl:2"),
                        ((line(model="d"), line()), r"one\.jsonl:2"),
                        ((line(model="d"), line(model="d")), r"three\.jsonl:1")):
        three = write(tmp_path / "three.jsonl", *last)
        with pytest.raises(PredictionError, match=rf"three\.jsonl:2: a second answer .*{first}\)"):
            load_predictions([one, two, three], cases=cases)
    three = write(tmp_path / "three.jsonl", line(model="d"))
    assert [p.model for p in load_predictions([one, two, three], cases=cases)] == ["a", "openai:gpt-5.5", "b", "c", "d"]


def test_same_case_for_different_models_or_conditions_is_fine(tmp_path, cases):
    src = write(tmp_path / "p.jsonl", line(), line(model="hf:qwen"),
                line(suite="modality", condition="text"), line(suite="modality", condition="image"))
    assert len(load_predictions([src], cases=cases)) == 4


def test_missing_file(tmp_path):
    with pytest.raises(PredictionError, match=r"predictions file .*nope\.jsonl not found"):
        load_predictions([tmp_path / "nope.jsonl"])


def test_without_cases_only_the_format_is_checked(tmp_path):
    src = write(tmp_path / "p.jsonl", line(case="ANY1", answer="Z"))
    assert load_predictions([src])[0].answer == "Z"


# ── the store ──────────────────────────────────────────────────────────────


def add_run(store: Store, run_id: str, model: str, suite: str, started: str, replies: list[tuple]) -> None:
    insert_rows(store.path, "runs", [{"id": run_id, "model": model, "suite": suite, "cfkit_version": "0.1.0",
                                      "started_at": started, "status": "done"}])
    insert_rows(store.path, "replies", [
        {"run_id": run_id, "case_id": case, "pair_id": pair, "condition": condition, "answer": answer,
         "parse": None if answer is None else "json", "error": error, "raw": "raw", "created_at": now()}
        for case, pair, condition, answer, error in replies])


def test_predictions_from_store_reads_latest_run_per_model_and_suite(tmp_path, cases):
    with Store(tmp_path / "cfkit.db") as store:
        add_run(store, "r1", "m", "contextcanvas", "2026-01-01T00:00:00+00:00", [("T001", "", "image", "A", None)])
        add_run(store, "r2", "m", "contextcanvas", "2026-01-02T00:00:00+00:00",
                [("T001", "", "image", "B", None), ("T002", "", "image", None, "refused")])
        add_run(store, "r3", "m", "counterfactual", "2026-01-01T00:00:00+00:00",
                [("T001", "TX01", "original", "B", None), ("T001", "TX01", "edit", "A", None)])
        assert sorted(latest_run_ids(store)) == ["r2", "r3"]
        preds = predictions_from_store(store)
        by_run = {(p.suite, p.case, p.condition): p for p in preds}
        assert len(preds) == 4
        assert by_run[("contextcanvas", "T001", "image")].answer == "B"  # r2, not r1
        assert by_run[("contextcanvas", "T002", "image")].error == "refused"
        assert by_run[("counterfactual", "T001", "edit")].pair == "TX01"
        assert by_run[("contextcanvas", "T001", "image")].pair is None  # '' in the table
        check_predictions(preds, "store", cases=cases, pairs=PAIRS)
        older = predictions_from_store(store, ["r1"])
        assert [p.answer for p in older] == ["A"]
        # Each repeated value is one string across runs, as when a file is read: the rows hold each once.
        both = predictions_from_store(store, ["r1", "r2", "r3"])
        for field in ("case", "condition", "answer", "parse"):
            values = [getattr(p, field) for p in both]
            assert len({id(v) for v in values}) == len(set(values)), field
        with pytest.raises(PredictionError, match="no run 'r9'"):
            predictions_from_store(store, ["r9"])


def test_check_predictions_names_the_source(cases):
    preds = [Prediction(model="m", suite="contextcanvas", case="NOPE", condition="image", answer="A")]
    with pytest.raises(PredictionError, match=r"store x, record 1 \(model m, contextcanvas\): unknown case 'NOPE'"):
        check_predictions(preds, "store x", cases=cases)


def test_edit_answers_carry_their_edit_and_image_and_other_lines_are_unchanged(tmp_path, cases):
    sha = "ab" * 32
    src = write(tmp_path / "p.jsonl",
                line(suite="counterfactual", pair="TX01", condition="edit", answer="A", edit_id=3, image_sha256=sha),
                line(suite="counterfactual", pair="TX01", condition="original"))
    edit, original = load_predictions([src], cases=cases, pairs=PAIRS)
    assert (edit.edit_id, edit.image_sha256) == (3, sha) and original.edit_id is None
    first, second = (json.loads(x) for x in dump_predictions([edit, original]).splitlines())
    assert list(first)[-2:] == ["edit_id", "image_sha256"]
    assert "edit_id" not in second and "image_sha256" not in second  # only where they have a value
    with pytest.raises(PredictionError, match=r"p2.jsonl:1: field 'record': 'edit_id' is only for counterfactual "
                                              r"'edit' answers"):
        load_predictions([write(tmp_path / "p2.jsonl", line(edit_id=3))], cases=cases)
    with pytest.raises(PredictionError, match=r"p3.jsonl:1: field 'image_sha256'"):
        load_predictions([write(tmp_path / "p3.jsonl", line(suite="counterfactual", pair="TX01", condition="edit",
                                                             image_sha256="not-a-hash"))], cases=cases, pairs=PAIRS)


@pytest.mark.parametrize("second, message", [
    ({"answer": "D", "condition": "image", "model": "n"}, r"record 2 \(model n, contextcanvas\): answer 'D' is not an "
                                                          r"option of case T001"),
    ({"answer": "A", "condition": "image", "model": "m"}, r"record 2 .*a second answer for case T001"),
])
def test_check_predictions_looks_at_every_record_of_a_case_already_seen(cases, second, message):
    """Records of a case already checked take a shorter path; a bad answer or a repeat is still caught there."""
    preds = [Prediction(model="m", suite="contextcanvas", case="T001", condition="image", answer="A"),
             Prediction(suite="contextcanvas", case="T001", **second)]
    with pytest.raises(PredictionError, match=message):
        check_predictions(preds, "store x", cases=cases)


def test_the_fast_reading_accepts_exactly_the_lines_the_model_accepts():
    """Lines are read by the model's schema without its two Python checks, which are made inline: over every mix of
    the fields those checks look at, a line read that way is the model's own reading, and one refused is refused
    by the model too (and then read the plain way, in the model's words)."""
    import itertools

    from pydantic import ValidationError

    from cfkit.predictions import _checks_pass, _read_whole
    from cfkit.predictions_schema import PredictionModel, one_pass_reader, values_of

    fast = one_pass_reader()
    assert fast is not PredictionModel.__pydantic_validator__.validate_json  # the schema has the layout relied on
    values = {"suite": ["contextcanvas", "counterfactual", "modality"], "condition": ["image", "edit", "original", "text"],
              "pair": [None, "", "TX01"], "answer": [None, "A"], "error": [None, "refused"],
              "parse": [None, "json", "guess"], "edit_id": [None, 2], "image_sha256": [None, "b" * 64]}
    for combo in itertools.product(*values.values()):
        text = line(**dict(zip(values, combo)))
        try:
            expected = PredictionModel.model_validate_json(text)
        except ValidationError:
            expected = None
        got = fast(text)
        assert (got if _checks_pass(got) else None) == expected, text
        # The plain reading of a whole file (no pydantic) accepts only what the model accepts, with its values.
        whole = _read_whole(text + "\n", "p.jsonl", None, None, {})
        if expected is None:
            assert whole is None, text
        elif whole is not None:
            assert whole == [Prediction(**expected.model_dump())] and tuple(whole[0]) == values_of(expected), text


def test_an_answer_is_checked_against_its_own_cases_options(tmp_path, cases):
    """The whole-file reading checks the answers at once where every case offers them; an option only some cases
    have (C of the three-option T003) is still looked up case by case, and refused on a two-option case with its
    line named."""
    lines = [line(case=c, answer=a) for c, a in (("T001", "A"), ("T002", None), ("T003", "C"))]
    assert [p.answer for p in load_predictions([write(tmp_path / "ok.jsonl", *lines)], cases=cases)] == ["A", None, "C"]
    bad = write(tmp_path / "bad.jsonl", *lines, line(model="n", case="T002", answer="C"))
    with pytest.raises(PredictionError, match=r"bad\.jsonl:4: answer 'C' is not an option of case T002"):
        load_predictions([bad], cases=cases)
    assert [p.answer for p in load_predictions([bad])][-1] == "C"  # without the cases, only the format is checked
