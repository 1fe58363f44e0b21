"""A script for the Chat Completions server that counts the requests in flight at once."""

from __future__ import annotations

import json
import threading
import time

from support.chat_api_server import first_option


class Counting:
    """A script that answers the first option after ``delay`` and counts the requests in flight at once.

    With ``gather``, each request is also held (up to ``patience`` seconds) until ``gather`` requests have been
    in flight together once, so that a test of "the limit is used" does not depend on how quickly a loaded
    machine sends: a client that never reaches the limit still fails, only ``patience`` later.
    """

    def __init__(self, delay: float = 0.05, gather: int = 0, patience: float = 20.0):
        self.delay, self.gather, self.patience = delay, gather, patience
        self.lock = threading.Lock()
        self.gathered = threading.Event()
        self.now = self.most = 0
        self.models: list[str] = []
        self.bodies: list[str] = []
        self.starts: list[float] = []

    def __call__(self, body, n):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.models.append(body["model"])
            self.bodies.append(json.dumps(body, sort_keys=True))
            self.starts.append(time.monotonic())
            if self.gather and self.now >= self.gather:
                self.gathered.set()
        try:
            if self.gather:
                self.gathered.wait(self.patience)
            time.sleep(self.delay)
            return first_option(body, n)
        finally:
            with self.lock:
                self.now -= 1
