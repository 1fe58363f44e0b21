"""``cfkit view``: the read-only web view of a workspace, served on loopback and exported as files.

The workspace is the demo's (edits, checks, four baseline models) plus one
model behind a loopback server whose replies are hostile: a script element,
an image with an ``onerror`` handler, a ``javascript:`` link and terminal
escape sequences. Every page must show them as text. The browser tests drive
Debian's Chromium through Playwright (the ``browser`` fixture of conftest.py).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from support.chat_api_server import ChatServer, Scripted, answer_json, completion, user_text
from support.view_server import serving
from support.workspace import MINI, run_cli

HOSTILE_REPLY = ("<script>alert(1)</script> <img src=x onerror=alert(2)> <a href=\"javascript:alert(3)\">click</a> "
                 "\x1b]0;PWNED\x07\x1b[31mred")
HOSTILE_MODEL = "openai:evil"


def _script(body: dict, n: int) -> Scripted:
    # Every other request: a valid answer with a hostile reason; the rest: hostile free text (no valid option).
    if n % 2:
        return Scripted(body=completion(answer_json("A", reason=HOSTILE_REPLY), model=body["model"]))
    return Scripted(body=completion(HOSTILE_REPLY, model=body["model"]))


@pytest.fixture(scope="module")
def demo_ws(tmp_path_factory) -> Path:
    if not (MINI / "cfkit.toml").is_file():
        pytest.skip("examples/mini is not in this checkout")
    ws = tmp_path_factory.mktemp("view") / "demo"
    assert run_cli(["demo", "--output", str(ws)]).exit_code == 0
    with ChatServer(_script) as server:
        result = run_cli(["-w", str(ws), "probe", "run", "-m", HOSTILE_MODEL, "-s", "contextcanvas", "--base-url",
                          server.url, "-o", "backoff=0.01", "-o", "max_retries=1"], env={"OPENAI_API_KEY": "sk-test"})
    assert result.exit_code == 0, result.stderr
    return ws


@pytest.fixture(scope="module")
def site_dir(demo_ws, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    result = run_cli(["view", "-w", str(demo_ws), "--export", str(out)])
    assert result.exit_code == 0, result.stderr
    assert f"open {out}/index.html" in result.stderr
    return out


def test_export_writes_every_page_escaped_and_small(site_dir, demo_ws):
    names = sorted(p.name for p in site_dir.iterdir())
    for page in ("index.html", "report.html", "pairs.html", "audit.html", "view.css", "cases-all-1.html",
                 "cases-wrong-1.html", "cases-invalid-1.html", "case-MX01.html"):
        assert page in names
    cases = [json.loads(line)["id"] for line in (demo_ws / "data" / "cases.jsonl").read_text().splitlines()
             if line.strip()] if (demo_ws / "data" / "cases.jsonl").is_file() else []
    for case_id in cases:
        assert f"case-{case_id}.html" in names
    for path in site_dir.iterdir():
        body = path.read_bytes()
        assert len(body) < 1_000_000, path.name  # no page over 1 MB
        if path.suffix in (".html", ".txt"):  # a raw reply is a .txt file: shown as plain text, never as HTML
            text = body.decode("utf-8")
            assert "\x1b" not in text and "\x07" not in text, path.name  # escapes shown as control pictures
        if path.suffix == ".html":
            assert "<script" not in text.lower() and "<img src=x" not in text, path.name
    page = (site_dir / "case-MX01.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and HOSTILE_MODEL in page
    assert 'href="javascript:' not in page


def test_the_case_page_shows_every_models_reply_with_its_reading(site_dir):
    page = (site_dir / "case-MX01.html").read_text()
    for model in ("baseline:always-yes", "baseline:always-no", "baseline:majority", HOSTILE_MODEL):
        assert model in page
    assert "no valid option" in page or "✓" in page
    assert 'href="raw-' in page  # each reply links to its raw text
    raw = next(site_dir.glob("raw-*.txt")).read_text()
    assert raw  # a raw reply, as text


def test_filters_keep_what_they_name(site_dir):
    wrong = (site_dir / "cases-wrong-1.html").read_text()
    invalid = (site_dir / "cases-invalid-1.html").read_text()
    assert "case-MX01.html" in wrong  # always-yes is wrong on a No case
    # The hostile model gave no valid option on every other request: those cases are under "invalid".
    assert invalid.count('href="case-') >= 1
    everything = (site_dir / "cases-all-1.html").read_text()
    assert everything.count('href="case-') >= invalid.count('href="case-')


def test_a_case_page_says_which_models_have_no_usable_answer_and_why(site_dir, demo_ws, tmp_path):
    # The demo's always-yes and always-no baselines decline the three-option case: the report counts them wrong,
    # and the case page says so, with the report's reason.
    page = (site_dir / "case-MX05.html").read_text()
    assert '<table id="missing"' in page
    for model in ("baseline:always-yes", "baseline:always-no"):
        assert f'<tr><td data-label="Model">{model}</td><td data-label="Suite">contextcanvas</td>' in page
    assert "<b>refused</b>: baseline always-yes has no answer for a case without a Yes/No option" in page
    # A peer's file that leaves a case out: that case's page names the file, and the case is under "wrong".
    ws = tmp_path / "ws"
    shutil.copytree(demo_ws, ws)
    run_id = next(r["id"] for r in json.loads(run_cli(["runs", "list", "-w", str(ws), "--json"]).stdout)
                  if r["model"] == "baseline:random" and r["suite"] == "contextcanvas")
    assert run_cli(["runs", "export", run_id, "-w", str(ws), "--format", "lmms", "--output",
                    str(tmp_path / "samples.jsonl")]).exit_code == 0
    records = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    kept = [{k: v for k, v in r.items() if k != "cfkit"} for r in records if r["doc"]["id"] != "MX02"]
    peer = tmp_path / "peer_samples.jsonl"
    peer.write_text("".join(json.dumps(r) + "\n" for r in kept))
    imported = run_cli(["runs", "import", str(peer), "-w", str(ws), "--label", "peer"])
    assert imported.exit_code == 0, imported.stderr
    others = [r["id"] for r in json.loads(run_cli(["runs", "list", "-w", str(ws), "--json"]).stdout)
              if r["model"] != "peer"]  # so that the case is wrong for want of an answer alone
    assert run_cli(["runs", "rm", *others, "-w", str(ws)]).exit_code == 0
    out = tmp_path / "site"
    assert run_cli(["view", "-w", str(ws), "--export", str(out)]).exit_code == 0
    page = (out / "case-MX02.html").read_text()
    assert '<tr><td data-label="Model">peer</td><td data-label="Suite">contextcanvas</td>' in page
    assert f"<b>absent</b>: not in {html.escape(str(peer))}, the file imported as run" in page
    wrong = (out / "cases-wrong-1.html").read_text()
    assert "case-MX02.html" in wrong
    right = [r["doc"]["id"] for r in kept if r["filtered_resps"] == [r["target"]]]
    assert right and not any(f"case-{case}.html" in wrong for case in right)


def test_the_report_page_says_what_cfkit_report_says_with_its_tables(site_dir, demo_ws):
    # The lines 'cfkit report' prints on stderr (units counted wrong for want of an answer, replies that are not
    # answers, runs left out) go with the tables on the page too: without them a row told only half of it.
    page = html.unescape((site_dir / "report.html").read_text())
    printed = run_cli(["report", "-w", str(demo_ws)], env={"COLUMNS": "10000"}).stderr
    said = [line.removeprefix("warning: ") for line in printed.splitlines() if line.startswith("warning: ")]
    assert any(" without a usable answer, counted wrong" in line for line in said)
    for line in said:
        assert f"<li>{line}</li>" in page, line


def test_a_case_page_says_when_the_report_behind_it_cannot_be_made(demo_ws, tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(demo_ws, ws)
    (ws / "cases.jsonl").write_text('{"id": "MX01", "images": \n')  # broken: no report, and no cases to show
    out = tmp_path / "site"
    assert run_cli(["view", "-w", str(ws), "--export", str(out)]).exit_code == 0
    page = (out / "case-MX01.html").read_text()
    assert "Which models have no usable answer here is not shown: the report could not be made (" in page
    assert '<table id="missing"' not in page


def test_pages_are_split_when_there_are_many_cases(demo_ws, monkeypatch, tmp_path):
    import cfkit.view.site as site_module
    from cfkit.view.data import ViewData
    from cfkit.view.site import Site, export
    from cfkit.workspace import load_workspace

    monkeypatch.setattr(site_module, "PAGE_SIZE", 3)
    site = Site(ViewData(load_workspace(demo_ws)))
    export(site, tmp_path / "out")
    first, last = (tmp_path / "out" / "cases-all-1.html").read_text(), (tmp_path / "out" / "cases-all-3.html").read_text()
    assert first.count('href="case-') == 3 and 'rel="next"' in first and 'rel="prev"' in last
    assert site.page("cases-all-9.html") is None


def test_export_refuses_a_folder_with_files_unless_forced(demo_ws, tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    result = run_cli(["view", "-w", str(demo_ws), "--export", str(tmp_path)])
    assert result.exit_code == 2 and "is not empty" in result.stderr and "--force" in result.stderr
    assert run_cli(["view", "-w", str(demo_ws), "--export", str(tmp_path), "--force"]).exit_code == 0
    assert (tmp_path / "keep.txt").read_text() == "mine"


@pytest.fixture(scope="module")
def served(demo_ws):
    with serving(demo_ws) as url:
        yield url


def _get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_the_server_binds_loopback_and_forbids_scripts_and_off_machine_requests(served):
    assert served.startswith("http://127.0.0.1:")
    status, headers, body = _get(served)
    assert status == 200 and b"Runs" in body
    policy = headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script-src" not in policy  # no script source is allowed at all
    assert headers["X-Content-Type-Options"] == "nosniff"
    status, headers, _ = _get(served + "raw-0000000000000000.txt")
    assert status == 404
    for path in ("../cfkit.toml", "%2e%2e/cfkit.toml", "..%2fcfkit.toml", "case-../../etc.html", "img-case-MX01-9.png"):
        assert _get(served + path)[0] == 404, path


def test_a_raw_reply_is_served_as_plain_text(served, site_dir):
    name = next(site_dir.glob("raw-*.txt")).name
    status, headers, body = _get(served + name)
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert body == (site_dir / name).read_bytes()


def test_an_audit_still_being_labelled_names_no_model(tmp_path):
    from support.audit_workspace import build, run_models

    ws = build(tmp_path / "ws")
    ids = run_models(ws)
    plan = run_cli(["-w", str(ws), "audit", "plan", *(a for r in ids.values() for a in ("--run", r))])
    assert plan.exit_code == 0, plan.stderr
    out = tmp_path / "site"
    assert run_cli(["view", "-w", str(ws), "--export", str(out)]).exit_code == 0
    page = (out / "audit.html").read_text()
    assert "still being labelled" in page
    for model, run_id in ids.items():
        assert model not in page and run_id not in page


# ── in a real browser ───────────────────────────────────────────────────────

PAGES = ("index.html", "report.html", "cases-all-1.html", "cases-wrong-1.html", "case-MX01.html", "pairs.html",
         "audit.html")


def _visit(browser, base: str, shots: Path) -> dict[str, list[str]]:
    """Load every page at desktop and phone widths; the console errors, dialogs and off-machine requests met."""
    problems: dict[str, list[str]] = {}
    for width, height, tag in ((1280, 800, "desktop"), (390, 844, "phone")):
        page = browser.new_page(viewport={"width": width, "height": height})
        seen: list[str] = []
        page.on("console", lambda m: seen.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: seen.append(f"page error: {e}"))
        page.on("dialog", lambda d: (seen.append(f"dialog: {d.message}"), d.dismiss()))
        page.on("request", lambda r: seen.append(f"request off the view: {r.url}")
                if not r.url.startswith(base) else None)
        for name in PAGES:
            page.goto(base + name)
            page.wait_for_load_state("load")
            page.screenshot(path=str(shots / f"{tag}-{name}.png"), full_page=True)
            problems.setdefault(name, []).extend(seen)
            seen.clear()
        page.close()
    return problems


def _shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("CFKIT_VIEW_SCREENSHOTS", tmp_path / "shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_every_page_loads_in_a_browser_without_errors_served(browser, served, tmp_path):
    problems = _visit(browser, served, _shots(tmp_path))
    assert problems == {name: [] for name in PAGES}


def test_every_page_loads_from_the_exported_folder(browser, site_dir, tmp_path):
    problems = _visit(browser, site_dir.as_uri() + "/", _shots(tmp_path / "exported"))
    assert problems == {name: [] for name in PAGES}


def test_the_runs_table_fits_a_desktop_window(site_dir, browser, tmp_path):  # the demo is made before the browser
    # Every column, settings included, without scrolling sideways at 1280 px, also with a server's long address
    # as the endpoint; on a phone each run is a block of its own (each value under its column's name), so the
    # table fits there too.
    long = (site_dir / "index.html").read_text().replace(
        '<td data-label="Endpoint" class="endpoint">—</td>',
        '<td data-label="Endpoint" class="endpoint">http://gpu-node-17.cluster.example.org:8000/v1</td>')
    (tmp_path / "index.html").write_text(long)
    (tmp_path / "view.css").write_bytes((site_dir / "view.css").read_bytes())
    for folder, width, fits in ((site_dir, 1280, True), (tmp_path, 1280, True), (site_dir, 390, True)):
        page = browser.new_page(viewport={"width": width, "height": 800})
        page.goto(folder.as_uri() + "/index.html")
        box = page.locator("div.scroll").evaluate("e => [e.scrollWidth, e.clientWidth]")
        page_width = page.evaluate("document.documentElement.scrollWidth")
        page.close()
        assert (box[0] <= box[1]) is fits, (width, box)
        assert page_width <= width  # the page itself never scrolls sideways


def test_a_hostile_reply_shows_as_text_in_the_dom(browser, served):
    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(served + "case-MX01.html")
    assert page.locator("table#answers tbody tr").count() >= 5  # four baselines and the hostile model
    text = page.locator("table#answers").inner_text()
    assert "<script>alert(1)</script>" in text and "<img src=x onerror=alert(2)>" in text
    assert "␛]0;PWNED" in text  # the escape sequence as control pictures, not acted on
    assert page.locator("table#answers script, table#answers img, table#answers a[href^='javascript']").count() == 0
    assert page.title().startswith("Case MX01")  # the OSC title sequence did not retitle anything
    assert dialogs == []
    # The filters are links to their pages, and each page says what it keeps.
    page.goto(served + "cases-all-1.html")
    filters = page.locator("nav.filters a")
    assert filters.count() == 6
    page.locator("nav.filters a", has_text="wrong").click()
    assert "answered wrong" in page.locator("p.filter-meaning").inner_text()
    page.close()


def test_pairs_show_the_mask_outline_and_the_check_figures(site_dir):
    import numpy as np
    from PIL import Image

    page = (site_dir / "pairs.html").read_text()
    assert "SSIM outside" in page and "change inside" in page
    for spec in ("EX01", "EX02", "EX03"):
        assert f"img-pair-{spec}-difference.png" in page
        with Image.open(site_dir / f"img-pair-{spec}-difference.png") as picture:
            pixels = np.asarray(picture.convert("RGB")).reshape(-1, 3)
        assert (pixels == (240, 228, 66)).all(axis=1).sum() > 20, spec  # the mask drawn round in yellow


@pytest.fixture(scope="module")
def finished_audit(tmp_path_factory):
    """The audit workspace with both annotators' labels in and every disagreement resolved, plus a swap run.

    Built on a thread of its own: the module's Playwright browser may already hold this thread's
    event loop, and the probe engine starts one of its own with asyncio.run."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(_finish_an_audit, tmp_path_factory.mktemp("view-audit") / "ws").result()


def _finish_an_audit(ws_path):
    from support import audit_workspace as aw

    ws = aw.build(ws_path)
    run_ids = aw.run_models(ws)
    assert run_cli(["-w", str(ws), "audit", "plan", "--run", run_ids[aw.GPT], "--run", run_ids[aw.QWEN]]).exit_code == 0
    rows = json.loads(run_cli(["-w", str(ws), "audit", "items", "--as", "alice", "--json"]).stdout)
    for n, row in enumerate(rows):
        for name, link in (("alice", "yes"), ("bob", "no" if n % 3 == 0 else "yes")):
            assert run_cli(["-w", str(ws), "audit", "label", row["item"], "--as", name, "--cue", "yes",
                            "--link", link]).exit_code == 0
    for n, row in enumerate(rows):
        if n % 3 == 0:
            assert run_cli(["-w", str(ws), "audit", "resolve", row["item"], "--as", "carol", "--cue", "yes",
                            "--link", "yes", "--note", "alice's reading holds"]).exit_code == 0
    assert run_cli(["-w", str(ws), "probe", "run", "-m", "baseline:always-yes", "-s", "swap"]).exit_code == 0
    return ws, run_ids


def test_a_complete_audit_shows_its_results_and_a_swap_run_its_inconsistent_cases(finished_audit, tmp_path):
    from support import audit_workspace as aw

    ws, _ = finished_audit
    out = tmp_path / "site"
    result = run_cli(["view", "-w", str(ws), "--export", str(out)])
    assert result.exit_code == 0, result.stderr
    audit_page = (out / "audit.html").read_text()
    assert "still being labelled" not in audit_page
    for model in aw.MODELS:
        assert model in audit_page  # the EGA rows, now that every item has its final label
    # Its tables' titles are headings under the audit's own, not beside it: the page's outline reads as it looks.
    levels = re.findall(r"<h([1-6])>", audit_page)
    assert levels[:2] == ["1", "2"] and levels[2:] and set(levels[2:]) == {"3"}, levels
    report_page = (out / "report.html").read_text()
    assert "Option order" in report_page or "swap" in report_page.lower()
    assert (out / "cases-swap-inconsistent-1.html").is_file()


def test_the_audit_workspace_in_a_browser(browser, finished_audit, tmp_path):
    ws, _ = finished_audit
    out = tmp_path / "site"
    assert run_cli(["view", "-w", str(ws), "--export", str(out)]).exit_code == 0
    shots = _shots(tmp_path / "audit")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    for name in ("audit.html", "report.html", "index.html", "cases-all-1.html"):
        page.goto(out.as_uri() + "/" + name)
        page.screenshot(path=str(shots / f"audit-ws-{name}.png"), full_page=True)
    assert page.locator("table").count() >= 1
    page.goto(out.as_uri() + "/audit.html")
    assert page.locator("table").first.locator("tbody tr").count() == 2  # one EGA row per audited model
    assert errors == []
    page.close()


def test_the_paper_fixtures_in_a_browser(browser, tmp_path):
    """The paper's 17 models (Tables 2, S7, S9 rebuilt from the published counts) imported as runs: the report page
    holds every model beside the published rows, and each page loads without a console error."""
    from support.paper_tables import TABLE_2, TABLE_S7, TABLE_S9
    from support.report_workspace import build_workspace, write_predictions

    ws = build_workspace(tmp_path / "paper")
    (tmp_path / "predictions").mkdir()
    for path in write_predictions(tmp_path / "predictions"):
        imported = run_cli(["runs", "import", str(path), "-w", str(ws)])
        assert imported.exit_code == 0, imported.stderr
    out = tmp_path / "site"
    exported = run_cli(["view", "-w", str(ws), "--export", str(out)])
    assert exported.exit_code == 0, exported.stderr
    report_page = (out / "report.html").read_text()
    for row in TABLE_2:
        assert report_page.count(html.escape(row[0])) >= 2, row[0]  # the model's own row and its published one
    shots = _shots(tmp_path / "paper-shots")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    for name in ("index.html", "report.html", "cases-all-1.html", "cases-wrong-1.html"):
        page.goto(out.as_uri() + "/" + name)
        page.screenshot(path=str(shots / f"paper-{name}.png"), full_page=name != "report.html")
    page.goto(out.as_uri() + "/index.html")
    assert page.locator("table tbody tr").count() == len(TABLE_2) + len(TABLE_S7) + len(TABLE_S9)  # every run
    assert errors == []
    page.close()
