"""A total deadline for a blocking urllib download: the socket is shut when time is up, whatever it was doing.

urllib's ``timeout`` bounds each wait for the server, not the whole
exchange: a server that sends one byte of its headers or body every few
seconds keeps a download going for ever. :class:`Watchdog` opens URLs through
connections it keeps hold of, and when its time is up it shuts their sockets,
so a blocked read returns at once; :attr:`Watchdog.fired` then tells the
caller why the read failed. Proxies from the environment are honoured as
urllib honours them.
"""

from __future__ import annotations

import http.client
import socket
import threading
import urllib.request
from typing import Any


class Watchdog:
    """``with Watchdog(seconds) as dog: dog.open(url, timeout=…)``; ``dog.fired`` once the deadline passed."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.fired = False
        self._connections: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def __enter__(self) -> "Watchdog":
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for connection in self._connections:
                sock = getattr(connection, "sock", None)
                if sock is not None:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:  # closed already
                        pass

    def _kept(self, kind: type[http.client.HTTPConnection]):
        dog = self

        class Kept(kind):  # type: ignore[misc, valid-type]
            def connect(self) -> None:
                super().connect()
                if dog.fired:  # connected just as time ran out
                    self.sock.shutdown(socket.SHUT_RDWR)

        def make(host: str, **options: Any) -> http.client.HTTPConnection:
            connection = Kept(host, **options)
            with self._lock:
                self._connections.append(connection)
            return connection
        return make

    def open(self, url: str, *, timeout: float) -> Any:
        """``urllib.request.urlopen(url, timeout=timeout)``, through connections this watchdog can shut."""
        dog = self

        class Plain(urllib.request.HTTPHandler):
            def http_open(self, req):
                return self.do_open(dog._kept(http.client.HTTPConnection), req)

        class Secure(urllib.request.HTTPSHandler):
            def https_open(self, req):
                return self.do_open(dog._kept(http.client.HTTPSConnection), req, context=self._context)

        if self.fired:
            raise TimeoutError(f"no complete answer within {self.seconds:g} s")
        return urllib.request.build_opener(Plain, Secure).open(url, timeout=timeout)
