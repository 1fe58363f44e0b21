"""The part every scripted loopback API server shares: a threading HTTP server on 127.0.0.1 at a free port,
serving from ``with`` until its end."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Loopback:
    """Base of the loopback servers: call :meth:`_listen` with the handler class; ``URL_PATH`` ends the URL."""

    URL_PATH = ""

    def _listen(self, handler: type[BaseHTTPRequestHandler], port: int = 0) -> None:
        """Listen on ``port`` (0: a free one; another: where a server that was stopped listened)."""
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{self.URL_PATH}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
