"""A server that refuses the key (HTTP 401/403) stops a probe run, live or batch, with one line that names what to
type in the command being run to send another key: ``-o api_key_env=NAME`` for ``probe run`` of an ``anthropic:``
model (it has no ``--api-key-env`` for one), ``--api-key-env`` for an ``openai:`` model and for ``probe collect``.
The Anthropic batch submission used to say only "refused the key while creating a batch (HTTP 401)"."""

from __future__ import annotations

import json
import re

import pytest

from support.anthropic_api_server import AnthropicServer
from support.batch_api_server import BatchServer
from support.probe_runs import FAST, many_cases
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(120)

TAIL = "Check the key in its environment variable, or name another variable with"


def _line(result) -> str:
    assert result.exit_code == 2, result.output
    return " ".join(result.stderr.split())


def claude(ws, url, *extra):
    return run_cli(["-w", str(ws), "probe", "run", "-m", "anthropic:claude-test", "-s", "contextcanvas",
                    "-o", f"base_url={url}", "-o", "api_key_env=CFKIT_TEST_KEY", *FAST, *extra],
                   env={"CFKIT_TEST_KEY": "wrong"})


@pytest.mark.parametrize("batch", [False, True], ids=["live", "batch"])
def test_anthropic_refused_key_names_probe_runs_option(tmp_path, batch):
    pytest.importorskip("anthropic")
    ws = many_cases(tmp_path / "ws", 2)
    with AnthropicServer() as server:
        server.refuse_key = 401
        line = _line(claude(ws, server.url, *(["--batch"] if batch else [])))
        assert server.batches == {}
    assert f"anthropic backend: {server.url} refused the key (HTTP 401" in line, line
    assert "invalid x-api-key" in line
    # (a second request in flight when the first was refused may add what it may cost: "(Before it stopped: …)")
    assert re.sub(r" \(Before it stopped: [^)]*\)$", "", line).endswith(f"{TAIL} -o api_key_env=NAME."), line
    assert "--api-key-env" not in line


def test_anthropic_refused_key_at_collect_names_collects_flag(tmp_path):
    pytest.importorskip("anthropic")
    ws = many_cases(tmp_path / "ws", 2)
    with AnthropicServer(polls_before_end=5) as server:
        submitted = claude(ws, server.url, "--batch", "--json")
        assert submitted.exit_code == 0, submitted.output
        run_id = json.loads(submitted.stdout)["run_id"]
        server.refuse_key = 403
        collected = run_cli(["-w", str(ws), "probe", "collect", run_id], env={"CFKIT_TEST_KEY": "wrong"})
    line = _line(collected)
    assert "refused the key (HTTP 403" in line and line.endswith(f"{TAIL} --api-key-env."), line


def test_openai_batch_refused_key_names_api_key_env(tmp_path):
    ws = many_cases(tmp_path / "ws", 2)
    with BatchServer(polls=1) as server:
        server.refuse_create = (401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                                "code": "invalid_api_key"}})
        result = run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                          "--base-url", server.url, "--api-key-env", "CFKIT_TEST_KEY", *FAST, "--batch"],
                         env={"CFKIT_TEST_KEY": "wrong"})
    line = _line(result)
    assert "openai batch: " in line and "refused the key (HTTP 401: while creating" in line, line
    assert "Incorrect API key provided" in line and line.endswith(f"{TAIL} --api-key-env."), line
