"""One reading of a server's model list (``GET /models``): ``cfkit study validate`` and ``study status`` say of an
endpoint's answer what ``cfkit probe run`` says of the same answer (a replica set's start-up check, ``--batch``'s
check), in the same words. The study used to read the list by its own copy: it passed an endpoint that lists no
model (``probe run --batch`` refuses it), said nothing of a replica that answers without a model list or with an
error status (``probe run`` leaves it out), and named a missing model in other words."""

from __future__ import annotations

import json

import pytest

from support.batch_api_server import BatchServer
from support.chat_api_server import ChatServer, listing
from support.probe_runs import FAST, many_cases, scripted_answer
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(120)

ENV = {"OPENAI_API_KEY": "sk-test", "COLUMNS": "250"}


def one_endpoint_study(ws, url: str, name: str):
    path = ws / "study.toml"
    path.write_text(f"[endpoints.e]\nurl = '{url}'\n[models.m]\nmodel = 'openai:{name}'\nendpoint = 'e'\n"
                    "[suites.contextcanvas]\n")
    return path


@pytest.mark.parametrize("models,why", [
    (listing("model-b", "other-model"), "it serves model-b, other-model, not 'modle-b'; did you mean 'model-b'?"),
    ([], "it serves nothing, not 'modle-b'"),  # an empty list: the study passed it, --batch refused it
], ids=["others", "empty"])
def test_study_and_probe_run_batch_say_the_same_of_a_list_without_the_model(tmp_path, models, why):
    ws = many_cases(tmp_path / "ws", 4)
    with BatchServer(scripted_answer) as server:
        server.models = models
        path = one_endpoint_study(ws, server.url, "modle-b")
        validate = run_cli(["-w", str(ws), "study", "validate", str(path), "--json"], env=ENV)
        status = run_cli(["-w", str(ws), "study", "status", str(path), "--json"], env=ENV)
        batch = run_cli(["-w", str(ws), "probe", "run", "-m", "openai:modle-b", "-s", "contextcanvas", "--base-url",
                         server.url, *FAST, "--batch"], env=ENV)
        assert server.calls("POST", "/files") == server.calls("POST", "/batches") == 0
    assert batch.exit_code == 2 and f"{server.url} cannot answer for 'modle-b' ({why})." in batch.stderr
    assert validate.exit_code == 1, validate.output
    (problem,) = json.loads(validate.stdout)["problems"]
    assert f"endpoint e ({server.url}) cannot answer for 'modle-b' ({why});" in problem, problem
    assert status.exit_code == 1
    (state,) = json.loads(status.stdout)
    assert state["state"] == "not started" and f"cannot answer for 'modle-b' ({why});" in state["detail"]


def _garbled(server: ChatServer) -> None:
    server.models = "not a list"  # answered {"object": "list", "data": "not a list"}


@pytest.mark.parametrize("spoil,why", [
    (_garbled, "it answered GET /models without a model list"),
], ids=["no-list"])
def test_study_and_probe_run_leave_out_the_same_replica_in_the_same_words(tmp_path, spoil, why):
    ws = many_cases(tmp_path / "ws", 4)
    with ChatServer(scripted_answer) as good, ChatServer(scripted_answer) as bad:
        good.models = listing("model-a")
        spoil(bad)
        path = ws / "study.toml"
        path.write_text(f"[endpoints.good]\nurl = '{good.url}'\n[endpoints.bad]\nurl = '{bad.url}'\n"
                        "[models.a]\nmodel = 'openai:model-a'\nendpoints = ['good', 'bad']\n[suites.contextcanvas]\n")
        validate = run_cli(["-w", str(ws), "study", "validate", str(path), "--json"], env=ENV)
        live = run_cli(["-w", str(ws), "probe", "run", "-m", "openai:model-a", "-s", "contextcanvas",
                        "--base-url", good.url, "--base-url", bad.url, *FAST], env=ENV)
        assert bad.count == 0
    assert live.exit_code == 0, live.output
    assert f"replica {bad.url} is left out of this run ({why})" in live.stderr
    assert validate.exit_code == 0, validate.output
    assert json.loads(validate.stdout)["notes"] == [f"model a: replica bad would be left out of its runs ({why})"]


def test_a_replica_set_none_of_which_lists_the_model_is_refused_with_each_ones_reason(tmp_path):
    ws = many_cases(tmp_path / "ws", 4)
    with ChatServer(scripted_answer) as a, ChatServer(scripted_answer) as b:
        a.models, b.models = listing("model-b"), []
        path = ws / "study.toml"
        path.write_text(f"[endpoints.a]\nurl = '{a.url}'\n[endpoints.b]\nurl = '{b.url}'\n"
                        "[models.m]\nmodel = 'openai:modle-b'\nendpoints = ['a', 'b']\n[suites.contextcanvas]\n")
        validate = run_cli(["-w", str(ws), "study", "validate", str(path), "--json"], env=ENV)
        live = run_cli(["-w", str(ws), "probe", "run", "-m", "openai:modle-b", "-s", "contextcanvas",
                        "--base-url", a.url, "--base-url", b.url, *FAST], env=ENV)
    why_a, why_b = "it serves model-b, not 'modle-b'; did you mean 'model-b'?", "it serves nothing, not 'modle-b'"
    assert live.exit_code == 2
    assert f"no replica can answer for 'modle-b' ({a.url}: {why_a}; {b.url}: {why_b})" in live.stderr
    assert validate.exit_code == 1
    (problem,) = json.loads(validate.stdout)["problems"]
    assert f"no replica can answer for 'modle-b' (a: {why_a}; b: {why_b});" in problem, problem
