"""Every number ``cfkit view`` shows is the number ``cfkit report --format json`` (or ``cfkit runs list``) gives.

The workspace is a study's with its awkward parts (support.view_study): runs
that failed, were cut off, stopped or were killed, a model left out for runs
of different settings, an imported peer file, a modality subset and a pair a
run skipped. The exported pages are read as a researcher would copy them;
each figure is formatted here from the JSON report, independently of the
view, and the served view must answer every page with the exported bytes.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from support import view_study
from support.workspace import MINI, REPO, run_cli


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> dict:
    if not (MINI / "cfkit.toml").is_file():
        pytest.skip("examples/mini is not in this checkout")
    root, site = view_study.exported(tmp_path_factory.mktemp("view-numbers"))
    report = run_cli(["report", "-w", str(root), "--format", "json"])
    assert report.exit_code == 1  # a model left out for runs of different settings
    runs = json.loads(run_cli(["runs", "list", "-w", str(root), "--json"]).stdout)
    return {"root": root, "site": site, "report": json.loads(report.stdout), "stderr": report.stderr, "runs": runs}


def _text(cell: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()


def _tables(page: str) -> dict[str, list[list[str]]]:
    """Each report table on a page, by title: its rows (a group heading row left out) as the cells' text."""
    tables = {}
    for title, body in re.findall(r'<section class="table">\s*<h2>(.*?)</h2>(.*?)</section>', page, re.S):
        rows = [[_text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
                for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body.split("<tbody>", 1)[1], re.S)]
        tables[_text(title)] = [r for r in rows if r]
    return tables


def _f(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _ci(values: list[float]) -> str:
    return f"[{values[0]:.2f}, {values[1]:.2f}]"


def _p(value: float) -> str:
    return f"{value:.4f}" if value >= 1e-4 else f"{value:.1e}"


def _name(row: dict) -> str:
    """The row's model as every table shows it: marked when it rests on an incomplete run or replies not clean."""
    return row["model"] + (" (incomplete)" if row["incomplete"] else "") + (" (not clean)" if row["not_clean"] else "")


def _measured(rows: list[list[str]]) -> list[list[str]]:
    return [r for r in rows if not r[0].endswith("(paper)")]


def test_the_report_page_shows_the_reports_numbers_each_with_its_marks_and_lines(study):
    data, page = study["report"], (study["site"] / "report.html").read_text()
    tables = _tables(page)
    cc = {r["model"]: r for r in data["contextcanvas"]}
    expected = {
        "ContextCanvas (as in Table 2)": [
            [_name(r), str(r["n"]), _f(r["accuracy"]), _ci(r["accuracy_ci"]), _f(r["macro_f1"]), _ci(r["macro_f1_ci"]),
             _f(r["yes_rate"]), str(r["invalid"])] for r in data["contextcanvas"]],
        "ContextCanvas by class (as in Table S4)": [
            [_name(r), _f(r["yes_f1"]), _f(r["no_f1"]), _f(r["yes_rate"]), _ci(r["yes_rate_ci"]),
             _f(r["gold_yes_rate"]), str(r["invalid"])] for r in data["contextcanvas"]],
        f"Counterfactual pairs (as in Table S7; {data['counterfactual'][0]['n_pairs']} pairs)": [
            [_name(r), _f(cc[r["model"]]["accuracy"]), _f(r["orig_acc"]), _f(r["edit_acc"]), _f(r["pair_acc"]),
             f"{r['correct']}/{r['reverse']}", str(r["invalid"]), _f(r["ncu"]), _ci(r["ncu_ci"])]
            for r in data["counterfactual"]],
        "Modality conditions (as in Table S9)": [
            [_name(r), str(r["n"]), *(_f(r["accuracy"][c]) for c in ("text", "neutral", "evidence", "image")),
             "/".join(str(r["invalid"][c]) for c in ("text", "neutral", "evidence", "image"))]
            for r in data["modality"]],
        "Modality changes (paired, exact McNemar, Bonferroni over 4)": [
            [_name(r), f"{d['from']} → {d['to']}", f"{d['delta'] + 0.0:+.2f}", _ci(d["ci"]), f"{d['b']}/{d['c']}",
             _p(d["p"]), _p(d["p_adj"])] for r in data["modality"] for d in r["deltas"]],
    }
    for title, rows in expected.items():
        assert sorted(_measured(tables[title])) == sorted(rows), title
    # The rows rest on what the report says with them: every such line is on the page, and the modality rows are
    # over the subset's cases, as many as the report counts.
    assert {r["n"] for r in data["modality"]} == {6}
    said = [_text(item) for item in re.findall(r"<li>(.*?)</li>", page.split('<ul class="said">', 1)[1].split("</ul>")[0],
                                              re.S)]
    lines = [line.removeprefix("warning: ") for line in study["stderr"].splitlines() if line.startswith("warning: ")]
    assert lines and lines == said
    for entry in (*data["set_aside"], *data["reply_problems"]):
        assert entry["message"] in said
    shown = html.unescape(page)
    for note in data["notes"]:  # what each suite's rows cover: in the captions, beside the rows
        assert note.split(": ", 1)[1] in shown, note
    assert "The newest run of each model and suite" not in page  # the report counts the run it chooses


def _units(data: dict) -> dict[str, list[int]]:
    """By case: the report's units (every model, suite, pair and condition) right, wrong, and with no answer."""
    counts: dict[str, list[int]] = {}
    for group in data["units"]:
        for unit in group["units"]:
            for condition, ok in unit["correct"].items():
                tally = counts.setdefault(unit["case"], [0, 0, 0])
                tally[0 if ok else 1] += 1
                tally[2] += unit["answers"][condition] is None
    return counts


def test_the_case_list_counts_every_unit_the_report_counts(study):
    data, site = study["report"], study["site"]
    units = _units(data)
    listing = (site / "cases-all-1.html").read_text()
    rows = re.findall(r'<tr><td class="id"><a href="case-([^"]+)\.html">.*?</tr>', listing, re.S)
    assert len(rows) == 7 and set(rows) == set(units)
    for case in rows:
        cells = re.findall(r'<td class="num">(\d+)</td>', re.search(rf'href="case-{case}.html">.*?</tr>', listing,
                                                                       re.S).group(0))
        page = (site / f"case-{case}.html").read_text()
        answers = page.split('<table id="answers" class="cards">', 1)[1].split("</table>", 1)[0].count("<tr class=")
        assert [int(n) for n in cells] == [*units[case], answers], case
        missing = [m for m in data["missing"] if m["case"] == case]
        if missing:
            assert f"<h2>Without a usable answer ({len(missing)})</h2>" in page, case
        else:
            assert "Without a usable answer" not in page, case
    # A unit with no reply at all (a run stopped by its cost limit, one killed, a pair skipped) is wrong too.
    assert any(m["reason"] == "absent" for m in data["missing"] if m["case"] == "MX03")
    wrong = (site / "cases-wrong-1.html").read_text()
    listed = re.findall(r'<tr><td class="id"><a href="case-([^"]+)\.html">', wrong)
    assert set(listed) == {c for c, t in units.items() if t[1]}


def test_the_pairs_page_shows_every_answer_the_report_counts_as_it_counts_it(study):
    data, pairs = study["report"], (study["site"] / "pairs.html").read_text()
    counted = {}
    for group in data["units"]:
        if group["suite"] == "counterfactual":
            for unit in group["units"]:
                counted[(unit["pair"], group["model"])] = unit
    missing = {(m["pair"], m["model"], m["condition"]): m for m in data["missing"] if m["suite"] == "counterfactual"}
    assert {p for p, _ in counted} == {"EX01", "EX02", "EX03"}
    assert ("EX03", view_study.MODEL, "edit") in missing  # its run skipped the pair: counted wrong all the same
    for pair, section in re.findall(r'<section class="pair" id="([^"]+)">(.*?)</section>', pairs, re.S):
        rows = dict(re.findall(r"<tr><td>([^<]+)</td>(.*?)</tr>", section.split('<table class="answers">', 1)[1]))
        models = {m for p, m in counted if p == pair}
        assert models <= set(rows), pair
        assert set(rows) - models == {view_study.REFUSED}, pair  # its answers are shown, marked left out
        for model in models:
            boxes = re.findall(r'<td class="([^"]*)">([^<]*)</td>', rows[model])
            for (state, text), condition in zip(boxes, ("original", "edit")):
                m = missing.get((pair, model, condition))
                if m is not None:
                    assert text.endswith(f"({m['reason']}: counted wrong)") and state != "ok", (pair, model, text)
                assert (state == "ok") == counted[(pair, model)]["correct"][condition], (pair, model, condition)


def test_the_runs_page_shows_each_runs_counts_and_status_as_runs_list_does(study):
    page = (study["site"] / "index.html").read_text()
    assert len(study["runs"]) == page.count('<td data-label="Run"><code>')
    for run in study["runs"]:
        row = re.search(rf'<td data-label="Run"><code>{re.escape(run["id"])}</code>.*?</tr>', page, re.S).group(0)
        cells = [_text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        assert cells[3].startswith(run["shown_status"]), (run["id"], cells[3])
        assert cells[4:6] == [f"{run['n_done']}/{run['n_requests']}", str(run["n_errors"])], run["id"]
    assert "interrupted (its process is gone)" in {r["shown_status"] for r in study["runs"]}
    assert "run the same &#39;cfkit probe run&#39;" in page  # how to resume it, as 'cfkit runs list' says


def test_the_served_view_answers_every_page_with_the_exported_bytes(study):
    # The real command on a free loopback port, its lifetime bounded by 'timeout', stopped by its own PID.
    proc = subprocess.Popen(["timeout", "300", sys.executable, "-m", "cfkit", "view", "-w", str(study["root"]),
                             "--no-browser", "--port", "0"], stderr=subprocess.PIPE, text=True,
                            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    try:
        line = proc.stderr.readline()
        url = re.search(r"at (http://127\.0\.0\.1:\d+/)", line).group(1)
        files = sorted(p.name for p in study["site"].iterdir())
        assert len(files) > 200
        read_at = re.compile(rb"read at\s+\d\d:\d\d:\d\d(?: [^ ]+)? on \d{4}-\d\d-\d\d")  # when each reading was made
        for name in files:
            with urllib.request.urlopen(url + name, timeout=60) as response:
                served, exported = response.read(), (study["site"] / name).read_bytes()
            assert read_at.sub(b"", served) == read_at.sub(b"", exported), name
            assert bool(read_at.search(served)) == bool(read_at.search(exported)) == name.endswith(".html"), name
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
