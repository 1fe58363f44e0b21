"""A loopback server speaking the OpenAI Files and Batches wire format, for tests.

It runs a real ``ThreadingHTTPServer`` on 127.0.0.1 in a background thread:

- ``POST /v1/files`` takes a ``multipart/form-data`` upload (``purpose=batch``,
  ``file``) and answers a file object;
- ``POST /v1/batches`` checks the input file as OpenAI documents it (JSONL;
  each line a unique ``custom_id``, ``method`` POST, ``url`` equal to the
  batch's ``endpoint``, one model throughout) and answers a batch object,
  ``validating`` (or ``failed`` with ``errors`` when a line is wrong);
- ``GET /v1/batches/{id}`` moves the batch one status on per look
  (``validating`` → ``in_progress`` → ``finalizing`` → ``completed``; after
  ``polls`` looks it has ended) and, when it ends, answers every line with
  ``script`` (the same scripts as tests/support/chat_api_server.py) into an output
  file and an error file; ``custom_id`` values in ``expire`` are left
  unanswered and the batch ends ``expired``, as a batch does whose 24 hours
  ran out (``ends_as`` "cancelled" or "failed" ends it so instead; with
  ``list_unanswered`` False they are in neither file, a partial output);
- ``POST /v1/batches/{id}/cancel`` makes a batch that has not ended
  ``cancelling``, or is refused with a 400 when ``refuse_cancel``; it ends
  ``cancelled`` at the next look (or after ``cancel_looks`` looks) with what
  it answered before it stopped, as OpenAI's does: every line but those in
  ``expire`` in the output file, those in the error file (``batch_cancelled``)
  or, with ``list_unanswered`` False, in neither;
- a batch in ``forgotten`` is answered 404, as one the provider deleted;
- ``refuse_create`` (a status and a body) answers every ``POST /v1/batches``
  (an account that cannot pay, say);
- ``GET /v1/files/{id}/content`` answers a file's bytes;
- ``GET /v1/models`` answers ``models`` as the model list (as
  tests/support/chat_api_server.py's ``listing`` makes them), or 404 while
  it is None;
- ``POST /v1/chat/completions`` answers live, with the same script (for the
  requests sent again after a batch).

Every request is recorded (method, path, headers).

``hostile`` makes it misbehave as a broken proxy or a careless provider
might (:data:`HOSTILE`): a malformed line in the output file, an HTML page
with status 200 for one call, one batch id for every batch, a result line
repeated with another answer, a batch id that is a path, or an output file
sent one byte at a time.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from support.loopback import Loopback

from support.chat_api_server import Scripted, error_body, first_option

_ids = itertools.count(1)
#: The ways the server can misbehave (``hostile=``).
HOSTILE = ("malformed_line", "html_upload", "html_create", "html_get", "html_content", "reused_id",
           "duplicate_id", "path_id", "drip_content")
HTML = b"<html><body>Please log in to the guest network</body></html>"


def _new_id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):06d}"


class BatchServer(Loopback):
    """The server, what it was sent, and its batches."""

    URL_PATH = "/v1"

    def __init__(self, script: Callable[[dict[str, Any], int], Scripted] = first_option, *, polls: int = 3,
                 expire: frozenset[str] = frozenset(), hostile: str | None = None, drip_s: float = 0.2,
                 ends_as: str = "expired", list_unanswered: bool = True):
        assert hostile is None or hostile in HOSTILE, hostile
        self.hostile = hostile
        self.drip_s = drip_s
        self.script = script
        self.polls = polls
        self.expire = set(expire)
        self.ends_as = ends_as
        self.list_unanswered = list_unanswered
        self.forgotten: set[str] = set()
        self.models: list[dict[str, Any]] | None = None  # what GET /models lists (None: no such route, a 404)
        self.refuse_cancel = False
        self.refuse_create: tuple[int, dict[str, Any]] | None = None  # (status, body) answered to POST /batches
        self.cancel_looks = 1  # looks a cancelling batch takes to end cancelled
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.looks: dict[str, int] = {}
        self.log: list[tuple[str, str, dict[str, str]]] = []
        self.answered = 0  # lines and live requests answered by the script
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("content-length", 0)))

            def do_GET(self) -> None:  # noqa: N802
                server._record(self)
                parts = self.path.split("?")[0].strip("/").split("/")
                kind = "content" if parts[-1] == "content" else "get"
                if server.hostile == f"html_{kind}":
                    self._send(200, HTML, "text/html")
                elif parts[-1] == "models" and server.models is not None:
                    self._json(200, {"object": "list", "data": server.models})
                elif parts[-3:-1] == ["files", parts[-2]] and parts[-1] == "content" and parts[-2] in server.files:
                    if server.hostile == "drip_content":
                        self._drip(server.files[parts[-2]]["data"])
                    else:
                        self._send(200, server.files[parts[-2]]["data"], "application/jsonl")
                elif len(parts) >= 2 and parts[-2] == "batches" and parts[-1] in server.forgotten:
                    self._json(404, error_body(f"No batch found with id '{parts[-1]}'."))
                elif len(parts) >= 2 and parts[-2] == "batches" and parts[-1] in server.batches:
                    self._json(200, server._look(parts[-1]))
                else:
                    self._json(404, error_body(f"no route {self.path}"))

            def do_POST(self) -> None:  # noqa: N802
                server._record(self)
                data = self._body()
                path = self.path.rstrip("/")
                if server.hostile in ("html_upload", "html_create") and path.endswith(
                        "/files" if server.hostile == "html_upload" else "/batches"):
                    self._send(200, HTML, "text/html")
                elif path.endswith("/cancel") and path.split("/")[-2] in server.batches:
                    self._json(*server._cancel(path.split("/")[-2]))
                elif path.endswith("/files"):
                    self._json(*server._upload(self.headers.get("content-type", ""), data))
                elif path.endswith("/batches") and server.refuse_create is not None:
                    self._json(*server.refuse_create)
                elif path.endswith("/batches"):
                    self._json(*server._create(json.loads(data)))
                elif path.endswith("/chat/completions"):
                    reply = server._answer(json.loads(data))
                    self._json(reply.status, reply.body or {})
                else:
                    self._json(404, error_body(f"no route {self.path}"))

            def _drip(self, data: bytes) -> None:
                self.send_response(200)
                self.send_header("content-type", "application/jsonl")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                try:
                    for byte in data:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(server.drip_s)
                except OSError:  # the client gave up
                    pass

            def _json(self, status: int, body: Any) -> None:
                self._send(status, json.dumps(body).encode(), "application/json")

            def _send(self, status: int, data: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._listen(Handler)

    # -- the wire format -------------------------------------------------------

    def _record(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.log.append((handler.command, handler.path, {k.lower(): v for k, v in handler.headers.items()}))

    def _answer(self, body: dict[str, Any]) -> Scripted:
        with self._lock:
            self.answered += 1
            number = self.answered
        return self.script(body, number)

    def _upload(self, content_type: str, data: bytes) -> tuple[int, Any]:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + data)
        fields = {part.get_param("name", header="content-disposition"): part for part in message.iter_parts()}
        if "file" not in fields or "purpose" not in fields:
            return 400, error_body("an upload needs 'purpose' and 'file'")
        purpose = fields["purpose"].get_content().strip()
        if purpose != "batch":
            return 400, error_body(f"purpose '{purpose}' is not supported here")
        content = fields["file"].get_payload(decode=True)
        file_id = _new_id("file")
        name = fields["file"].get_param("filename", header="content-disposition")
        self.files[file_id] = {"data": content, "filename": name, "purpose": purpose}
        return 200, {"id": file_id, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                     "filename": name, "purpose": purpose}

    def _create(self, request: dict[str, Any]) -> tuple[int, Any]:
        file_id = request.get("input_file_id")
        if file_id not in self.files:
            return 400, error_body(f"no file {file_id}")
        if request.get("completion_window") != "24h":
            return 400, error_body("completion_window must be 24h")
        endpoint = request.get("endpoint")
        lines, errors, seen, models = [], [], set(), set()
        for number, raw in enumerate(self.files[file_id]["data"].splitlines(), 1):
            line = json.loads(raw)
            if line.get("custom_id") in seen:
                errors.append({"code": "duplicate_custom_id", "message": "custom_id must be unique", "line": number})
            if line.get("method") != "POST" or line.get("url") != endpoint:
                errors.append({"code": "invalid_url", "message": f"url must be {endpoint}", "line": number})
            seen.add(line.get("custom_id"))
            models.add(line.get("body", {}).get("model"))
            lines.append(line)
        if len(models) > 1:
            errors.append({"code": "mixed_models", "message": "every line must ask the same model", "line": None})
        batch_id = {"reused_id": "batch_reused", "path_id": f"../files/{file_id}/content"}.get(
            self.hostile or "", _new_id("batch"))
        self.batches[batch_id] = {
            "id": batch_id, "object": "batch", "endpoint": endpoint, "input_file_id": file_id,
            "completion_window": "24h", "status": "failed" if errors else "validating",
            "errors": {"object": "list", "data": errors} if errors else None, "output_file_id": None,
            "error_file_id": None, "created_at": int(time.time()), "metadata": request.get("metadata"),
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0}, "_lines": lines}
        self.looks[batch_id] = 0
        return 200, self._public(batch_id)

    def _cancel(self, batch_id: str) -> tuple[int, Any]:
        batch = self.batches[batch_id]
        if self.refuse_cancel:
            return 400, error_body("cancelling batches is not allowed for this project")
        if batch["status"] in ("failed", "completed", "expired", "cancelled"):
            return 400, error_body(f"Cannot cancel a batch with status '{batch['status']}'.")
        batch["status"] = "cancelling"
        batch["_cancel_looks"] = 0
        batch["request_counts"]["completed"] = sum(1 for line in batch["_lines"] if line["custom_id"] not in self.expire)
        return 200, self._public(batch_id)

    def _public(self, batch_id: str) -> dict[str, Any]:
        return {k: v for k, v in self.batches[batch_id].items() if not k.startswith("_")}

    def _look(self, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        self.looks[batch_id] += 1
        if batch["status"] == "cancelling":
            batch["_cancel_looks"] += 1
            if batch["_cancel_looks"] >= self.cancel_looks:
                self._end(batch_id, "cancelled")
            return self._public(batch_id)
        if batch["status"] in ("failed", "completed", "expired", "cancelled"):
            return self._public(batch_id)
        steps = ["validating", "in_progress", "finalizing"]
        if self.looks[batch_id] < self.polls:
            batch["status"] = steps[min(self.looks[batch_id], len(steps) - 1)]
            return self._public(batch_id)
        left = any(line["custom_id"] in self.expire for line in batch["_lines"])
        self._end(batch_id, self.ends_as if left else "completed")
        return self._public(batch_id)

    def _end(self, batch_id: str, status: str) -> None:
        """End a batch ``status``: each line not in ``expire`` answered by the script into the output (or, not a
        200, the error) file; those in ``expire`` left unanswered (listed in the error file, or not)."""
        batch = self.batches[batch_id]
        out, failed, done = [], [], 0
        for line in batch["_lines"]:
            custom_id = line["custom_id"]
            if custom_id in self.expire:
                if self.list_unanswered:
                    failed.append({"id": _new_id("batch_req"), "custom_id": custom_id, "response": None,
                                   "error": {"code": f"batch_{status}", "message": "This request could not be "
                                             f"executed before the batch was {status}."}})
                continue
            reply = self._answer(line["body"])
            entry = {"id": _new_id("batch_req"), "custom_id": custom_id, "error": None,
                     "response": {"status_code": reply.status, "request_id": _new_id("req"), "body": reply.body}}
            (out if reply.status == 200 else failed).append(entry)
            done += reply.status == 200
        for kind, entries in (("output_file_id", out), ("error_file_id", failed)):
            if entries:
                file_id = _new_id("file")
                lines = [json.dumps(e) + "\n" for e in entries]
                if kind == "output_file_id" and self.hostile == "malformed_line":
                    lines[0] = lines[0][:len(lines[0]) // 2] + "\n"  # cut mid-line: its custom_id still shows
                    lines.append("<html>upstream timed out</html>\n")
                if kind == "output_file_id" and self.hostile == "duplicate_id":
                    twin = json.loads(lines[0])
                    twin["response"]["body"]["choices"][0]["message"]["content"] = "a second, different answer"
                    lines.append(json.dumps(twin) + "\n")
                self.files[file_id] = {"data": "".join(lines).encode(),
                                       "filename": f"{batch_id}_{kind}.jsonl", "purpose": "batch_output"}
                batch[kind] = file_id
        batch["status"] = status
        batch["request_counts"] = {"total": len(batch["_lines"]), "completed": done, "failed": len(failed)}

    # -- plumbing --------------------------------------------------------------


    def lines(self) -> list[dict[str, Any]]:
        """Every line of every uploaded batch input file, in order."""
        return [json.loads(raw) for f in self.files.values() if f["purpose"] == "batch"
                for raw in f["data"].splitlines()]

    def calls(self, method: str, fragment: str) -> int:
        return sum(1 for m, path, _ in self.log if m == method and fragment in path)


