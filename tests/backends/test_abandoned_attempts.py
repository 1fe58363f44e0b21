"""Attempts given up after the request was sent (a timeout once connected, a connection dropped mid-reply) are
counted with the reply, or the failure, they came before: a provider may bill them although cfkit priced only the
reply that came. A refused connection or an error status answered at once is not counted: nothing was generated."""

from __future__ import annotations

import asyncio
import socket

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from cfkit.backends import TransportError, load_backend
from cfkit.backends.http import JSONClient
from support.backend_requests import ask
from support.chat_api_server import ChatServer, Scripted, completion, error_body
from support.hostile_http_server import HostileServer, answer, hang_up, silent


def openai(url: str, **options):
    return load_backend("openai:test-model", {"base_url": url, "backoff": 0.01, "max_retries": 3, "timeout": 5}
                        | options)


def slow_first(seconds: float):
    """A script whose first attempt answers only after ``seconds``; the next ones at once."""
    return lambda body, n: Scripted(body=completion("A"), delay=seconds if n == 1 else 0.0)


def test_a_reply_after_a_timed_out_attempt_counts_that_attempt():
    with ChatServer(slow_first(1.5)) as server:
        reply = ask(openai(server.url, timeout=0.4, price_in=1000, price_out=0))
    assert server.count == 2 and reply.abandoned == 1
    assert reply.cost_usd == pytest.approx(0.1)  # the reply's own cost: what the server reported for it


def test_error_statuses_answered_at_once_are_not_counted():
    def script(body, n):
        return Scripted(503, error_body("busy", kind="server_error")) if n < 3 else Scripted(body=completion("A"))

    with ChatServer(script) as server:
        reply = ask(openai(server.url))
    assert server.count == 3 and reply.abandoned == 0


def test_a_request_that_fails_carries_its_abandoned_attempts():
    with ChatServer(lambda body, n: Scripted(body=completion("A"), delay=1.5)) as server:
        with pytest.raises(TransportError, match="Timeout") as failed:
            ask(openai(server.url, timeout=0.3, max_retries=1))
    assert server.count == 2 and failed.value.abandoned == 2


def test_a_connection_dropped_mid_reply_is_counted_and_a_refused_one_is_not():
    with HostileServer(lambda body: hang_up) as dropping:
        with pytest.raises(TransportError) as dropped:
            ask(openai(dropping.url, max_retries=1))
    assert dropping.count == 2 and dropped.value.abandoned == 2
    with pytest.raises(TransportError) as refused:
        ask(openai("http://127.0.0.1:1/v1", max_retries=1))
    assert refused.value.abandoned == 0


def test_the_transport_tells_a_deadline_passed_while_connecting_from_one_passed_after_sending():
    async def attempts(full_url: str, silent_url: str):
        out = []
        for url in (full_url, silent_url):
            client = JSONClient(url, {}, deadline=0.4)
            try:
                out.append(await client.post("/chat/completions", b"{}"))
            finally:
                await client.aclose()
        return out

    # A listening socket whose accept queue is full: the handshake never completes, nothing is sent.
    full = socket.socket()
    full.bind(("127.0.0.1", 0))
    full.listen(0)
    queued = []
    try:
        for _ in range(4):
            peer = socket.socket()
            peer.setblocking(False)
            peer.connect_ex(full.getsockname())
            queued.append(peer)
        with HostileServer(lambda body: silent) as quiet:
            connecting, waiting = asyncio.run(attempts(f"http://127.0.0.1:{full.getsockname()[1]}", quiet.url))
    finally:
        for peer in queued:
            peer.close()
        full.close()
    assert (connecting.failure, connecting.abandoned) == ("Timeout", False)
    assert (waiting.failure, waiting.abandoned) == ("Timeout", True)


def test_a_well_answered_request_counts_nothing():
    with HostileServer(lambda body: answer) as server:
        assert ask(openai(server.url)).abandoned == 0


def test_anthropic_counts_a_timed_out_attempt_and_not_a_refused_connection():
    pytest.importorskip("anthropic")
    from support.anthropic_api_server import AnthropicServer, Scripted as Said

    def slow_first_message(params, n):
        return Said(text="A", delay=1.5 if n == 1 else 0.0)

    def claude(url: str, **options):
        return load_backend("anthropic:claude-test", {"base_url": url, "backoff": 0.01, "max_retries": 2,
                                                      "timeout": 5} | options)

    with AnthropicServer(slow_first_message) as server:
        reply = ask(claude(server.url, timeout=0.4))
    assert len(server.messages) == 2 and reply.abandoned == 1
    with pytest.raises(TransportError) as refused:
        ask(claude("http://127.0.0.1:1", max_retries=1))
    assert refused.value.abandoned == 0
