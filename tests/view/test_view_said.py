"""``cfkit view`` says on each page what the CLI says of the same numbers.

A cost some replies did not report is "at least" one on the runs page, as in
``cfkit runs list``; a run whose replies came from servers naming different
models says so there, as ``cfkit runs show`` does; an answer the report counts
wrong because what it was asked changed since (the case's options, a caption,
the case's image) is marked so on its case page, in the case list's counts and
on the pairs page, never shown as a current answer; and the audit page says
when the audit's inputs changed since planning, as ``cfkit report --ega`` does.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

from support.chat_api_server import ChatServer, Scripted, answer_json, completion, user_text
from support.workspace import MINI, run_cli


def _two_models_some_unpriced(body: dict, n: int) -> Scripted:
    """Answers the first option; every third reply names another model, every other one reports no usage."""
    found = re.search(r"^([A-Z])\. ", user_text(body), re.MULTILINE)
    reply = completion(answer_json(found.group(1) if found else "A"), model="other-model" if n % 3 == 0 else "test-model")
    if n % 2 == 0:
        del reply["usage"]
    return Scripted(body=reply)


@pytest.fixture(scope="module")
def demo_ws(tmp_path_factory) -> Path:
    if not (MINI / "cfkit.toml").is_file():
        pytest.skip("examples/mini is not in this checkout")
    ws = tmp_path_factory.mktemp("view-said") / "demo"
    assert run_cli(["demo", "--output", str(ws)]).exit_code == 0
    return ws


def _export(ws: Path, out: Path) -> Path:
    result = run_cli(["view", "-w", str(ws), "--export", str(out)])
    assert result.exit_code == 0, result.stderr
    return out


def _runs(ws: Path) -> list[dict]:
    return json.loads(run_cli(["runs", "list", "-w", str(ws), "--json"]).stdout)


def test_the_runs_page_says_a_cost_is_at_least_and_which_runs_servers_named_other_models(demo_ws, tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(demo_ws, ws)
    with ChatServer(_two_models_some_unpriced) as server:
        run = run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas", "--base-url",
                       server.url, "-o", "price_in=1", "-o", "price_out=2", "-o", "backoff=0.01"])
    assert run.exit_code == 1 and "2 different models" in run.stderr  # as cfkit.servers says it
    record = next(r for r in _runs(ws) if r["model"] == "openai:test-model")
    page = (_export(ws, tmp_path / "site") / "index.html").read_text()
    row = re.search(rf"<tr[^>]*>\s*<td><code>{record['id']}</code>.*?</tr>", page, re.S).group(0)
    listed = run_cli(["runs", "list", "-w", str(ws)], env={"COLUMNS": "200"}).stdout
    cost = re.search(r"at least \$[0-9.]+", listed).group(0)
    assert cost in row and "3 replies without a reported cost" in row  # not the known part alone, as if all
    assert "servers differ" in row
    shown = run_cli(["runs", "show", record["id"], "-w", str(ws)], env={"COLUMNS": "2000"}).stdout
    said = [line.split("servers ", 1)[1] for line in shown.splitlines() if "different models" in line
            and line.startswith("servers ")]
    assert said and all(line.strip() in html.unescape(page) for line in said)
    # A run without prices still shows no cost, and one with every cost reported no "at least".
    baseline = next(r for r in _runs(ws) if r["model"] == "baseline:random" and r["suite"] == "contextcanvas")
    row = re.search(rf"<tr[^>]*>\s*<td><code>{baseline['id']}</code>.*?</tr>", page, re.S).group(0)
    assert '<td class="num">—</td>' in row and "servers differ" not in row
