"""A run the store marks running is shown by whether its sender lives: one rule (cfkit.store.leases) for
'runs list', 'runs show', 'study status', the report and the view, with real processes killed and alive."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cfkit.store import Store, leases
from support.chat_api_server import ChatServer, listing
from support.probe_runs import _cli_process, many_cases, scripted_answer
from support.store_sql import table_rows
from support.workspace import REPO, run_cli

pytestmark = pytest.mark.timeout(300)

GONE = "interrupted (its process is gone)"


def _until(condition, what: str, proc: subprocess.Popen | None = None, seconds: float = 120) -> None:
    """Poll ``condition`` until it holds (a loaded machine may be slow); fail naming ``what`` if it never does."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        assert proc is None or proc.poll() is None, (what, proc.communicate())
        time.sleep(0.05)


def _stored(ws: Path) -> int:
    """Replies stored so far (0 while the store or its tables are still being made)."""
    try:
        return len(table_rows(ws, "replies", "run_id"))
    except sqlite3.Error:
        return 0


def _listed(ws: Path) -> list[dict]:
    done = run_cli(["-w", str(ws), "runs", "list", "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_a_killed_probe_run_is_shown_as_interrupted_everywhere_with_the_way_to_resume(tmp_path):
    ws = many_cases(tmp_path / "ws", 60)
    with ChatServer(scripted_answer, latency=0.2) as server:
        proc = _cli_process(ws, server.url, "--concurrency", "2")
        try:
            _until(lambda: _stored(ws) >= 4, "four replies stored", proc)
            # While it sends, every view says it runs.
            [live] = _listed(ws)
            assert live["status"] == "running" and live["shown_status"] == "running", live
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    [run] = _listed(ws)
    assert run["status"] == "running" and run["shown_status"] == GONE, run  # the store still says running

    listed = run_cli(["-w", str(ws), "runs", "list"])
    assert listed.exit_code == 0
    assert "interrupted" in listed.stdout and "running" not in listed.stdout, listed.stdout
    assert "same 'cfkit probe run'" in " ".join(listed.stderr.split()), listed.stderr

    shown = run_cli(["-w", str(ws), "runs", "show", run["id"]])
    text = " ".join(shown.stdout.split())
    assert shown.exit_code == 0 and GONE in text and "same 'cfkit probe run'" in text, text
    assert json.loads(run_cli(["-w", str(ws), "runs", "show", run["id"], "--json"]).stdout)["shown_status"] == GONE

    # The view's runs page says it too (it showed the stored "running" for a process long gone).
    assert run_cli(["-w", str(ws), "view", "--export", str(tmp_path / "site")]).exit_code == 0
    page = (tmp_path / "site" / "index.html").read_text()
    assert f'<td data-label="Status">{GONE}' in page and '<td data-label="Status">running' not in page, page

    exported = run_cli(["-w", str(ws), "runs", "export", run["id"], "--output", str(tmp_path / "run.jsonl")])
    assert exported.exit_code == 0 and f"is {GONE}" in " ".join(exported.stderr.split()), exported.stderr

    for spec in (ws / "interventions").glob("*.yaml"):  # about cases this workspace does not have
        spec.unlink()
    report = run_cli(["-w", str(ws), "report", "--format", "json", "--resamples", "50"])
    assert report.exit_code in (0, 1), report.output
    said = report.stdout + report.stderr
    assert f"is {GONE}" in said and "is running" not in said, said[:2000]


def _study(ws: Path, url: str) -> Path:
    path = ws / "study.toml"
    path.write_text(f"[models.a]\nmodel = 'openai:model-a'\nendpoint = '{url}'\n[suites.contextcanvas]\n")
    return path


def _study_process(ws: Path, path: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cfkit", "-w", str(ws), "study", "run", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


def test_study_status_names_the_process_sending_a_run_and_after_a_kill_says_it_is_gone(tmp_path):
    ws = many_cases(tmp_path / "ws", 200)  # 15 s of sending at least: room for the checks on a loaded machine
    with ChatServer(scripted_answer, latency=0.3) as server:
        server.models = listing("model-a")  # study run asks the endpoint for its models first
        path = _study(ws, server.url)
        proc = _study_process(ws, path)
        try:
            _until(lambda: _stored(ws) >= 2, "two replies stored", proc)
            status = run_cli(["-w", str(ws), "study", "status", str(path)])
            lines = " ".join(status.output.split())
            assert status.exit_code == 1
            assert f"sent by process {proc.pid} on this machine" in lines, lines
            # The last line does not invite a second run unawares: it says another process sends it, and what
            # a second 'study run' would do.
            assert "being sent by another process now" in lines and "continue with" not in lines, lines
            assert "share their requests" in lines, lines
            [run] = _listed(ws)
            assert run["shown_status"] == "running", run
            shown = " ".join(run_cli(["-w", str(ws), "runs", "show", run["id"]]).stdout.split())
            assert f"sent by process {proc.pid} on this machine" in shown, shown
            assert "not sent yet" in shown, shown
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    status = run_cli(["-w", str(ws), "study", "status", str(path), "--json"])
    [state] = json.loads(status.stdout)
    assert state["state"] == "incomplete" and state["detail"] == GONE, state
    assert "continue with: cfkit" in " ".join(status.stderr.split()), status.stderr


def _store_with_a_run(tmp_path: Path) -> tuple[Path, str]:
    """A workspace whose store holds one finished baseline run; its id."""
    ws = many_cases(tmp_path / "ws", 3)
    done = run_cli(["-w", str(ws), "probe", "run", "-m", "baseline:always-no", "-s", "contextcanvas", "--json"])
    assert done.exit_code == 0, done.output
    return ws, json.loads(done.stdout)["run_id"]


def _lease(ws: Path, run_id: str, owner: str, expires_in: float) -> dict:
    with Store(ws / ".cfkit" / "cfkit.db") as store:
        with store.transaction() as tx:
            leases.take(tx, run_id, [("*sending*", owner, "*sending*")], owner, time.time() + expires_in)
        return leases.sending_of(store, [run_id])[run_id]


def test_a_reused_process_id_is_not_taken_for_the_sender(tmp_path):
    ws, run_id = _store_with_a_run(tmp_path)
    here = socket.gethostname()
    pid = os.getpid()  # a process that exists, but started at another time than the owner says
    assert leases.process_started(pid) is not None  # (Linux: /proc tells when a process started)
    reused = _lease(ws, run_id, f"{here}:{pid}:1:ab12cd34", expires_in=60)
    assert not reused.live and reused.shown() == GONE
    this = leases.owner_id()
    assert _lease(ws, run_id, this, expires_in=-60).shown() == "running"  # alive, even past its lease


def test_a_run_sent_from_another_host_is_running_there_until_its_lease_expires(tmp_path):
    ws, run_id = _store_with_a_run(tmp_path)
    other = _lease(ws, run_id, "lab-box.example:4242:99:ab12cd34", expires_in=60)
    assert other.shown() == "running on lab-box.example (cannot be checked from here)"
    with Store(ws / ".cfkit" / "cfkit.db") as store:
        with store.transaction() as tx:
            leases.release_all(tx, run_id, "lab-box.example:4242:99:ab12cd34")
    assert _lease(ws, run_id, "lab-box.example:4242:99:ab12cd34", expires_in=-1).shown() == GONE
