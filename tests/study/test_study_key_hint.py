"""A study whose model needs a key that is not set: ``study validate`` and ``study run`` say where the study file
names the key's variable (``api_key_env`` in ``[endpoints.NAME]``, or the model's options), never probe run's
``--api-key-env``, which these commands do not have; ``probe run`` still names its own flag."""

from __future__ import annotations

import pytest

from support.chat_api_server import ChatServer, first_option
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(120)


def _lines(output: str, model: str) -> list[str]:
    return [line for line in output.splitlines() if "is not set" in line and line.split()[1 if
            line.startswith("warning:") else 0] == model]


def test_study_key_hint_names_the_study_files_setting(tiny_ws):
    ws = tiny_ws
    with ChatServer(first_option) as chat:
        chat.models = [{"id": "m", "object": "model"}]
        path = ws / "study.toml"
        path.write_text(f"[endpoints.local]\nurl = '{chat.url}'\napi_key_env = 'CFKIT_TEST_NO_SUCH_KEY'\n"
                        "[models.behind]\nmodel = 'openai:m'\nendpoint = 'local'\n"
                        "[models.official]\nmodel = 'openai:gpt-4o'\n"
                        "[suites.contextcanvas]\nlimit = 2\n")
        env = {"OPENAI_API_KEY": "", "CFKIT_TEST_NO_SUCH_KEY": "", "COLUMNS": "200"}
        file = str(path.resolve())
        for command in ("validate", "run"):
            result = run_cli(["-w", str(ws), "study", command, str(path)], env=env)
            assert result.exit_code != 0, result.output
            assert "--api-key-env" not in result.output and "-o api_key_env" not in result.output, result.output
            behind = _lines(result.output, "behind")
            official = _lines(result.output, "official")
            assert behind and official, result.output
            for line in behind:
                assert "$CFKIT_TEST_NO_SUCH_KEY is not set; export your key in it" in line
                assert f'api_key_env = "NAME" in [endpoints.local] of {file}' in line
            for line in official:
                assert "$OPENAI_API_KEY is not set" in line
                assert f'options = {{ api_key_env = "NAME" }} in [models.official] of {file}' in line
        assert chat.requests == []

    probe = run_cli(["-w", str(ws), "probe", "run", "-m", "openai:gpt-4o", "-s", "contextcanvas", "--limit", "1"],
                    env=env)
    assert probe.exit_code == 2 and "name another variable with --api-key-env" in probe.output, probe.output


def test_a_refused_key_under_study_run_names_the_study_files_setting(tiny_ws):
    from support.chat_api_server import Scripted, error_body

    ws = tiny_ws
    with ChatServer(lambda body, n: Scripted(401, error_body("bad key", kind="AuthenticationError"))) as chat:
        chat.models = [{"id": "m", "object": "model"}]
        path = ws / "study.toml"
        path.write_text(f"[endpoints.local]\nurl = '{chat.url}'\napi_key_env = 'CFKIT_TEST_KEY'\n"
                        "[models.behind]\nmodel = 'openai:m'\nendpoint = 'local'\noptions = { max_retries = 0 }\n"
                        "[suites.contextcanvas]\nlimit = 1\n")
        env = {"CFKIT_TEST_KEY": "wrong", "COLUMNS": "200"}
        result = run_cli(["-w", str(ws), "study", "run", str(path)], env=env)
        probe = run_cli(["-w", str(ws), "probe", "run", "-m", "openai:m", "-s", "contextcanvas", "--limit", "1",
                         "--base-url", chat.url, "--api-key-env", "CFKIT_TEST_KEY", "-o", "max_retries=0"], env=env)
    assert result.exit_code != 0
    assert "refused the key" in result.output, result.output
    assert f'or name another variable with api_key_env = "NAME" in [endpoints.local] of {path.resolve()}' in result.output, result.output
    assert "--api-key-env" not in result.output
    assert probe.exit_code != 0 and "refused the key" in probe.output and "name another variable with --api-key-env." in probe.output, \
        probe.output
