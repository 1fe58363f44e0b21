"""Adaptive concurrency: how many requests a run keeps in flight, as the server allows.

A run starts at ``--concurrency``. When the server says it is overloaded (HTTP
429 or 503; the backend reports it through its ``on_overload`` hook before it
retries), the level is halved — at most once per :data:`COOLDOWN_S`, so one
burst of refusals counts once — and no new request starts before the
``Retry-After`` the server named. Each run of successes as long as the
current level raises it by one, back up to ``--concurrency`` (additive
increase, multiplicative decrease, as TCP does). The level is shown in the
progress bar and recorded in the run's notes when it ever dropped.

A pacer may also hold a rate: at most ``rate`` requests started per second,
evenly spaced. One pacer can serve several runs at once (``cfkit study run``
gives every run behind one endpoint the same pacer), so the endpoint's
concurrency, rate and overload back-off hold for all of them together.
"""

from __future__ import annotations

import asyncio
import time

#: Seconds after a decrease during which further overload signals do not decrease again.
COOLDOWN_S = 1.0
#: The longest pause honoured for one Retry-After (longer ones are the backend's to give up on).
MAX_PAUSE_S = 120.0


class Pacer:
    """The number of requests allowed in flight, between 1 and ``limit`` (see the module docstring)."""

    def __init__(self, limit: int, rate: float | None = None):
        self.limit = limit
        self.rate = rate  # requests started per second at most; None: no limit
        self._next_start = 0.0
        self.level = limit
        self.lowest = limit  # the lowest level reached, for the run's record
        self.overloads = 0  # overload signals received
        self.in_flight = 0
        self._successes = 0
        self._decreased_at = float("-inf")
        self._paused_until = 0.0
        self._changed = asyncio.Condition()
        self._next_ticket = 0  # the line of waiting workers: each takes a ticket …
        self._serving = 0  # … and the one holding this one goes next
        self._abandoned: set[int] = set()

    async def acquire(self) -> None:
        """Wait for a free slot under the current level, past any pause the server asked for and the rate's next
        start. Slots go first come, first served, so the runs sharing a pacer take turns."""
        async with self._changed:
            ticket = self._next_ticket
            self._next_ticket += 1
            try:
                while True:
                    at = time.monotonic()
                    turn = ticket == self._serving
                    pause = max(self._paused_until,
                                self._next_start if turn and self.in_flight < self.level else 0.0) - at
                    if pause > 0:
                        try:
                            await asyncio.wait_for(self._changed.wait(), pause)
                        except TimeoutError:
                            pass
                        continue
                    if turn and self.in_flight < self.level:
                        self.in_flight += 1
                        self._advance()
                        if self.rate:
                            self._next_start = max(at, self._next_start) + 1.0 / self.rate
                        self._changed.notify_all()
                        return
                    await self._changed.wait()
            except BaseException:
                if ticket >= self._serving:  # a cancelled waiter gives up its place in the line
                    self._abandoned.add(ticket)
                    self._advance(skip_only=True)
                    self._changed.notify_all()
                raise

    def _advance(self, *, skip_only: bool = False) -> None:
        if not skip_only:
            self._serving += 1
        while self._serving in self._abandoned:
            self._abandoned.discard(self._serving)
            self._serving += 1

    async def release(self, *, ok: bool) -> None:
        """A request ended; ``ok`` when it was answered without an overload signal."""
        async with self._changed:
            self.in_flight -= 1
            if ok:
                self._successes += 1
                if self._successes >= self.level and self.level < self.limit:
                    self.level += 1
                    self._successes = 0
            self._changed.notify_all()

    def overloaded(self, retry_after: float | None = None) -> None:
        """The server refused a request as overloaded, asking (maybe) to wait ``retry_after`` seconds.

        Called from the backend (inside the event loop, without awaiting);
        the waiting workers see the change at their next wake-up.
        """
        at = time.monotonic()
        self.overloads += 1
        if retry_after:
            self._paused_until = max(self._paused_until, at + min(retry_after, MAX_PAUSE_S))
        if at - self._decreased_at >= COOLDOWN_S:
            self.level = max(1, self.level // 2)
            self.lowest = min(self.lowest, self.level)
            self._decreased_at = at
            self._successes = 0
