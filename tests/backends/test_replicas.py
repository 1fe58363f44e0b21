"""Replicas: one model at several OpenAI-compatible endpoints is one run with one cache; requests are spread over
them with per-endpoint concurrency, and an endpoint that fails is backed off while the others answer."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest

from support.chat_api_server import ChatServer, Scripted, error_body
from support.probe_runs import (FAST, answering_as, many_cases, replicated, replies, reported_notes,
                                scripted_answer)
from support.workspace import run_cli

N = 24


@pytest.fixture
def many_ws(tmp_path):
    return many_cases(tmp_path / "ws", N)


class InFlight:
    """A script that answers after ``delay`` and records the most requests it held at once."""

    def __init__(self, delay: float = 0.05, fail_after: int | None = None):
        self.delay, self.fail_after = delay, fail_after
        self.now = self.most = 0
        self.lock = threading.Lock()

    def __call__(self, body, n):
        if self.fail_after is not None and n > self.fail_after:
            return Scripted(503, error_body("replica going down", kind="server_error"))
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(self.delay)
        with self.lock:
            self.now -= 1
        return scripted_answer(body, n)


def test_two_replicas_share_the_requests_within_their_concurrency_and_record_who_answered(many_ws):
    a_script, b_script = InFlight(), InFlight()
    with ChatServer(a_script) as a, ChatServer(b_script) as b:
        result = replicated(many_ws, [a.url, b.url], "-j", "3")
        assert result.exit_code == 0, result.stderr
    assert a.count + b.count == N  # every request sent once
    assert a.count >= N // 4 and b.count >= N // 4  # both took a share
    assert a_script.most <= 3 and b_script.most <= 3  # -j is per endpoint …
    assert a_script.most + b_script.most > 3  # … and both were busy at once
    stored = replies(many_ws)
    assert len(stored) == N and all(r["error"] is None for r in stored)
    assert {r["endpoint"] for r in stored} == {a.url, b.url}
    assert sum(r["endpoint"] == a.url for r in stored) == a.count
    run_id = json.loads(result.stdout)["run_id"]
    exported = [json.loads(line) for line in run_cli(["-w", str(many_ws), "runs", "export", run_id]).stdout.splitlines()]
    assert {line["endpoint"] for line in exported} == {a.url, b.url}
    shown = json.loads(run_cli(["-w", str(many_ws), "runs", "show", run_id, "--json"]).stdout)["run"]
    assert shown["options"]["options"]["base_url"] == [a.url, b.url]  # the endpoint list: provenance


def test_one_run_one_cache_whatever_the_endpoints(many_ws):
    with ChatServer(scripted_answer) as a, ChatServer(scripted_answer) as b:
        first = replicated(many_ws, [a.url, b.url])
        assert first.exit_code == 0, first.stderr
        sent = a.count + b.count
        with ChatServer(scripted_answer) as c:
            again = replicated(many_ws, [c.url, b.url, a.url])
            assert again.exit_code == 0, again.stderr
            assert c.count == 0
    assert a.count + b.count == sent  # nothing sent again: the same run, the same cache keys
    assert json.loads(again.stdout)["run_id"] == json.loads(first.stdout)["run_id"]


def test_endpoints_serving_the_model_from_different_weights_are_refused_in_one_line(many_ws):
    # (An endpoint that does not serve the name is left out: tests/backends/test_replicas_down.py.)
    with ChatServer(scripted_answer) as a, ChatServer(scripted_answer) as b:
        a.models = [{"id": "test-model", "root": "/models/qwen-a"}]
        b.models = [{"id": "test-model", "root": "/models/qwen-b"}]
        result = replicated(many_ws, [a.url, b.url])
        assert a.count == b.count == 0
    assert result.exit_code == 2 and "different weights" in result.stderr and "\n" not in result.stderr.strip()


def test_an_endpoint_that_starts_failing_is_backed_off_and_the_other_answers(many_ws):
    failing, healthy = InFlight(0.02, fail_after=3), InFlight(0.02)
    with ChatServer(failing) as a, ChatServer(healthy) as b:
        result = replicated(many_ws, [a.url, b.url], "-j", "2")
        assert result.exit_code == 0, result.stderr
    stored = replies(many_ws)
    assert len(stored) == N and all(r["error"] is None for r in stored)
    answered_by_a = sum(r["endpoint"] == a.url for r in stored)
    assert answered_by_a == 3 and b.count == N - 3
    # The failing endpoint was backed off: far fewer than one failed attempt per request reached it.
    assert a.count - 3 < N // 2
    # Said once for the run: how many requests, and how many attempts failed in all (a request may fail at the
    # failing endpoint twice before the other answers it).
    notes = [n for n in json.loads(result.stdout)["notes"] if "another replica" in n]
    [said] = notes
    found = re.fullmatch(rf"(\d+) of {N} requests sent got (its|their) answer from another replica after a failed "
                         r"attempt \((\d+) failed attempts? in all\)", said)
    assert found is not None, said
    requests, attempts = int(found.group(1)), int(found.group(3))
    assert found.group(2) == ("its" if requests == 1 else "their"), said
    assert 1 <= requests <= attempts <= a.count - 3


def test_batch_needs_one_endpoint(many_ws):
    with ChatServer(scripted_answer) as a, ChatServer(scripted_answer) as b:
        result = replicated(many_ws, [a.url, b.url], "--batch")
    assert result.exit_code == 2 and "give one --base-url" in result.stderr


def test_replicas_from_the_workspace_configuration(many_ws):
    with ChatServer(scripted_answer) as a, ChatServer(scripted_answer) as b:
        toml = many_ws / "cfkit.toml"
        toml.write_text(toml.read_text().replace("[probe]", f'[probe]\nbase_urls = ["{a.url}", "{b.url}"]', 1)
                        if "[probe]" in toml.read_text() else
                        toml.read_text() + f'\n[probe]\nbase_urls = ["{a.url}", "{b.url}"]\n')
        result = run_cli(["-w", str(many_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                          *FAST])
        assert result.exit_code == 0, result.stderr
        assert a.count > 0 and b.count > 0 and a.count + b.count == N


def test_replies_from_a_server_answering_as_another_model_make_the_run_not_clean_and_the_report_says_so(many_ws):
    with ChatServer(scripted_answer) as a, ChatServer(answering_as("other-model")) as b:
        result = replicated(many_ws, [a.url, b.url])
        assert b.count > 0
    assert result.exit_code == 1  # every request answered, but not all by the model asked
    run_id = json.loads(result.stdout)["run_id"]
    line = result.stderr.strip().splitlines()[-1]
    assert "2 different models" in line and f"'other-model' ({b.count} repl" in line and b.url in line
    assert f"'test-model' ({a.count} repl" in line and f"runs export {run_id}" in line
    shown = run_cli(["-w", str(many_ws), "runs", "show", run_id, "--json"])
    assert json.loads(shown.stdout)["servers"]["models"] == {"test-model": a.count, "other-model": b.count}
    assert "2 different models" in run_cli(["-w", str(many_ws), "runs", "show", run_id]).stdout
    notes = reported_notes(many_ws)
    assert any(n.startswith("openai:test-model: ") and "other-model" in n and b.url in n for n in notes), notes
    # The same from one endpoint that answers some requests as another model (a proxy's fallback): the run
    # continued against it is not clean either.
    with ChatServer(answering_as("fallback-model", every=3)) as c:
        again = run_cli(["-w", str(many_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                         "--base-url", c.url, *FAST])
    assert again.exit_code == 1 and "'fallback-model' (8 replies)" in again.stderr


def test_replies_from_several_server_builds_are_said_and_the_run_is_clean(many_ws):
    with ChatServer(answering_as(fingerprint="fp_one")) as a, ChatServer(answering_as(fingerprint="fp_two")) as b:
        result = replicated(many_ws, [a.url, b.url])
    assert result.exit_code == 0, result.stderr
    assert "2 server builds" in result.stderr and "fp_one" in result.stderr and "fp_two" in result.stderr
    run_id = json.loads(result.stdout)["run_id"]
    shown = json.loads(run_cli(["-w", str(many_ws), "runs", "show", run_id, "--json"]).stdout)["servers"]
    assert shown == {"models": {"test-model": N}, "builds": {"fp_one": a.count, "fp_two": b.count},
                     "other_than_asked": None}
    assert any("2 server builds" in n for n in reported_notes(many_ws))
