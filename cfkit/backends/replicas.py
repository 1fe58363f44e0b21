"""Replicas: one model served at several endpoints, its requests spread over them.

A model behind several OpenAI-compatible servers (vLLM or SGLang data-parallel
replicas on different nodes, ``transformers serve`` on each GPU) is one run
with one cache. :func:`served_model` asks each server which models it serves
(``GET /models``) before anything is recorded. An endpoint that cannot be
asked (nothing listening, an error status, no model list) or does not list the
model is left out of the run, in one line saying which and why, and the others
do its work; with none left, or when the others serve the name from different
weights, the run is refused in one line, with the fix the servers' answers call
for (the key, where every one refused it: 401/403; the model's name, where
every one lists other models; starting them, where they gave no list). The model's id (and, where the server
reports it, the weights it was loaded from, vLLM's ``root``) is then the run's
identity, and the endpoints are provenance — which one answered is stored with
each reply. The same reading of a server's answer to ``GET /models``
(:func:`cfkit.backends.model_lists.read_listing`: listed, not listed, no list,
no answer; :func:`~cfkit.backends.model_lists.none_serve`)
checks the one server of ``probe run --batch`` before anything is uploaded
(:func:`~cfkit.backends.model_lists.check_served`), and the endpoints of a study (``cfkit study validate``,
``status``, ``run``: :mod:`cfkit.study.check`), in the same words.

:class:`ReplicaPool` hands each request to an endpoint:

- **Per-endpoint concurrency.** Each endpoint has at most ``limit`` requests
  in flight (the run's ``-j``); a request goes to the healthy endpoint with the
  fewest in flight, and waits when every healthy one is full.
- **Health.** An endpoint that fails a request (refuses the connection, times
  out, answers 5xx or 429) is backed off — given no request for 1 s, doubling
  with each consecutive failure up to 30 s, or the ``Retry-After`` it named —
  and the request goes to another endpoint at once. An endpoint that answers
  again is healthy again. When every endpoint in use is backed off at
  once, the back-off no longer holds requests back (there is nowhere better
  to send them): each request's own retries and their back-off (``-o
  backoff``, ``-o max_retries``, ``Retry-After``) pace the set, as they pace
  a single ``--base-url``, so a set whose servers all fail gives up at one
  server's pace, not after minutes of 30 s back-offs. The last endpoint left
  in a run (the others left out) is never backed off: it is then one server.
- **Left out.** An endpoint that refuses the key (401, 403), says it has no
  such model (404) or refuses a request for quota or billing (its account
  cannot pay: HTTP 402, ``insufficient_quota``…, :mod:`cfkit.backends.billing`)
  is left out while another remains, and the request it refused goes to
  another at once (no retry counted; :meth:`ReplicaPool.leave_out`,
  :meth:`ReplicaPool.unpaid`); :func:`cfkit.backends.replica_notes.end_notes`
  says at the end of the run which endpoints were left out or failed
  attempts, and why.
- **Back in use.** An endpoint left out, by the start-up check (not up yet,
  or not yet serving the model) or during the run for a 404 (a server
  restarted on other weights says it has no such model until it is restarted
  on these), is asked again (``GET /models``) every ``recheck_s`` seconds
  (:data:`RECHECK_S`, the openai backend's ``-o replica_recheck``) while the
  run sends; once it lists the model, from the same weights as the others, it
  takes requests again, and ``on_back`` (the runner's) is told so; its
  end-of-run note says when it came back. Each time one is left out again
  during the run it waits twice as long before it is asked again, so a server
  that lists the model but answers 404 for it costs one failed attempt (sent
  elsewhere at once) ever more rarely. One that refused the key (401, 403)
  during the run is not asked again: the run's key does not change while it
  sends, and ``GET /models`` often needs no key, so it would be put back only
  to refuse again; nor is one that refused for quota or billing (its model
  list does not say when the account has credit again). When the last endpoint
  in use refuses for quota or billing, the run stops with
  :class:`~cfkit.errors.QuotaRefused` (exit 2), as one server's would.

The pool lives in one event loop at a time (the runner's); its condition is
made anew when the loop changes, as the HTTP client's session is.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cfkit.backends.model_lists import MODELS_DEADLINE_S, none_serve, read_exchange
from cfkit.errors import BackendError, BackendUnavailable, QuotaRefused

if TYPE_CHECKING:
    from cfkit.option_words import OptionWords

#: First back-off of a failing endpoint, and the longest (seconds).
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
#: How often a left-out endpoint is asked again whether it serves the model (seconds; ``-o replica_recheck``).
RECHECK_S = 30.0
#: How every line about one endpoint of a replica set begins (``runs show`` finds them among a run's notes).
NOTE_START = "replica "


@dataclass(eq=False)
class Replica:
    """One endpoint of a model: where (``shown``: credentials redacted), its client and its state."""

    shown: str
    client: Any  # cfkit.backends.http.JSONClient
    in_flight: int = 0
    failures: int = 0  # consecutive
    down_until: float = 0.0  # time.monotonic() before which it gets no request
    answered: int = 0
    failed: int = 0
    notes: list[str] = field(default_factory=list)
    left_out: str | None = None  # why it gets no request in this run; None while it is in use
    at_start: bool = False  # left out by the start-up check (said when the run starts)
    last_failure: str = ""  # what its last failed attempt met
    back_after: float | None = None  # seconds into the run it was last put back in use
    first_left_out: str | None = None  # why it was first left out during the run (not at start-up)
    times_out: int = 0  # how often it was left out during the run
    returns: int = 0  # how often it was put back in use
    recheck: bool = True  # asked again while left out (not after it refused the run's key, or to be paid)
    unpaid: bool = False  # left out for a refusal for quota or billing (cfkit.backends.billing)
    due: float = 0.0  # time.monotonic() from which it is asked again (while left out)


class ReplicaPool:
    """Spreads requests over ``replicas`` with per-endpoint concurrency and health (see the module docstring)."""

    def __init__(self, replicas: Sequence[Replica], *, limit: int = 4):
        self.replicas = list(replicas)
        self.limit = limit
        self._condition: Any = None
        self._loop: Any = None
        self.name: str = ""  # the model the endpoints serve, and the weights (``root``) where the servers report
        self.root: str | None = None  # them: what a left-out endpoint must serve to be put back (served_model)
        self.on_back: Any = None  # told, in one line, of each endpoint put back in use (set by the runner)
        self.recheck_s = RECHECK_S  # how often a left-out endpoint is asked again (the backend's option)
        self._started: float | None = None  # when the first request was asked for
        self._next_check = float("inf")  # the earliest a left-out endpoint is due to be asked again
        self._checking: Any = None  # the re-check under way (an asyncio task)

    def set_limit(self, limit: int) -> None:
        """Requests each endpoint may have in flight."""
        self.limit = max(1, int(limit))

    def _cond(self) -> Any:
        import asyncio

        loop = asyncio.get_running_loop()
        if self._condition is None or self._loop is not loop:
            self._condition, self._loop = asyncio.Condition(), loop
        return self._condition

    def in_use(self) -> list[Replica]:
        """The endpoints not left out of the run."""
        return [r for r in self.replicas if r.left_out is None]

    def _ready(self, now: float) -> list[Replica]:
        in_use = self.in_use()
        if all(r.down_until > now for r in in_use):
            # Every replica is failing: there is nowhere better to send, so no request waits for a replica's
            # back-off; each request's own retries pace them, as they pace one server (see the module docstring).
            return [r for r in in_use if r.in_flight < self.limit]
        return [r for r in in_use if r.down_until <= now and r.in_flight < self.limit]

    async def acquire(self) -> Replica:
        """The endpoint the next attempt goes to (counted in flight until :meth:`release`)."""
        import asyncio

        cond = self._cond()
        self._recheck_when_due()
        async with cond:
            while True:
                if not self.in_use():
                    raise self.none_left()
                now = time.monotonic()
                ready = self._ready(now)
                if ready:
                    chosen = min(ready, key=lambda r: (r.in_flight, r.down_until, self.replicas.index(r)))
                    chosen.in_flight += 1
                    return chosen
                backed_off = [r.down_until for r in self.in_use() if r.down_until > now]
                wait = max(0.01, min(backed_off) - now) if backed_off else None
                try:
                    await asyncio.wait_for(cond.wait(), wait)
                except TimeoutError:
                    pass

    def _recheck_when_due(self) -> None:
        """Ask the left-out endpoints that are due again (in the background): see the module docstring."""
        import asyncio

        now = time.monotonic()
        if self._started is None:
            self._started = now
            for replica in self.replicas:
                if replica.left_out is not None:
                    self._due(replica, now + self.recheck_s)
        if now < self._next_check or (self._checking is not None and not self._checking.done()):
            return
        waiting = [r for r in self.replicas if r.left_out is not None and r.recheck and r.due <= now]
        for replica in waiting:  # the next time, should this check not put it back
            replica.due = now + self.recheck_s * 2 ** max(0, replica.times_out - 1)
        self._next_check = min((r.due for r in self.replicas if r.left_out is not None and r.recheck),
                               default=float("inf"))
        if waiting and self.name:
            self._checking = asyncio.get_running_loop().create_task(self._recheck(waiting))

    def _due(self, replica: Replica, when: float) -> None:
        replica.due = when
        self._next_check = min(self._next_check, when)

    async def _recheck(self, waiting: list[Replica]) -> None:
        for replica, exchange in await _listings(waiting, close=False):
            match = read_exchange(exchange, self.name, replica.shown).entry
            root = match.get("root") if match is not None else None
            if match is None or (self.root is not None and isinstance(root, str) and root != self.root):
                continue  # still down, or serving something else: asked again later
            why, replica.left_out, replica.failures, replica.down_until = replica.left_out, None, 0, 0.0
            replica.back_after = time.monotonic() - (self._started or time.monotonic())
            replica.returns += 1
            if self.on_back is not None:  # more requests in flight only for one the run started without
                when = "during the run" if replica.times_out else "at start"
                self.on_back(f"{NOTE_START}{replica.shown} answers for '{self.name}' now; it takes requests again "
                             f"(left out {when}: {why})", replica.at_start and replica.returns == 1)
        cond = self._cond()
        async with cond:
            cond.notify_all()

    async def aclose(self) -> None:
        """Stop a re-check under way (the run ends)."""
        import asyncio
        from contextlib import suppress

        if self._checking is not None and not self._checking.done():
            self._checking.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await self._checking

    async def release(self, replica: Replica, *, healthy: bool | None, retry_after: float | None = None,
                      failure: str = "") -> None:
        """The attempt on ``replica`` ended: ``healthy`` True (it answered), False (it failed: back it off;
        ``failure`` says what it met) or None (an answer that says nothing of its health)."""
        now = time.monotonic()
        replica.in_flight -= 1
        if healthy is True:
            replica.failures = 0
            replica.down_until = 0.0
            replica.answered += 1
        elif healthy is False:
            replica.failures += 1
            replica.failed += 1
            replica.last_failure = failure or replica.last_failure
            if len(self.in_use()) > 1:  # the last one left is one server: each request's own retries pace it
                backoff = min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** (replica.failures - 1))
                if retry_after is not None:
                    backoff = min(MAX_BACKOFF_S, max(backoff, retry_after))
                replica.down_until = max(replica.down_until, now + backoff)
        cond = self._cond()
        async with cond:
            cond.notify_all()

    def another_is_up(self, replica: Replica) -> bool:
        """Whether an endpoint other than ``replica`` is not backed off (a failed request can go there now)."""
        now = time.monotonic()
        return any(r is not replica and r.down_until <= now for r in self.in_use())

    def leave_out(self, replica: Replica, why: str, *, recheck: bool = True, unpaid: bool = False) -> bool:
        """Give ``replica`` no requests (``why``: what it answered) until it lists the model again (``recheck``),
        or for the rest of the run (also when it refused for quota or billing: ``unpaid``); whether another
        remains."""
        if replica.left_out is None:
            replica.left_out, replica.recheck, replica.unpaid = why, recheck and not unpaid, unpaid
            replica.times_out += 1
            replica.first_left_out = replica.first_left_out or why
            if recheck:
                self._due(replica, time.monotonic() + self.recheck_s * 2 ** (replica.times_out - 1))
        return bool(self.in_use())

    def unpaid(self, replica: Replica, status: int | None, message: str, *, counted: bool = False) -> bool:
        """Leave ``replica`` out for the rest of the run: it refused a request for quota or billing (HTTP
        ``status``, ``message``; ``counted``: in a 200, which :meth:`release` took for an answer); whether another
        remains."""
        from cfkit.backends.billing import left_out_why

        replica.answered -= counted
        return self.leave_out(replica, left_out_why(status, message), unpaid=True)

    def none_left(self) -> BackendError:
        """The error that stops the run once every endpoint is left out: :class:`QuotaRefused` (exit 2, in
        :mod:`cfkit.backends.billing`'s words) when one was left out for quota or billing."""
        if any(r.unpaid for r in self.replicas):
            from cfkit.backends.billing import ADD_CREDIT, ASK_THE_REST

            return QuotaRefused(f"openai backend: every replica was left out ({self.why_left_out()}). "
                                f"{ADD_CREDIT}{ASK_THE_REST}.")
        return BackendError(f"openai backend: every replica was left out ({self.why_left_out()}).")

    def why_left_out(self) -> str:
        """``URL: why; URL: why`` of the endpoints left out."""
        return "; ".join(f"{r.shown}: {r.left_out}" for r in self.replicas if r.left_out is not None)


async def _listings(replicas: Sequence[Replica], *, close: bool = True) -> list[tuple[Replica, Any]]:
    """Each replica's answer to ``GET /models``; ``close``: its connections closed after (the start-up check's loop
    ends there), not while the run sends (requests of the run may be in flight to it)."""
    import asyncio

    async def one(replica: Replica) -> tuple[Replica, Any]:
        exchange = await replica.client.request("GET", "/models", deadline=MODELS_DEADLINE_S)
        if close:
            await replica.client.aclose()  # this loop ends here; the run's loop opens its own connections
        return replica, exchange

    return await asyncio.gather(*(one(r) for r in replicas))


def _run_now(coroutine: Any) -> Any:
    """Run ``coroutine`` to its end from synchronous code, also when an event loop is running in this thread."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def served_model(replicas: Sequence[Replica], name: str, *, who: str, url_flag: str = "--base-url",
                 words: OptionWords | None = None, key_sent: bool | None = None) -> dict[str, str]:
    """The identity of model ``name`` as the endpoints serve it: ``{"served_model": id}`` plus ``root`` where
    the servers report one. An endpoint that cannot be asked or does not list ``name`` is left out
    (:attr:`Replica.left_out`, :attr:`Replica.at_start`). Raises :class:`BackendUnavailable` (one line,
    :func:`~cfkit.backends.model_lists.none_serve`: the key where every endpoint refused it, named with ``words``
    of the command that built the backend, ``url_flag`` without them; the model's name where every endpoint lists
    others) when every endpoint is left out, or those that serve ``name`` serve it from different weights."""
    found: list[tuple[Replica, dict[str, Any]]] = []
    readings = []
    url_flag = words.of("base_url") if words is not None else url_flag
    for replica, exchange in _run_now(_listings(replicas)):
        reading = read_exchange(exchange, name, replica.shown, url=url_flag)
        readings.append((replica.shown, reading))
        match, replica.left_out = reading.entry, reading.why
        if match is None:
            replica.at_start = True
        else:
            found.append((replica, match))
    if not found:
        raise BackendUnavailable(none_serve(who, name, readings, words=words, key_sent=key_sent, url_flag=url_flag))
    roots = {str(e["root"]) for _, e in found if isinstance(e.get("root"), str)}
    if len(roots) > 1:
        detail = "; ".join(f"{r.shown}: {e.get('root')}" for r, e in found)
        raise BackendUnavailable(f"{who}: the endpoints serve '{name}' from different weights ({detail}). "
                                 "Give only endpoints that serve the same model.")
    identity = {"served_model": name}
    if roots:
        identity["root"] = roots.pop()
    return identity
