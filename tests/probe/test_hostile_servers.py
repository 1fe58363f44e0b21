"""Hostile servers cannot hang a run or flood the store: every attempt has a total deadline, bodies a size cap.

The servers are real sockets on 127.0.0.1 (tests/support/hostile_http_server.py):
one drips a byte every 2 s, one never ends its chunked body, one never
answers, one sends 10 MB (declared, or chunked without a length), one a 1 MB
answer text, one an HTML page. Deadlines are set short (``timeout``, the
total seconds of one attempt) so the tests stay fast.
"""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.workspace import run_cli
from support.hostile_http_server import (
    HostileServer, answer, drip, drip_head, endless, html, huge, huge_chunked, long_reply, silent,
)
from cfkit.backends import Generation, ProbeRequest, RequestMeta, TransportError, load_backend
from cfkit.backends.http import MAX_RESPONSE_BYTES
from cfkit.backends.openai_chat import MAX_STORED_CHARS
from cfkit.store import Store
from support.store_sql import table_rows

#: Time allowed beyond the deadline for the event loop, the thread switch and closing the socket.
SLACK_S = 0.5


def request() -> ProbeRequest:
    return ProbeRequest(system="s", user="Question?\n\nOptions:\nA. Yes\nB. No", images=(), option_ids=("A", "B"),
                        schema=None, generation=Generation(max_tokens=16),
                        meta=RequestMeta(suite="contextcanvas", case_id="T001", pair_id="", condition="image"))


def ask(url: str, **options):
    backend = load_backend("openai:test-model", {"base_url": url, "backoff": 0.01} | options)

    async def once():
        try:
            return await backend.answer(request())
        finally:
            await backend.aclose()

    started = time.perf_counter()
    try:
        return asyncio.run(once()), time.perf_counter() - started
    except TransportError as exc:
        return exc, time.perf_counter() - started


@pytest.mark.parametrize("behaviour", [drip, endless, silent], ids=["drip", "endless", "silent"])
def test_a_slow_or_endless_response_ends_at_the_deadline_of_each_attempt(behaviour):
    with HostileServer(lambda body: behaviour) as server:
        error, elapsed = ask(server.url, timeout=0.8, max_retries=1)
    assert isinstance(error, TransportError)
    assert str(error) == f"Timeout from {server.url} after 2 attempts: no complete response within 0.8 s"
    assert server.count == 2
    assert 1.6 <= elapsed < 1.6 + 2 * SLACK_S


def test_a_declared_10_mb_body_is_refused_at_once_and_not_retried():
    with HostileServer(lambda body: huge) as server:
        error, elapsed = ask(server.url, timeout=10, max_retries=3)
    assert isinstance(error, TransportError)
    assert str(error) == (f"response too large from {server.url}: the body declares 10,000,000 bytes, "
                          f"over the {MAX_RESPONSE_BYTES:,}-byte cap")
    assert server.count == 1 and elapsed < 2


def test_a_10_mb_body_without_a_declared_length_is_cut_off_at_the_cap():
    with HostileServer(lambda body: huge_chunked) as server:
        error, elapsed = ask(server.url, timeout=10, max_retries=3)
    assert isinstance(error, TransportError)
    assert f"response too large from {server.url}: the body was cut off after " in str(error)
    assert f"over the {MAX_RESPONSE_BYTES:,}-byte cap" in str(error)
    assert server.count == 1 and elapsed < 5


def test_a_long_answer_text_is_cut_to_the_storage_cap_with_its_full_length_kept():
    with HostileServer(lambda body: long_reply) as server:
        reply, _ = ask(server.url, timeout=10)
    assert len(reply.raw) == MAX_STORED_CHARS and reply.raw_chars == 1_000_000
    assert reply.raw.startswith('{"answer": "A", "reason": "xxx')
    assert f"replies longer than {MAX_STORED_CHARS:,} characters were stored cut to that length" in reply.notes


def test_an_html_page_with_status_200_is_a_malformed_body_retried_then_reported():
    with HostileServer(lambda body: html) as server:
        error, _ = ask(server.url, timeout=5, max_retries=1)
    assert isinstance(error, TransportError)
    assert str(error).startswith(f"malformed response body from {server.url} after 2 attempts: ")
    assert server.count == 2


def _by_case(drip_for: bytes, endless_for: bytes, huge_for: bytes):
    def choose(body: bytes):
        for needle, behaviour in ((drip_for, drip), (endless_for, endless), (huge_for, huge)):
            if needle in body:
                return behaviour
        return answer
    return choose


def test_a_run_against_hostile_servers_finishes_and_stores_capped_replies(tiny_ws):
    args = ["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas", "-j", "3",
            "-o", "timeout=1", "-o", "max_retries=0", "--json"]
    # T001 drips, T002 never ends its body, T003 sends 10 MB: each request ends by its deadline.
    choose = _by_case(b"spring fair poster", b"winter card", b"Which event")
    with HostileServer(choose) as server:
        started = time.perf_counter()
        first = run_cli([*args, "--base-url", server.url])
        elapsed = time.perf_counter() - started
    summary = json.loads(first.stdout)
    assert summary["status"] == "incomplete" and summary["errors"] == 3, first.stderr
    assert elapsed < 1 + 3 * SLACK_S + 2  # one deadline (the three in parallel), plus the command itself
    with Store(tiny_ws / ".cfkit" / "cfkit.db") as store:
        details = {r["case_id"]: r["detail"] for r in table_rows(store.path, "replies", "case_id, detail")}
    assert details["T001"].startswith("Timeout from") and details["T002"].startswith("Timeout from")
    assert details["T003"].startswith("response too large from")

    # The next run sends the three again; this time each answer text is 1 MB and is stored cut.
    with HostileServer(lambda body: long_reply) as server:
        second = run_cli([*args, "--base-url", server.url])
    summary = json.loads(second.stdout)
    assert summary["status"] == "done" and summary["sent"] == 3, second.stderr
    assert f"replies longer than {MAX_STORED_CHARS:,} characters were stored cut" in second.stderr
    with Store(tiny_ws / ".cfkit" / "cfkit.db") as store:
        stored = [len(r["raw"]) for r in table_rows(store.path, "replies", "raw") if r["raw"] is not None]
        cached = [len(r["raw"]) for r in table_rows(store.path, "responses", "raw")]
    assert stored == [MAX_STORED_CHARS] * 3
    assert cached == [MAX_STORED_CHARS] * 3


# ── downloads: a total deadline, and nothing partial left in place ─────────


@pytest.mark.parametrize("behaviour", [drip, drip_head, endless], ids=["drip", "drip_head", "endless"])
def test_weights_fetch_ends_at_its_total_deadline_and_keeps_no_partial_file(behaviour, tmp_path, monkeypatch):
    pytest.importorskip("lpips", reason="the lpips extra is not installed")
    weights = tmp_path / "weights"
    monkeypatch.setenv("CFKIT_WEIGHTS_DIR", str(weights))
    monkeypatch.delenv("CFKIT_LPIPS_URL", raising=False)
    with HostileServer(lambda body: behaviour) as server:
        started = time.perf_counter()
        result = run_cli(["weights", "fetch", "lpips", "--url", f"{server.url}/alexnet-owt-7be5be79.pth",
                          "--timeout", "3"])
        elapsed = time.perf_counter() - started
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "took longer than 3 s in all" in lines[0], result.stderr
    assert elapsed < 3 + 3.0  # the deadline, and slack for a loaded machine (each read waits at most 5 s)
    assert [p for p in weights.rglob("*") if p.is_file()] == []


def test_a_fetch_killed_part_way_leaves_a_scratch_folder_that_the_next_fetch_removes(tmp_path, monkeypatch):
    pytest.importorskip("lpips", reason="the lpips extra is not installed")
    import subprocess
    import sys

    weights = tmp_path / "weights"
    monkeypatch.setenv("CFKIT_WEIGHTS_DIR", str(weights))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    abandoned = weights / f".fetch-{gone.pid}-x1y2"
    abandoned.mkdir(parents=True)
    (abandoned / "alexnet-owt-7be5be79.pth").write_bytes(b"\0" * 1000)  # what a kill -9 left
    mine = weights / f".fetch-{os.getpid()}-busy"  # a fetch still running (this process) keeps its folder
    mine.mkdir()
    with HostileServer(lambda body: html) as server:
        result = run_cli(["weights", "fetch", "lpips", "--url", f"{server.url}/alexnet-owt-7be5be79.pth"])
    assert result.exit_code == 1
    assert not abandoned.exists() and mine.exists()
