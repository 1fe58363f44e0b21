"""A loopback HTTP server that misbehaves on purpose, for the transport's deadline and size-cap tests.

It runs a real threading TCP server on 127.0.0.1 and writes raw bytes, so it
can do what a well-behaved HTTP library would not: drip a body one byte at a
time, never end a chunked body, declare or send 10 MB. Each POST is answered
by the behaviour a ``choose`` function picks from the request body; every
behaviour ends by itself (a bounded number of bytes, a bounded time), and a
write to a client that gave up ends the handler at once.
"""

from __future__ import annotations

import json
import socketserver
import threading
import time
from collections.abc import Callable

#: Longest any handler runs, whatever the behaviour (seconds).
HANDLER_LIFETIME_S = 30.0


def completion_bytes(content: str) -> bytes:
    """A Chat Completions body whose answer text is ``content``."""
    return json.dumps({
        "id": "chatcmpl-hostile", "object": "chat.completion", "created": 0, "model": "hostile-model",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }).encode()


def _head(status: str, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status}", "Content-Type: application/json", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def drip(wfile, deadline: float) -> None:
    """Declares a 1,000-byte body, then sends one byte every 2 s."""
    wfile.write(_head("200 OK", {"Content-Length": "1000"}))
    wfile.flush()
    for _ in range(1000):
        if time.monotonic() > deadline:
            return
        wfile.write(b" ")
        wfile.flush()
        time.sleep(2.0)


def drip_head(wfile, deadline: float) -> None:
    """Sends its status line and headers one byte a second (the body would follow, if ever they ended)."""
    for byte in _head("200 OK", {"Content-Length": "10"}) + b"0123456789":
        if time.monotonic() > deadline:
            return
        wfile.write(bytes([byte]))
        wfile.flush()
        time.sleep(1.0)


def endless(wfile, deadline: float) -> None:
    """A chunked body that never ends: a chunk every 50 ms, never the closing zero-length chunk."""
    wfile.write(_head("200 OK", {"Transfer-Encoding": "chunked"}))
    while time.monotonic() < deadline:
        wfile.write(b"10\r\n" + b" " * 16 + b"\r\n")
        wfile.flush()
        time.sleep(0.05)


def silent(wfile, deadline: float, connection=None) -> None:
    """Reads the request and never answers; returns when the client hangs up (or at the deadline)."""
    connection.settimeout(max(0.0, deadline - time.monotonic()))
    try:
        connection.recv(1)
    except OSError:  # the lifetime ran out
        pass


def huge(wfile, deadline: float) -> None:
    """A 10 MB body with its length declared."""
    size = 10_000_000
    wfile.write(_head("200 OK", {"Content-Length": str(size)}))
    _send_zeros(wfile, size, deadline)


def huge_chunked(wfile, deadline: float) -> None:
    """A 10 MB body in chunks, no length declared."""
    wfile.write(_head("200 OK", {"Transfer-Encoding": "chunked"}))
    chunk = b" " * 65536
    sent = 0
    while sent < 10_000_000 and time.monotonic() < deadline:
        wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        sent += len(chunk)
    wfile.write(b"0\r\n\r\n")


def long_reply(wfile, deadline: float) -> None:
    """A valid completion whose answer text is 1,000,000 characters (1 MB), under the response cap."""
    body = completion_bytes('{"answer": "A", "reason": "' + "x" * (1_000_000 - 29) + '"}')
    wfile.write(_head("200 OK", {"Content-Length": str(len(body))}) + body)


def html(wfile, deadline: float) -> None:
    """A proxy's error page with status 200."""
    body = b"<html><body>Gateway says hello</body></html>"
    wfile.write(_head("200 OK", {"Content-Length": str(len(body)), "Content-Type": "text/html"}) + body)


def hang_up(wfile, deadline: float) -> None:
    """Reads the request and closes the connection without a word (a server that is there but broken)."""


def storm(wfile, deadline: float) -> None:
    """HTTP 429, come back in an hour."""
    body = b'{"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}'
    wfile.write(_head("429 Too Many Requests", {"Content-Length": str(len(body)), "Retry-After": "3600"}) + body)


def busy(wfile, deadline: float) -> None:
    """HTTP 429, come back in a second (for ever)."""
    body = b'{"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}'
    wfile.write(_head("429 Too Many Requests", {"Content-Length": str(len(body)), "Retry-After": "1"}) + body)


def refused(wfile, deadline: float) -> None:
    """HTTP 429 without a Retry-After."""
    body = b'{"error": {"message": "Too many requests"}}'
    wfile.write(_head("429 Too Many Requests", {"Content-Length": str(len(body))}) + body)


def answer(wfile, deadline: float) -> None:
    """A well-formed completion answering A."""
    body = completion_bytes('{"answer": "A", "reason": "fine", "confidence": "high"}')
    wfile.write(_head("200 OK", {"Content-Length": str(len(body))}) + body)


def _send_zeros(wfile, size: int, deadline: float) -> None:
    block = b"0" * 65536
    while size > 0 and time.monotonic() < deadline:
        wfile.write(block[:size])
        size -= len(block)


Behaviour = Callable[..., None]


class HostileServer:
    """``choose(body_bytes)`` picks the behaviour of each request; ``count`` requests were received (a connection
    closed before it sent a request line is none)."""

    def __init__(self, choose: Callable[[bytes], Behaviour]):
        self.count = 0
        self._lock = threading.Lock()
        server = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                deadline = time.monotonic() + HANDLER_LIFETIME_S
                length = 0
                first = True
                while True:
                    line = self.rfile.readline(65537)
                    if first and line == b"":  # a connection closed before any request (a check that one opens)
                        return
                    first = False
                    if line in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                body = self.rfile.read(length)
                with server._lock:
                    server.count += 1
                behaviour = choose(body)
                extra = {"connection": self.connection} if behaviour is silent else {}
                try:
                    behaviour(self.wfile, deadline, **extra)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):  # the client gave up: what the tests want
                    pass

        self.tcp = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler, bind_and_activate=True)
        self.tcp.daemon_threads = True
        self.tcp.block_on_close = False
        self.thread = threading.Thread(target=self.tcp.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.tcp.server_address[1]}/v1"

    def __enter__(self) -> "HostileServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.tcp.shutdown()
        self.tcp.server_close()
