"""A declined reply is shown the same way wherever a reply without an answer is listed: by why it was declined
(its ``detail``), not by its text. A provider's content filter answers with its own error message, which can name
an option ("... Answer: B"); the report's ``missing`` list (JSON and terminal), the browser view's case page and
``runs show`` all say the filter blocked it."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from support.report_workspace import build_workspace
from support.view_server import serving
from support.workspace import run_cli

DATA = Path(__file__).resolve().parents[1] / "data" / "inspect"
TEXT = "Your request was rejected as a result of our safety system. Answer: B"
WHY = "the provider's content filter blocked the reply"


def test_a_declined_reply_is_listed_by_why_it_was_declined_everywhere(tmp_path):
    ws = build_workspace(tmp_path / "ws")
    log = json.loads((DATA / "contextcanvas.json").read_text())
    sample = log["samples"][0]
    sample["output"]["choices"][0]["message"]["content"] = TEXT
    sample["output"]["choices"][0]["stop_reason"] = "content_filter"
    sample["output"]["completion"] = TEXT
    sample["output"]["error"] = "content_policy_violation: the prompt was flagged"
    path = tmp_path / "filtered.json"
    path.write_text(json.dumps(log))
    case = sample["id"]
    imported = run_cli(["-w", str(ws), "runs", "import", str(path), "--label", "filtered"])
    assert imported.exit_code == 0, imported.output
    run_id = imported.stdout.split()[0]

    shown = json.loads(run_cli(["-w", str(ws), "runs", "show", run_id, "--json"]).stdout)
    [failure] = [f for f in shown["failures"] if f["case"] == case]
    assert WHY in failure["detail"]

    result = run_cli(["report", "-w", str(ws), "--format", "json", "--resamples", "100"])
    assert result.exit_code == 0, result.output
    [missing] = [m for m in json.loads(result.stdout)["missing"] if m["case"] == case]
    assert missing["reason"] == "refused" and missing["detail"] == failure["detail"], missing

    terminal = run_cli(["report", "-w", str(ws), "--resamples", "100"], env={"COLUMNS": "400"})
    said = " ".join((terminal.stdout + terminal.stderr).split())
    assert WHY in said and "safety system" not in said, said

    with serving(ws) as url:
        page = urllib.request.urlopen(f"{url}case-{case}.html").read().decode()
    missing_table = page.split('id="missing"', 1)[1].split("</table>", 1)[0]
    assert WHY in missing_table.replace("&#39;", "'") and "safety system" not in missing_table, missing_table
