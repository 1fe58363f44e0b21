"""One request's attempts at a chat API: the wait before a retry, and what a stop cut off.

:class:`Attempts` counts a request's retries, failovers and the attempts given
up after they were sent (``Reply.abandoned``, a ``BackendError``'s
``abandoned``: a provider may bill them), waits before the next attempt
(:meth:`Attempts.wait_or_give_up`: jittered exponential back-off, a
``Retry-After`` honoured up to :data:`MAX_RETRY_AFTER_S`, a rate limit used up
waited out until it resets) and marks a stop met inside the request: asyncio's
cancellation (how ``probe run``, ``study run``, the judges and ``captions
draft`` stop a request at Ctrl-C or SIGTERM) or a ``KeyboardInterrupt``. The
mark (:func:`cfkit.errors.stopped_sending`) says what the request had sent: the attempts
given up once sent, and whether one was out (sent, its reply not come) or the
stop came between attempts (nothing out); :func:`cfkit.errors.sent_before_stop` reads it,
and says one attempt out for a stop no backend marked, the side a bill is safe on.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable
from typing import Any, TypeVar

from cfkit.backends.http import rate_limit_reset_seconds, retry_after_seconds
from cfkit.errors import TransportError, stopped_sending
from cfkit.plural import plural

#: A server asking to wait longer than this is treated as a failure, not waited for.
MAX_RETRY_AFTER_S = 120.0

T = TypeVar("T")


def billable(sent: tuple[int, bool]) -> int:
    """The attempts a request stopped with ``sent`` (:func:`cfkit.errors.sent_before_stop`) may be billed for: those given up
    once sent, and the one out."""
    return sent[0] + sent[1]


class Attempts:
    """One request's attempts so far (see the module docstring)."""

    __slots__ = ("retry", "failovers", "abandoned")

    def __init__(self) -> None:
        self.retry = 0  # failed attempts waited after and retried (Reply.retries)
        self.failovers = 0  # attempts sent at once to another replica after one failed (Reply.failovers)
        self.abandoned = 0  # attempts given up after they were sent (Reply.abandoned)

    async def send(self, attempt: Awaitable[T]) -> T:
        """Await one attempt; a stop meanwhile is marked with it out."""
        import asyncio  # (here: a rerun of a finished run decides without loading it)

        try:
            return await attempt
        except (asyncio.CancelledError, KeyboardInterrupt) as stop:
            stopped_sending(stop, abandoned=self.abandoned, out=True)
            raise

    def stopped(self, stop: BaseException) -> None:
        """A stop anywhere else in the request (between attempts, or before the first): nothing out."""
        stopped_sending(stop, abandoned=self.abandoned, out=False)

    async def wait_or_give_up(self, options: Any, what: str, detail: str, headers: Any, where: str, *,
                              until_reset: bool = True) -> None:
        """Sleep before the next attempt (``options``: ``backoff``, ``max_retries``), counting a retry, or raise
        a :class:`TransportError` when none is left. ``until_reset``: without a ``Retry-After``, no sooner than a
        rate limit the headers say is used up resets."""
        delay = retry_after_seconds(headers)
        if delay is None:
            delay = options.backoff * (2.0 ** self.retry) * random.uniform(0.5, 1.0)
            reset = rate_limit_reset_seconds(headers) if until_reset else None
            delay = delay if reset is None else max(delay, reset)
        if self.retry >= options.max_retries or delay > MAX_RETRY_AFTER_S:
            raise TransportError(f"{what} from {where} after {plural(self.retry + 1, 'attempt')}: {detail}")
        import asyncio

        await asyncio.sleep(delay)
        self.retry += 1
