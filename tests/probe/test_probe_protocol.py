"""--protocol paper sets what the AesCanvas supplement states; runs warn about inputs no person reviewed."""

from __future__ import annotations

import json

import pytest

from cfkit.errors import UsageError
from cfkit.probe.protocol import paper_max_tokens, resolve_protocol
from support.chat_api_server import ChatServer
from support.edits import add_edit, inside_change, tiny_original
from support.probe_runs import _accepted_edit, add_modality, openai_run, replies, scripted_answer
from support.workspace import run_cli

OPENAI_FIELDS = {"timeout", "max_retries", "base_url", "price_in", "price_out"}


def paper_run(ws, url: str, *extra: str, model: str = "openai:test-model"):
    """A run against the loopback server without the tests' usual retry options (the preset sets them)."""
    return run_cli(["-w", str(ws), "probe", "run", "-m", model, "-s", "contextcanvas", "--base-url", url,
                    "-o", "backoff=0.01", *extra])


def test_the_paper_preset_is_what_the_supplement_states():
    api = resolve_protocol("paper", remote=True, model_name="openai/gpt-5.2", option_names=OPENAI_FIELDS,
                           max_tokens=None, concurrency=None, options={})
    # Section S2.4.1: temperature 0, four concurrent requests, a 180-second timeout, at most three retries,
    # 800 output tokens for GPT-5.2 and Gemini 3.1 Pro, 500 for Qwen3.7-Plus.
    assert (api.generation.temperature, api.generation.max_tokens, api.concurrency) == (0.0, 800, 4)
    assert api.options == {"timeout": 180.0, "max_retries": 3}
    assert paper_max_tokens("google/gemini-3.1-pro-preview") == 800 and paper_max_tokens("qwen3.7-plus") == 500
    assert paper_max_tokens("gpt-5.2-2025-12-11") == 800 and paper_max_tokens("gpt-5.2-mini") is None
    local = resolve_protocol("paper", remote=False, model_name="Qwen/Qwen3-VL-8B-Instruct",
                             option_names={"image_size", "device"}, max_tokens=None, concurrency=None, options={})
    # Local runs: greedy, at most 256 new tokens, images fitted to 448 x 448.
    assert (local.generation.temperature, local.generation.max_tokens, local.options) == (0.0, 256, {"image_size": 448})
    default = resolve_protocol("default", remote=True, model_name="x", option_names=OPENAI_FIELDS, max_tokens=None,
                               concurrency=None, options={})
    assert (default.generation.max_tokens, default.options) == (512, {})


@pytest.mark.parametrize("kwargs, message", [
    (dict(model_name="gpt-5.5", max_tokens=None), r"states output-token limits only for gpt-5.2 800, .*give "
                                                  r"--max-tokens for gpt-5.5"),
    (dict(model_name="gpt-5.2", max_tokens=512), r"sets --max-tokens 800 for gpt-5.2; drop --max-tokens 512"),
    (dict(model_name="gpt-5.2", concurrency=16), r"sends 4 requests at once; drop -j 16"),
    (dict(model_name="gpt-5.2", options={"timeout": "60"}), r"sets -o timeout=180; drop -o timeout=60"),
])
def test_a_value_that_contradicts_the_preset_is_refused(kwargs, message):
    args = dict(remote=True, option_names=OPENAI_FIELDS, max_tokens=None, concurrency=None, options={}) | kwargs
    with pytest.raises(UsageError, match=message):
        resolve_protocol("paper", **args)


def test_a_paper_run_sends_the_papers_settings_and_records_the_preset(tiny_ws):
    with ChatServer(scripted_answer) as server:
        result = paper_run(tiny_ws, server.url, "--protocol", "paper", "--json", model="openai:gpt-5.2")
        assert result.exit_code == 0, result.stderr
        bodies = list(server.requests)
    assert {b["temperature"] for b in bodies} == {0.0} and {b["max_tokens"] for b in bodies} == {800}
    run_id = json.loads(result.stdout)["run_id"]
    run = json.loads(run_cli(["-w", str(tiny_ws), "runs", "show", run_id, "--json"]).stdout)["run"]
    assert run["protocol"] == "paper" and run["settings"]["protocol"] == "paper"
    assert run["options"]["options"]["timeout"] == 180.0 and run["options"]["options"]["max_retries"] == 3
    assert run["notes"]["protocol"]["source"].startswith("AesCanvas supplement, Section S2.4.1")
    assert run["notes"]["protocol"]["concurrency"] == 4
    # The same model under the default preset is another run with other settings: the report will not merge them.
    with ChatServer(scripted_answer) as server:
        assert openai_run(tiny_ws, server.url, "contextcanvas", model="openai:gpt-5.2").exit_code == 0
    refused = run_cli(["report", "-w", str(tiny_ws), "--format", "json"])
    assert refused.exit_code == 2 and "protocol paper" in refused.stderr and "protocol default" in refused.stderr


def test_the_preset_can_be_set_in_cfkit_toml(tiny_ws):
    config = tiny_ws / "cfkit.toml"
    config.write_text(config.read_text() + '\n[probe]\nprotocol = "paper"\n')
    with ChatServer(scripted_answer) as server:
        refused = paper_run(tiny_ws, server.url)
        assert refused.exit_code == 2 and "give --max-tokens for test-model" in refused.stderr and server.count == 0
        conflict = paper_run(tiny_ws, server.url, "--max-tokens", "300", "-o", "max_retries=1")
        assert conflict.exit_code == 2 and "drop -o max_retries=1 or the preset" in conflict.stderr
        ran = paper_run(tiny_ws, server.url, "--max-tokens", "300", "--json")
    assert ran.exit_code == 0 and {b["max_tokens"] for b in server.requests} == {300}


def test_counterfactual_warns_about_pairs_whose_edit_no_person_accepted(tiny_ws):
    add_edit(tiny_ws, "TX01", inside_change(tiny_original(tiny_ws)))
    run_cli(["check", "TX01", "-w", str(tiny_ws)])  # the edit passes its check: usable, but unreviewed
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-yes", "-s", "counterfactual"])
    assert result.exit_code == 0, result.stderr
    warned = " ".join(result.stderr.split())
    assert ("1 of 1 pair uses an edit no person has accepted (it passed its own check only): TX01. Review it with "
            "'cfkit review', or ask only accepted edits with --accepted-only.") in warned
    only = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-yes", "-s", "counterfactual",
                    "--accepted-only"])
    assert only.exit_code == 2 and "every pair was skipped" in only.stderr


def test_an_accepted_edit_is_not_warned_about(tiny_ws):
    _accepted_edit(tiny_ws)
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-yes", "-s", "counterfactual"])
    assert result.exit_code == 0 and "no person has accepted" not in result.stderr


def test_modality_warns_about_drafted_captions_and_reviewed_only_leaves_them_out(tiny_ws):
    add_modality(tiny_ws)
    draft = tiny_ws / "captions" / "T002.yaml"
    draft.write_text(draft.read_text().replace("author: human\nreviewed: true", "author: openai:gpt-5.5\nreviewed: false"))
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-no", "-s", "modality", "--json"])
    assert result.exit_code == 0
    warned = " ".join(result.stderr.split())
    assert ("1 of 2 cases has a caption a model drafted and no person has reviewed: T002. Read it and set "
            "'reviewed: true', or leave it out with --reviewed-only.") in warned
    reviewed = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-no", "-s", "modality",
                        "--reviewed-only", "--json"])
    summary = json.loads(reviewed.stdout)
    assert reviewed.exit_code == 0 and summary["total"] == 4 and "drafted" not in reviewed.stderr
    assert {r["case_id"] for r in replies(tiny_ws, summary["run_id"])} == {"T001"}
    wrong_suite = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-no", "-s", "contextcanvas",
                           "--reviewed-only"])
    assert wrong_suite.exit_code == 2 and "--reviewed-only is for the modality suite" in wrong_suite.stderr
