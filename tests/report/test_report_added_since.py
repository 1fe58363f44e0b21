"""Why a run holds no answer for a case, told from what the run planned.

A case added to the cases file after a run was planned is not one the run
left unanswered: resuming it would never ask the case. The report says so, and
says what asks it: the command that made the run, run again, plans a new run of
the suite as it is now (the run id covers every request). A case the run
planned and has not answered yet is still the run's gap, and a case its
selection left out is said with the options that left it out.
"""

from __future__ import annotations

import json

from support.chat_api_server import ChatServer, Scripted, error_body, user_text
from support.probe_runs import _accepted_edit, openai_run, report, scripted_answer
from support.store_sql import table_rows, update_rows
from support.workspace import run_cli


def _add_case(ws, case_id="T004"):
    """A case appended to the cases file (another question, so another request)."""
    path = ws / "data" / "cases.jsonl"
    lines = path.read_text().splitlines()
    added = json.loads(lines[1]) | {"id": case_id, "question": f"Is this picture suitable for a spring fair poster? "
                                                               f"({case_id})"}
    path.write_text("\n".join([*lines, json.dumps(added)]) + "\n")


def _details(data) -> dict[str, tuple[str, str]]:
    return {m["case"]: (m["reason"], m["detail"]) for m in data["missing"]}


def _add_pair(ws, spec_id: str, edit_id: int):
    """Another spec on case T001 (a pair of a case the run already asked), with an accepted edit."""
    spec = (ws / "interventions" / "TX01.yaml").read_text()
    (ws / "interventions" / f"{spec_id}.yaml").write_text(spec.replace("id: TX01", f"id: {spec_id}"))
    return _accepted_edit(ws, spec_id, edit_id)


def _pair_details(data) -> dict[tuple[str, str], tuple[str, str]]:
    return {(m["pair"], m["condition"]): (m["reason"], m["detail"]) for m in data["missing"]}


def test_a_case_added_after_an_incomplete_run_is_said_to_be_added_and_the_same_command_asks_it(tiny_ws):
    failing = {"on": True}

    def script(body, n):
        if failing["on"] and "Which event" in user_text(body):  # T003 fails: the run ends incomplete
            return Scripted(status=400, body=error_body("bad request"))
        return scripted_answer(body, n)

    with ChatServer(script) as server:
        first = openai_run(tiny_ws, server.url)
        assert first.exit_code == 1
        run_id = table_rows(tiny_ws, "runs")[0]["id"]
        _add_case(tiny_ws)
        missing = _details(report(tiny_ws))
        assert missing["T003"][0] == "transport"  # the run's own gap: resuming it asks it
        reason, detail = missing["T004"]
        assert reason == "absent"
        assert detail.startswith(f"not asked: the case was added to the suite after run {run_id} was planned, so "
                                 "resuming that incomplete run (2 of 3 replies) would not ask it; run the command "
                                 f"that made run {run_id} again")
        assert "is incomplete" not in detail
        # What the line says to do: the same command again plans a new run that asks every case.
        failing["on"] = False
        again = openai_run(tiny_ws, server.url)
    assert again.exit_code == 0, again.stderr
    assert "2 from cache, 2 sent" in again.stderr
    data = report(tiny_ws)
    assert not data["missing"] and data["contextcanvas"][0]["n"] == 4
    assert data["contextcanvas"][0]["runs"] != [run_id]


def test_a_case_added_after_a_subset_run_names_the_selection_to_leave_off(tiny_ws):
    with ChatServer(scripted_answer) as server:
        assert openai_run(tiny_ws, server.url, "contextcanvas", "--limit", "1").exit_code == 0
        _add_case(tiny_ws)
        run_id = table_rows(tiny_ws, "runs")[0]["id"]
        missing = _details(report(tiny_ws))
        assert missing["T002"] == ("absent", f"not asked: run {run_id} asked only part of the suite (--limit 1)")
        assert missing["T004"][1].startswith(
            f"not asked: the case was added to the suite after run {run_id} was planned, and that run asked only "
            f"part of the suite (--limit 1); run the command that made run {run_id} again without --limit 1 (")
        assert openai_run(tiny_ws, server.url).exit_code == 0  # without --limit: every case
    assert not report(tiny_ws)["missing"]


def test_a_case_added_after_a_complete_run_and_a_run_that_recorded_no_plan(tiny_ws):
    with ChatServer(scripted_answer) as server:
        assert openai_run(tiny_ws, server.url).exit_code == 0
    run_id = table_rows(tiny_ws, "runs")[0]["id"]
    _add_case(tiny_ws)
    assert _details(report(tiny_ws))["T004"][1].startswith(
        f"not asked by run {run_id}: the case was not part of the suite then (added since); run the command that "
        f"made run {run_id} again")
    # A run that recorded nothing of what it asked (made before cfkit kept it) is told by its state alone.
    update_rows(tiny_ws, "runs", {"status": "incomplete", "notes": "{}"}, {"id": run_id})
    assert _details(report(tiny_ws))["T004"] == (
        "absent", f"not answered: run {run_id} is incomplete (3 of 3 replies)")


def test_a_pair_added_after_an_incomplete_counterfactual_run_on_a_case_it_asked_is_said_to_be_added(tiny_ws):
    edited = _accepted_edit(tiny_ws, "TX01", 1)
    shown = __import__("base64").b64encode(edited.read_bytes()).decode()

    def script(body, n):  # TX01's edit question fails: the run ends incomplete, having asked case T001
        if shown in json.dumps(body):
            return Scripted(status=400, body=error_body("bad request"))
        return scripted_answer(body, n)

    with ChatServer(script) as server:
        assert openai_run(tiny_ws, server.url, "counterfactual").exit_code == 1
    run_id = table_rows(tiny_ws, "runs")[0]["id"]
    _add_pair(tiny_ws, "TX02", 2)  # made after the run was planned, on the case it asked
    missing = _pair_details(report(tiny_ws))
    assert missing[("TX01", "edit")][0] == "transport"  # the run's own gap: resuming it asks it
    for condition in ("original", "edit"):
        reason, detail = missing[("TX02", condition)]
        assert reason == "absent"
        assert detail.startswith(f"not asked: the pair was added to the suite after run {run_id} was planned, so "
                                 "resuming that incomplete run (1 of 2 replies) would not ask it; run the command "
                                 f"that made run {run_id} again"), detail


def test_a_pair_added_after_a_counterfactual_run_of_part_of_the_suite_names_the_selection(tiny_ws):
    _add_pair(tiny_ws, "TX02", 1)
    _accepted_edit(tiny_ws, "TX01", 2)
    with ChatServer(scripted_answer) as server:
        assert openai_run(tiny_ws, server.url, "counterfactual", "--limit", "1").exit_code == 0
    run_id = table_rows(tiny_ws, "runs")[0]["id"]
    _add_pair(tiny_ws, "TX03", 3)  # on case T001, which the run asked
    missing = _pair_details(report(tiny_ws))
    assert missing[("TX02", "edit")] == ("absent", f"not asked: run {run_id} asked only part of the suite (--limit 1)")
    assert missing[("TX03", "edit")][1].startswith(
        f"not asked: the pair was added to the suite after run {run_id} was planned, and that run asked only "
        f"part of the suite (--limit 1); run the command that made run {run_id} again without --limit 1 (")



def test_a_counterfactual_run_written_as_a_batch_file_records_its_pairs_too(tiny_ws, tmp_path):
    """``probe run --batch-file`` opens the run without sending (an offline runner answers it later)."""
    _accepted_edit(tiny_ws, "TX01", 1)
    _add_pair(tiny_ws, "TX02", 2)
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "counterfactual",
                      "--base-url", "http://127.0.0.1:9/v1", "--batch-file", str(tmp_path / "requests.jsonl")])
    assert result.exit_code == 0, result.stderr
    notes = json.loads(table_rows(tiny_ws, "runs")[0]["notes"])
    assert notes["asked_pairs"] == ["TX01", "TX02"] and set(notes["asked"]) == {"T001"}
