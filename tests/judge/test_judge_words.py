"""The judge and drafting commands (``audit prelabel``, ``edits screen``, ``captions draft``) name, in their hints,
the options they take: ``--max-tokens`` for a reply's token limit, ``-o base_url=URL`` and ``-o api_key_env=NAME``
for the server and its key (:data:`cfkit.option_words.JUDGE`). Before, their backends were built with the default
words, and a token limit given as ``-o max_tokens=N`` was refused as an unknown backend option with a list of the
others, never naming ``--max-tokens``."""

from __future__ import annotations

import json

import pytest

from support import audit_workspace as aw
from support.caption_workspace import make_caption_ws
from support.chat_api_server import ChatServer, Scripted, completion
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(120)

ENV = {"COLUMNS": "250", "OPENAI_API_KEY": "sk-not-sent-to-a-base-url"}


def _prelabel(tmp_path):
    ws = aw.build(tmp_path / "ws")
    run_ids = aw.run_models(ws)
    assert run_cli(["-w", str(ws), "audit", "plan", "--run", run_ids[aw.GPT], "--run", run_ids[aw.QWEN]]).exit_code == 0
    assert run_cli(["-w", str(ws), "audit", "items", "--as", "alice", "--json"]).exit_code == 0
    return ws, ["audit", "prelabel", "--judge", "openai:judge-model"], "read; raise"


def _screen(ws):
    assert run_cli(["-w", str(ws), "edit", "EX01", "--engine", "classical"]).exit_code == 0
    return ws, ["edits", "screen", "--judge", "openai:judge-model"], "read; raise"


def _draft(tmp_path):
    ws = make_caption_ws(tmp_path / "cws")
    for path in (ws / "captions").glob("*.yaml"):
        path.unlink()
    return ws, ["captions", "draft", "--model", "openai:judge-model", "--all-cases"], "saved; raise"


COMMANDS = {"audit-prelabel": _prelabel, "edits-screen": _screen, "captions-draft": _draft}


@pytest.fixture(params=COMMANDS, ids=COMMANDS)
def command(request, tmp_path):
    if request.param == "edits-screen":
        return _screen(request.getfixturevalue("mini_ws"))  # a private copy of examples/mini
    return COMMANDS[request.param](tmp_path)


def _said(result) -> str:
    return " ".join(result.output.split())


def test_a_reply_cut_off_at_the_token_limit_names_max_tokens(command):
    ws, args, kept = command

    def cut_off(body, n):
        return Scripted(body=completion("Yes, the picture shows", model=body["model"], finish_reason="length"))

    with ChatServer(cut_off) as judge:
        result = run_cli(["-w", str(ws), *args, "-o", f"base_url={judge.url}", "--max-tokens", "8"], env=ENV)
        assert judge.count and all(r["max_tokens"] == 8 for r in judge.requests)
    assert result.exit_code == 1, result.output
    assert (f"the reply was cut off at the token limit (8 tokens), so it was not {kept} --max-tokens (now 8) and "
            "run again") in _said(result), result.output
    assert "-o max_tokens" not in result.output


@pytest.mark.parametrize("key,line", [
    (None, "wants a key (HTTP 401: Incorrect API key provided), and none was sent to it; name the variable holding "
           "its key with -o api_key_env=NAME."),
    ("wrong", "refused the key (HTTP 401: Incorrect API key provided). Check the key in its environment variable, "
              "or name another variable with -o api_key_env=NAME."),
], ids=["none-sent", "refused"])
def test_a_refused_key_names_the_option_the_command_takes_for_it(command, key, line):
    ws, args, _ = command
    with ChatServer() as judge:
        judge.key = "the-right-key"
        given = ["-o", "api_key_env=JUDGE_KEY"] if key else []
        result = run_cli(["-w", str(ws), *args, "-o", f"base_url={judge.url}", *given],
                         env=ENV | {"JUDGE_KEY": key or ""})
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines()[-1] == f"error: openai backend: {judge.url} {line}", result.stderr
    assert "--api-key-env" not in result.output


@pytest.mark.parametrize("key", ["max_tokens", "max_completion_tokens"])
def test_a_token_limit_given_as_a_backend_option_is_refused_naming_max_tokens(command, key):
    ws, args, _ = command
    with ChatServer() as judge:
        result = run_cli(["-w", str(ws), *args, "-o", f"base_url={judge.url}", "-o", f"{key}=64"], env=ENV)
        assert judge.count == 0
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: -o {key}=64: the token limit of each reply is set here with --max-tokens 64, not as a backend "
        "option."), result.stderr
    if args[0] == "audit":
        assert json.loads(run_cli(["-w", str(ws), "audit", "status", "--json"]).stdout)["judges"] == []
