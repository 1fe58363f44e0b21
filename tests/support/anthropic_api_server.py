"""A loopback HTTP server speaking Anthropic's Messages and Message Batches wire formats, for tests.

``POST /v1/messages`` is recorded (body and headers) and answered by a
``script`` (the parsed body and its 1-based number -> a :class:`Scripted`
status and message text). ``POST /v1/messages/batches`` creates a batch of
``{"custom_id", "params"}`` requests; ``GET /v1/messages/batches/ID`` says
``in_progress`` for the first ``polls_before_end`` looks, then ``ended`` with
a ``results_url``; ``GET …/results`` streams one JSON line a request, each
answered by the same script (``succeeded`` with a message, or ``errored``),
and passed through ``mangle`` when given; a request whose ``custom_id`` is in
``expire`` is ``expired`` instead (the batch's 24 hours ran out before it).
``POST …/ID/cancel`` makes a batch that has not ended ``canceling``; it ends
at the next look, each request in ``expire`` ``canceled`` and the others
answered, as a batch does that answered part before it stopped. A batch in
``forgotten`` is answered 404. ``GET /v1/models`` and ``GET /v1/models/ID``
answer from ``models`` (each made by :func:`model`), or 404 while it is None;
they are not recorded. While ``refuse_key`` is a status (401, 403), every
request is answered with it and an ``authentication_error``, as a server
that refuses the key does (recorded all the same).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from support.loopback import Loopback

TIMESTAMP = "2026-12-02T12:00:00Z"


@dataclass
class Scripted:
    status: int = 200
    text: str = ""
    stop_reason: str = "end_turn"
    thinking: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    error_type: str = "invalid_request_error"
    usage: dict[str, Any] | None = None  # the message's usage (default: 100 input and 20 output tokens)
    delay: float = 0.0  # seconds before the answer goes (past the client's timeout: an abandoned attempt)


def model(model_id: str) -> dict[str, Any]:
    """A model as ``GET /v1/models`` lists it."""
    return {"id": model_id, "type": "model", "display_name": model_id, "created_at": TIMESTAMP}


def user_text(params: dict[str, Any]) -> str:
    parts = []
    for message in params.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        else:
            parts += [b.get("text", "") for b in content if b.get("type") == "text"]
    return "\n".join(parts)


def first_option(params: dict[str, Any], n: int) -> Scripted:
    found = re.search(r"^([A-Z])\. ", user_text(params), re.MULTILINE)
    return Scripted(text=json.dumps({"answer": found.group(1) if found else "A", "reason": "scripted",
                                     "confidence": "high"}))


def message(params: dict[str, Any], reply: Scripted) -> dict[str, Any]:
    content = [{"type": "thinking", "thinking": reply.thinking, "signature": "sig"}] if reply.thinking else []
    content.append({"type": "text", "text": reply.text})
    return {"id": f"msg_{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant",
            "model": params.get("model", "claude-test"), "content": content, "stop_reason": reply.stop_reason,
            "stop_sequence": None, "usage": reply.usage or {"input_tokens": 100, "output_tokens": 20}}


def error_body(kind: str, text: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": text}}


class AnthropicServer(Loopback):
    """The server, what it received, and its script."""

    def __init__(self, script: Callable[[dict[str, Any], int], Scripted] = first_option, *,
                 polls_before_end: int = 1, results_host: str | None = None,
                 mangle: Callable[[list[str]], list[str]] | None = None):
        self.script = script
        self.mangle = mangle  # what becomes of the results lines on their way (a proxy cutting one short …)
        self.polls_before_end = polls_before_end
        self.results_host = results_host  # where results_url points (default: this server)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.batches: dict[str, dict[str, Any]] = {}
        self.forgotten: set[str] = set()
        self.expire: set[str] = set()
        self.models: list[dict[str, Any]] | None = None  # GET /v1/models (None: no such route, a 404); model()
        self.refuse_key: int | None = None  # a status every request is answered with while set (the key refused)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _record(self, body: Any) -> int:
                with server._lock:
                    server.requests.append({"path": self.path, "body": body})
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    return len(server.requests)

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                n = self._record(body)
                if server.refuse_key is not None:
                    return self._send(server.refuse_key, error_body("authentication_error", "invalid x-api-key"))
                path = self.path.split("?")[0].rstrip("/")
                if path == "/v1/messages":
                    reply = server.script(body, n)
                    time.sleep(reply.delay)
                    if reply.status != 200:
                        return self._send(reply.status, error_body(reply.error_type, reply.text), reply.headers)
                    return self._send(200, message(body, reply))
                if path == "/v1/messages/batches":
                    batch_id = f"msgbatch_{uuid.uuid4().hex[:16]}"
                    with server._lock:
                        server.batches[batch_id] = {"requests": body["requests"], "polls": 0}
                    return self._send(200, server.batch_object(batch_id))
                cancel = re.fullmatch(r"/v1/messages/batches/([^/]+)/cancel", path)
                if cancel and cancel.group(1) in server.batches and cancel.group(1) not in server.forgotten:
                    with server._lock:
                        server.batches[cancel.group(1)]["canceling"] = True
                    return self._send(200, server.batch_object(cancel.group(1)))
                self._send(404, error_body("not_found_error", f"no route {self.path}"))

            def do_GET(self) -> None:  # noqa: N802
                if server.refuse_key is not None:
                    self._record(None)
                    return self._send(server.refuse_key, error_body("authentication_error", "invalid x-api-key"))
                listed = re.fullmatch(r"/v1/models(?:/([^/?]+))?", self.path.split("?")[0])
                if listed and server.models is not None:  # not recorded: asked before a batch is created
                    ids = [m["id"] for m in server.models]
                    if listed.group(1) is None:
                        return self._send(200, {"data": server.models, "has_more": False,
                                                "first_id": ids[0] if ids else None,
                                                "last_id": ids[-1] if ids else None})
                    if listed.group(1) in ids:
                        return self._send(200, next(m for m in server.models if m["id"] == listed.group(1)))
                    return self._send(404, error_body("not_found_error", f"model: {listed.group(1)}"))
                n = self._record(None)
                found = re.fullmatch(r"/v1/messages/batches/([^/?]+)(/results)?", self.path.split("?")[0])
                if not found or found.group(1) not in server.batches or found.group(1) in server.forgotten:
                    return self._send(404, error_body("not_found_error", f"no route {self.path}"))
                batch_id = found.group(1)
                if found.group(2):
                    batch = server.batches[batch_id]
                    lines = [json.dumps(server.result(entry, n, "canceled" if batch.get("canceled") else "expired"))
                             for entry in batch["requests"]]
                    lines = server.mangle(lines) if server.mangle else lines
                    data = ("\n".join(lines) + "\n").encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/binary")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                with server._lock:
                    server.batches[batch_id]["polls"] += 1
                    if server.batches[batch_id].get("canceling"):
                        server.batches[batch_id]["canceled"] = True  # it ends at this look
                self._send(200, server.batch_object(batch_id))

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                    pass

        self._listen(Handler)

    def batch_object(self, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        ended = (batch["polls"] > self.polls_before_end - 1 and batch["polls"] > 0) or bool(batch.get("canceled"))
        total = len(batch["requests"])
        left = sum(1 for r in batch["requests"] if r["custom_id"] in self.expire) if ended else 0
        errored = sum(1 for r in batch["requests"] if r["custom_id"] not in self.expire
                      and self.script(r["params"], 0).status != 200) if ended else 0
        host = self.results_host or self.url
        running = "canceling" if batch.get("canceling") else "in_progress"
        return {"id": batch_id, "type": "message_batch", "processing_status": "ended" if ended else running,
                "request_counts": {"processing": 0 if ended else total,
                                   "succeeded": total - errored - left if ended else 0, "errored": errored,
                                   "canceled": left if batch.get("canceled") else 0,
                                   "expired": 0 if batch.get("canceled") else left},
                "created_at": TIMESTAMP, "expires_at": "2026-12-03T12:00:00Z", "ended_at": TIMESTAMP if ended else None,
                "cancel_initiated_at": TIMESTAMP if batch.get("canceling") else None, "archived_at": None,
                "results_url": f"{host}/v1/messages/batches/{batch_id}/results" if ended else None}

    def result(self, entry: dict[str, Any], n: int, unanswered: str = "expired") -> dict[str, Any]:
        if entry["custom_id"] in self.expire:
            return {"custom_id": entry["custom_id"], "result": {"type": unanswered}}
        reply = self.script(entry["params"], n)
        if reply.status != 200:
            return {"custom_id": entry["custom_id"], "result": {"type": "errored", "error": error_body(
                reply.error_type, reply.text)}}
        return {"custom_id": entry["custom_id"], "result": {"type": "succeeded",
                                                            "message": message(entry["params"], reply)}}


    @property
    def messages(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r["body"] for r in self.requests if r["path"].split("?")[0].rstrip("/") == "/v1/messages"]
