"""Which run a number comes from, when a model has several runs of one suite.

Against a real loopback server and a real store: a newer run that the report
does not read (a ``--limit`` smoke test with the full run's settings, a run
with other settings beside a ``--run`` choice) never loses silently to an
older one: one line names it, what it asked, why and how to report it; and
every output (the terminal, JSON, CSV, Markdown, LaTeX) names the run each
row comes from and how many other runs of its model and suite it does not
read.
"""

from __future__ import annotations

import csv
import io
import json

from support.chat_api_server import ChatServer
from support.probe_runs import FAST, scripted_answer
from support.workspace import run_cli


def _run(ws, url, suite="contextcanvas", *extra) -> str:
    result = run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", suite, "--base-url", url,
                      *FAST, "--json", *extra])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["run_id"]


def _report(ws, *extra):
    return run_cli(["-w", str(ws), "report", "--resamples", "50", *extra], env={"COLUMNS": "250"})


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_newer_limit_run_is_named_where_an_older_full_run_is_read_and_every_output_says_which(tiny_ws):
    with ChatServer(scripted_answer) as server:
        full = _run(tiny_ws, server.url)
        smoke = _run(tiny_ws, server.url, "contextcanvas", "--limit", "1")
    assert full != smoke
    line = (f"openai:test-model: a newer contextcanvas run, {smoke} (1 request, --limit 1), was left out: it asked "
            f"only part of the suite; the rows read {full} (3 requests). 'cfkit report --run {smoke}' reports the "
            f"newer run instead; 'cfkit runs rm {smoke}' removes it.")

    as_json = _report(tiny_ws, "--format", "json")
    assert as_json.exit_code == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert [r["runs"] for r in data["contextcanvas"]] == [[full]] and data["contextcanvas"][0]["n"] == 3
    assert data["set_aside"] == [{"model": "openai:test-model", "runs": [smoke], "refused": False, "message": line}]
    assert line in _flat(as_json.stderr)
    assert data["runs_read"] == [{"model": "openai:test-model", "suite": "contextcanvas", "run": full, "replies": 3,
                                  "requests": 3, "asked": "the whole suite", "status": "done", "newer_not_read": 1,
                                  "older_not_read": 0, "imported": None}]

    table = _report(tiny_ws)
    assert table.exit_code == 0, table.stderr
    shown = table.stdout.split("Runs read", 1)[1]
    row = next(line for line in shown.splitlines() if full in line)
    assert [c.strip() for c in row.split("│")[1:-1]] == ["contextcanvas", full, "3/3", "1 newer"]
    assert "openai:test-model" in shown.split(row, 1)[0]  # under the model's heading
    assert f"Left out (1 run): {smoke} (newer than the run read, but asked only part of the suite)" in _flat(shown)
    assert line in _flat(table.stderr)

    for fmt in ("md", "latex"):
        text = _flat(_report(tiny_ws, "--format", fmt).stdout)
        assert full in text.replace("\\_", "_") and smoke in text.replace("\\_", "_"), fmt

    rows = list(csv.reader(io.StringIO(_report(tiny_ws, "--format", "csv").stdout)))
    cells = {(r[0], r[1], r[2]): r[3] for r in rows[1:]}
    assert cells[("runs_read", "openai:test-model", "contextcanvas.run")] == full
    assert cells[("runs_read", "openai:test-model", "contextcanvas.newer_not_read")] == "1"
    assert cells[("set_aside", "openai:test-model", "0.runs.0")] == smoke
    assert cells[("set_aside", "openai:test-model", "0.message")] == line

    # The line's command reads the newer run: its one case answered, the two it did not ask counted wrong.
    row = next(line for line in _report(tiny_ws, "--run", smoke).stdout.splitlines() if smoke in line)
    assert [c.strip() for c in row.split("│")[1:-1]] == ["contextcanvas", smoke, "1/1, --limit 1", "1 older"]
    chosen = _report(tiny_ws, "--format", "json", "--run", smoke)
    assert chosen.exit_code == 0, chosen.stderr
    data = json.loads(chosen.stdout)
    assert [r["runs"] for r in data["contextcanvas"]] == [[smoke]] and data["set_aside"] == []
    assert data["runs_read"][0] | {"status": None} == {
        "model": "openai:test-model", "suite": "contextcanvas", "run": smoke, "replies": 1, "requests": 1,
        "asked": "--limit 1", "status": None, "newer_not_read": 0, "older_not_read": 1, "imported": None}
    assert {m["case"] for m in data["missing"]} == {"T002", "T003"}


def test_a_newer_run_of_other_settings_beside_a_run_choice_is_named_not_dropped(tiny_ws):
    with ChatServer(scripted_answer) as server:
        canvas = _run(tiny_ws, server.url)
        swap = _run(tiny_ws, server.url, "swap")
        other = _run(tiny_ws, server.url, "swap", "--max-tokens", "64")  # newer, other settings
    # --run chooses the contextcanvas run: the swap suite takes the run with its settings, the older one.
    result = _report(tiny_ws, "--format", "json", "--run", canvas)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert [r["runs"] for r in data["swap"]] == [[swap]]
    said = [a for a in data["set_aside"] if other in a["runs"]]
    assert len(said) == 1 and not said[0]["refused"]
    assert said[0]["message"].startswith(f"openai:test-model: a newer swap run, {other} (")
    assert "its settings differ" in said[0]["message"] and "max_tokens 64" in said[0]["message"]
    assert f"the rows read {swap}" in said[0]["message"] and f"--run {other}" in said[0]["message"]
    assert {(r["suite"], r["run"], r["newer_not_read"]) for r in data["runs_read"]} == {
        ("contextcanvas", canvas, 0), ("swap", swap, 1)}
