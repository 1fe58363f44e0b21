"""Counts in the one-line summaries of probe runs and their removal are in the right number: "1 request",
"its 1 reply", never "1 requests" or "1 replies"."""

from __future__ import annotations

import json

from support.probe_runs import many_cases
from support.workspace import run_cli


def test_a_run_of_one_request_and_its_removal_say_one_request_and_one_reply(tmp_path):
    ws = many_cases(tmp_path / "ws", 3)
    ran = run_cli(["-w", str(ws), "probe", "run", "-m", "baseline:always-no", "-s", "contextcanvas", "--limit", "1"])
    assert ran.exit_code == 0, ran.output
    assert "done: 1 request; 0 already stored" in ran.stderr and "1 requests" not in ran.stderr
    [run] = json.loads(run_cli(["-w", str(ws), "runs", "list", "--json"]).stdout)
    removed = run_cli(["-w", str(ws), "runs", "rm", run["id"], "--drop-cached"])
    assert removed.exit_code == 0, removed.output
    assert f"removed run {run['id']} (baseline:always-no, contextcanvas) and its 1 reply; dropped " in removed.stderr
    assert "1 replies" not in removed.stderr
