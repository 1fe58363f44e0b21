"""``captions draft`` sends the model to the server(s) ``probe run`` would: cfkit.toml's ``[probe] base_urls``
when no ``-o base_url`` is given. Before, drafting read ``[probe] model`` but not ``base_urls``, so a model
configured for a local server went to the default one (https://api.openai.com/v1, with $OPENAI_API_KEY and the
case images), or stopped on a missing key, while ``probe run`` reached the local server."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.caption_workspace import make_caption_ws
from support.chat_api_server import ChatServer, Scripted, completion, error_body, listing
from support.probe_runs import FAST
from support.workspace import run_cli

#: No key and no $OPENAI_BASE_URL: drafting sent to the default server stops at once on the missing key (never
#: reaching out of this machine), a loopback server needs none.
ENV = {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None}
CASES = ("T001", "T002", "T003", "T004")


def described(body: dict, n: int) -> Scripted:
    return Scripted(body=completion("A plain grey picture of a wall.", model=body["model"]))


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    """The caption workspace with no captions: each of its four cases is drafted."""
    ws = make_caption_ws(tmp_path / "cws")
    for path in (ws / "captions").glob("*.yaml"):
        path.unlink()
    return ws


def _configure(ws: Path, *urls: str) -> None:
    config = ws / "cfkit.toml"
    config.write_text(config.read_text() + f'\n[probe]\nmodel = "openai:tiny-vlm"\nbase_urls = {json.dumps(urls)}\n')


def _drafts(ws: Path) -> list[str]:
    return sorted(p.stem for p in (ws / "captions").glob("*.yaml"))


def test_a_server_named_only_in_cfkit_toml_gets_the_drafts_as_it_gets_probe_run(bare):
    with ChatServer(described) as server:
        server.models = listing("tiny-vlm")
        _configure(bare, server.url)
        drafted = run_cli(["-w", str(bare), "captions", "draft", "T001"], env=ENV)
        assert drafted.exit_code == 0, drafted.stderr
        assert server.count == 1 and server.requests[0]["model"] == "tiny-vlm"
        assert _drafts(bare) == ["T001"]
        probed = run_cli(["-w", str(bare), "probe", "run", "-s", "contextcanvas", *FAST], env=ENV)
        assert probed.exit_code == 0, probed.stderr
        assert server.count > 1  # the same server, for the same settings


def test_several_base_urls_are_the_model_s_replicas_for_drafting_too(bare):
    """Drafting asks one case at a time, through the replica set probe run uses: a replica that fails sends the
    request to another at once."""
    def failing(body: dict, n: int) -> Scripted:
        return Scripted(500, error_body("The server had an error", kind="server_error"))

    with ChatServer(failing) as a, ChatServer(described) as b:
        a.models = b.models = listing("tiny-vlm")
        _configure(bare, a.url, b.url)
        drafted = run_cli(["-w", str(bare), "captions", "draft", *CASES], env=ENV)
        assert drafted.exit_code == 0, drafted.stderr
        assert a.count >= 1 and b.count == len(CASES), (a.count, b.count)
    assert _drafts(bare) == list(CASES)


def test_o_base_url_overrides_the_configured_servers(bare):
    with ChatServer(described) as configured, ChatServer(described) as given:
        _configure(bare, configured.url)
        drafted = run_cli(["-w", str(bare), "captions", "draft", "-o", f"base_url={given.url}", "T001"], env=ENV)
        assert drafted.exit_code == 0, drafted.stderr
        assert (configured.count, given.count) == (0, 1)


def test_a_replica_left_out_at_start_up_is_said_as_probe_run_says_it(bare):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    with ChatServer(described) as live:
        live.models = listing("tiny-vlm")
        _configure(bare, dead, live.url)
        drafted = run_cli(["-w", str(bare), "captions", "draft", "T001"], env=ENV)
        assert drafted.exit_code == 0, drafted.stderr
        assert live.count == 1
    said = " ".join(drafted.stderr.split())
    assert f"warning: replica {dead} is left out" in said, said
    assert "fix -o base_url=URL" in said and "--base-url" not in said  # what captions draft takes
