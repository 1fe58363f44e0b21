"""Replica sets that are partly down: a replica that cannot be used at start-up, or stops answering for the model
during the run, is left out in one line and the others do its work; the run ends complete (exit 0) when every
request got a reply, the left-out replica is named in the summary and in `runs show`, and a rerun sends only what
is missing. With every replica down the run is refused in one line (exit 2), nothing recorded."""

from __future__ import annotations

import json
import threading
import time

import pytest

from support.chat_api_server import ChatServer, ChatServerProcess, Scripted, error_body
from support.probe_runs import many_cases, replicated, replies, scripted_answer
from support.store_sql import table_rows
from support.transformers_server import free_port
from support.workspace import run_cli

N = 24


@pytest.fixture
def many_ws(tmp_path):
    return many_cases(tmp_path / "ws", N)


def shown(ws, run_id) -> tuple[str, list[str]]:
    """`runs show RUN` as text, and the run's notes as its --json gives them."""
    text = run_cli(["-w", str(ws), "runs", "show", run_id]).stdout
    record = json.loads(run_cli(["-w", str(ws), "runs", "show", run_id, "--json"]).stdout)["run"]
    return " ".join(text.split()), record["notes"]["backend_notes"]


def no_such_model(body, n):
    return Scripted(404, error_body("The model `test-model` does not exist.", kind="NotFoundError"))


def test_replicas_down_or_serving_another_model_at_start_are_left_out_and_the_others_answer_everything(many_ws):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with ChatServer(scripted_answer) as a, ChatServer(scripted_answer) as other:
        other.models = [{"id": "other-model", "object": "model"}]
        result = replicated(many_ws, [dead, a.url, other.url])
        assert other.count == 0 and a.count == N
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    said_dead = [line for line in lines if f"replica {dead} is left out" in line]
    said_other = [line for line in lines if f"replica {other.url} is left out" in line]
    assert len(said_dead) == len(said_other) == 1
    assert f"(nothing is listening at {dead} (connection refused)" in said_dead[0]
    assert "serves other-model, not 'test-model'" in said_other[0] and "1 other replica" in said_other[0]
    summary = json.loads(result.stdout)
    assert (summary["status"], summary["missing"], summary["errors"]) == ("done", 0, 0)
    assert any(dead in note for note in summary["notes"]) and any(other.url in note for note in summary["notes"])
    stored = replies(many_ws)
    assert len(stored) == N and {r["endpoint"] for r in stored} == {a.url} and all(r["error"] is None for r in stored)
    text, notes = shown(many_ws, summary["run_id"])
    assert f"replicas replica {dead} is left out of this run (nothing is listening at {dead}" in text
    assert sum(n.startswith("replica ") for n in notes) == 2
    # The same command with every replica up: the same run, nothing sent again.
    with ChatServer(scripted_answer) as a2, ChatServer(scripted_answer) as b2:
        again = replicated(many_ws, [a2.url, b2.url])
        assert a2.count == b2.count == 0
    assert again.exit_code == 0 and json.loads(again.stdout)["run_id"] == summary["run_id"]
    assert "left out" not in again.stderr


def test_every_replica_down_is_refused_in_one_line_naming_each_and_nothing_is_recorded(many_ws):
    dead = [f"http://127.0.0.1:{free_port()}/v1" for _ in range(2)]
    with ChatServer(scripted_answer) as other:
        other.models = [{"id": "other-model", "object": "model"}]
        result = replicated(many_ws, [*dead, other.url])
        assert other.count == 0
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "no replica can answer for 'test-model'" in line and all(url in line for url in [*dead, other.url])
    assert "Start the servers" in line
    db = many_ws / ".cfkit" / "cfkit.db"
    assert not db.exists() or table_rows(many_ws, "runs", "id") == []


def test_a_replica_that_says_it_has_no_such_model_mid_run_is_left_out_and_the_run_ends_complete(many_ws):
    with ChatServer(scripted_answer) as a, ChatServer(no_such_model) as gone:
        result = replicated(many_ws, [a.url, gone.url], "-j", "2")
        assert 1 <= gone.count <= 2  # what it held when it first said so; nothing after
    assert result.exit_code == 0, result.stderr
    stored = replies(many_ws)
    assert len(stored) == N and {r["endpoint"] for r in stored} == {a.url} and all(r["error"] is None for r in stored)
    line = next(line for line in result.stderr.splitlines() if f"replica {gone.url}" in line)
    assert "left out during the run (it answered HTTP 404: The model `test-model` does not exist.)" in line
    text, _ = shown(many_ws, json.loads(result.stdout)["run_id"])
    assert f"replicas replica {gone.url} was left out during the run" in text
    # When it is the last replica in use, the run stops with the one-endpoint line.
    ws2 = many_cases(many_ws.parent / "ws2", 4)
    with ChatServer(no_such_model) as b, ChatServer(no_such_model) as c:
        stopped = replicated(ws2, [b.url, c.url])
    assert stopped.exit_code == 1 and "has no model 'test-model' (HTTP 404" in stopped.stderr.strip().splitlines()[-1]


def test_a_replica_killed_mid_run_its_requests_go_to_the_other_and_the_summary_names_it(many_ws):
    with ChatServerProcess(latency=0.05) as doomed, ChatServer(scripted_answer, latency=0.05) as b:
        killed_at: list[int] = []

        def kill_after_three() -> None:
            deadline = time.monotonic() + 60
            while b.count < 3 and time.monotonic() < deadline:
                time.sleep(0.005)
            doomed.kill()  # SIGKILL: the request it holds is cut off, then nothing listens
            killed_at.append(b.count)

        killer = threading.Thread(target=kill_after_three, daemon=True)
        killer.start()
        result = replicated(many_ws, [doomed.url, b.url], "-j", "1")
        killer.join(timeout=60)
    assert killed_at and killed_at[0] < N - 4  # it died with requests still to answer
    assert result.exit_code == 0, result.stderr
    stored = replies(many_ws)
    assert len(stored) == N and all(r["error"] is None for r in stored)
    assert {r["endpoint"] for r in stored} == {doomed.url, b.url}
    line = next(line for line in result.stderr.splitlines() if f"replica {doomed.url} failed" in line)
    assert "ConnectionError" in line and "each failed attempt was sent again" in line
    text, _ = shown(many_ws, json.loads(result.stdout)["run_id"])
    assert f"replicas replica {doomed.url} failed" in text


def answers_first(k):
    def script(body, n):
        return scripted_answer(body, n) if n <= k else no_such_model(body, n)
    return script


def test_a_run_left_incomplete_by_its_replicas_keeps_what_it_has_and_the_rerun_sends_only_the_rest(many_ws):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with ChatServer(answers_first(10)) as a:
        first = replicated(many_ws, [a.url, dead], "-j", "1")
    assert first.exit_code == 1  # its last replica said it had no such model: the run stopped there
    assert f"replica {dead} is left out" in first.stderr and "has no model 'test-model'" in first.stderr
    (run,) = table_rows(many_ws, "runs", "id, status")
    assert run["status"] == "failed" and len(replies(many_ws)) == 10
    with ChatServer(scripted_answer) as c, ChatServer(scripted_answer) as d:
        again = replicated(many_ws, [c.url, d.url])
        assert c.count + d.count == N - 10  # only what had no reply
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout)["run_id"] == run["id"]
    stored = replies(many_ws)
    assert len(stored) == N and all(r["error"] is None for r in stored)
    assert sum(r["endpoint"] == a.url for r in stored) == 10  # what the first run stored is kept


def test_study_run_goes_on_over_the_replicas_that_answer_and_names_the_one_left_out(many_ws):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with ChatServer(scripted_answer) as a:
        study = many_ws / "s.toml"
        study.write_text(f"[endpoints.up]\nurl='{a.url}'\n[endpoints.down]\nurl='{dead}'\n"
                         "[models.m]\nmodel='openai:test-model'\nendpoints=['up', 'down']\n[suites.contextcanvas]\n")
        result = run_cli(["-w", str(many_ws), "study", "run", str(study)])
        assert a.count == N
    assert result.exit_code == 0, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "left out" in x]
    assert line.startswith("warning: m contextcanvas: replica ") and dead in line and "(connection refused)" in line


def failing(body, n):
    return Scripted(500, error_body("upstream crashed", kind="server_error"))


def test_the_last_replica_left_that_keeps_failing_fails_each_request_as_one_server_would(many_ws):
    """With the other replica left out at start, the one left is one server: each request's own retries
    (-o backoff=0.01, max_retries=2) pace it, not the pool's back-off of up to 30 s a failure, which made every
    attempt wait (a run of 24 failing requests took minutes where one server fails them in about a second)."""
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with ChatServer(failing) as a:
        started = time.monotonic()
        result = replicated(many_ws, [dead, a.url])
        took = time.monotonic() - started
        assert a.count == N * 3  # each request: its first attempt and two retries
    assert result.exit_code == 1, result.stderr
    assert took < 60, f"{took:.0f} s"  # the pool's back-off alone would be minutes; slack for a loaded machine
    summary = json.loads(result.stdout)
    assert (summary["status"], summary["errors"]) == ("incomplete", N)
    assert any(f"replica {dead} is left out" in note for note in summary["notes"])


def test_a_replica_left_out_at_start_takes_no_share_of_the_runs_concurrency(many_ws):
    """-j applies at each replica in use: with one of two left out, the run keeps -j in flight (and says so on its
    progress bar), not -j for each replica given; with both up, 2 × -j."""
    from cfkit.probe.job import prepare_probe
    from cfkit.store import Store
    from cfkit.workspace import load_workspace

    ws = load_workspace(many_ws)
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with ChatServer(scripted_answer) as a, ChatServer(scripted_answer) as b, Store(ws.db_path) as store:
        for urls, expected in (([dead, a.url], 3), ([a.url, b.url], 6)):
            job = prepare_probe(ws, "openai:test-model", "contextcanvas", options={"base_url": urls}, concurrency=3)
            assert job.planned(store, lazy=True).concurrency == expected, urls
