"""A run taken out with ``cfkit runs export`` and brought back with ``cfkit runs import`` keeps how it ended: an
incomplete run stays incomplete, with its unanswered requests missing, and replies an older parser read are still
said to be so.

Each run is a real one (a loopback Chat Completions server) stored by the CLI in a real store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cfkit.parse import PARSER_VERSION
from support.store_sql import update_rows
from support.workspace import run_cli

FORMATS = [("jsonl", ".jsonl"), ("csv", ".csv")]


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
    said = _rm_and_import(tiny_ws, before["id"], target)
    assert f"run {before['id']} is incomplete, as it was when exported" in said
    [after] = json.loads(run_cli(["runs", "list", "-w", str(tiny_ws), "--json"]).stdout)
    assert (after["id"], after["status"], after["n_done"], after["n_requests"], after["n_errors"]) == (
        before["id"], "incomplete", before["n_done"], 3, before["n_errors"])
    shown = json.loads(run_cli(["runs", "show", before["id"], "-w", str(tiny_ws), "--json"]).stdout)
    assert shown["not_sent"] + len(shown["failures"]) == 3 - before["n_done"]
    assert _counted(_report(tiny_ws)[0]) == stored


def test_replies_an_older_parser_read_are_said_so_after_import(tiny_ws, tmp_path):
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
    _rm_and_import(tiny_ws, run["id"], target)
    assert older(_report(tiny_ws)[0]) == [
        f"contextcanvas: openai:test-model's answers include 3 replies of run {run['id']} read by an older parser "
        f"(version 1; now {PARSER_VERSION}), which the parser now may read otherwise; 'cfkit runs reparse "
        f"{run['id']}' reads them again and says what changed."]


