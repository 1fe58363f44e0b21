"""Where a run stands while it sends (the progress bar reads it), and the budget that may stop it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RunProgress:
    """Where a run stands, passed to the progress callback after every reply."""

    total: int
    done: int = 0  # replies in the store, including those kept from before
    sent: int = 0  # requests sent in this invocation
    errors: int = 0  # transport failures in this invocation
    cost_usd: float = 0.0  # spent in this invocation
    priced: bool = False
    concurrency: int | None = None  # requests allowed in flight now (it drops when the server is overloaded)
    elsewhere: int = 0  # requests another process running the same run answered meanwhile


class Budget:
    """Stops sending before the spent cost plus the requests in flight could pass ``limit``.

    A request's cost is estimated as the most expensive one seen so far; the
    first request is sent alone to learn it.
    """

    def __init__(self, limit: float):
        self.limit = limit
        self.spent = 0.0
        self.largest = 0.0
        self.seen = 0
        self.in_flight = 0

    def admit(self) -> bool:
        if self.seen == 0:
            return self.in_flight == 0 and self.limit > 0
        return self.spent + (self.in_flight + 1) * self.largest <= self.limit

    def record(self, cost: float | None) -> None:
        self.seen += 1
        if cost is not None:
            self.spent += cost
            self.largest = max(self.largest, cost)
