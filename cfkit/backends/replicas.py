"""Replicas: one model served at several endpoints, its requests spread over them.

A model behind several OpenAI-compatible servers (vLLM or SGLang data-parallel
replicas on different nodes, ``transformers serve`` on each GPU) is one run
with one cache. :func:`served_model` asks each server which models it serves
(``GET /models``) before anything is recorded and refuses, in one line,
endpoints that do not serve the same model: the model's id (and, where the
server reports it, the weights it was loaded from, vLLM's ``root``) is then
the run's identity, and the endpoints are provenance — which one answered is
stored with each reply.

:class:`ReplicaPool` hands each request to an endpoint:

- **Per-endpoint concurrency.** Each endpoint has at most ``limit`` requests
  in flight (the run's ``-j``); a request goes to the healthy endpoint with the
  fewest in flight, and waits when every healthy one is full.
- **Health.** An endpoint that fails a request (refuses the connection, times
  out, answers 5xx or 429) is backed off — given no request for 1 s, doubling
  with each consecutive failure up to 30 s, or the ``Retry-After`` it named —
  and the request goes to another endpoint at once. An endpoint that answers
  again is healthy again. When every endpoint is backed off, a request waits
  for the first to come back.

The pool lives in one event loop at a time (the runner's); its condition is
made anew when the loop changes, as the HTTP client's session is.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cfkit.errors import BackendUnavailable

#: First back-off of a failing endpoint, and the longest (seconds).
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
#: How long the start-up check waits for each server's model list (seconds).
MODELS_DEADLINE_S = 15.0


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


class ReplicaPool:
    """Spreads requests over ``replicas`` with per-endpoint concurrency and health (see the module docstring)."""

    def __init__(self, replicas: Sequence[Replica], *, limit: int = 4):
        self.replicas = list(replicas)
        self.limit = limit
        self._condition: Any = None
        self._loop: Any = None

    def set_limit(self, limit: int) -> None:
        """Requests each endpoint may have in flight."""
        self.limit = max(1, int(limit))

    def _cond(self) -> Any:
        import asyncio

        loop = asyncio.get_running_loop()
        if self._condition is None or self._loop is not loop:
            self._condition, self._loop = asyncio.Condition(), loop
        return self._condition

    def _ready(self, now: float) -> list[Replica]:
        return [r for r in self.replicas if r.down_until <= now and r.in_flight < self.limit]

    async def acquire(self) -> Replica:
        """The endpoint the next attempt goes to (counted in flight until :meth:`release`)."""
        import asyncio

        cond = self._cond()
        async with cond:
            while True:
                now = time.monotonic()
                ready = self._ready(now)
                if ready:
                    chosen = min(ready, key=lambda r: (r.in_flight, r.failures, self.replicas.index(r)))
                    chosen.in_flight += 1
                    return chosen
                backed_off = [r.down_until for r in self.replicas if r.down_until > now]
                wait = max(0.01, min(backed_off) - now) if backed_off else None
                try:
                    await asyncio.wait_for(cond.wait(), wait)
                except TimeoutError:
                    pass

    async def release(self, replica: Replica, *, healthy: bool | None, retry_after: float | None = None) -> None:
        """The attempt on ``replica`` ended: ``healthy`` True (it answered), False (it failed: back it off)
        or None (an answer that says nothing of its health)."""
        now = time.monotonic()
        replica.in_flight -= 1
        if healthy is True:
            replica.failures = 0
            replica.down_until = 0.0
            replica.answered += 1
        elif healthy is False:
            replica.failures += 1
            replica.failed += 1
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
        return any(r is not replica and r.down_until <= now for r in self.replicas)

    def tally(self) -> dict[str, dict[str, int]]:
        """Requests answered and attempts failed, by endpoint."""
        return {r.shown: {"answered": r.answered, "failed": r.failed} for r in self.replicas}


def model_entries(body: bytes) -> list[dict[str, Any]] | None:
    """The entries (each with a text ``id``) of a ``GET /models`` answer, or None when it holds no model list."""
    import orjson

    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]


async def _listings(replicas: Sequence[Replica]) -> list[tuple[Replica, Any]]:
    import asyncio

    async def one(replica: Replica) -> tuple[Replica, Any]:
        exchange = await replica.client.request("GET", "/models", deadline=MODELS_DEADLINE_S)
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


def served_model(replicas: Sequence[Replica], name: str, *, who: str) -> dict[str, str]:
    """The identity of model ``name`` as every endpoint serves it: ``{"served_model": id}`` plus ``root`` where
    the servers report one. Raises :class:`BackendUnavailable` (one line) when an endpoint cannot be asked, does
    not serve ``name``, or serves it from other weights than the first endpoint."""
    found: list[tuple[Replica, dict[str, Any]]] = []
    for replica, exchange in _run_now(_listings(replicas)):
        if exchange.failure is not None or exchange.status != 200:
            what = exchange.failure or f"HTTP {exchange.status}"
            raise BackendUnavailable(f"{who}: cannot list the models of {replica.shown} ({what}: "
                                     f"{exchange.detail or 'GET /models failed'}); every replica must answer "
                                     "GET /models at start-up so that cfkit can check they serve one model.")
        entries = model_entries(exchange.body)
        if entries is None:
            raise BackendUnavailable(f"{who}: {replica.shown} answered GET /models without a model list.")
        match = next((e for e in entries if e["id"] == name), None)
        if match is None:
            served = ", ".join(sorted(e["id"] for e in entries)[:5]) or "nothing"
            raise BackendUnavailable(f"{who}: the endpoints do not serve one model: {replica.shown} serves "
                                     f"{served}, not '{name}'. Give only endpoints that serve '{name}'.")
        found.append((replica, match))
    roots = {str(e["root"]) for _, e in found if isinstance(e.get("root"), str)}
    if len(roots) > 1:
        detail = "; ".join(f"{r.shown}: {e.get('root')}" for r, e in found)
        raise BackendUnavailable(f"{who}: the endpoints serve '{name}' from different weights ({detail}). "
                                 "Give only endpoints that serve the same model.")
    identity = {"served_model": name}
    if roots:
        identity["root"] = roots.pop()
    return identity
