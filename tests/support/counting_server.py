"""A script for the Chat Completions server that counts the requests in flight at once."""

from __future__ import annotations

import json
import threading
import time

from support.chat_api_server import first_option


class Counting:
    """A script that answers the first option after ``delay`` and counts the requests in flight at once."""

    def __init__(self, delay: float = 0.05):
        self.delay = delay
        self.lock = threading.Lock()
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
        try:
            time.sleep(self.delay)
            return first_option(body, n)
        finally:
            with self.lock:
                self.now -= 1
