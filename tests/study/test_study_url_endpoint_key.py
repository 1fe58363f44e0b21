"""A study model whose ``endpoint`` is a URL (no ``[endpoints.NAME]`` table) takes its key variable in its own
``options`` (``api_key_env``), as ``-o api_key_env=NAME`` gives it on the command line. The study file used to
refuse that ("sets option 'api_key_env' and an endpoint ... Keep one"), so such a model could not send a key at all,
and the line of the server's 401 pointed at an ``[endpoints.NAME]`` table the file did not have. A model behind a
table still takes the table's key, and the refusal says so."""

from __future__ import annotations

import pytest

from support.chat_api_server import ChatServer, first_option
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(120)

ENV = {"CFKIT_TEST_KEY": "s3cret", "OPENAI_API_KEY": "", "COLUMNS": "200"}


def _study(ws, url: str, extra: str = "", tables: str = ""):
    path = ws / "study.toml"
    path.write_text(f"{tables}[models.behind]\nmodel = 'openai:m'\nendpoint = '{url}'\n{extra}"
                    "[suites.contextcanvas]\nlimit = 1\n")
    return path


def _study_cli(ws, command: str, path):
    return run_cli(["-w", str(ws), "study", command, str(path)], env=ENV)


def test_a_url_endpoint_takes_the_models_api_key_env(tiny_ws):
    with ChatServer(first_option) as chat:
        chat.models, chat.key = [{"id": "m", "object": "model"}], "s3cret"
        path = _study(tiny_ws, chat.url)
        warned = _study_cli(tiny_ws, "validate", path)  # its GET /models wanted a key too: said, before any run
        assert (f"warning: model behind: endpoint {chat.url} wants a key (HTTP 401 to a request without one), and "
                f'the study sends it none; name the variable holding its key with options = {{ api_key_env = "NAME" '
                f"}} in [models.behind] of {path.resolve()}") in " ".join(warned.output.split()), warned.output
        refused = _study_cli(tiny_ws, "run", path)
        assert refused.exit_code != 0 and chat.requests == [], refused.output
        said = " ".join(refused.output.split())
        assert (f"{chat.url} wants a key (HTTP 401: Incorrect API key provided), and none was sent to it; name the "
                f'variable holding its key with options = {{ api_key_env = "NAME" }} in [models.behind] of '
                f"{path.resolve()}.") in said, said
        assert "[endpoints.NAME]" not in said

        _study(tiny_ws, chat.url, "options = { api_key_env = 'CFKIT_TEST_KEY' }\n")
        checked = _study_cli(tiny_ws, "validate", path)
        assert checked.exit_code == 0 and "wants a key" not in checked.output, checked.output
        ran = _study_cli(tiny_ws, "run", path)
        assert ran.exit_code == 0, ran.output
        assert chat.requests and all(h["authorization"] == "Bearer s3cret" for h in chat.headers)


def test_a_refused_key_behind_a_url_names_the_models_option(tiny_ws):
    with ChatServer(first_option) as chat:
        chat.models, chat.key = [{"id": "m", "object": "model"}], "another"
        path = _study(tiny_ws, chat.url, "options = { api_key_env = 'CFKIT_TEST_KEY', max_retries = 0 }\n")
        result = _study_cli(tiny_ws, "run", path)
    said = " ".join(result.output.split())
    assert result.exit_code != 0
    assert (f"{chat.url} refused the key (HTTP 401: Incorrect API key provided). Check the key in its environment "
            f'variable, or name another variable with options = {{ api_key_env = "NAME" }} in [models.behind] of '
            f"{path.resolve()}.") in said, said


def test_a_model_behind_a_table_takes_the_tables_key(tiny_ws):
    path = _study(tiny_ws, "local", "options = { api_key_env = 'CFKIT_TEST_KEY' }\n",
                  tables="[endpoints.local]\nurl = 'http://127.0.0.1:9/v1'\n")
    for command in ("validate", "run"):
        result = _study_cli(tiny_ws, command, path)
        assert result.exit_code == 2, result.output
        said = " ".join(result.output.split())
        assert ("model 'behind' sets option 'api_key_env', and its endpoint 'local' is an [endpoints.local] table, "
                "which says the key of every model behind it; set api_key_env there") in said, said
