"""A run export given to ``cfkit report --predictions`` is reported as the run is, stored or imported: an answer
about a case or an image changed since the run is stale, an incomplete run stays incomplete with its unanswered
requests missing, and replies an older parser read are said to be so.

Each run is a real one (a baseline model, or a loopback Chat Completions server) stored by the CLI in a real
store; the workspace is then changed as a person editing the cases or replacing an image would.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cfkit.parse import PARSER_VERSION
from support.store_sql import update_rows
from support.workspace import gradient_image, run_cli

FORMATS = [("jsonl", ".jsonl"), ("csv", ".csv")]


def _edit_case(ws: Path, case_id: str, question: str) -> None:
    path = ws / "data" / "cases.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for record in records:
        if record["id"] == case_id:
            record["question"] = question
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _report(ws: Path, *args: str) -> tuple[dict, str]:
    result = run_cli(["report", "-w", str(ws), "--format", "json", "--resamples", "100", *args])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout), result.stderr


def _rm_and_import(ws: Path, run_id: str, target: Path) -> str:
    """The run removed from the store and imported again from its export ``target``; what the import said."""
    assert run_cli(["runs", "rm", run_id, "-w", str(ws)]).exit_code == 0
    imported = run_cli(["runs", "import", str(target), "-w", str(ws)])
    assert imported.exit_code == 0, imported.stderr
    return imported.stderr


def _counted(report: dict) -> tuple:
    """What a report counts for its contextcanvas row, and every unit it lists as missing, with why."""
    [row] = report["contextcanvas"]
    missing = sorted((m["case"], m["condition"], m["reason"], m["detail"], m["run"]) for m in report["missing"])
    return {k: v for k, v in row.items() if not k.endswith("_ci")}, missing


@pytest.mark.parametrize(("fmt", "suffix"), FORMATS)
def test_an_export_reported_from_the_file_tells_stale_answers_as_the_imported_run_does(tiny_ws, tmp_path, fmt,
                                                                                     suffix):
    probed = run_cli(["probe", "run", "-m", "baseline:always-yes", "-s", "contextcanvas", "-w", str(tiny_ws)])
    assert probed.exit_code == 0, probed.stderr
    run_id = probed.stdout.strip().splitlines()[-1]
    target = tmp_path / f"run{suffix}"
    assert run_cli(["runs", "export", run_id, "-w", str(tiny_ws), "--format", fmt, "--output", str(target)]
                   ).exit_code == 0
    # After the run: T002's question is reworded and T001's image replaced by another picture.
    _edit_case(tiny_ws, "T002", "Is this picture suitable for a winter greeting card?")
    from PIL import Image

    Image.fromarray(gradient_image(seed=7)).save(tiny_ws / "data" / "images" / "T001.png")

    from_file, said = _report(tiny_ws, "--predictions", str(target))
    row, missing = _counted(from_file)
    stale = {(case, reason) for case, _, reason, _, _ in missing}
    assert {("T001", "stale"), ("T002", "stale")} <= stale
    assert row["incomplete"] and row["runs"] == [run_id]
    details = " ".join(detail for *_, detail, _ in missing)
    assert "earlier version of case T002" in details and "earlier file of case T001's image" in details
    assert "counted wrong (stale; contextcanvas 2)" in said
    stored = _counted(_report(tiny_ws)[0])
    assert _counted(from_file) == stored

    _rm_and_import(tiny_ws, run_id, target)
    assert _counted(_report(tiny_ws)[0]) == stored


def test_a_plain_predictions_file_is_not_checked_for_stale_answers(tiny_ws, tmp_path):
    """The predictions format records nothing of what was asked: its answers are taken as they are (the report
    from the run's full export above is the one that can tell)."""
    probed = run_cli(["probe", "run", "-m", "baseline:always-yes", "-s", "contextcanvas", "-w", str(tiny_ws)])
    run_id = probed.stdout.strip().splitlines()[-1]
    target = tmp_path / "run.jsonl"
    target.write_text(run_cli(["runs", "export", run_id, "-w", str(tiny_ws)]).stdout)
    _edit_case(tiny_ws, "T002", "Is this picture suitable for a winter greeting card?")
    report, _ = _report(tiny_ws, "--predictions", str(target))
    assert not [m for m in report["missing"] if m["reason"] == "stale"]
    assert report["contextcanvas"][0]["runs"] == []


@pytest.mark.parametrize(("fmt", "suffix"), FORMATS)
def test_an_incomplete_run_stays_incomplete_through_export_and_import(tiny_ws, tmp_path, fmt, suffix):
    pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")
    from support.hostile_http_server import HostileServer, answer, storm

    # T002's request is told to come back in an hour: the run stops there, one at a time, before asking T003.
    with HostileServer(lambda body: storm if b"winter card" in body else answer) as server:
        probed = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                          "--base-url", server.url, "-j", "1", "-o", "backoff=0.01"])
    assert probed.exit_code == 1, probed.stderr
    [before] = json.loads(run_cli(["runs", "list", "-w", str(tiny_ws), "--json"]).stdout)
    assert before["status"] == "incomplete" and before["n_done"] < before["n_requests"] == 3
    target = tmp_path / f"run{suffix}"
    stored = _counted(_report(tiny_ws)[0])
    assert ("T003", "image", "absent") in {m[:3] for m in stored[1]}

    exported = run_cli(["runs", "export", before["id"], "-w", str(tiny_ws), "--format", fmt, "--output",
                        str(target)])
    assert exported.exit_code == 0, exported.stderr
    from_file, _ = _report(tiny_ws, "--predictions", str(target))
    assert _counted(from_file) == stored  # the row marked incomplete, T003 missing: the run is incomplete

    said = _rm_and_import(tiny_ws, before["id"], target)
    assert f"run {before['id']} is incomplete, as its file records it" in said
    [after] = json.loads(run_cli(["runs", "list", "-w", str(tiny_ws), "--json"]).stdout)
    assert (after["id"], after["status"], after["n_done"], after["n_requests"], after["n_errors"]) == (
        before["id"], "incomplete", before["n_done"], 3, before["n_errors"])
    shown = json.loads(run_cli(["runs", "show", before["id"], "-w", str(tiny_ws), "--json"]).stdout)
    assert shown["not_sent"] + len(shown["failures"]) == 3 - before["n_done"]
    assert _counted(_report(tiny_ws)[0]) == stored


def test_replies_an_older_parser_read_are_said_so_from_the_file_and_after_import(tiny_ws, tmp_path):
    pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")
    from support.chat_api_server import ChatServer
    from support.probe_runs import openai_run, scripted_answer

    with ChatServer(scripted_answer) as server:
        assert openai_run(tiny_ws, server.url).exit_code == 0
    [run] = json.loads(run_cli(["runs", "list", "-w", str(tiny_ws), "--json"]).stdout)
    update_rows(tiny_ws / ".cfkit" / "cfkit.db", "replies", {"parser": "1"})  # as a store from before holds them
    target = tmp_path / "run.jsonl"

    def older(report: dict) -> list[str]:
        return [n for n in report["notes"] if "older parser" in n]

    exported = run_cli(["runs", "export", run["id"], "-w", str(tiny_ws), "--format", "jsonl", "--output",
                        str(target)])
    assert exported.exit_code == 0, exported.stderr
    [from_file] = older(_report(tiny_ws, "--predictions", str(target))[0])
    assert (f"3 replies of run {run['id']} read by an older parser (version 1; now {PARSER_VERSION})" in from_file
            and f"'cfkit runs import {target}' then 'cfkit runs reparse {run['id']}'" in from_file)
    _rm_and_import(tiny_ws, run["id"], target)
    assert older(_report(tiny_ws)[0]) == [
        f"contextcanvas: openai:test-model's answers include 3 replies of run {run['id']} read by an older parser "
        f"(version 1; now {PARSER_VERSION}), which the parser now may read otherwise; 'cfkit runs reparse "
        f"{run['id']}' reads them again and says what changed."]



def test_two_exports_of_one_model_and_suite_are_read_as_one_run_of_both(tiny_ws, tmp_path):
    targets, ids = [], []
    for name, cases in (("first", "T001\nT003\n"), ("second", "T002\n")):
        (tmp_path / f"{name}.txt").write_text(cases)
        probed = run_cli(["probe", "run", "-m", "baseline:always-yes", "-s", "contextcanvas", "-w", str(tiny_ws),
                          "--cases", str(tmp_path / f"{name}.txt")])
        assert probed.exit_code == 0, probed.stderr
        ids.append(probed.stdout.strip().splitlines()[-1])
        targets.append(tmp_path / f"{name}.jsonl")
        assert run_cli(["runs", "export", ids[-1], "-w", str(tiny_ws), "--format", "jsonl", "--output",
                        str(targets[-1])]).exit_code == 0
    _edit_case(tiny_ws, "T002", "Is this picture suitable for a winter greeting card?")  # asked by the second
    report, _ = _report(tiny_ws, *(a for path in targets for a in ("--predictions", str(path))))
    both = f"{ids[0]} + {ids[1]}"
    assert report["contextcanvas"][0]["runs"] == [both]
    assert [(m["case"], m["reason"], m["run"]) for m in report["missing"] if m["reason"] != "refused"] == [
        ("T002", "stale", both)]
    [stale] = [m for m in report["missing"] if m["reason"] == "stale"]
    assert f"since run {both} asked it" in stale["detail"]
