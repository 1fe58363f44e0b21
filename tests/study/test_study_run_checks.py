"""``cfkit study run`` checks what ``study validate`` checks before it sends: each endpoint of a run left to send
is reached once (``GET /models``), and a run whose endpoint does not answer, or does not list its model, is
skipped, nothing of it sent, with why; the exit status says the study was not done."""

from __future__ import annotations

import json

import pytest

from support.chat_api_server import ChatServer, Scripted, error_body, first_option
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(120)


def _serves_model_a(body, n):
    """A server that answers model-a and, like vLLM, refuses any other model with a 404."""
    if body.get("model") != "model-a":
        return Scripted(404, error_body(f"The model `{body.get('model')}` does not exist.", kind="NotFoundError"))
    return first_option(body, n)


def test_study_run_skips_a_model_its_endpoint_does_not_list_or_whose_endpoint_is_down(tiny_ws):
    from support.transformers_server import free_port

    ws = tiny_ws
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with ChatServer(_serves_model_a) as chat:
        chat.models = [{"id": "model-a", "object": "model"}]
        path = ws / "study.toml"
        path.write_text(f"[endpoints.e]\nurl = '{chat.url}'\n"
                        "[models.a]\nmodel = 'openai:model-a'\nendpoint = 'e'\noptions = { max_retries = 0 }\n"
                        "[models.typo]\nmodel = 'openai:modle-a'\nendpoint = 'e'\noptions = { max_retries = 0 }\n"
                        f"[models.down]\nmodel = 'openai:down'\nendpoint = '{dead}'\noptions = {{ max_retries = 0 }}\n"
                        "[models.no]\nmodel = 'baseline:always-no'\n[suites.contextcanvas]\n")
        env = {"OPENAI_API_KEY": "sk-test", "COLUMNS": "200"}
        result = run_cli(["-w", str(ws), "study", "run", str(path), "--json"], env=env)
        asked = {body["model"] for body in chat.requests}
        status = run_cli(["-w", str(ws), "study", "status", str(path), "--json"], env=env)
        table = run_cli(["-w", str(ws), "study", "status", str(path)], env=env)
    assert result.exit_code == 1, result.output
    assert asked == {"model-a"}  # nothing sent for the misspelt model (before: every request of it, each a 404)
    runs = {r["model"]: r for r in json.loads(result.stdout)}
    assert {m: r["state"] for m, r in runs.items()} == {"a": "done", "typo": "skipped", "down": "skipped",
                                                        "no": "done"}
    assert "cannot answer for 'modle-a' (it serves model-a, not 'modle-a'" in runs["typo"]["error"] and "did you mean 'model-a'" in runs["typo"]["error"]
    assert runs["down"]["error"].startswith("not started, nothing sent: its endpoint is not reachable")
    assert f"nothing is listening at {dead} (connection refused)" in runs["down"]["error"]
    last = result.stderr.strip().splitlines()[-1]
    assert "2 of 4 runs incomplete: typo contextcanvas (skipped), down contextcanvas (skipped)" in last
    assert "The lines above say why" in last
    assert f"'cfkit study status {path}' again" in last
    # Nothing of a skipped run is stored: 'study status' finds it not started, and the others done.
    assert status.exit_code == 1
    states = {s["model"]: s for s in json.loads(status.stdout)}
    assert {m: s["state"] for m, s in states.items()} == {
        "a": "done", "typo": "not started", "down": "not started", "no": "done"}
    # ... and says why, as 'study run' said it (before: 'not started' and nothing more, while 'study run' pointed
    # at the lines it had printed): it reaches the endpoints of the runs not started, as 'study run' does.
    assert states["typo"]["detail"].startswith("'study run' skips it, nothing of it sent: endpoint e")
    assert "cannot answer for 'modle-a' (it serves model-a, not 'modle-a'" in states["typo"]["detail"]
    assert f"nothing is listening at {dead} (connection refused)" in states["down"]["detail"]
    assert states["a"]["detail"] is None and states["no"]["detail"] is None
    assert "cannot answer for 'modle-a' (it serves model-a, not 'modle-a'" in table.stdout and f"nothing is listening at {dead} (connection refused)" in table.stdout


def test_a_finished_study_is_not_refused_when_its_servers_are_gone(tiny_ws):
    """The check is of runs left to send: a study whose runs are all finished reruns with its server stopped."""
    ws = tiny_ws
    with ChatServer(_serves_model_a) as chat:
        chat.models = [{"id": "model-a", "object": "model"}]
        path = ws / "study.toml"
        path.write_text(f"[models.a]\nmodel = 'openai:model-a'\nendpoint = '{chat.url}'\n[suites.contextcanvas]\n")
        env = {"OPENAI_API_KEY": "sk-test"}
        assert run_cli(["-w", str(ws), "study", "run", str(path)], env=env).exit_code == 0
    again = run_cli(["-w", str(ws), "study", "run", str(path)], env=env)
    assert again.exit_code == 0, again.output
