"""A server that answers every request as one model other than the one asked (it ignores the name and serves
what it loaded): probe run, runs show and the report say so in a note; the run stays clean. Names that stand for
the model asked (a dated snapshot, a '-latest' alias, the served alias itself, the path the weights came from)
say nothing."""

from __future__ import annotations

import json

import pytest

from cfkit.servers import plainly_other
from support.chat_api_server import ChatServer
from support.probe_runs import FAST, answering_as, many_cases, reported_notes
from support.workspace import run_cli

N = 4

SAME = [  # (asked, what the server named): one model
    ("gpt-4o", "gpt-4o-2024-08-06"),  # a provider's dated snapshot of an alias
    ("gpt-4o-2024-08-06", "gpt-4o"),
    ("claude-3-5-sonnet-latest", "claude-3-5-sonnet-20241022"),  # '-latest' answered by a dated id
    ("mistral-large-latest", "mistral-large-2411"),
    ("claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet-v2"),
    ("my-served-alias", "my-served-alias"),  # vLLM --served-model-name: the alias is answered
    ("Qwen/Qwen2.5-VL-7B-Instruct", "/models/Qwen2.5-VL-7B-Instruct/"),  # the path the weights were loaded from
    ("qwen2.5-vl-7b-instruct", "/data/Qwen2.5-VL-7B-Instruct"),
    ("openai/gpt-4o", "openai/gpt-4o-2024-08-06"),  # a router's vendor/name
    ("llava", "llava:latest"),
]
OTHER = [  # (asked, what the server named): plainly another model
    ("qwen-7b", "llava-hf/llava-1.5-7b-hf"),
    ("qwen-7b", "/models/llava-1.5-7b"),
    ("gpt-4o", "claude-3-5-sonnet-20241022"),
    ("claude-3-5-sonnet-latest", "claude-3-opus-20240229"),
    ("model-b", "test-model"),
]


@pytest.mark.parametrize("asked,named", SAME)
def test_names_that_stand_for_the_model_asked_are_not_plainly_other(asked, named):
    assert not plainly_other(asked, named)


@pytest.mark.parametrize("asked,named", OTHER)
def test_names_of_another_model_are_plainly_other(asked, named):
    assert plainly_other(asked, named)


@pytest.fixture
def ws(tmp_path):
    return many_cases(tmp_path / "ws", N)


def asked_of(ws, url, model):
    return run_cli(["-w", str(ws), "probe", "run", "-m", f"openai:{model}", "-s", "contextcanvas", "--base-url", url,
                    *FAST, "--json"])


def test_a_server_answering_every_request_as_another_model_is_noted_where_the_run_is_shown(ws):
    with ChatServer(answering_as("llava-hf/llava-1.5-7b-hf")) as chat:
        result = asked_of(ws, chat.url, "qwen-7b")
    assert result.exit_code == 0, result.stderr  # a note: an alias a proxy maps can read the same
    run_id = json.loads(result.stdout)["run_id"]
    said = f"every reply of run {run_id} named model 'llava-hf/llava-1.5-7b-hf', not 'qwen-7b' as asked"
    (line,) = [x for x in result.stderr.splitlines() if said in x]
    assert line.startswith("warning: openai:qwen-7b contextcanvas: ") and "check --base-url and what the server loaded" in line
    shown = run_cli(["-w", str(ws), "runs", "show", run_id])
    assert shown.exit_code == 0 and said in " ".join(shown.stdout.split())
    as_json = json.loads(run_cli(["-w", str(ws), "runs", "show", run_id, "--json"]).stdout)["servers"]
    assert as_json["other_than_asked"] == "llava-hf/llava-1.5-7b-hf"
    notes = reported_notes(ws)
    assert any(n.startswith("openai:qwen-7b: ") and said in n for n in notes), notes


@pytest.mark.parametrize("asked,named", [("qwen-7b", "qwen-7b-2024-08-06"), ("qwen-vl-latest", "qwen-vl-2411"),
                                         ("qwen-7b", "qwen-7b"), ("Qwen/Qwen-7B", "/models/Qwen-7B/")])
def test_a_server_naming_the_model_asked_otherwise_says_nothing(ws, asked, named):
    with ChatServer(answering_as(named)) as chat:
        result = asked_of(ws, chat.url, asked)
    assert result.exit_code == 0, result.stderr
    assert "as asked" not in result.stderr
    run_id = json.loads(result.stdout)["run_id"]
    shown = run_cli(["-w", str(ws), "runs", "show", run_id])
    assert "as asked" not in shown.stdout
    assert json.loads(run_cli(["-w", str(ws), "runs", "show", run_id, "--json"]).stdout)["servers"] == {
        "models": {named: N}, "builds": {}, "other_than_asked": None}
    assert not [n for n in reported_notes(ws) if "as asked" in n]


def test_a_run_read_from_a_file_under_a_label_says_nothing_of_the_name(ws, tmp_path):
    # An import's model is the label given then, not the name its servers were asked for.
    with ChatServer(answering_as("gpt-4o-2024-08-06")) as chat:
        asked = json.loads(asked_of(ws, chat.url, "gpt-4o").stdout)["run_id"]
    export = tmp_path / "run.jsonl"
    assert run_cli(["-w", str(ws), "runs", "export", asked, "--format", "jsonl", "--output", str(export)]
                   ).exit_code == 0
    assert run_cli(["-w", str(ws), "runs", "rm", asked]).exit_code == 0
    for spec in (ws / "interventions").glob("*.yaml"):  # of the cases many_cases replaced
        spec.unlink()
    imported = run_cli(["-w", str(ws), "runs", "import", str(export), "--label", "ours"])
    assert imported.exit_code == 0, imported.stderr
    assert "as asked" not in imported.stderr
    (run_id,) = [r["id"] for r in json.loads(run_cli(["-w", str(ws), "runs", "list", "--json"]).stdout)]
    shown = json.loads(run_cli(["-w", str(ws), "runs", "show", run_id, "--json"]).stdout)["servers"]
    assert shown["models"] == {"gpt-4o-2024-08-06": N} and shown["other_than_asked"] is None
    assert "as asked" not in run_cli(["-w", str(ws), "runs", "show", run_id]).stdout
    assert not [n for n in reported_notes(ws) if "as asked" in n]
