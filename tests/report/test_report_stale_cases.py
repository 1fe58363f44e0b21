"""An answer to a case whose question, options or images changed since its run is stale, not credited.

A run records, per case, a digest of what the model was shown of it
(``cfkit.cases.asked_digests``). Options reordered in the cases file after a
run would otherwise turn a stored "A" into the other option's answer: the report
lists such answers under missing as stale, counts them wrong and marks the row.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cfkit.cases import asked_digests
from cfkit.dataset import load_cases
from cfkit.store import Store, runs
from cfkit.workspace import load_workspace
from support.workspace import run_cli


def _probe(ws: Path, model: str = "baseline:always-yes") -> str:
    result = run_cli(["probe", "run", "-m", model, "-s", "contextcanvas", "-w", str(ws)])
    assert result.exit_code == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def _edit_case(ws: Path, case_id: str, change) -> None:
    path = ws / "data" / "cases.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for record in records:
        if record["id"] == case_id:
            change(record)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _swap_option_texts(record: dict) -> None:
    """The same ids, their texts exchanged (and the gold and Yes option with them): the case asks the same thing,
    but a stored "A" now names the other answer."""
    a, b = record["options"]
    a["text"], b["text"] = b["text"], a["text"]
    record["gold"] = b["id"] if record["gold"] == a["id"] else a["id"]
    record["yes_option"] = b["id"] if record["yes_option"] == a["id"] else a["id"]


def _report(ws: Path) -> tuple[dict, str]:
    """The report's JSON, with ``missing`` holding all but the refusals (always-yes has no answer for the tiny
    workspace's three-option case T003, whatever its runs), and what it said."""
    result = run_cli(["report", "-w", str(ws), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    report["missing"] = [m for m in report["missing"] if m["reason"] != "refused"]
    return report, result.stderr


def test_an_answer_to_a_case_changed_since_its_run_is_stale_and_counted_wrong(tiny_ws):
    run_id = _probe(tiny_ws)
    before, _ = _report(tiny_ws)
    [row] = before["contextcanvas"]
    assert not row["incomplete"] and not before["missing"]

    _edit_case(tiny_ws, "T002", _swap_option_texts)
    after, said = _report(tiny_ws)

    [stale] = after["missing"]
    assert (stale["case"], stale["reason"], stale["run"]) == ("T002", "stale", run_id)
    assert "earlier version of case T002" in stale["detail"] and "run the contextcanvas suite again" in stale["detail"]
    [row] = after["contextcanvas"]
    assert row["incomplete"]
    # Independently: always-yes names the Yes option; T002's stored answer is now counted wrong, the others stand.
    ws = load_workspace(tiny_ws)
    cases = load_cases(ws.cases_path, ws.image_root)
    right = sum(1 for c in cases if c.id != "T002" and c.yes_option is not None and c.gold == c.yes_option)
    assert row["accuracy"] == pytest.approx(100 * right / len(cases))
    assert "stale" in said and "T002" in said


def test_gold_and_rationale_are_not_what_the_model_was_shown(tiny_ws):
    _probe(tiny_ws)

    def regold(record: dict) -> None:
        record["rationale"] = "Rewritten after review."
        record["gold"] = next(o["id"] for o in record["options"] if o["id"] != record["gold"])
    _edit_case(tiny_ws, "T001", regold)

    report, _ = _report(tiny_ws)
    assert not report["missing"] and not report["contextcanvas"][0]["incomplete"]


def test_asking_again_answers_the_case_as_it_is_now(tiny_ws):
    _probe(tiny_ws)
    _edit_case(tiny_ws, "T002", _swap_option_texts)
    _probe(tiny_ws)

    report, _ = _report(tiny_ws)
    assert not report["missing"] and not report["contextcanvas"][0]["incomplete"]


def test_a_run_records_what_it_was_shown_of_every_case_it_asked(tiny_ws):
    run_id = _probe(tiny_ws, "baseline:random")
    ws = load_workspace(tiny_ws)
    with Store(ws.db_path) as store:
        asked = runs.get_run(store, run_id).notes["asked"]
    assert asked == asked_digests(load_cases(ws.cases_path, ws.image_root))
    # The digest follows what is shown: a question, an option text, the options' order, an image name.
    [case] = [c for c in load_cases(ws.cases_path, ws.image_root) if c.id == "T001"]
    import dataclasses

    for changed in (dataclasses.replace(case, question=case.question + "?"),
                    dataclasses.replace(case, options=list(reversed(case.options))),
                    dataclasses.replace(case, images=["other.png"])):
        assert asked_digests([changed])["T001"] != asked["T001"]
    assert asked_digests([dataclasses.replace(case, gold=case.options[1].id, rationale="x")])["T001"] == asked["T001"]


def test_a_run_written_as_a_batch_file_records_it_too(tiny_ws, tmp_path):
    """``probe run --batch-file`` opens the run without sending (an offline runner answers it later)."""
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                      "--base-url", "http://127.0.0.1:9/v1", "--batch-file", str(tmp_path / "requests.jsonl")])
    assert result.exit_code == 0, result.stderr
    ws = load_workspace(tiny_ws)
    with Store(ws.db_path) as store:
        [run] = runs.list_runs(store)
    assert run.notes["asked"] == asked_digests(load_cases(ws.cases_path, ws.image_root))
