"""Drafting Neutral captions with a model, against a real HTTP server speaking Chat Completions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cfkit.lint import lint_captions
from cfkit.workspace import load_workspace
from support.caption_workspace import make_caption_ws
from support.chat_api_server import ChatServer, Scripted, completion, error_body
from support.workspace import run_cli


@pytest.fixture
def cws(tmp_path: Path) -> Path:
    return make_caption_ws(tmp_path / "cws")



# ---------------------------------------------------------------------------
# Drafting, against a real HTTP server speaking the Chat Completions wire format


def scripted(replies: list[tuple[int, str]]):
    """A script for the loopback server: each (status, text) answers one request, then a plain description."""
    replies = list(replies)

    def script(body: dict, n: int) -> Scripted:
        status, content = replies.pop(0) if replies else (200, "A plain grey picture.")
        if status == 200:
            return Scripted(body=completion(content, model=body["model"]))
        return Scripted(status, error_body(content, kind="server_error"))

    return script


@pytest.fixture
def chat():
    servers: list[ChatServer] = []

    def start(replies):
        servers.append(ChatServer(scripted(replies)).__enter__())
        return servers[-1]

    yield start
    for s in servers:
        s.__exit__(None, None, None)


def draft_cli(ws_root: Path, server: ChatServer, *args: str):
    return run_cli(["-w", str(ws_root), "captions", "draft", "--model", "openai:tiny-vlm",
                    "-o", f"base_url={server.url}", "-o", "max_retries=0", *args])


def test_draft_writes_an_unreviewed_model_caption_and_keeps_human_ones(cws, chat):
    import base64

    import yaml

    (cws / "captions" / "T001.yaml").unlink()
    human = (cws / "captions" / "T002.yaml").read_bytes()
    server = chat([(200, '"Description: A blue wave curls over three small boats under a pale sky."')])
    result = draft_cli(cws, server, "T001", "T002")
    assert result.exit_code == 0, result.output
    assert len(server.requests) == 1  # T002 has a human caption: no request, file untouched
    assert (cws / "captions" / "T002.yaml").read_bytes() == human
    assert "T002: kept the human caption." in result.stdout
    saved = yaml.safe_load((cws / "captions" / "T001.yaml").read_text())
    assert saved == {"neutral": "A blue wave curls over three small boats under a pale sky.",
                     "author": "openai:tiny-vlm", "reviewed": False}
    # The model saw the image and instructions against names and verdicts, and nothing of the case.
    body = server.requests[0]
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert "Never identify" in system and "Never judge" in system
    image_url = user[1]["image_url"]["url"]
    assert image_url.startswith("data:image/png;base64,")
    assert base64.b64decode(image_url.split(",", 1)[1]) == (cws / "data" / "images" / "T001.png").read_bytes()
    sent = json.dumps(body)
    for secret in ("surf shop", "Kanagawa", "Hokusai", "RATIONALE", "Yes"):
        assert secret not in sent
    # The lint now flags the draft as unreviewed and asks for evidence.
    lint = lint_captions(load_workspace(cws), ["T001"])
    assert {(f.rule, f.level) for f in lint.findings} == {("unreviewed-draft", "warning"), ("evidence-missing", "error")}


def test_draft_reports_leaks_in_the_draft(cws, chat):
    (cws / "captions" / "T001.yaml").unlink()
    server = chat([(200, "A Hokusai-style wave over boats; it would be ideal for a poster.")])
    result = draft_cli(cws, server, "T001")
    assert result.exit_code == 0, result.output
    assert "captions/T001.yaml: neutral: identity: 'Hokusai'" in result.stdout
    assert "captions/T001.yaml: neutral: verdict: 'ideal'" in result.stdout


def test_redraft_replaces_only_unreviewed_drafts(cws, chat):
    import yaml

    (cws / "captions" / "T001.yaml").unlink()
    server = chat([(200, "First draft of a wave."), (200, "Second draft of a wave.")])
    assert draft_cli(cws, server, "T001").exit_code == 0
    kept = draft_cli(cws, server, "T001")
    assert "kept the unreviewed draft by openai:tiny-vlm; pass --redraft" in kept.stdout
    assert len(server.requests) == 1
    assert draft_cli(cws, server, "T001", "T002", "--redraft").exit_code == 0
    assert len(server.requests) == 2  # T002 is human: never asked about, even with --redraft
    assert yaml.safe_load((cws / "captions" / "T001.yaml").read_text())["neutral"] == "Second draft of a wave."


def test_draft_sends_both_images_of_a_paired_case(cws, chat):
    (cws / "captions" / "T004.yaml").unlink()
    server = chat([(200, "Two rooms: one lit by neon, the other by lamps.")])
    assert draft_cli(cws, server, "T004").exit_code == 0
    user = server.requests[0]["messages"][1]["content"]
    assert [part["type"] for part in user] == ["text", "image_url", "image_url"]
    assert "first image" in user[0]["text"] and "second image" in user[0]["text"]


def test_draft_failure_writes_nothing_and_exits_1(cws, chat):
    (cws / "captions" / "T001.yaml").unlink()
    server = chat([(500, "model crashed")])
    result = draft_cli(cws, server, "T001")
    assert result.exit_code == 1
    assert "T001: not drafted: the request failed: HTTP 500" in result.stdout
    assert "1 draft failed" in result.stderr
    assert not (cws / "captions" / "T001.yaml").exists()
    empty = chat([(200, "   ")])
    result = draft_cli(cws, empty, "T001")
    assert result.exit_code == 1 and "not drafted: openai:tiny-vlm returned an empty reply." in result.stdout
    assert not (cws / "captions" / "T001.yaml").exists()


def test_draft_refuses_a_backend_without_images(cws):
    pytest.importorskip("cfkit.backends.baseline", reason="the backends are not in this checkout")
    result = run_cli(["-w", str(cws), "captions", "draft", "--model", "baseline:always-no", "T001"])
    assert result.exit_code == 2
    assert "cannot see images" in result.stderr
    no_model = run_cli(["-w", str(cws), "captions", "draft", "T001"])
    assert no_model.exit_code == 2 and "no model given" in no_model.stderr


def test_a_missing_key_names_an_option_captions_draft_takes(cws, tmp_path):
    """'captions draft' has no --api-key-env: the line about a missing key must name what it does take
    (-o api_key_env=NAME), and following it gets past that line."""
    pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")
    no_key = {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None}
    result = run_cli(["-w", str(cws), "captions", "draft", "--model", "openai:gpt-5.5", "T001"], env=no_key)
    assert result.exit_code == 2
    assert "-o api_key_env=NAME" in result.stderr, result.stderr
    followed = run_cli(["-w", str(cws), "captions", "draft", "--model", "openai:gpt-5.5", "-o", "api_key_env=CFKIT_T_KEY",
                        "T001"], env=no_key | {"CFKIT_T_KEY": None})
    assert followed.exit_code == 2 and "$CFKIT_T_KEY is not set" in followed.stderr, followed.stderr
    assert "No such option" not in followed.stderr
