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
    row = re.search(rf"<tr[^>]*>\s*<td[^>]*><code>{record['id']}</code>.*?</tr>", page, re.S).group(0)
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
    row = re.search(rf"<tr[^>]*>\s*<td[^>]*><code>{baseline['id']}</code>.*?</tr>", page, re.S).group(0)
    assert '<td data-label="Cost" class="num">—</td>' in row and "servers differ" not in row


def _change_what_was_asked(ws: Path) -> None:
    """The three kinds of change that make a stored answer stale: a case's options reordered, a caption edited,
    a case's image replaced by another picture."""
    lines = [json.loads(line) for line in (ws / "cases.jsonl").read_text().splitlines() if line.strip()]
    for case in lines:
        if case["id"] == "MX01":
            case["options"].reverse()
    (ws / "cases.jsonl").write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in lines))
    caption = ws / "captions" / "MX02.yaml"
    caption.write_text(caption.read_text().replace("pale yellow-green", "pale green"))
    shutil.copy(ws / "images" / "camera.jpg", ws / "images" / "hubble_deep_field.jpg")


def _answer_rows(page: str) -> list[tuple[str, str, str, str, str]]:
    """(class, model, suite, condition with its pair tag, answer cell) of each row of a case page's answers."""
    table = page.split('<table id="answers" class="cards">', 1)[1].split("</table>", 1)[0]
    rows = []
    for cls, body in re.findall(r'<tr class="([^"]*)">(.*?)</tr>', table, re.S):
        cells = re.findall(r'<td data-label="[^"]*">(.*?)</td>', body, re.S)
        rows.append((cls, cells[0], cells[1], re.sub(r"<[^>]+>", "", cells[2]).strip(), cells[3]))
    return rows


def test_an_answer_counted_wrong_as_stale_is_never_shown_as_current(demo_ws, tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(demo_ws, ws)
    _change_what_was_asked(ws)
    report = run_cli(["report", "-w", str(ws), "--format", "json"])
    missing = json.loads(report.stdout)["missing"]
    stale = [m for m in missing if m["reason"] == "stale"]
    assert {m["case"] for m in stale} == {"MX01", "MX02", "MX03"}  # options, caption, image: each is stale
    out = _export(ws, tmp_path / "site")
    for case in ("MX01", "MX02", "MX03", "MX06"):
        rows = _answer_rows((out / f"case-{case}.html").read_text())
        marked = {(model, suite, condition) for cls, model, suite, condition, _ in rows if "set-aside" in cls}
        expected = {(m["model"], m["suite"], f"{m['condition']} {m['pair']}" if m["pair"] else m["condition"])
                    for m in missing if m["case"] == case}
        assert marked == expected, case
        for cls, model, suite, condition, answer in rows:
            if "set-aside" in cls:
                assert "counted wrong" in answer and "✓" not in answer and "✗" not in answer, (case, model, condition)
    # The case list counts them wrong: every answer on MX01 is stale, none is right.
    listing = (out / "cases-all-1.html").read_text()
    mx01 = re.search(r'href="case-MX01.html">.*?</tr>', listing, re.S).group(0)
    assert re.findall(r'<td class="num">(\d+)</td>', mx01)[:2] == ["0", str(len(_answer_rows(
        (out / "case-MX01.html").read_text())))]
    # The pairs page marks each stale answer box, pair by pair, and says why.
    pairs = (out / "pairs.html").read_text()
    for pair in ("EX01", "EX02", "EX03"):
        section = pairs.split(f'<section class="pair" id="{pair}">', 1)[1].split("</section>", 1)[0]
        units = [m for m in stale if m["suite"] == "counterfactual" and m["pair"] == pair]
        assert section.count("(stale: counted wrong)") == len(units), pair
        assert any(m["detail"] in html.unescape(section) for m in units) if units else "counted wrong" not in section


def test_the_audit_page_says_its_inputs_changed_since_planning(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from support import audit_workspace as aw

    def finished(root: Path) -> Path:  # a thread of its own: the probe engine starts its own event loop
        ws = aw.build(root)
        run_ids = aw.run_models(ws)
        assert run_cli(["-w", str(ws), "audit", "plan", "--run", run_ids[aw.GPT], "--run",
                        run_ids[aw.QWEN]]).exit_code == 0
        for row in json.loads(run_cli(["-w", str(ws), "audit", "items", "--as", "alice", "--json"]).stdout):
            for name in ("alice", "bob"):
                assert run_cli(["-w", str(ws), "audit", "label", row["item"], "--as", name, "--cue", "yes",
                                "--link", "yes"]).exit_code == 0
        return ws

    with ThreadPoolExecutor(1) as pool:
        ws = pool.submit(finished, tmp_path / "ws").result()
    assert "changed since planning" not in (_export(ws, tmp_path / "before") / "audit.html").read_text()
    cases = ws / "data" / "cases.jsonl"
    cases.write_text(cases.read_text().replace("is this picture suitable", "is this photograph suitable", 1))
    said = [line for line in run_cli(["report", "-w", str(ws), "--ega"]).stderr.splitlines()
            if "since planning" in line]
    assert said
    page = (_export(ws, tmp_path / "after") / "audit.html").read_text()
    for line in said:
        assert line.removeprefix("warning: ") in html.unescape(page)
    # The rows are the report's own: the same cells as 'cfkit report --ega' prints, the caption saying it too.
    data = json.loads(run_cli(["report", "-w", str(ws), "--ega", "--format", "json"]).stdout)
    for row in data["ega"]:
        ci = f"[{row['ega_ci'][0]:.1f}, {row['ega_ci'][1]:.1f}]"
        assert re.search(rf"<td>{re.escape(row['model'])}</td>.*?{re.escape(ci)}", page, re.S), row["model"]
    assert "Since the audit was planned" in page
