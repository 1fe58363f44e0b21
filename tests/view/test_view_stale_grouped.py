"""The view's "Answers stale now" says once the reason a changed case makes many runs stale: one line names the
reason, how many runs and answers, and the first few runs (the rest counted), and lists each run under it, so
each stays findable from its row.

Before, each run had its own line, so one case reworded under five runs gave five long lines that differed only
in the run's id.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from support.workspace import run_cli, write_workspace


def _probe(ws: Path, model: str, *options: str) -> str:
    result = run_cli(["-w", str(ws), "probe", "run", "-m", model, "-s", "contextcanvas", *options, "--json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["run_id"]


@pytest.fixture(scope="module")
def stale_site(tmp_path_factory):
    """Five runs, one case reworded under them all, and the view exported (built before the browser starts)."""
    tmp_path = tmp_path_factory.mktemp("stale-grouped")
    tiny_ws = write_workspace(tmp_path / "ws")
    runs = [_probe(tiny_ws, "baseline:always-yes"), _probe(tiny_ws, "baseline:always-no")]
    runs += [_probe(tiny_ws, "baseline:random", "-o", f"seed={seed}") for seed in (1, 2, 3)]
    path = tiny_ws / "data" / "cases.jsonl"  # T002's question reworded: every run's answer to it is stale
    path.write_text(path.read_text().replace("a winter card", "a summer card"))
    shown = {r: run_cli(["-w", str(tiny_ws), "runs", "show", r], env={"COLUMNS": "2000"}).stdout for r in runs}
    why = {r: re.search(r"e\.g\. (.*)\.$", next(line for line in text.splitlines() if line.startswith("stale ")))
           .group(1) for r, text in shown.items()}
    site = tmp_path / "site"
    assert run_cli(["-w", str(tiny_ws), "view", "--export", str(site)]).exit_code == 0
    return runs, why, site


def test_runs_stale_for_one_reason_share_one_line_and_each_stays_listed(stale_site):
    runs, why, site = stale_site
    common = {w.replace(f"run {r}", "each run") for r, w in why.items()}
    assert len(common) == 1 and len(set(why.values())) == 5  # one reason, but for the run that asked it
    page = html.unescape((site / "index.html").read_text())
    section = page.split("<h2>Answers stale now</h2>")[1].split("<h2>")[0]
    groups = re.findall(r'<li class="problem stale-group">(.*?)<details>(.*?)</details>', section, re.S)
    assert len(groups) == 1, section
    line, listed = groups[0]
    line = " ".join(line.split())
    reason = common.pop()
    assert line.count(reason) == 1 and "changed since each run asked it" in reason  # the reason once
    named = re.match(r"5 runs \((.*?), (.*?), (.*?) and 2 more\): 1 answer stale now in each", line)
    assert named is not None and set(named.groups()) < set(runs), line
    for run_id in runs:  # each run findable: its row's link leads to its own entry under the line
        assert len(re.findall(rf'<li id="stale-{run_id}">', listed)) == 1
        assert f'href="#stale-{run_id}">1 answer stale</a>' in page
    assert section.count('class="problem') == 1


def test_the_grouped_line_fits_the_window_and_opens_to_each_run(stale_site, browser):
    runs, _, site = stale_site
    for width in (1280, 390):
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto((site / "index.html").as_uri())
        line = page.locator("li.stale-group")
        box = line.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, (width, box)
        assert page.locator(f"#stale-{runs[4]}").is_hidden()  # listed, folded under the line
        page.goto((site / "index.html").as_uri() + f"#stale-{runs[4]}")  # its row's link opens the list
        assert page.locator(f"#stale-{runs[4]}").is_visible()
        item = page.locator(f"#stale-{runs[4]}").bounding_box()
        assert item["x"] + item["width"] <= width, (width, item)
        assert page.evaluate("document.documentElement.scrollWidth") <= width  # the page never scrolls sideways
        page.close()
