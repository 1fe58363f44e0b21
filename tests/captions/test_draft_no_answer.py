"""``captions draft`` (and the judges, which ask through the same loop) tries the server once before the first
request, as ``probe run`` does: a port nothing listens on stops the drafting at once, every case not asked,
in one line naming what the command takes to fix it. Before, the first case's request ran its five attempts with
back-off against the dead port, was counted failed, and the next ones followed it until three had failed."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.caption_workspace import make_caption_ws
from support.workspace import run_cli


def test_a_dead_server_stops_the_drafting_before_anything_is_sent(tmp_path: Path):
    ws = make_caption_ws(tmp_path / "cws")
    for path in (ws / "captions").glob("*.yaml"):
        path.unlink()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    drafted = run_cli(["-w", str(ws), "captions", "draft", "--all-cases", "-m", "openai:tiny-vlm",
                       "-o", f"base_url={dead}", "-o", "backoff=5"], env={"OPENAI_API_KEY": None})
    assert drafted.exit_code == 1, drafted.stderr
    said = drafted.stderr.strip().splitlines()
    assert said[-1] == (f"error: nothing is listening at {dead} (connection refused): start the server (e.g. "
                        "'transformers serve' or 'vllm serve'), or fix -o base_url=URL; nothing was sent.")
    assert "0 failed" in drafted.stderr and "4 not asked" in drafted.stderr
    assert not list((ws / "captions").glob("*.yaml"))
