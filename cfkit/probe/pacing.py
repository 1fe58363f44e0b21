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
import contextlib
import time
from collections import deque

#: Seconds after a decrease during which further overload signals do not decrease again.
COOLDOWN_S = 1.0
#: The longest pause honoured for one Retry-After (longer ones are the backend's to give up on).
MAX_PAUSE_S = 120.0


class Pacer:
    """The number of requests allowed in flight, between 1 and ``limit`` (see the module docstring).

    Waiting workers queue first come, first served, so the runs sharing a
    pacer take turns; a freed slot is handed to the first of them directly
    (one wake-up per slot, however many workers wait).
    """

    def __init__(self, limit: int, rate: float | None = None):
        self.limit = limit
        self.rate = rate  # requests started per second at most; None: no limit
        self.level = limit
        self.lowest = limit  # the lowest level reached, for the run's record
        self.overloads = 0  # overload signals received
        self.in_flight = 0
        self._successes = 0
        self._decreased_at = float("-inf")
        self._paused_until = 0.0
        self._next_start = 0.0  # with a rate: the earliest time the next request may start
        self._waiters: deque[asyncio.Future] = deque()
        self._timer: asyncio.TimerHandle | None = None

    def _ready_at(self) -> float:
        """When the next request may start, as far as pauses and the rate go (slots aside)."""
        return max(self._paused_until, self._next_start)

    def _take(self, at: float) -> None:
        self.in_flight += 1
        if self.rate:
            self._next_start = max(at, self._next_start) + 1.0 / self.rate

    async def acquire(self) -> None:
        """Wait for a free slot under the current level, past any pause the server asked for and the rate's next
        start."""
        at = time.monotonic()
        if not self._waiters and self.in_flight < self.level and self._ready_at() <= at:
            self._take(at)
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._wake()
        try:
            await waiter  # resolved by _wake, which has taken the slot on this worker's behalf
        except BaseException:  # cancelled (or failed) while waiting: undo, then raise it again
            if waiter.done() and not waiter.cancelled():
                self.in_flight -= 1  # granted just as it was cancelled: give the slot back
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            self._wake()
            raise

    def _wake(self) -> None:
        """Hand free slots to the first waiters; when a pause or the rate holds them, look again then."""
        while self._waiters and self._waiters[0].done():
            self._waiters.popleft()  # cancelled meanwhile
        while self._waiters and self.in_flight < self.level:
            at = time.monotonic()
            ready = self._ready_at()
            if ready > at:
                if self._timer is None:
                    def again() -> None:
                        self._timer = None
                        self._wake()

                    self._timer = asyncio.get_running_loop().call_later(ready - at, again)
                return
            waiter = self._waiters.popleft()
            if waiter.done():
                continue
            self._take(at)
            waiter.set_result(None)

    def widen(self, more: int) -> None:
        """Allow ``more`` requests in flight from now on (a replica back in use)."""
        self.limit += more
        self.level += more
        self._wake()

    async def release(self, *, ok: bool) -> None:
        """A request ended; ``ok`` when it was answered without an overload signal."""
        self.in_flight -= 1
        if ok:
            self._successes += 1
            if self._successes >= self.level and self.level < self.limit:
                self.level += 1
                self._successes = 0
        self._wake()

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
