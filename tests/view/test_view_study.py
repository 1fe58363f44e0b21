"""``cfkit view --study FILE``: a study's page says where each of its runs stands and shows the study's report.

Before, the view had no word of a study: its runs page lists runs, its report page reads the workspace's
newest runs, and which of them make up the study, which were never started (and why) and the study's own
report were only in the terminal.
"""

from __future__ import annotations

import json
import re
import socket
from html import unescape
from pathlib import Path

import pytest

from support.chat_api_server import ChatServer, Scripted, completion, error_body, user_text
from support.probe_runs import scripted_answer
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(300)


def flaky(body, n) -> Scripted:
    """Answers every case but the spring fair poster (T001), which gets HTTP 500."""
    if "spring fair poster" in user_text(body):
        return Scripted(500, error_body("overloaded", kind="server_error"))
    return scripted_answer(body, n)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


@pytest.fixture(scope="module")
def study_site(tmp_path_factory):
    from support.workspace import write_workspace

    root = write_workspace(tmp_path_factory.mktemp("view-study") / "ws")
    path = root / "study.toml"
    with ChatServer(flaky) as server:
        path.write_text(
            "name = 'pilot'\n"
            "[models.majority]\nmodel = 'baseline:majority'\ngroup = 'baselines'\n"
            f"[models.flaky]\nmodel = 'openai:test-model'\nendpoint = '{server.url}'\n"
            "options = { max_retries = 0 }\ndisplay = 'Flaky <v1> & co'\n"
            f"[models.offline]\nmodel = 'openai:absent-model'\nendpoint = 'http://127.0.0.1:{_closed_port()}/v1'\n"
            "[suites.contextcanvas]\n")
        assert run_cli(["-w", str(root), "study", "run", str(path)]).exit_code == 1
    status = run_cli(["-w", str(root), "study", "status", str(path), "--json"])
    site = root / "site"
    made = run_cli(["-w", str(root), "view", "--study", "study.toml", "--export", str(site)])
    assert made.exit_code == 0, made.stderr
    return root, site, json.loads(status.stdout), status.stderr


def test_the_study_page_gives_each_run_its_state_as_study_status_does(study_site):
    root, site, states, said = study_site
    page = (site / "study.html").read_text()
    text = _text(page)
    assert "pilot" in text and str(root / "study.toml") in text
    rows = re.findall(r'<tr class="state-([a-z-]+)">(.*?)</tr>', page, re.S)
    assert [state for state, _ in rows] == [s["state"].replace(" ", "-") for s in states]
    assert [s["state"] for s in states] == ["done", "incomplete", "not started"]
    by_state = {state: _text(row) for state, row in rows}
    assert "2/3" in by_state["incomplete"] and "1 request failed" in by_state["incomplete"]
    assert "Flaky <v1> & co" in by_state["incomplete"] and "openai:test-model" in by_state["incomplete"]
    # A run never started says why, as study status does: its endpoint does not answer.
    assert "not reachable" in by_state["not-started"] and "—" in by_state["not-started"]
    # Each stored run links to its row on the runs page, which has that anchor.
    for state in ("done", "incomplete"):
        run_id = next(s["run_id"] for s in states if s["state"] == state)
        assert f'href="index.html#run-{run_id}"' in page
        assert f'id="run-{run_id}"' in (site / "index.html").read_text()
    # The line study status ends with, and the commands that go on.
    last = said.strip().splitlines()[-1].removeprefix("error: ")
    assert last in text and last.startswith("study 'pilot': 1 of 3 runs done; continue with: cfkit -w")
    assert f"cfkit -w {root} study report {root / 'study.toml'}" in text


def test_the_study_page_shows_the_study_report_with_its_names_and_what_it_leaves_out(study_site):
    root, site, _, _ = study_site
    text = _text((site / "study.html").read_text())
    report = run_cli(["-w", str(root), "study", "report", "study.toml", "--format", "json"])
    assert report.exit_code == 1  # not the whole study
    models = [r["model"] for r in json.loads(report.stdout)["contextcanvas"]]
    assert models == ["baseline:majority", "Flaky <v1> & co"]  # the study's display name, not openai:test-model
    section = text.split(" Report ", 1)[1]
    assert "ContextCanvas (as in Table 2)" in section and "baselines" in section
    for model in models:
        assert model in section
    # What study report says on stderr with its tables: the run left out, the incomplete run, and its last line.
    assert "offline contextcanvas: not started" in section and "left out of the report" in section
    assert "the report is not the whole study: 1 run left out" in section
    assert "1 run reported incomplete" in section


def test_the_study_link_is_in_every_page_with_a_study_and_in_none_without(study_site, tmp_path):
    root, site, _, _ = study_site
    for name in ("index.html", "report.html", "pairs.html"):
        assert '<a href="study.html"' in (site / name).read_text()
    plain = tmp_path / "plain"
    assert run_cli(["-w", str(root), "view", "--export", str(plain)]).exit_code == 0
    assert not (plain / "study.html").exists() and 'href="study.html"' not in (plain / "index.html").read_text()


def test_a_study_file_that_cannot_be_read_stops_the_view_before_anything_is_written(study_site, tmp_path):
    root, _, _, _ = study_site
    out = tmp_path / "site"
    missing = run_cli(["-w", str(root), "view", "--study", "nope.toml", "--export", str(out)])
    assert missing.exit_code == 2 and "study file" in missing.stderr and "nope.toml not found" in missing.stderr
    bad = root / "bad.toml"
    bad.write_text("[models.x]\nmodel = 'nokind'\n[suites.contextcanvas]\n")
    broken = run_cli(["-w", str(root), "view", "--study", str(bad), "--export", str(out)])
    assert broken.exit_code == 2 and str(bad) in broken.stderr
    assert not out.exists()


def test_the_study_page_in_a_browser_fits_a_phone(study_site, browser):
    _, site, _, _ = study_site
    for width in (1280, 390):
        page = browser.new_page(viewport={"width": width, "height": 800})
        problems = []
        page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
        page.goto((site / "study.html").as_uri())
        assert page.evaluate("document.documentElement.scrollWidth") <= width  # wide tables scroll in their box
        assert page.locator("table.study-runs tbody tr").count() == 3
        assert page.locator("nav a[aria-current=page]").inner_text() == "Study"
        assert problems == []
        page.close()
