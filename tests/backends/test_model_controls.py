"""Model controls (-o temperature, top_p, seed, reasoning_effort, max_completion_tokens, extra_body): checked,
sent on the wire, part of the run's identity, shown by ``runs show``, and the server's provenance in exports."""

from __future__ import annotations

import json

import pytest

from support.chat_api_server import ChatServer, Scripted, error_body
from support.probe_runs import openai_run, scripted_answer
from support.workspace import run_cli

CONTROLS = ["-o", "temperature=0", "-o", "seed=7", "-o", "reasoning_effort=low"]


def _run_id(result) -> str:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["run_id"]


def test_controls_reach_the_wire_and_change_the_run_id(tiny_ws):
    with ChatServer(scripted_answer) as server:
        plain = _run_id(openai_run(tiny_ws, server.url, "contextcanvas", "--json"))
        plain_bodies = list(server.requests)
        controlled = _run_id(openai_run(tiny_ws, server.url, "contextcanvas", "--json", *CONTROLS))
        bodies = server.requests[len(plain_bodies):]
    assert controlled != plain
    # The controlled run could not reuse the plain run's cached answers: every request was sent again, with them.
    assert len(bodies) == len(plain_bodies) == 3
    for body in bodies:
        assert body["temperature"] == 0 and body["seed"] == 7 and body["reasoning_effort"] == "low"
    for body in plain_bodies:  # nothing is sent that was not asked for
        assert not {"seed", "reasoning_effort", "top_p"} & set(body)
    shown = run_cli(["-w", str(tiny_ws), "runs", "show", controlled, "--json"])
    generation = json.loads(shown.stdout)["run"]["settings"]["generation"]
    assert generation == {"temperature": 0.0, "max_tokens": 512, "seed": 7, "reasoning_effort": "low"}
    text = run_cli(["-w", str(tiny_ws), "runs", "show", controlled])
    assert "seed 7" in text.stdout and "reasoning_effort low" in text.stdout


def test_each_control_changes_the_run_id_and_a_rerun_keeps_it(tiny_ws):
    with ChatServer(scripted_answer) as server:
        ids = {_run_id(openai_run(tiny_ws, server.url, "contextcanvas", "--json", *extra))
               for extra in ([], ["-o", "top_p=0.5"], ["-o", "seed=1"], ["-o", "temperature=0.7"],
                             ["-o", 'extra_body={"top_k": 20}'], ["-o", "max_completion_tokens=300"])}
        assert len(ids) == 6
        sent = server.count
        again = _run_id(openai_run(tiny_ws, server.url, "contextcanvas", "--json", "-o", "seed=1"))
        assert again in ids and server.count == sent  # the same controls: the same run, nothing sent
    bodies = server.requests
    assert any(b.get("top_k") == 20 for b in bodies)  # extra_body laid over the body as it is
    assert any(b.get("max_tokens") == 300 for b in bodies)  # max_completion_tokens is the token limit


@pytest.mark.parametrize("pair, says", [
    ("temperature=3", "less than or equal to 2"),
    ("top_p=0", "greater than 0"),
    ("seed=-1", "greater than or equal to 0"),
    ("reasoning_effort=extreme", "reasoning_effort"),
    ("extra_body=[1]", "JSON object"),
    ("extra_body={nope", "not JSON"),
    ('extra_body={"messages": []}', "may not set messages"),
    ('extra_body={"seed": 3}', "may not set seed"),
])
def test_bad_controls_are_refused_before_anything_is_sent(tiny_ws, pair, says):
    with ChatServer(scripted_answer) as server:
        result = openai_run(tiny_ws, server.url, "contextcanvas", "-o", pair)
    assert result.exit_code == 2
    assert says in result.stderr and pair.split("=")[0] in result.stderr
    assert server.count == 0


def test_a_backend_that_cannot_honour_a_control_refuses_it(tiny_ws):
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-no", "-s", "contextcanvas",
                      "-o", "top_p=0.5"])
    assert result.exit_code == 2
    assert "has no option 'top_p' (-o top_p=0.5)" in result.stderr
    from cfkit.backends.controls import split_controls
    from cfkit.errors import OptionError

    with pytest.raises(OptionError, match=r"does not take -o seed=7 \(model controls it takes: max_completion_tokens\)"):
        split_controls({"seed": "7"}, ("max_completion_tokens",), kind="hf")


def test_max_completion_tokens_and_max_tokens_must_agree(tiny_ws):
    with ChatServer(scripted_answer) as server:
        result = openai_run(tiny_ws, server.url, "contextcanvas", "--max-tokens", "100",
                            "-o", "max_completion_tokens=200")
    assert result.exit_code == 2 and "disagree" in result.stderr


def test_paper_protocol_fixes_temperature_but_leaves_other_controls(tiny_ws):
    def paper(url, *extra):
        return run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                        "--base-url", url, "--protocol", "paper", "--max-tokens", "800", *extra])

    with ChatServer(scripted_answer) as server:
        refused = paper(server.url, "-o", "temperature=0.5")
        assert refused.exit_code == 2 and "temperature 0" in refused.stderr
        run_id = _run_id(paper(server.url, "-o", "seed=3", "--json"))
    assert all(b["temperature"] == 0 and b["seed"] == 3 and b["max_tokens"] == 800 for b in server.requests)
    shown = json.loads(run_cli(["-w", str(tiny_ws), "runs", "show", run_id, "--json"]).stdout)["run"]
    assert shown["settings"]["generation"]["seed"] == 3 and shown["settings"]["protocol"] == "paper"


def test_a_server_refusing_a_control_stops_the_run_with_one_line(tiny_ws):
    def script(body, n):
        if "seed" in body:
            return Scripted(400, error_body("Unsupported parameter: 'seed'", param="seed"))
        return scripted_answer(body, n)

    with ChatServer(script) as server:
        result = openai_run(tiny_ws, server.url, "contextcanvas", "-o", "seed=7")
    assert result.exit_code != 0
    assert "refused the model control 'seed'" in result.stderr
    assert server.count <= 3  # no request was retried (three may have been in flight at once)


def test_export_carries_the_servers_model_fingerprint_and_reasoning(tiny_ws):
    def script(body, n):
        reply = scripted_answer(body, n).body
        reply["model"] = "served/model-v2"
        reply["system_fingerprint"] = "fp_123"
        reply["choices"][0]["message"]["reasoning_content"] = "thinking it over"
        return Scripted(body=reply)

    with ChatServer(script) as server:
        run_id = _run_id(openai_run(tiny_ws, server.url, "contextcanvas", "--json"))
    exported = run_cli(["-w", str(tiny_ws), "runs", "export", run_id])
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    assert len(lines) == 3
    for line in lines:
        assert line["server_model"] == "served/model-v2" and line["system_fingerprint"] == "fp_123"
        assert line["reasoning"] == "thinking it over"
    # An export that carries provenance is still read back by replay.
    path = tiny_ws / "preds.jsonl"
    path.write_text(exported.stdout)
    replay = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", f"replay:{path}", "-s", "contextcanvas"])
    assert replay.exit_code == 0, replay.stderr
