"""``cfkit edit`` with a remote engine whose server gives no answer at all: one connection is tried before the
first call (as ``probe run`` checks its endpoint), and when none opens nothing is sent, nothing is recorded, and
one line in the probe's words (cfkit.backends.no_answer) names the server and what to type to fix it (exit 1, as
``probe run``). ``--dry-run`` checks nothing (it sends nothing, as ``probe run --dry-run``), and ``auto`` still
falls back from such a server to its next engine."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("openai", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.images_api_server import FullListener, ImagesAPI, serve, unused_port_url
from support.store_sql import table_rows
from support.workspace import run_cli

SPECS = ("TX01", "TX02", "TX03", "TX04", "TX05")
FIX = "-o base_url=URL (or base_url in cfkit.toml's [edit.engines.openai])"


def _five(ws: Path, url: str | None = None, *, engine: str = "openai", retries: int = 3, backoff: float = 2.0) -> Path:
    """TX01 … TX05, the same edit of case T001, with the openai engine (at ``url``, when given) and its retries
    and back-off: the check must stop the edits before any of them is spent."""
    spec = (ws / "interventions" / "TX01.yaml").read_text()
    for spec_id in SPECS[1:]:
        (ws / "interventions" / f"{spec_id}.yaml").write_text(spec.replace("id: TX01", f"id: {spec_id}"))
    config = ws / "cfkit.toml"
    base = f'base_url = "{url}"\n' if url else ""
    config.write_text(config.read_text() + f'\n[edit]\nengine = "{engine}"\nauto = ["openai", "classical"]\n\n'
                                           f'[edit.engines.openai]\nbackoff = {backoff}\nmax_retries = {retries}\n'
                                           f'timeout = 0.3\n{base}')
    return ws


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _rows(ws: Path) -> list[tuple]:
    if not (ws / ".cfkit" / "cfkit.db").exists():
        return []
    return [tuple(r.values()) for r in table_rows(ws, "edits", "spec_id, status, engine", order_by="id")]


def _timed(args: list[str]):
    started = time.perf_counter()
    result = run_cli(args)
    return result, time.perf_counter() - started


@pytest.mark.parametrize("which", [["--all"], ["--pending"], ["TX01", "TX02", "TX03"]], ids=["all", "pending", "ids"])
def test_a_port_nothing_listens_on_stops_a_batch_before_anything_is_sent(tiny_ws, which):
    url = unused_port_url()
    ws = _five(tiny_ws, url)
    result, elapsed = _timed(["edit", *which, "-w", str(ws)])
    assert result.exit_code == 1, result.output  # as probe run for the same
    assert elapsed < 5, elapsed  # before: 3 specs x 4 attempts with back-off (about 43 s)
    assert "Traceback" not in result.output
    assert _rows(ws) == []  # nothing sent, so no failed edit recorded
    assert "spent:" not in result.stderr  # nothing was sent: nothing that may be billed
    asked = len(which) if which[0].startswith("TX") else 5
    assert f"{asked} specs: {asked} not asked." in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    # the probe's words (cfkit.backends.no_answer), with what sets this engine's server
    assert last.startswith(f"error: openai: nothing is listening at {url} (connection refused): start the server "), last
    assert f"or fix {FIX}; nothing was sent. 0 of {asked} specs done, no edit was received." in last
    assert "once the server answers, run 'cfkit edit --pending'" in last or "'cfkit edit TX01 TX02 TX03'" in last


def test_one_spec_stops_in_one_line_and_records_nothing(tiny_ws):
    url = unused_port_url()
    ws = _five(tiny_ws, url)
    result, elapsed = _timed(["edit", "TX01", "-w", str(ws)])
    assert result.exit_code == 1, result.output
    assert elapsed < 5, elapsed
    assert _rows(ws) == []
    assert result.stderr.strip().splitlines() == [
        f"error: openai: nothing is listening at {url} (connection refused): start the server of the images API there "
        f"(POST /images/edits), or fix {FIX}; nothing was sent."]


def test_the_line_names_openai_base_url_when_the_server_came_from_it(tiny_ws, monkeypatch):
    url = unused_port_url()
    ws = _five(tiny_ws)
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    result = run_cli(["edit", "TX01", "-w", str(ws)])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().endswith("or fix $OPENAI_BASE_URL (or -o base_url=URL); nothing was sent."), \
        result.stderr


def test_a_connection_that_never_opens_stops_within_the_engine_timeout(tiny_ws):
    with FullListener() as listener:
        ws = _five(tiny_ws, listener.url)
        result, elapsed = _timed(["edit", "--all", "--json", "-w", str(ws)])
    assert result.exit_code == 1, result.output
    assert elapsed < 5, elapsed  # one check of 0.3 s (the engine's timeout, under the check's 5 s)
    assert _rows(ws) == []
    data = json.loads(result.stdout)
    assert [d["status"] for d in data["specs"]] == ["not asked"] * 5
    assert data["spent"]["calls"] == 0
    assert data["stopped"].startswith(f"openai: {listener.url} did not answer within 0.3 s (timed out): check that the "
                                      f"server is up and not stuck, that no firewall drops the connection, and {FIX}")


def test_dry_run_checks_nothing_and_sends_nothing(tiny_ws):
    ws = _five(tiny_ws, unused_port_url())
    for args in (["TX01"], ["--all"]):
        result = run_cli(["edit", *args, "--dry-run", "-w", str(ws)])
        assert result.exit_code == 0, result.output
        assert "dry run: nothing was sent and nothing was written." in result.stderr
    assert not (ws / ".cfkit" / "cfkit.db").exists()


def test_auto_falls_back_from_a_server_that_gives_no_answer(tiny_ws):
    url = unused_port_url()
    ws = _five(tiny_ws, url, engine="auto")
    result = run_cli(["edit", "TX01", "TX02", "-w", str(ws)])
    assert result.exit_code == 0, result.output
    assert [(spec, status, engine) for spec, status, engine in _rows(ws)] == [
        ("TX01", "ok", "classical"), ("TX02", "ok", "classical")]
    assert f"TX01: openai unreachable: openai: nothing is listening at {url} (connection refused)" in result.stderr
    assert "TX02: openai unreachable" in result.stderr
    assert "spent:" not in result.stderr
    shown = run_cli(["edits", "show", "TX01", "--json", "-w", str(ws)])
    assert f"openai unreachable: openai: nothing is listening at {url}" in json.loads(shown.stdout)[0]["fallback"]


def test_a_server_that_answers_anything_is_sent_the_edit(tiny_ws):
    """The check asks for a connection only: the images server here answers the check's probe of nothing at all,
    and 501 to any GET, yet it is there; the edit is sent and made."""
    api = ImagesAPI()
    url, server = serve(api)
    try:
        ws = _five(tiny_ws, url)
        result = run_cli(["edit", "TX01", "-w", str(ws)])
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 0, result.output
    assert len(api.requests) == 1
    assert _rows(ws) == [("TX01", "ok", "openai")]
