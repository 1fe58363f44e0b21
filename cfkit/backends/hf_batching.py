"""Batched generation for the hf backend: requests that arrive together are answered by one ``generate()``.

With ``-o batch_size=B`` the backend's ``answer`` is a coroutine the runner
awaits (it keeps ``2 B`` requests in flight by default): each request is
queued, and one drain task takes up to ``B`` queued requests with the same
token limit, waits a few milliseconds for a batch to fill when fewer are
queued, and runs the backend's ``_generate`` on them in a worker thread,
while the next batch gathers. Each request gets its own reply, or its own
error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

#: How long a partly filled batch waits for more requests (seconds), in small steps.
LINGER_S = 0.02
_STEP_S = 0.002


class Batcher:
    """Queues requests and answers them ``size`` at a time with ``generate`` (a list of requests -> results)."""

    def __init__(self, generate: Callable[[list[Any]], list[Any]], size: int):
        self.generate = generate
        self.size = size
        self._pending: list[tuple[Any, asyncio.Future]] = []
        self._drainer: asyncio.Task | None = None
        self.batches: list[int] = []  # the size of each batch run, in order

    async def answer(self, request: Any) -> Any:
        future = asyncio.get_running_loop().create_future()
        self._pending.append((request, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.get_running_loop().create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._pending:
            waited = 0.0
            while len(self._pending) < self.size and waited < LINGER_S:
                await asyncio.sleep(_STEP_S)
                waited += _STEP_S
            limit = self._pending[0][0].generation.max_tokens
            batch = [p for p in self._pending if p[0].generation.max_tokens == limit][:self.size]
            for entry in batch:
                self._pending.remove(entry)
            live = [(r, f) for r, f in batch if not f.done()]  # a cancelled request is not generated
            if not live:
                continue
            self.batches.append(len(live))
            try:
                results = await asyncio.to_thread(self.generate, [r for r, _ in live])
            except BaseException as exc:  # noqa: BLE001 - every waiting request hears of it
                results = [exc] * len(live)
            for (_, future), result in zip(live, results):
                if future.done():
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)
