"""A newer run of a model and suite with no reply yet (batches submitted and not collected, a server down from the
start) never takes the rows of an older run that has replies: the report reads the newest run with replies, and
one line names both and how the newer run gets its replies, in the report, its JSON and the view alike.

Before, the report chose the newer run, then left it out for having no reply: that model and suite had no row at
all, though a complete older run stood in the store (and a newer run with other settings refused the whole model).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

from support.batch_api_server import BatchServer
from support.chat_api_server import ChatServer
from support.probe_runs import FAST, scripted_answer
from support.workspace import run_cli

MODEL = "openai:test-model"


def _probe(ws: Path, url: str, *extra: str):
    return run_cli(["-w", str(ws), "probe", "run", "-m", MODEL, "-s", "contextcanvas", "--base-url", url, *FAST,
                    "--json", *extra])


def _report(ws: Path, *extra: str) -> tuple[int, dict, str]:
    result = run_cli(["report", "-w", str(ws), "--format", "json", "--resamples", "50", *extra])
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}, " ".join(result.stderr.split())


def _reworded(ws: Path) -> None:
    """T002 asked in other words: the next run of the suite is a new run (its id covers every request)."""
    cases = ws / "data" / "cases.jsonl"
    cases.write_text(cases.read_text().replace("a winter card?", "a winter greeting card?"))


def _view(ws: Path):
    from cfkit.view.data import ViewData
    from cfkit.workspace import load_workspace

    return ViewData(load_workspace(ws))


def test_a_batch_run_not_collected_leaves_the_rows_to_the_older_run_and_says_how_to_collect(tiny_ws):
    with ChatServer(scripted_answer) as server:
        done = _probe(tiny_ws, server.url)
    assert done.exit_code == 0, done.stderr
    older = json.loads(done.stdout)["run_id"]
    _reworded(tiny_ws)
    with BatchServer(scripted_answer, polls=5) as server:
        submitted = _probe(tiny_ws, server.url, "--batch")
    assert submitted.exit_code == 0, submitted.stderr
    newer = json.loads(submitted.stdout)["run_id"]
    assert newer != older and json.loads(submitted.stdout)["status"] == "waiting"

    code, data, stderr = _report(tiny_ws)
    assert code == 0
    [row] = data["contextcanvas"]
    assert row["model"] == MODEL and row["runs"] == [older] and row["n"] == 3
    # The older run's answer about the case reworded since is stale, counted wrong, as for any older run.
    assert [(m["case"], m["reason"]) for m in data["missing"]] == [("T002", "stale")]
    line = (f"{MODEL}: its newer contextcanvas run {newer} (3 requests) has no reply yet (waiting); the rows read "
            f"{older} (3 requests, 3 replies) until it has one: 'cfkit probe collect {newer}' collects its batches.")
    assert [a["message"] for a in data["set_aside"]] == [line]
    assert line in stderr
    [read] = data["runs_read"]
    assert (read["run"], read["newer_not_read"]) == (older, 1)
    # The terminal's table of the runs read names it under Left out, with why.
    shown = " ".join(run_cli(["report", "-w", str(tiny_ws), "--resamples", "50"]).stdout.split())
    assert f"Left out (1 run): {newer} (newer than the run read, but has no reply yet)" in shown

    # The view reads the same choice: the older run counts, the newer one is named with why.
    view = _view(tiny_ws)
    assert view.in_report[older] == "read"
    assert view.in_report[newer] == "left out of the report: newer than the run read, but has no reply yet"


def test_a_newer_run_with_other_settings_whose_server_was_down_does_not_refuse_the_model(tiny_ws):
    with ChatServer(scripted_answer) as server:
        done = _probe(tiny_ws, server.url)
    assert done.exit_code == 0, done.stderr
    older = json.loads(done.stdout)["run_id"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"  # bound, never listening: refused
        down = _probe(tiny_ws, dead, "--max-tokens", "64")
    assert down.exit_code == 1
    newer = json.loads(down.stdout)["run_id"]

    code, data, stderr = _report(tiny_ws)
    assert code == 0, stderr  # not "runs with different settings": the newer run has nothing to count
    [row] = data["contextcanvas"]
    assert row["runs"] == [older] and not data["missing"]
    [aside] = data["set_aside"]
    assert aside["runs"] == [newer] and not aside["refused"]
    assert aside["message"].startswith(f"{MODEL}: its newer contextcanvas run {newer} (3 requests) has no reply yet "
                                       f"(incomplete: nothing is listening at {dead}")
    assert aside["message"].endswith(
        f"the rows read {older} (3 requests, 3 replies) until it has one: run the command that made it again to "
        f"resume it ('cfkit probe run -m {MODEL} -s contextcanvas' with its options, or 'cfkit study run' for a "
        "study's run).")
    view = _view(tiny_ws)
    assert view.in_report == {older: "read",
                              newer: "left out of the report: newer than the run read, but has no reply yet"}

    # Named with --run, the run without replies is still said and left out (nothing else is left: refused).
    named = run_cli(["report", "-w", str(tiny_ws), "--run", newer])
    flat = " ".join(named.stderr.split())
    assert named.exit_code == 2
    assert f"its contextcanvas run {newer} has no reply yet" in flat
    assert "To get its replies: run the command that made it again to resume it" in flat


def test_with_no_run_with_replies_the_newest_is_left_out_with_its_line_as_before(tiny_ws):
    with BatchServer(scripted_answer, polls=5) as server:
        submitted = _probe(tiny_ws, server.url, "--batch")
    newer = json.loads(submitted.stdout)["run_id"]
    result = run_cli(["report", "-w", str(tiny_ws)])
    assert result.exit_code == 2
    assert (f"{MODEL}: its contextcanvas run {newer} has no reply yet (waiting); the report leaves it out until it "
            f"has one. To get its replies: 'cfkit probe collect {newer}' collects its batches.") \
        in " ".join(result.stderr.split())
