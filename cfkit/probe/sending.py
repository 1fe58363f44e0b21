"""Sending a run's requests: workers under an adaptive limit, images read as sent, replies stored in batches.

:class:`Sender` runs as many workers as ``--concurrency`` allows; each takes
the next request this process holds the lease of (:mod:`~cfkit.probe.sharing`),
waits for a slot under the current level (:mod:`~cfkit.probe.pacing`), reads
its images (:class:`~cfkit.probe.sending_images.SendingImages`: once while
requests sharing an image are in flight), asks the backend, and queues the
reply for the next commit (:mod:`~cfkit.probe.recording`). A budget, when
given (:class:`~cfkit.probe.progress.Budget`), stops sending before it could be passed;
so does a server that is not there or keeps refusing (:mod:`~cfkit.probe.stopping`).

At 64 requests in flight a run is bound by this thread's CPU, so each
request's own work is kept small: a lazy plan's cache key is spliced into the
run's shared key text (:mod:`~cfkit.probe.cache_keys`) and, unless the
response cache may answer the request, taken when its reply is committed,
with the reply's reading (:mod:`~cfkit.probe.recording`); the objects made
before sending are left out of the garbage collector's passes while it sends
(:class:`_OldObjectsFrozen`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import replace

from cfkit.backends import Backend, is_async
from cfkit.backends.attempts import billable
from cfkit.errors import BackendError, ImageError, TransportError, sent_before_stop
from cfkit.money import abandoned_note, abandoned_usd, usd
from cfkit.plural import agree, plural
from cfkit.probe.cache_keys import RunKeys
from cfkit.probe.image_refs import ImageRef
from cfkit.probe.sending_images import SendingImages
from cfkit.probe.pacing import Pacer
from cfkit.probe.plan import ProbeItem
from cfkit.probe.progress import Budget, RunProgress
from cfkit.probe.recording import Recorder, cached_reply
from cfkit.probe.sharing import CLAIM, SharedQueue
from cfkit.probe.stopping import StopPolicy, until_done_or_stopped
from cfkit.store import digests as digest_table, responses


#: Files read for the first time are stored in the digest table in batches of this many, as the run sends.
LEARNED_BATCH = 512
#: With the server out of reach, the response cache is asked for requests keyed only when read until this many
#: in a row have no answer there: a resumed run's unsent requests have none, and reading them all (thousands
#: of images) would only delay the line that says the server is not there.
CACHE_ALONE_MISSES = 64


#: Why sending stopped when a reply's cost is not known: a budget cannot be kept without it.
UNBUDGETED = ("--max-cost {limit:g} USD cannot be kept: {where} reported no token counts for a reply, so what it cost "
              "is not known; the command below goes on without --max-cost")


#: Why sending stopped at the budget, until the requests in flight have ended and what was spent is known.
OVER_BUDGET = "--max-cost would be exceeded"


class Sender:
    """Sends one run's requests and stores each reply (see the module docstring)."""

    def __init__(self, store, run_id: str, backend: Backend, keys: dict, progress: RunProgress,
                 on_progress: Callable[[RunProgress], None] | None, budget: Budget | None, recorder: Recorder):
        self.store = store
        self.run_id = run_id
        self.backend = backend
        self.keys = keys
        self.progress = progress
        self.on_progress = on_progress
        self.budget = budget
        self.recorder = recorder
        recorder.keyer = self._key_later
        self.stopped: str | None = None
        self.notes: set[str] = set()
        self.pacer: Pacer | None = None
        self._own_pacer = True
        self._queue: SharedQueue | None = None
        self._added: list[asyncio.Task] = []  # workers started while sending (a replica back in use)
        self.owner: str | None = None  # this process as the run's lease owner (cfkit.probe.sharing)
        self.policy = StopPolicy(backend.endpoint or backend.model)
        self._stopping: asyncio.Event | None = None
        self._async = is_async(backend)
        self._images = SendingImages(base64=backend.sends_base64)
        self._run_keys = RunKeys(backend)  # a lazy plan's cache keys, the parts every request shares serialised once
        self.from_cache = 0  # requests of a lazy plan the response cache answered once their images were read
        self._cache_holds: bool | None = None  # whether the cache held a response of this model when sending began
        # Requests answered only after retries (and the retries in all), and those another replica answered after
        # one failed them (and those failures): said once for the run when sending ends, not reply by reply.
        self.retried = self.retries = self.failed_over = self.failovers = 0

    async def send_all(self, items: list[ProbeItem], concurrency: int, pacer: Pacer | None = None) -> None:
        """Send ``items`` (those of them no other process takes), ``concurrency`` at most at once.

        ``pacer`` is shared with other runs sending to the same endpoint (``cfkit study run``); it then
        bounds the requests in flight of them all together, and ``concurrency`` is its limit.
        """
        self._own_pacer = pacer is None  # a run's own pacer may widen (a replica back in use); a shared one not
        if pacer is not None:
            concurrency = pacer.limit
        self.pacer = pacer = pacer or Pacer(concurrency)
        self.progress.concurrency = concurrency
        self._stopping = asyncio.Event()
        if await self._unreachable():
            await self._answer_from_cache_alone(items)
            return
        self.backend.on_overload = self._overloaded  # the backend says when the server is overloaded
        self.backend.on_news = self._news  # and what to say while the run sends (a replica back in use)
        queue = SharedQueue(self.store, self.run_id, items, self.keys, claim=concurrency * CLAIM,
                            on_elsewhere=self._elsewhere, owner=self.owner, on_wait=self._waiting)
        self._queue = queue
        self.recorder.lease_owner = queue.owner
        queue.announce()
        helpers = [asyncio.create_task(queue.keep_alive()), asyncio.create_task(self._commit_when_due())]
        frozen = _OldObjectsFrozen()
        try:
            if self.budget is not None:
                # Learn what one request costs before sending several at once.
                first = await queue.next()
                if first is not None:
                    await self._one(first)
            workers = [asyncio.create_task(self._worker(queue)) for _ in range(concurrency)]
            try:
                await self._until_done_or_stopped(workers)
            except BaseException:
                workers += self._added
                for task in workers:
                    task.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
                raise
        finally:
            frozen.end()
            if self.stopped is OVER_BUDGET:
                budget = self.budget
                may_add = abandoned_note(budget.abandoned, abandoned_usd(budget.abandoned, budget.largest))
                self.stopped = (f"--max-cost {budget.limit:g} USD would be exceeded (spent {usd(budget.spent)} in "
                                f"this invocation{may_add}); raise it and run again to continue")
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            try:
                self.recorder.flush()
                self._remember_learned()
            finally:
                with contextlib.suppress(Exception):  # a store that cannot be written has said so already
                    queue.close()
                await self.backend.aclose()
                self.notes.update(self.backend.run_notes())  # replicas left out or failing (cfkit.backends.replicas)
                self.notes.update(self._retry_notes())
                self.progress.elsewhere = queue.elsewhere
                if pacer.lowest < pacer.limit:
                    ended = "and back up as it recovered" if pacer.level >= pacer.limit else \
                        f"and were {pacer.level} when sending ended"
                    self.notes.add(f"the server said it was overloaded {plural(pacer.overloads, 'time')}; requests in "
                                   f"flight went down to {pacer.lowest} of {pacer.limit} {ended}")

    def _count_retries(self, reply) -> None:
        if reply.retries:
            self.retried += 1
            self.retries += reply.retries
        if reply.failovers:
            self.failed_over += 1
            self.failovers += reply.failovers

    def _retry_notes(self) -> list[str]:
        """How many of the requests sent were answered only after retries, or by another replica after one failed
        them; each such request counts once in the run's sent and done."""
        sent = self.progress.sent
        notes = []
        if self.retried:
            notes.append(f"{self.retried} of {plural(sent, 'request')} sent succeeded only after retrying "
                         f"({plural(self.retries, 'retry', 'retries')} in all)")
        if self.failed_over:
            notes.append(f"{self.failed_over} of {plural(sent, 'request')} sent got "
                         f"{agree(self.failed_over, 'their')} answer from another replica after a failed attempt ({plural(self.failovers, 'failed attempt')} in all)")
        return notes

    def _remember_learned(self) -> None:
        """Store the digests of the files read for the first time so far (the next run knows them without reading
        them), and let them go: held until the end, they were about 250 bytes a request of a large run's peak."""
        learned, self._images.learned = self._images.learned, []
        if learned:
            digest_table.remember(self.store, learned)

    # -- stopping early (cfkit.probe.stopping): a server that is not there, or keeps refusing ---------------

    async def _unreachable(self) -> bool:
        """Ask the backend once whether its server can be reached; when not, stop before sending."""
        problem = await self.backend.check_endpoint()
        if problem is None:
            return False
        self.stopped = problem
        await self.backend.aclose()
        return True

    async def _answer_from_cache_alone(self, items: list[ProbeItem]) -> None:
        """With the server out of reach, still answer what the response cache holds of a lazy plan's requests.

        Their keys are known only once their images are read (files this store has no trusted digest of: moved,
        copied, or just written), so the plan's lookup could not ask the cache for them; they are read and
        asked here, nothing is sent, until CACHE_ALONE_MISSES in a row have no answer. When the cache answers
        every one, the run is complete and the server was not needed: it is not named as a reason to stop. The
        loop is given back between requests, so the other runs of a study keep sending meanwhile."""
        if not any(self.keys[item.key] is None for item in items) or not self._cache_may_answer():
            return
        answered = misses = 0
        try:
            for item in items:
                if self.keys[item.key] is not None:
                    continue  # asked before sending began (cfkit.probe.runner.open_and_settle): not held
                if misses >= CACHE_ALONE_MISSES:
                    break
                await asyncio.sleep(0)
                try:
                    request, shas = self._images.acquire_with_digests(item.request)
                except ImageError as exc:  # recorded as when sending (sent again on the next run)
                    self.recorder.transport(item, "", str(exc))
                    self.progress.errors += 1
                    continue
                self._images.release(item.request)
                if self._from_cache(item, request, shas)[2]:
                    answered += 1
                    misses = 0
                else:
                    misses += 1
        finally:
            self.recorder.flush()
            self._remember_learned()
        if answered == len(items):
            self.stopped = None

    def _overloaded(self, retry_after: float | None = None) -> None:
        self.pacer.overloaded(retry_after)
        self.policy.overloaded(retry_after)
        self._stop_if_told()

    def _stop_if_told(self) -> None:
        if self.policy.reason is not None and self.stopped is None:
            self.stopped = self.policy.reason
            self._stopping.set()

    async def _until_done_or_stopped(self, workers: list[asyncio.Task]) -> None:
        """Wait for the workers, those started meanwhile too (cfkit.probe.stopping.until_done_or_stopped)."""
        await until_done_or_stopped(workers, self._added, self._stopping)

    def _keyed(self, item: ProbeItem, request, shas: tuple) -> tuple[str, ProbeItem]:
        # Not written back into the run's map of keys: that map is read before a request is sent, never after,
        # and a key kept there per request sent was about 110 bytes of a large run's peak.
        return _keyed(self._run_keys, item, request, shas)

    def _key_later(self, item: ProbeItem, shas: tuple) -> tuple[str, ProbeItem]:
        """:meth:`_keyed` for a reply the recorder was given without its key: the key does not depend on
        the images' bytes, only on their digests, so the planned request (images by reference) gives it."""
        return self._keyed(item, item.request, shas)

    def _cache_may_answer(self) -> bool:
        """Whether a lazy plan's request must be keyed before it is sent, to ask the response cache.

        A cache that held nothing of this model when sending began is not asked again: what this run adds
        answers other requests, as a plan's lookup before sending would not have seen it either. Otherwise
        the key is taken when the reply is committed (:mod:`cfkit.probe.recording`)."""
        if not self.backend.capabilities.cacheable:
            return False
        if self._cache_holds is None:
            self._cache_holds = responses.holds_any(self.store, backend=self.backend.kind, model=self.backend.model)
        return self._cache_holds

    def _from_cache(self, item: ProbeItem, request, shas: tuple) -> tuple[str, ProbeItem, bool]:
        """Key a lazy plan's request from the digests of the bytes just read and record the response cache's reply
        to it, when it holds one: (its key, the item with its image's digest, whether the cache answered)."""
        key, item = self._keyed(item, request, shas)
        hit = responses.cached(self.store, [key]).get(key)
        if hit is None:
            return key, item, False
        self.recorder.reply(item, key, cached_reply(hit, self.backend.priced), fresh=False)
        self.progress.done += 1
        self.from_cache += 1
        if self.on_progress:
            self.on_progress(self.progress)
        return key, item, True

    def _news(self, line: str, more: int = 0) -> None:
        """Good news the progress display says once, as a note: a replica back in use (``more``: the requests it
        may have in flight, which a run pacing itself adds to its own: more workers, a wider pacer)."""
        if more > 0 and self._own_pacer and self.pacer is not None and self._queue is not None \
                and self.stopped is None:
            self.pacer.widen(more)
            self._added += [asyncio.create_task(self._worker(self._queue)) for _ in range(more)]
            self.progress.concurrency = self.pacer.level
        self._waiting(line, news=True)

    def _waiting(self, line: str, *, news: bool = False) -> None:
        """A line the progress display says once: what the run waits for (requests another process holds the
        leases of), as a warning, or good news (``news``), as a note."""
        if news:
            self.progress.news = line
        else:
            self.progress.waiting = line
        if self.on_progress:
            self.on_progress(self.progress)

    def _elsewhere(self, item: ProbeItem) -> None:
        self.progress.done += 1
        self.progress.elsewhere += 1
        if self.on_progress:
            self.on_progress(self.progress)

    async def _commit_when_due(self) -> None:
        """Commit queued replies once the oldest has waited long enough, even when no new reply comes."""
        while True:
            await asyncio.sleep(self.recorder.seconds / 2)
            if self.recorder.due():
                self.recorder.flush()

    async def _worker(self, queue: SharedQueue) -> None:
        pacer = self.pacer
        while self.stopped is None:
            await pacer.acquire()
            answered = False
            try:
                item = await queue.next()
                if item is None:
                    return
                answered = await self._one(item)
            finally:
                await pacer.release(ok=answered)
            self.progress.concurrency = pacer.level

    async def _one(self, item: ProbeItem) -> bool:
        """Send one request and queue what came back; True when a reply came."""
        budget = self.budget
        if budget is not None:
            if not budget.admit():
                self.stopped = OVER_BUDGET  # said with what was spent once the requests in flight have ended
                return False
            budget.in_flight += 1
        key = self.keys[item.key]
        reply = None
        request = shas = None
        try:
            # Read (and, for a lazy plan, hashed) here on the loop: a worker thread hashing them kept 8 MiB
            # more resident at 64 in flight (its own malloc arena) for no measurable gain on two cores. Reading
            # here and hashing on one worker thread while the request is in flight (keyed on its reply) was
            # tried too: it cost the loop more than the hash it moved (main-thread CPU 300-365 against
            # 240-288 us a request, 1,204 lazy-plan images, load average 3.4 on two cores). Hashing on one
            # thread without asyncio's hand-over (a future waited for at the reply's commit) gave the same wall
            # time on two cores for 14% more CPU in all (1.32 s either way, 844 against 729 us a request; two
            # processes, 10 alternating rounds, load average 1.6).
            request, shas = self._images.acquire_with_digests(item.request)
            if len(self._images.learned) >= LEARNED_BATCH:
                self._remember_learned()
            try:
                # A lazy plan: the key and the image's digest come from the bytes just read; taken now only
                # when the response cache may answer, else when the reply is committed.
                if key is None and self._cache_may_answer():
                    key, item, answered = self._from_cache(item, request, shas)
                    if answered:
                        return True
                try:
                    reply = await (self.backend.answer(request) if self._async
                                   else asyncio.to_thread(self.backend.answer, request))
                except (asyncio.CancelledError, KeyboardInterrupt) as stop:  # Ctrl-C, SIGTERM: its attempts given up
                    # once sent and the one out (none while it waited to retry) may be billed (cfkit.backends.attempts)
                    self.progress.abandoned += billable(sent_before_stop(stop))
                    raise
            finally:
                self._images.release(item.request)
        except (TransportError, ImageError) as exc:  # recorded, and sent again on the next run
            if isinstance(exc, TransportError) and exc.abandoned:  # attempts a provider may bill all the same
                self.progress.abandoned += exc.abandoned
                if budget is not None:
                    budget.abandon(exc.abandoned)
            if key is None and shas is not None:
                key, item = self._keyed(item, request, shas)
            self.recorder.transport(item, key or "", str(exc))
            self.progress.errors += 1
            self.policy.failed(str(exc))
            self._stop_if_told()
        except BackendError as exc:  # it stops the run; attempts it gave up once sent may be billed all the same
            if exc.abandoned:
                self.progress.abandoned += exc.abandoned
                if budget is not None:
                    budget.abandon(exc.abandoned)
            raise
        finally:
            if budget is not None:
                budget.in_flight -= 1
        self.progress.sent += 1
        if reply is not None:
            self.policy.answered()
            self.recorder.reply(item, key, reply, shas=shas if key is None else None)
            self.progress.done += 1
            self.notes.update(reply.notes)
            if reply.retries or reply.failovers:
                self._count_retries(reply)
            if reply.cost_usd is not None:
                self.progress.cost_usd += reply.cost_usd
            elif self.backend.priced:
                self.progress.unpriced += 1
            if reply.abandoned:  # attempts given up once sent before it came (a provider may bill them)
                self.progress.abandoned += reply.abandoned
            if budget is not None:
                budget.record(reply.cost_usd, reply.abandoned)
                if reply.cost_usd is None and self.stopped is None:
                    where = self.backend.endpoint or self.backend.model
                    self.stopped = UNBUDGETED.format(limit=budget.limit, where=where)
        if self.on_progress:
            self.on_progress(self.progress)
        return reply is not None


def _keyed(run_keys: RunKeys, item: ProbeItem, request, shas: tuple) -> tuple[str, ProbeItem]:
    """(the cache key of ``item`` from the digests of the bytes read to send it, the item with the digest of the
    image it shows filled in)."""
    key = run_keys.cache_key(request, shas)
    if item.image_sha256 is None and item.image_file is not None:
        for ref, sha in zip(item.request.images, shas):
            if isinstance(ref, ImageRef) and ref.kind == "file" and ref.files[0].path == item.image_file.path:
                item = replace(item, image_sha256=sha)
    return key, item


class _OldObjectsFrozen:
    """While a run sends, the objects that existed before (the plan, the cases, imported modules) are left out of
    the garbage collector's full passes (``gc.freeze``): each pass walked all of them, several milliseconds a
    time, for objects that live until the run ends. Given back to the collector (``gc.unfreeze``) when the last
    of the runs sending at once in this process ends."""

    sending = 0  # runs of this process inside one

    def __init__(self) -> None:
        import gc

        if _OldObjectsFrozen.sending == 0:
            gc.freeze()
        _OldObjectsFrozen.sending += 1
        self._ended = False

    def end(self) -> None:
        import gc

        if self._ended:
            return
        self._ended = True
        _OldObjectsFrozen.sending -= 1
        if _OldObjectsFrozen.sending == 0:
            gc.unfreeze()
