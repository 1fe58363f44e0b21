"""When a run stops sending before its end: a server that is not there, or one that keeps refusing.

Each request already retries what retrying can mend (the backend's
``max_retries``, honouring ``Retry-After``). A run that meets the same wall
request after request learns nothing from the next one, so it stops, keeps
what it has, and says how to go on (the resume line of ``probe run``):

- before the first request, the endpoint is tried once (the backend's
  ``check_endpoint``, :meth:`cfkit.backends.http.JSONClient.endpoint_problem`):
  a port nothing listens on, or a host name that does not resolve, stops the
  run at once, before anything is sent;
- :data:`CONNECTION_LIMIT` requests in a row that failed on the connection
  (refused, reset, timed out after every retry) stop it;
- a server that asks to wait longer than the longest pause a run honours
  (:data:`~cfkit.probe.pacing.MAX_PAUSE_S`) stops it at once; one whose
  pauses add up to more than :data:`WAIT_BUDGET_S` seconds without a single
  reply in between, or :data:`OVERLOAD_LIMIT` requests in a row refused as
  overloaded (HTTP 429, 503, or Anthropic's 529), stops it too.

A reply resets every count: a server that is slow but answers is waited for.
"""

from __future__ import annotations

import time

from cfkit.plural import plural
from cfkit.probe.pacing import MAX_PAUSE_S

#: Requests in a row that failed on the connection (after their retries) before the run stops.
CONNECTION_LIMIT = 3
#: Requests in a row refused as overloaded (HTTP 429/503/529, after their retries) before the run stops.
OVERLOAD_LIMIT = 5
#: Seconds of pauses a server may ask for, in all, without one reply in between, before the run stops.
WAIT_BUDGET_S = 600.0

#: How a backend's TransportError opens, by kind (see cfkit/backends/openai_chat.py).
_CONNECTION = ("ConnectionError", "Timeout")
_OVERLOAD = ("HTTP 429", "HTTP 503", "HTTP 529")  # 529: Anthropic's "overloaded"


class StopPolicy:
    """Counts what a run meets; :attr:`reason` is set once it should stop sending (see the module docstring)."""

    def __init__(self, endpoint: str, *, url_flag: str = "--base-url", lower: str | None = "-j"):
        self.endpoint = endpoint
        self.url_flag = url_flag  # what sets the server, named in the line that stops a run that cannot reach it
        self.lower = lower  # the flag that sends fewer requests at once, if the command has one
        self.reason: str | None = None
        self.connection_failures = 0
        self.overload_failures = 0
        self.waited_s = 0.0  # pause time asked since the last reply
        self._paused_until = 0.0

    def answered(self) -> None:
        self.connection_failures = self.overload_failures = 0
        self.waited_s = 0.0

    def failed(self, message: str) -> None:
        """A request ended in a transport failure with ``message``."""
        if message.startswith(_CONNECTION):
            self.connection_failures += 1
            self.overload_failures = 0
            if self.connection_failures >= CONNECTION_LIMIT:
                self._stop(f"{plural(self.connection_failures, 'request')} in a row could not reach {self.endpoint} "
                           f"({_first(message)}); check that the server is up and {self.url_flag} is right")
        elif message.startswith(_OVERLOAD):
            self.overload_failures += 1
            self.connection_failures = 0
            if self.overload_failures >= OVERLOAD_LIMIT:
                self._stop(f"{plural(self.overload_failures, 'request')} in a row were refused as overloaded by "
                           f"{self.endpoint}; wait until it accepts requests again"
                           + (f" (or lower {self.lower})" if self.lower else ""))
        else:  # the server answered, if not usefully: it is there
            self.connection_failures = self.overload_failures = 0

    def overloaded(self, retry_after: float | None) -> None:
        """The server refused a request as overloaded, maybe asking to wait ``retry_after`` seconds."""
        if not retry_after:
            return
        if retry_after > MAX_PAUSE_S:
            self._stop(f"{self.endpoint} asked to wait {retry_after:g} s before any more requests (Retry-After), "
                       f"longer than a run waits ({MAX_PAUSE_S:g} s)")
            return
        now = time.monotonic()
        until = now + retry_after
        self.waited_s += max(0.0, until - max(self._paused_until, now))
        self._paused_until = max(self._paused_until, until)
        if self.waited_s > WAIT_BUDGET_S:
            self._stop(f"{self.endpoint} asked for {self.waited_s:.0f} s of pauses without answering a request "
                       f"in between (more than {WAIT_BUDGET_S:g} s)")

    def _stop(self, why: str) -> None:
        if self.reason is None:
            self.reason = why


def _first(message: str) -> str:
    return message.split(": ", 1)[-1][:160]


async def until_done_or_stopped(workers: list, added: list, stopping) -> None:
    """Wait for a run's ``workers`` and for those ``added`` to it meanwhile (a replica back in use); when
    ``stopping`` (an asyncio.Event) is set, cancel those still waiting (a pause the server asked for can be long)
    and return. A worker's failure is raised as it is."""
    import asyncio

    everyone = asyncio.gather(*workers)
    everyone.add_done_callback(_retrieved)  # however it ends (Ctrl-C too), asyncio need not report it as lost
    stop = asyncio.create_task(stopping.wait())
    try:
        await asyncio.wait({everyone, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
    more = [task for task in added if task not in workers]  # started while these ran
    if everyone.done():
        everyone.result()
        if more:
            await until_done_or_stopped([*workers, *more], added, stopping)
        return
    workers = [*workers, *more]
    for task in workers:
        task.cancel()
    outcomes = await asyncio.gather(*workers, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, Exception):
            raise outcome


def _retrieved(future) -> None:
    if not future.cancelled():
        future.exception()
