"""A real HTTP server on 127.0.0.1 that speaks the OpenAI images API's edit endpoint.

It parses each multipart request, records its fields and files, and answers
from a script: by default a solid-colour PNG of the requested ``size`` for each
of ``n`` images, as ``b64_json``, with a ``usage`` block.
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import io
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from PIL import Image

REPLY_COLOUR = (200, 30, 160)


@dataclass
class Upload:
    filename: str | None
    content_type: str
    data: bytes

    def image(self) -> Image.Image:
        return Image.open(io.BytesIO(self.data))


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    fields: dict[str, str]
    files: dict[str, Upload]
    raw: bytes


@dataclass
class ImagesAPI:
    """Scripted replies: each entry is ``(status, json_body)``, None for the default success,
    or a float: wait that many seconds, then the default success (to provoke client timeouts)."""

    script: list[tuple[int, dict] | float | None] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)

    def reply(self, rec: Recorded) -> tuple[int, dict]:
        if self.script:
            entry = self.script.pop(0)
            if isinstance(entry, float):
                time.sleep(entry)
            elif entry is not None:
                return entry
        width, height = (int(v) for v in rec.fields.get("size", "1024x1024").split("x"))
        n = int(rec.fields.get("n", "1"))
        png = io.BytesIO()
        Image.fromarray(np.full((height, width, 3), REPLY_COLOUR, np.uint8)).save(png, format="PNG")
        b64 = base64.b64encode(png.getvalue()).decode()
        return 200, {"created": 1_700_000_000, "data": [{"b64_json": b64} for _ in range(n)],
                     "usage": {"input_tokens": 50, "output_tokens": 4000, "total_tokens": 4050,
                               "input_tokens_details": {"image_tokens": 40, "text_tokens": 10}}}


def parse_multipart(content_type: str, body: bytes) -> tuple[dict[str, str], dict[str, Upload]]:
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    fields: dict[str, str] = {}
    files: dict[str, Upload] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        filename = part.get_filename()
        payload = part.get_payload(decode=True)
        if filename is not None:
            files[name] = Upload(filename, part.get_content_type(), payload)
        else:
            fields[name] = payload.decode()
    return fields, files


def serve(api: ImagesAPI):
    """Start the server in a thread; returns ``(base_url, server)``. Call ``server.shutdown()`` when done."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's naming)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            fields, files = parse_multipart(self.headers.get("Content-Type", ""), body)
            rec = Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, fields, files, body)
            api.requests.append(rec)
            status, payload = api.reply(rec)
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting (a timeout it was set)
                pass

        def log_message(self, *args):  # keep test output quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1", server


class SilentServer:
    """A real server on 127.0.0.1 that accepts each connection, reads what is sent, and never answers: every
    request to it times out once sent. ``connections`` counts those it accepted. Use as a context manager."""

    def __init__(self):
        import socket

        self._socket = socket.create_server(("127.0.0.1", 0))
        self._socket.settimeout(0.05)
        self._held: list = []
        self._done = threading.Event()
        self.connections = 0
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}/v1"
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        import socket

        while not self._done.is_set():
            try:
                conn, _ = self._socket.accept()
            except (TimeoutError, socket.timeout, OSError):
                continue
            self.connections += 1
            self._held.append(conn)
            threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    def _drain(self, conn) -> None:
        try:
            while not self._done.is_set() and conn.recv(65536):
                pass
        except OSError:
            pass

    def __enter__(self) -> "SilentServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=5)
        for conn in self._held:
            conn.close()
        self._socket.close()


def unused_port_url() -> str:
    """The base URL of a loopback port nothing listens on (bound, then closed): a connection to it is refused."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as sock:
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


class FullListener:
    """A real listener on 127.0.0.1 that accepts nothing, its queue filled: a new connection to it never opens
    (the system drops its SYN), as with a firewall that drops packets or a host that is not there. Use as a
    context manager."""

    def __init__(self, fillers: int = 8):
        import socket

        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(0)
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}/v1"
        self._fillers = fillers
        self._held: list = []

    def __enter__(self) -> "FullListener":
        import socket

        for _ in range(self._fillers):  # the queue holds one or two; the rest wait in SYN-SENT
            conn = socket.socket()
            conn.setblocking(False)
            try:
                conn.connect(self._socket.getsockname())
            except BlockingIOError:
                pass
            self._held.append(conn)
        return self

    def __exit__(self, *exc: object) -> None:
        for conn in self._held:
            conn.close()
        self._socket.close()
