"""A backend double that counts its calls and the requests in flight at once."""

from __future__ import annotations

import asyncio
from typing import ClassVar

from cfkit.backends import BackendOptions, Capabilities, ProbeRequest, Reply
from cfkit.errors import TransportError


class Counting:
    """A backend double: answers A after a short wait, counts calls and the most requests in flight."""

    kind: ClassVar[str] = "counting"
    capabilities: ClassVar[Capabilities] = Capabilities(images=True, multi_image=True, json_schema=True,
                                                        remote=True)
    Options: ClassVar[type[BackendOptions]] = BackendOptions

    def __init__(self, fail: set[str] = frozenset(), price: float | None = None):
        self.model = "counting:test"
        self.priced = price is not None
        self.price = price
        self.cache_identity = {}
        self.fail = set(fail)
        self.calls: list[str] = []
        self.in_flight = 0
        self.most_in_flight = 0

    async def answer(self, request: ProbeRequest) -> Reply:
        self.calls.append(request.meta.case_id)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.005)
            if request.meta.case_id in self.fail:
                raise TransportError(f"503 from the server for {request.meta.case_id}")
            return Reply(raw='{"answer": "A", "reason": "r", "confidence": "low"}', cost_usd=self.price)
        finally:
            self.in_flight -= 1
