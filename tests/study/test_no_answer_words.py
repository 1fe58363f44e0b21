"""An endpoint that gives no answer at all is said in the same words by a study (``study validate``/``status``)
and by ``probe run`` (its start-up check, a replica left out at start): nothing listening, a host not known and
no answer in time stay told apart, and only where the url is fixed differs.

Before, a study said ``URL/models did not answer (<urlopen error [Errno 111] Connection refused>); start the
server or fix the url``, probe run's start-up check ``nothing is listening at URL (connection refused): ...``, and
a replica left out ``it did not answer GET /models: ConnectionError: Cannot connect to host ...``.
"""

from __future__ import annotations

import json
import time

import pytest

from cfkit.backends import model_lists, replicas
from cfkit.backends.no_answer import NO_HOST, REFUSED, TIMED_OUT, no_answer
from cfkit.study import load_study
from cfkit.study.check import STUDY_URL, check_endpoints
from support.chat_api_server import ChatServer
from support.hostile_http_server import HostileServer, silent
from support.probe_runs import many_cases, replicated, scripted_answer
from support.transformers_server import free_port
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(120)


def study_says(tmp_path, url: str, timeout: float = 5.0) -> str:
    path = tmp_path / "study.toml"
    path.write_text(f"[models.m]\nmodel = 'openai:test-model'\nendpoint = '{url}'\n[suites.contextcanvas]\n")
    return check_endpoints(load_study(path), timeout=timeout).endpoints[url]


def what(line: str) -> str:
    """The words of a line before where the url is fixed."""
    return line.split(", or fix ")[0].split(": check ")[0]


def test_nothing_listening_is_said_alike_by_a_study_and_probe_run(tmp_path):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    said = study_says(tmp_path, dead)
    assert said == no_answer(dead, REFUSED, url=STUDY_URL)
    assert said.startswith(f"nothing is listening at {dead} (connection refused): start the server")
    ws = many_cases(tmp_path / "ws", 4)
    alone = run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                     "--base-url", dead])
    assert alone.exit_code != 0
    start_up = next(line for line in alone.stderr.splitlines() if "nothing is listening" in line)
    with ChatServer(scripted_answer) as up:
        result = replicated(ws, [dead, up.url])
    assert result.exit_code == 0, result.stderr
    left_out = next(line for line in result.stderr.splitlines() if f"replica {dead} is left out" in line)
    assert what(no_answer(dead, REFUSED)) in start_up and f"or fix --base-url" in start_up
    assert f"({no_answer(dead, REFUSED)})" in left_out  # not "ConnectionError: Cannot connect to host ..."
    assert what(said) == what(no_answer(dead, REFUSED))
    assert any(no_answer(dead, REFUSED) in n for n in json.loads(result.stdout)["notes"])


def test_a_server_that_never_answers_is_said_alike_with_the_time_waited(tmp_path, monkeypatch):
    monkeypatch.setattr(replicas, "MODELS_DEADLINE_S", 1.0)  # what the check waits
    monkeypatch.setattr(model_lists, "MODELS_DEADLINE_S", 1.0)  # what its reading says it waited
    with HostileServer(lambda body: silent) as mute:
        started = time.monotonic()
        said = study_says(tmp_path, mute.url, timeout=1.0)
        assert time.monotonic() - started < 4
        exchange = replicas._run_now(replicas._listings([replicas.Replica(mute.url, _client(mute.url))]))
    assert said == no_answer(mute.url, TIMED_OUT, seconds=1.0, url=STUDY_URL)
    assert said.startswith(f"{mute.url} did not answer within 1 s (timed out)")
    reading = model_lists.read_exchange(exchange[0][1], "test-model", mute.url)
    assert reading.why == no_answer(mute.url, TIMED_OUT, seconds=1.0)
    assert what(reading.why) == what(said)


def test_a_host_not_known_is_told_apart(tmp_path):
    url = "http://no-such-host.invalid:8000/v1"
    said = study_says(tmp_path, url)
    assert said == no_answer(url, NO_HOST, url=STUDY_URL)
    assert "is not known (DNS)" in said and "connection refused" not in said and "timed out" not in said
    import asyncio

    assert asyncio.run(_client(url).endpoint_problem(url)) == no_answer(url, NO_HOST)  # probe run's start-up check
    exchange = replicas._run_now(replicas._listings([replicas.Replica(url, _client(url))]))
    assert model_lists.read_exchange(exchange[0][1], "m", url).why == no_answer(url, NO_HOST)


def _client(url: str):
    from cfkit.backends.http import JSONClient

    return JSONClient(url, {}, deadline=5)
