"""The served view shows the workspace as it is when a page is loaded, not as it was when the server started.

Before, ``cfkit view`` read the workspace once: a researcher who kept it open while a probe run or a study added
runs, or while a case was corrected, reloaded the runs page and the report and saw neither the new run nor the
change, and no page said when what it showed was read.
"""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from cfkit.view.data import ViewData
from cfkit.view.fresh import Current
from cfkit.view.site import Site
from cfkit.workspace import load_workspace
from support.view_server import serving
from support.workspace import MINI, run_cli

pytestmark = pytest.mark.timeout(300)

READ_AT = re.compile(r"read at\s+(\d\d:\d\d:\d\d)(?: [^ ]+)? on (\d{4}-\d\d-\d\d)")


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read().decode()


@pytest.fixture
def demo(tmp_path):
    if not (MINI / "cfkit.toml").is_file():
        pytest.skip("examples/mini is not in this checkout")
    root = tmp_path / "ws"
    assert run_cli(["demo", "--output", str(root)]).exit_code == 0
    return root


def test_a_run_made_while_the_view_is_served_is_on_the_reloaded_pages(demo, tmp_path):
    listed = json.loads(run_cli(["-w", str(demo), "runs", "list", "--json"]).stdout)
    baseline = next(r["id"] for r in listed if r["model"] == "baseline:random" and r["suite"] == "contextcanvas")
    answers = tmp_path / "answers.jsonl"
    answers.write_text(run_cli(["-w", str(demo), "runs", "export", baseline, "--format", "predictions"]).stdout)
    with serving(demo, recheck_s=0) as url:
        runs, report = _get(url + "index.html"), _get(url + "report.html")
        assert "openai:late-model" not in runs and "openai:late-model" not in report
        assert READ_AT.search(runs)
        ran = run_cli(["-w", str(demo), "probe", "run", "-m", f"replay:{answers}", "-o", "label=openai:late-model",
                       "-s", "contextcanvas"])
        assert ran.exit_code == 0, ran.stderr
        run_id = re.search(r"contextcanvas-[a-z0-9-]*late-model-[0-9a-f]+", ran.stdout + ran.stderr).group(0)
        runs, report = _get(url + "index.html"), _get(url + "report.html")
    assert f"<code>{run_id}</code>" in runs
    assert "openai:late-model" in report and run_id in report  # its row, and the run it comes from


def test_a_case_corrected_while_the_view_is_served_is_shown_corrected(demo):
    cases = demo / "cases.jsonl"
    first = json.loads(cases.read_text().splitlines()[0])
    with serving(demo, recheck_s=0) as url:
        before = _get(url + f"case-{first['id']}.html")
        assert first["question"] in before
        lines = cases.read_text().splitlines()
        lines[0] = json.dumps(first | {"question": "Which panel suits this photograph, corrected?"})
        cases.write_text("\n".join(lines) + "\n")
        after = _get(url + f"case-{first['id']}.html")
    assert "Which panel suits this photograph, corrected?" in after and first["question"] not in after


def test_the_workspace_is_read_again_only_when_it_changed(demo):
    ws = load_workspace(demo)
    current = Current(ws, lambda: Site(ViewData(ws)), recheck_s=0)
    site = current.site()
    assert current.site() is site and current.site() is site  # nothing changed: the pages rendered stay
    image = next(p for p in (demo / "images").iterdir() if p.suffix in (".jpg", ".png"))
    image.write_bytes(image.read_bytes() + b"\0")  # a case's image changed: its answers may now be stale
    changed = current.site()
    assert changed is not site and current.site() is changed
    (demo / "captions" / "a-new-caption.yaml").write_text("neutral: a new caption file\n")
    assert current.site() is not changed


def test_an_exported_page_says_when_the_workspace_was_read(demo, tmp_path):
    made = run_cli(["-w", str(demo), "view", "--export", str(tmp_path / "site")])
    assert made.exit_code == 0, made.stderr
    for name in ("index.html", "report.html", "cases-all-1.html"):
        assert READ_AT.search((tmp_path / "site" / name).read_text()), name
