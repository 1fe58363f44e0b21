"""A loopback HTTP server speaking the OpenAI Chat Completions wire format, for tests and benchmarks.

It runs a real ``ThreadingHTTPServer`` on 127.0.0.1 in a background thread
(or, with ``python tests/support/chat_api_server.py``, in its own process). Each POST
to ``…/chat/completions`` is recorded (body and headers) and answered by a
``script``: a function of the parsed request and its 1-based number that
returns a :class:`Scripted` response (status, JSON body, headers, delay).
While ``key`` is set, a request (a model list too) without ``Bearer KEY`` is
answered 401, as a server that wants a key does, and counted in ``refused``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from support.loopback import Loopback


@dataclass
class Scripted:
    status: int = 200
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def completion(content: str | None, *, model: str = "test-model", refusal: str | None = None,
               prompt_tokens: int = 100, completion_tokens: int = 20, finish_reason: str = "stop",
               cached_tokens: Any = None) -> dict[str, Any]:
    """A Chat Completions response body (``finish_reason`` "length": cut off at max_tokens; ``cached_tokens``: how
    many of the prompt tokens the server says it read from its prompt cache, as OpenAI reports them)."""
    body = {
        "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason,
                     "message": {"role": "assistant", "content": content, "refusal": refusal}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }
    if cached_tokens is not None:
        body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached_tokens, "audio_tokens": 0}
    return body


def error_body(message: str, *, kind: str = "invalid_request_error", param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


def user_text(body: dict[str, Any]) -> str:
    """The text parts of the user message of a request."""
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message["content"]
            if isinstance(content, str):
                return content
            return "\n".join(part.get("text", "") for part in content if part.get("type") == "text")
    return ""


def answer_json(answer: str, reason: str = "scripted", confidence: str = "high") -> str:
    return json.dumps({"answer": answer, "reason": reason, "confidence": confidence})


def first_option(body: dict[str, Any], n: int) -> Scripted:
    """Default script: answer the first option listed in the user text ("A. …"), as the model asked (a server
    that serves the name it is asked for)."""
    found = re.search(r"^([A-Z])\. ", user_text(body), re.MULTILINE)
    return Scripted(body=completion(answer_json(found.group(1) if found else "A"), model=body.get("model", "test-model")))


def listing(*ids: str) -> list[dict[str, Any]]:
    """What ``GET /models`` lists for a server serving ``ids`` (``ChatServer.models``): ``study run`` asks it first."""
    return [{"id": i, "object": "model"} for i in ids]


class ChatServer(Loopback):
    """The server, its recorded requests, and its script."""

    URL_PATH = "/v1"

    def __init__(self, script: Callable[[dict[str, Any], int], Scripted] = first_option, *, latency: float = 0.0,
                 port: int = 0):
        self.script = script
        self.latency = latency
        self.models: list[dict[str, Any]] = [{"id": "test-model", "object": "model"}]  # what GET /models lists
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []  # the path of each POST to …/chat/completions
        self.key: str | None = None  # while set, a request without "Bearer KEY" is refused (401), not recorded
        self.refused = 0  # how many were
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def _refused(self) -> bool:
                """Whether the request lacks the key ``server.key`` (then it is answered 401, as a server does)."""
                if server.key is None or self.headers.get("authorization") == f"Bearer {server.key}":
                    return False
                with server._lock:
                    server.refused += 1
                self._send(Scripted(401, error_body("Incorrect API key provided", kind="invalid_api_key")))
                return True

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self._refused():
                    return
                if self.path.rstrip("/").endswith("/models"):
                    self._send(Scripted(body={"object": "list", "data": server.models}))
                else:
                    self._send(Scripted(404, error_body(f"no route {self.path}")))

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if self._refused():
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(Scripted(404, error_body(f"no route {self.path}")))
                    return
                with server._lock:
                    server.requests.append(body)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    server.paths.append(self.path)
                    number = len(server.requests)
                reply = server.script(body, number)
                time.sleep(server.latency + reply.delay)
                self._send(reply)

            def _send(self, reply: Scripted) -> None:
                data = json.dumps(reply.body if reply.body is not None else {}).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                    pass

        self._listen(Handler, port)

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)


class ChatServerProcess:
    """A :class:`ChatServer` (the default script, ``latency`` s a reply) in its own process, so that a test can
    kill it mid-run as a crashed server dies (SIGKILL, by its PID): connections reset, then refused."""

    def __init__(self, latency: float = 0.0):
        self.latency = latency

    def __enter__(self) -> ChatServerProcess:
        import os
        import subprocess
        import sys
        from pathlib import Path

        tests = Path(__file__).resolve().parents[1]
        env = os.environ | {"PYTHONPATH": os.pathsep.join([str(tests), str(tests.parent)])}
        self.proc = subprocess.Popen([sys.executable, __file__, str(self.latency)], stdout=subprocess.PIPE,
                                     text=True, env=env)
        self.url = (self.proc.stdout.readline() if self.proc.stdout else "").strip()
        return self

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)

    def __exit__(self, *exc: object) -> None:
        self.kill()
        if self.proc.stdout:
            self.proc.stdout.close()


if __name__ == "__main__":  # a server in its own process: prints its URL, serves until killed
    import sys

    latency = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
    with ChatServer(latency=latency) as chat:
        print(chat.url, flush=True)
        threading.Event().wait()
