"""``cfkit view`` marks on a case page every answer the report's numbers leave out, as the report page says it.

The demo's baselines, plus runs the report does not count: a second full run
of one model with another token limit (that model is refused: runs of
different settings), a smoke test of another with other settings (left out),
and a smoke test of a third with its full runs' settings (the report takes the
full run, and names the newer smoke test it leaves out). Every answer a case page shows unmarked must be the report's own
answer for that unit, every answer of the report must be there, and every other
answer is marked with why, in the exported site and the served view alike.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import urllib.request
from pathlib import Path

import pytest

from support.view_server import serving
from support.workspace import MINI, run_cli

REFUSED = "baseline:always-yes"
SMOKE = "baseline:random"
SAME_SMOKE = "baseline:majority"
WHY = {REFUSED: "left out of the report: runs of different settings",
       SMOKE: "left out of the report: a smoke test with other settings than the full runs",
       SAME_SMOKE: "left out of the report: newer than the run read, but asked only part of the suite"}


def _probe(ws: Path, *args: str) -> str:
    result = run_cli(["-w", str(ws), "probe", "run", *args, "--json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["run_id"]


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    if not (MINI / "cfkit.toml").is_file():
        pytest.skip("examples/mini is not in this checkout")
    root = tmp_path_factory.mktemp("view-left-out") / "demo"
    assert run_cli(["demo", "--output", str(root)]).exit_code == 0
    runs = {SMOKE: _probe(root, "-m", SMOKE, "-s", "contextcanvas", "--limit", "2", "--max-tokens", "8"),
            REFUSED: _probe(root, "-m", REFUSED, "-s", "contextcanvas", "--max-tokens", "64"),
            SAME_SMOKE: _probe(root, "-m", SAME_SMOKE, "-s", "contextcanvas", "--limit", "2")}
    return root, runs


@pytest.fixture(scope="module")
def site(ws) -> Path:
    out = ws[0].parent / "site"
    result = run_cli(["view", "-w", str(ws[0]), "--export", str(out)])
    assert result.exit_code == 0, result.stderr
    return out


def _rows(page: str) -> list[dict[str, str]]:
    """Each row of a case page's answers: its class, model, suite, condition, pair, answer cell and run."""
    table = page.split('<table id="answers" class="cards">', 1)[1].split("</table>", 1)[0]
    rows = []
    for cls, body in re.findall(r'<tr class="([^"]*)">(.*?)</tr>', table, re.S):
        cells = re.findall(r'<td data-label="[^"]*">(.*?)</td>', body, re.S)
        pair = re.search(r'<span class="tag">([^<]*)</span>', cells[2])
        model, _, tag = cells[0].partition("<br>")
        rows.append({"class": cls, "model": model, "tag": tag, "suite": cells[1],
                     "condition": re.sub(r"<[^>]+>.*", "", cells[2]).strip(), "pair": pair.group(1) if pair else "",
                     "answer": cells[3], "run": re.search(r"run <code>([^<]+)</code>", body).group(1)})
    return rows


def test_a_case_page_marks_every_answer_the_reports_numbers_leave_out(ws, site):
    root, runs = ws
    report = run_cli(["report", "-w", str(root), "--format", "json"])
    assert report.exit_code == 1  # one model refused: the report says so, and the view must too
    data = json.loads(report.stdout)
    counted_runs = {run for suite in ("contextcanvas", "counterfactual", "modality", "swap")
                    for row in data[suite] for run in row["runs"]}
    assert runs[SAME_SMOKE] not in counted_runs and runs[SMOKE] not in counted_runs
    counted = {(m["model"], m["suite"], u["case"], u.get("pair") or "", condition): answer
               for m in data["units"] for u in m["units"] for condition, answer in u["answers"].items()}
    right = {}
    for m in data["units"]:
        for u in m["units"]:
            for condition, ok in u["correct"].items():
                right.setdefault(u["case"], [0, 0])[0 if ok else 1] += 1
    shown, marked = {}, set()
    cases = sorted(p.name[5:-5] for p in site.glob("case-*.html"))
    assert cases
    listing = (site / "cases-all-1.html").read_text()
    for case in cases:
        page = (site / f"case-{case}.html").read_text()
        rows = _rows(page)
        for row in rows:
            key = (row["model"], row["suite"], case, row["pair"], row["condition"])
            if "left-out" in row["class"]:
                assert row["answer"].endswith(f'<br><span class="left-out">{WHY[row["model"]]}</span>'), (case, row)
                assert "✓" not in row["answer"] and "✗" not in row["answer"]
                # The first column says it too: on a phone the table scrolls, and the first column is in view.
                assert row["tag"] == '<span class="tag left-out">not in the report</span>'
                assert row["run"] not in counted_runs
                marked.add((row["model"], row["run"]))
            else:  # unmarked: the very answer the report counts, from the run it counts
                assert row["tag"] == ""
                assert row["run"] in counted_runs and key in counted, (case, row)
                assert re.match(rf"{re.escape(counted[key] or 'no valid option')}\b", row["answer"]), (case, row)
                shown[key] = row["answer"]
        # One line per model above the table, naming its runs: on a phone the table scrolls, the list does not.
        left = {r["model"] for r in rows if "left-out" in r["class"]}
        assert ('<ul class="left-out">' in page) == bool(left), case
        listed = page.split('<ul class="left-out">', 1)[1].split("</ul>", 1)[0] if left else ""
        assert listed.count("<li>") == len(left), case
        for model in left:
            assert re.search(rf"<li><b>{re.escape(model)}</b> [^<]*: {re.escape(WHY[model])} <small>\(run ", listed)
        # The case list counts right and wrong as the report does: the left-out answers are neither.
        cells = re.search(rf'href="case-{case}.html">.*?</tr>', listing, re.S).group(0)
        assert [int(n) for n in re.findall(r'<td class="num">(\d+)</td>', cells)[:2]] == right.get(case, [0, 0]), case
    assert set(shown) == set(counted)  # every answer the report counts is on its case page (the full run's too)
    assert {m for m, _ in marked} == {REFUSED, SMOKE, SAME_SMOKE}
    assert (SMOKE, runs[SMOKE]) in marked and (REFUSED, runs[REFUSED]) in marked
    # Its full run stands for it; its newer smoke test's answers are shown, marked, never silently dropped.
    assert {run for m, run in marked if m == SAME_SMOKE} == {runs[SAME_SMOKE]}
    # The report page names each of those models as left out (with the runs its line names), and no other.
    said = re.findall(r"<li>([^<]*)</li>", html.unescape((site / "report.html").read_text()))
    aside = {a["model"]: a for a in data["set_aside"]}
    assert set(aside) == {m for m, _ in marked}
    for model, entry in aside.items():
        assert entry["message"] in said
        assert any(run in entry["message"] for m, run in marked if m == model)


def test_the_runs_page_says_of_every_run_whether_the_report_reads_it_and_why_not(ws, site):
    root, runs = ws
    data = json.loads(run_cli(["report", "-w", str(root), "--format", "json"]).stdout)
    read = {r["run"] for r in data["runs_read"]}
    page = (site / "index.html").read_text()
    marks = dict(re.findall(r'<tr [^>]*>\s*<td[^>]*><code>([^<]+)</code>.*?<td[^>]* class="report">(.*?)</td>', page, re.S))
    listed = json.loads(run_cli(["runs", "list", "-w", str(root), "--json"]).stdout)
    assert set(marks) == {r["id"] for r in listed}
    assert {run for run, mark in marks.items() if mark == "read"} == read
    for model, run in runs.items():  # each left out, with the report's reason
        assert marks[run] == f'<span class="left-out">{WHY[model]}</span>', (model, marks[run])
    for r in listed:  # the refused model's other runs are left out too, for the same reason
        if r["model"] == REFUSED:
            assert marks[r["id"]] == f'<span class="left-out">{WHY[REFUSED]}</span>'


def test_the_pairs_page_marks_the_answers_of_a_model_the_report_leaves_out(site):
    # One answer per model and pair: the counted run's, else the left-out one, which says why in its boxes.
    pairs = (site / "pairs.html").read_text()
    sections = re.findall(r'<section class="pair" id="([^"]+)">(.*?)</section>', pairs, re.S)
    assert sections
    for pair, section in sections:
        rows = dict(re.findall(r"<tr><td>([^<]+)</td>(.*?)</tr>", section.split('<table class="answers">', 1)[1]))
        assert set(rows) >= {REFUSED, SMOKE, SAME_SMOKE}, pair
        for model, boxes in rows.items():
            cells = re.findall(r'<td class="([^"]*)">([^<]*)</td>', boxes)
            if model == REFUSED:
                assert [c for c, _ in cells] == ["left-out", "left-out"], pair
                assert all(text.endswith(f"({WHY[REFUSED]})") for _, text in cells), pair
            else:  # the smoke test's model has a counted counterfactual run: unmarked
                assert "left out" not in boxes, (pair, model)
        listed = section.split('<ul class="left-out">', 1)[1].split("</ul>", 1)[0]
        assert re.findall(r"<li>([^<]*)</li>", listed) == [f"{REFUSED}: {WHY[REFUSED]}"], pair


def test_every_answer_is_marked_when_the_report_cannot_be_made(ws, tmp_path):
    # Every model refused: no report at all, so no answer is in any of its numbers.
    root = tmp_path / "ws"
    shutil.copytree(ws[0], root)
    others = [r["id"] for r in json.loads(run_cli(["runs", "list", "-w", str(root), "--json"]).stdout)
              if r["model"] != REFUSED]
    assert run_cli(["runs", "rm", *others, "-w", str(root)]).exit_code == 0
    out = tmp_path / "site"
    assert run_cli(["view", "-w", str(root), "--export", str(out)]).exit_code == 0
    page = (out / "case-MX01.html").read_text()
    assert "the report could not be made (model baseline:always-yes has runs with different settings" in page
    rows = _rows(page)
    assert rows and all("left-out" in r["class"] for r in rows)
    assert all('<span class="left-out">not in any report: the report could not be made (see the report page)</span>'
               in r["answer"] for r in rows)


@pytest.fixture(scope="module")
def served(ws):
    with serving(ws[0]) as url:
        yield url


def test_the_marks_read_the_same_served_and_exported_and_fit_a_phone(site, served, browser, tmp_path):
    read_at = re.compile(rb"read at\s+\d\d:\d\d:\d\d(?: [^ ]+)? on \d{4}-\d\d-\d\d")  # each reading says when it was made
    for name in ("case-MX01.html", "case-MX02.html", "cases-all-1.html"):
        with urllib.request.urlopen(served + name, timeout=30) as response:
            served_page, exported = response.read(), (site / name).read_bytes()
        assert read_at.search(served_page) and read_at.search(exported), name
        assert read_at.sub(b"", served_page) == read_at.sub(b"", exported), name
    shots = Path(os.environ.get("CFKIT_VIEW_SCREENSHOTS", tmp_path / "shots"))
    shots.mkdir(parents=True, exist_ok=True)
    for base, tag in ((served, "served"), (site.as_uri() + "/", "exported")):
        for width in (1280, 400):
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto(base + "case-MX01.html")
            page.screenshot(path=str(shots / f"left-out-{tag}-{width}.png"), full_page=True)
            items = page.locator("ul.left-out li")
            assert items.count() == 3
            for k in range(3):  # each line whole inside the window, in a legible size
                box = items.nth(k).bounding_box()
                assert box["x"] >= 0 and box["x"] + box["width"] <= width, (tag, width, box)
                assert float(items.nth(k).evaluate("e => parseFloat(getComputedStyle(e).fontSize)")) >= 12
            assert {items.nth(k).locator("b").inner_text() for k in range(3)} == {REFUSED, SMOKE, SAME_SMOKE}
            marks = page.locator("table#answers td:nth-child(4) span.left-out")
            assert marks.count() >= 2 and all(marks.nth(k).is_visible() for k in range(marks.count()))
            assert set(marks.all_inner_texts()) == set(WHY.values())
            tags = page.locator("table#answers td:first-child span.left-out")
            assert tags.count() == marks.count()
            box = tags.first.bounding_box()  # the first column's tag is in the window without scrolling the table
            assert box["x"] + box["width"] <= width and tags.first.is_visible()
            assert page.evaluate("document.documentElement.scrollWidth") <= width  # the page never scrolls sideways
            page.close()
