"""What the view's test modules share: a headless Chromium (Debian's, driven by Playwright), one per module.

The browser tests skip, saying why, where Chromium or Playwright is missing; CI installs both. A module builds
its workspaces before it asks for the browser: the probe engine runs its own event loop, which Playwright's
would be in the way of on the same thread.
"""

from __future__ import annotations

import shutil

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium); the browser tests need it")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the 'dev' extra has it)")
    with sync_api.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            yield instance
        finally:
            instance.close()
