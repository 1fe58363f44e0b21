"""The view served on loopback: the standard library's threading HTTP server, GET and HEAD only.

Each page comes from the workspace's latest reading (:class:`cfkit.view.fresh.Current`): a page loaded again
after a run added replies, or an input changed, shows the change.

Every answer carries a Content-Security-Policy that allows nothing but the
view's own stylesheet and images (no script, no request off the machine),
and ``nosniff`` so a reply's raw text is never taken for HTML.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from typing import TYPE_CHECKING, Any

from cfkit.errors import UsageError
from cfkit.view.fresh import RECHECK_S, Current

if TYPE_CHECKING:
    from cfkit.workspace import Workspace

#: The policy of every page (the pages also carry it in a meta element, for the static export).
CSP = "default-src 'none'; img-src 'self'; style-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"


def make_server(ws: Workspace, studies: tuple[Any, ...] = (), host: str = "127.0.0.1", port: int = 0, *,
                recheck_s: float = RECHECK_S) -> ThreadingHTTPServer:
    """A server of the view of ``ws`` (with a page of each loaded study file in ``studies``) bound to
    ``host``:``port`` (0: a free port), reading the workspace again when it changed (looked at at most every
    ``recheck_s``); call ``serve_forever`` to answer."""
    from cfkit.view.data import ViewData
    from cfkit.view.site import Site
    from cfkit.view.study import RecentChecks

    checks = RecentChecks()  # one for every reading: the study page's check is reused across them while recent
    current = Current(ws, lambda: Site(ViewData(ws), studies, checks), recheck_s=recheck_s)
    lock = threading.Lock()  # the site renders lazily and caches; one page at a time

    class Handler(BaseHTTPRequestHandler):
        server_version = "cfkit-view"
        sys_version = ""

        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            self._answer(body=True)

        def do_HEAD(self) -> None:  # noqa: N802
            self._answer(body=False)

        def _answer(self, *, body: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            if path == "/favicon.ico":  # browsers ask for one; the view has none
                self.send_response(204)
                self.send_header("Content-Security-Policy", CSP)
                self.end_headers()
                return
            with lock:
                page = current.site().page(path) if "/" not in path.lstrip("/") else None
            if page is None:
                status, content_type, data = 404, "text/plain; charset=utf-8", b"not found\n"
            else:
                status, content_type, data = 200, page.content_type, page.body
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Content-Security-Policy", CSP)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if body:
                self.wfile.write(data)

        def log_message(self, format: str, *args) -> None:  # noqa: A002 (the standard library's name)
            return  # a read-only local view: no access log on the terminal

    try:
        return ThreadingHTTPServer((host, port), Handler)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port} ({exc.strerror}); choose another --port or --host.") from exc
