"""A request body sent in parts (JSONClient.post with a list) is the same request on the wire as the joined body."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import threading
from http.server import BaseHTTPRequestHandler

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.chat_api_server import ChatServer, Scripted, completion
from support.backend_requests import ask, request
from support.loopback import Loopback
from cfkit.backends import load_backend
from cfkit.backends.http import JSONClient
from cfkit.images import ImageData


class RawServer(Loopback):
    """Records each POST as it arrived: its request line, its header lines in order, and its body bytes."""

    def __init__(self, status: int = 200):
        self.seen: list[tuple[str, list[tuple[str, str]], bytes]] = []
        lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["content-length"]))
                with lock:
                    server.seen.append((self.requestline, list(self.headers.items()), body))
                data = json.dumps(completion("ok")).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._listen(Handler)


def _post_each(url: str, bodies: list) -> list:
    async def go():
        client = JSONClient(url, {"Authorization": "Bearer test"}, deadline=10)
        try:
            return [await client.post("/chat/completions", body) for body in bodies]
        finally:
            await client.aclose()

    return asyncio.run(go())


#: Parts as the openai backend makes them (text before an image, its base64, the rest), with the edge cases:
#: an empty part, parts on both sides of the size from which a part is written as a view of itself.
PARTS_CASES = {
    "one image": [b'{"messages": [{"content": "data:image/jpeg;base64,', os.urandom(210_000).hex().encode()[:210_000],
                  b'"}], "max_tokens": 16}'],
    "two images and an empty part": [b'{"a": "', b"x" * 65_535, b'", "b": "', b"y" * 65_536, b"", b'"}'],
    "no image": [b'{"model": "m"}'],
}


@pytest.mark.parametrize("parts", PARTS_CASES.values(), ids=PARTS_CASES.keys())
def test_a_body_in_parts_is_the_same_request_as_the_joined_body(parts):
    with RawServer() as server:
        exchanges = _post_each(server.url, [parts, b"".join(parts), list(parts)])
    assert [e.status for e in exchanges] == [200, 200, 200]
    (line, headers, body), joined, again = server.seen
    assert (line, headers, body) == joined == again  # the same request line, header lines in order, and body
    assert body == b"".join(parts)
    assert dict(headers)["Content-Length"] == str(len(body)) and dict(headers)["Content-Type"] == "application/json"


def test_the_openai_backend_sends_its_body_in_parts_and_the_server_reads_the_whole_json():
    """Two images in one request: the server parses one JSON body holding both data URLs (and a retry after a
    500 sends the same parts again)."""
    images = (ImageData(os.urandom(150_001), "image/jpeg"), ImageData(os.urandom(70_000), "image/png"))
    calls = []

    def script(body, n):
        calls.append(n)
        return Scripted(500, {"error": {"message": "busy"}}) if n == 1 else Scripted(body=completion("A"))

    with ChatServer(script) as server:
        backend = load_backend("openai:test-model", {"base_url": server.url, "backoff": 0.01, "timeout": 10})
        reply = ask(backend, request(images=images))
    assert reply.raw == "A" and calls == [1, 2]
    assert server.requests[0] == server.requests[1]
    urls = [part["image_url"]["url"] for part in server.requests[1]["messages"][1]["content"][1:]]
    assert urls == [f"data:{image.mime};base64,{base64.b64encode(image.data).decode()}" for image in images]
