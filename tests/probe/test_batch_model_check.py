"""`probe run --batch` asks the server which models it serves before anything is recorded, uploaded or created:
a model it does not list (a typo, the wrong server) is refused in one line, exit 2, naming the models it lists and
the one meant, in the words a replica set's start-up check uses. It used to upload the file and create the batch,
and the user learnt of the typo when the batch failed, hours later."""

from __future__ import annotations

import json

import pytest

from support.anthropic_api_server import AnthropicServer, model
from support.batch_api_server import BatchServer
from support.chat_api_server import ChatServer, listing
from support.probe_runs import FAST, many_cases, scripted_answer
from support.store_sql import table_rows
from support.workspace import run_cli


def batch_run(ws, url, model_name, *extra):
    return run_cli(["-w", str(ws), "probe", "run", "-m", model_name, "-s", "contextcanvas", "--base-url", url,
                    *FAST, "--batch", *extra])


def no_runs(ws) -> bool:
    db = ws / ".cfkit" / "cfkit.db"
    return not db.exists() or table_rows(ws, "runs", "id") == []


def test_a_model_the_server_does_not_list_is_refused_before_anything_is_uploaded_or_recorded(tiny_ws):
    with BatchServer(scripted_answer) as server:
        server.models = listing("test-model", "other-model")
        refused = batch_run(tiny_ws, server.url, "openai:test-modle")
        assert refused.exit_code == 2, refused.stderr
        (line,) = refused.stderr.strip().splitlines()
        assert f"{server.url} cannot answer for 'test-modle' (it serves other-model, test-model, not 'test-modle'; " \
               "did you mean 'test-model'?). Nothing was sent." in line
        assert "Fix the model's name" in line
        assert server.calls("GET", "/models") == 1
        assert server.calls("POST", "/files") == server.calls("POST", "/batches") == 0
        assert no_runs(tiny_ws)
        # The right name goes through: asked once, then uploaded and created.
        sent = batch_run(tiny_ws, server.url, "openai:test-model", "--json")
        assert sent.exit_code == 0, sent.stderr
        assert json.loads(sent.stdout)["submitted"] == 3
        assert server.calls("GET", "/models") == 2 and server.calls("POST", "/batches") == 1


def test_the_refusal_says_why_in_the_words_of_the_replica_sets_check(tmp_path):
    """One check, one reason: a replica set none of whose servers lists the name says the same of each."""
    ws = many_cases(tmp_path / "ws", 4)
    with ChatServer(scripted_answer) as a, ChatServer(scripted_answer) as b, BatchServer(scripted_answer) as batch:
        batch.models = listing("test-model")
        live = run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-modle", "-s", "contextcanvas",
                        "--base-url", a.url, "--base-url", b.url, *FAST])
        batched = batch_run(ws, batch.url, "openai:test-modle")
        assert a.count == b.count == 0 and batch.calls("POST", "/files") == 0
    why = "it serves test-model, not 'test-modle'; did you mean 'test-model'?"
    assert live.exit_code == batched.exit_code == 2
    assert f"{a.url}: {why}; {b.url}: {why}" in live.stderr
    assert f"{batch.url} cannot answer for 'test-modle' ({why})" in batched.stderr


def test_a_server_that_lists_no_models_is_not_refused_here(tiny_ws):
    """A server (or proxy) without GET /models cannot tell: the batch goes as before, and says what it meets."""
    with BatchServer(scripted_answer) as server:
        assert server.models is None
        sent = batch_run(tiny_ws, server.url, "openai:test-model", "--json")
        assert sent.exit_code == 0, sent.stderr
        assert server.calls("GET", "/models") == 1 and server.calls("POST", "/batches") == 1


def claude_batch(ws, url, name):
    return run_cli(["-w", str(ws), "probe", "run", "-m", f"anthropic:{name}", "-s", "contextcanvas", "-o",
                    f"base_url={url}", *FAST, "--batch", "--json"])


def test_a_message_batch_for_a_model_anthropic_does_not_have_is_refused_before_it_is_created(tiny_ws):
    pytest.importorskip("anthropic")
    with AnthropicServer() as server:
        server.models = [model("claude-test"), model("claude-other")]
        refused = claude_batch(tiny_ws, server.url, "claude-tset")
        assert refused.exit_code == 2, refused.stderr
        (line,) = refused.stderr.strip().splitlines()
        assert "anthropic backend:" in line and "cannot answer for 'claude-tset'" in line
        assert "did you mean 'claude-test'?" in line and "Nothing was sent." in line
        assert "give -o base_url=URL for a server" in line  # (probe run has no --base-url for it)
        assert server.batches == {} and no_runs(tiny_ws)
        sent = claude_batch(tiny_ws, server.url, "claude-test")
        assert sent.exit_code == 0, sent.stderr
        assert len(server.batches) == 1
