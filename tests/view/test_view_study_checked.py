"""The served study page reuses its check of the servers for a short while and says when it was made.

Before, every load of ``cfkit view --study FILE``'s study page asked the endpoint of each run not yet started for
its models: with an endpoint behind a firewall that drops packets, each load waited 5 s, and nothing said how
fresh the "not reachable" it showed was.
"""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from cfkit.study import load_study
from support.hostile_http_server import HostileServer, silent
from support.view_server import serving
from support.workspace import run_cli, write_workspace

pytestmark = pytest.mark.timeout(180)

CHECKED = re.compile(r"Servers checked at (\d\d:\d\d:\d\d) on \d{4}-\d\d-\d\d")


def _load(url: str) -> tuple[float, str]:
    began = time.monotonic()
    with urllib.request.urlopen(url + "study.html", timeout=60) as response:
        body = response.read().decode()
    return time.monotonic() - began, " ".join(body.split())


@pytest.fixture
def mute_study(tmp_path):
    root = write_workspace(tmp_path / "ws")
    with HostileServer(lambda body: silent) as mute:
        (root / "study.toml").write_text(f"name = 'pilot'\n[models.m]\nmodel = 'openai:test-model'\n"
                                         f"endpoint = '{mute.url}'\n[suites.contextcanvas]\n")
        yield root, mute


def test_a_load_within_the_window_reuses_the_check_and_names_its_time(mute_study):
    root, mute = mute_study
    with serving(root, (load_study(root / "study.toml", root),)) as url:
        first_s, first = _load(url)
        asked = mute.count
        second_s, second = _load(url)
    assert asked == 1 and first_s >= 4  # the first load waited for the silent server (5 s)
    assert mute.count == 1 and second_s < 2, second_s  # the second asked nothing and did not wait
    assert "did not answer within 5 s (timed out)" in second
    when = CHECKED.search(first)
    assert when is not None and CHECKED.search(second).group(1) == when.group(1)


def test_after_the_window_the_servers_are_asked_again(mute_study, monkeypatch):
    import cfkit.view.study

    monkeypatch.setattr(cfkit.view.study, "KEEP_S", 0.0)
    root, mute = mute_study
    with serving(root, (load_study(root / "study.toml", root),)) as url:
        _load(url)
        second_s, second = _load(url)
    assert mute.count == 2 and second_s >= 4 and CHECKED.search(second)


def test_an_export_says_when_its_servers_were_checked(mute_study, tmp_path):
    root, _ = mute_study
    made = run_cli(["-w", str(root), "view", "--study", "study.toml", "--export", str(tmp_path / "site")])
    assert made.exit_code == 0, made.stderr
    assert CHECKED.search(" ".join((tmp_path / "site" / "study.html").read_text().split()))


def test_the_check_time_fits_the_window(mute_study, tmp_path, browser):
    root, _ = mute_study
    made = run_cli(["-w", str(root), "view", "--study", "study.toml", "--export", str(tmp_path / "site")])
    assert made.exit_code == 0, made.stderr
    for width in (1280, 390):
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto((tmp_path / "site" / "study.html").as_uri())
        said = page.locator("p.checked")
        assert CHECKED.search(said.inner_text())
        box = said.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, (width, box)
        assert page.evaluate("document.documentElement.scrollWidth") <= width  # the page never scrolls sideways
        page.close()
