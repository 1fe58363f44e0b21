"""Running a probe plan: send only what is missing, with bounded concurrency, storing every reply.

For each request the runner, in order:

1. keeps the run's stored reply when it was made from the identical request
   and is not a transport failure;
2. otherwise answers from the response cache, keyed by a SHA-256 over backend
   kind, model, answer-changing options and the exact request
   (:func:`cfkit.probe.identity.cache_key`);
3. otherwise sends it, with at most ``concurrency`` requests in flight, and
   commits the reply as soon as it arrives.

So a rerun makes no model call, and a run stopped by Ctrl-C, a crash or a
``kill -9`` resumes with only the missing requests. Replies are parsed with
:func:`cfkit.parse.parse_answer`; transport failures are stored as error
``transport`` with a null answer, the server's last word as the detail, and
retried on the next run.

The run id covers the settings and every request
(:mod:`cfkit.probe.identity`), so a stored reply is only ever completed, never
replaced by an answer to another question. The run records its settings, the
library versions, and why it failed if it did; each reply records the edit
and image it was about and the model id and build the server reported.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from cfkit import __version__
from cfkit.backends import Backend, Reply, is_async
from cfkit.cases import Case
from cfkit.errors import TransportError, UsageError
from cfkit.parse import PARSER_VERSION, parse_answer
from cfkit.probe.identity import cache_key, library_versions, requests_sha256, run_id_for, run_settings, settings_sha256
from cfkit.probe.plan import ProbeItem, ProbePlan, SkippedPair
from cfkit.store import Store, responses, runs
from cfkit.store.responses import CachedResponse
from cfkit.store.runs import ReplyFields, ReplyProvenance, RunSettings


@dataclass
class RunProgress:
    """Where a run stands, passed to the progress callback after every reply."""

    total: int
    done: int = 0  # replies in the store, including those kept from before
    sent: int = 0  # requests sent in this invocation
    errors: int = 0  # transport failures in this invocation
    cost_usd: float = 0.0  # spent in this invocation
    priced: bool = False


@dataclass(frozen=True)
class RunSummary:
    """What one invocation of a run did."""

    run_id: str
    model: str
    suite: str
    status: str  # done | incomplete | interrupted | failed
    total: int
    kept: int  # replies already stored for identical requests
    from_cache: int  # answered from the response cache
    sent: int
    errors: int  # transport failures in this invocation
    invalid: int  # replies without a valid answer (parse errors, refusals), in the whole run
    cost_usd: float | None
    skipped: tuple[SkippedPair, ...]
    stopped: str | None = None  # why sending stopped early (budget)
    notes: tuple[str, ...] = ()
    failed: int = 0  # planned requests whose stored reply is a transport failure, in the whole run
    not_sent: int = 0  # planned requests with no stored reply at all (a budget stop, an interruption)
    first_failure: str | None = None  # what one failed request's server said, for the summary line
    unreviewed: tuple[str, ...] = ()  # pairs or cases asked with inputs no person reviewed (see ProbePlan)
    endpoint: str | None = None
    protocol: str | None = None

    @property
    def missing(self) -> int:
        """Planned requests without a stored reply: what keeps the run from being complete."""
        return self.failed + self.not_sent


class _Budget:
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


def run_probe(store: Store, backend: Backend, plan: ProbePlan, *, concurrency: int | None = None,
              max_cost: float | None = None, on_progress: Callable[[RunProgress], None] | None = None,
              inputs_sha256: str | None = None, protocol: str | None = None,
              notes: dict[str, Any] | None = None) -> RunSummary:
    """Ask ``backend`` every request of ``plan`` that has no stored reply; see the module docstring.

    ``inputs_sha256`` (from :func:`inputs_sha256`) is recorded when the run
    ends complete, so the next identical command can skip planning;
    ``protocol`` names the preset the settings came from; ``notes`` are
    recorded with the run (e.g. where prices came from).

    Raises :class:`BackendError` (after recording the run as failed, with why)
    when the backend cannot go on, e.g. a rejected key.
    """
    # 1. Check the inputs.
    if concurrency is None:
        concurrency = 4 if backend.capabilities.remote else 1
    if concurrency < 1:
        raise UsageError(f"--concurrency {concurrency}: must be at least 1.")
    if max_cost is not None and not backend.priced:
        raise UsageError(f"--max-cost needs prices, and {backend.model} has none. Give them as "
                         "-o price_in=USD_PER_M_INPUT_TOKENS -o price_out=USD_PER_M_OUTPUT_TOKENS, or in "
                         "cfkit.toml [probe.prices].")

    # 2. Open (or continue) the run: its id covers the settings and every request.
    run_id, keys, recorded = run_identity(backend, plan, protocol)
    previous = runs.get_run(store, run_id)
    _open_run(store, run_id, backend, plan, recorded, notes or {})
    run_notes: set[str] = set()
    if previous is not None and previous.versions and previous.versions != recorded.versions:
        changed = sorted(k for k in set(previous.versions) | set(recorded.versions)
                         if previous.versions.get(k) != recorded.versions.get(k))
        run_notes.add(f"resumed with other library versions than before ({', '.join(changed)})")

    # 3. Keep what is stored; answer from the cache what can be.
    stored = runs.reply_index(store, run_id)

    def needed(item: ProbeItem) -> bool:
        reply = stored.get(item.key)
        return reply is None or reply.error == "transport" or reply.cache_key != keys[item.key]

    pending = [item for item in plan.items if needed(item)]
    kept = len(plan.items) - len(pending)
    from_cache = 0
    to_send: list[ProbeItem] = []
    cached = responses.cached(store, [keys[i.key] for i in pending]) if backend.capabilities.cacheable else {}
    for item in pending:
        hit = cached.get(keys[item.key])
        if hit is None:
            to_send.append(item)
        else:
            reply = Reply(raw=hit.raw, usage=hit.usage, latency_s=hit.latency_s, cost_usd=hit.cost_usd,
                          refused=hit.refused, server_model=hit.server_model,
                          system_fingerprint=hit.system_fingerprint, raw_chars=hit.raw_chars,
                          reasoning=hit.reasoning)
            _record(store, run_id, item, keys[item.key], reply, cache_as=None)
            from_cache += 1

    # 4. Send the rest.
    progress = RunProgress(total=len(plan.items), done=kept + from_cache, priced=backend.priced)
    if on_progress:
        on_progress(progress)
    sender = _Sender(store, run_id, backend, keys, progress, on_progress,
                     _Budget(max_cost) if max_cost is not None else None)
    sender.notes.update(run_notes)
    sender.notes.update(getattr(backend, "notes", ()) or ())  # said at the start, and kept with the run
    status = "failed"
    failure: str | None = None
    try:
        asyncio.run(sender.send_all(to_send, concurrency))
        status = "done"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except BaseException as exc:
        # Recorded with the run, so 'cfkit runs show' says why it stopped.
        failure = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        counts = _close_run(store, run_id, status, sender.stopped, plan, sorted(sender.notes), inputs_sha256, failure)
    return RunSummary(
        run_id=run_id, model=backend.model, suite=plan.suite, status=counts["status"], total=len(plan.items),
        kept=kept, from_cache=from_cache, sent=progress.sent, errors=progress.errors, invalid=counts["invalid"],
        cost_usd=progress.cost_usd if backend.priced else None, skipped=plan.skipped, stopped=sender.stopped,
        notes=tuple(sorted(sender.notes)), failed=counts["errors"], not_sent=counts["absent"],
        first_failure=counts["first_failure"], unreviewed=plan.unreviewed, endpoint=recorded.endpoint,
        protocol=protocol,
    )


def run_identity(backend: Backend, plan: ProbePlan,
                 protocol: str | None = None) -> tuple[str, dict[tuple[str, str, str], str], RunSettings]:
    """(run id, cache key of each request, what the run records) of ``plan`` on ``backend``."""
    keys = {item.key: cache_key(backend, item.request) for item in plan.items}
    settings = run_settings(backend, plan.generation, protocol)
    shown = {item.key: (item.edit_id, item.image_sha256) for item in plan.items}
    recorded = RunSettings(settings=settings, settings_sha256=settings_sha256(settings),
                           requests_sha256=requests_sha256(keys, shown), endpoint=getattr(backend, "endpoint", None),
                           versions=library_versions(backend), protocol=protocol, selection=plan.selection.as_dict())
    return run_id_for(backend, plan.suite, recorded.settings_sha256, recorded.requests_sha256), keys, recorded


class _Sender:
    """Sends requests with a bounded number in flight and records each reply as it arrives."""

    def __init__(self, store: Store, run_id: str, backend: Backend, keys: dict, progress: RunProgress,
                 on_progress: Callable[[RunProgress], None] | None, budget: _Budget | None):
        self.store = store
        self.run_id = run_id
        self.backend = backend
        self.keys = keys
        self.progress = progress
        self.on_progress = on_progress
        self.budget = budget
        self.stopped: str | None = None
        self.notes: set[str] = set()
        self._async = is_async(backend)

    async def send_all(self, items: list[ProbeItem], concurrency: int) -> None:
        queue = iter(items)
        try:
            if self.budget is not None:
                # Learn what one request costs before sending several at once.
                first = next(queue, None)
                if first is not None:
                    await self._one(first)
            workers = [asyncio.create_task(self._worker(queue)) for _ in range(concurrency)]
            try:
                await asyncio.gather(*workers)
            except BaseException:
                for task in workers:
                    task.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
                raise
        finally:
            closer = getattr(self.backend, "aclose", None)
            if closer is not None:
                await closer()

    async def _worker(self, queue) -> None:
        while self.stopped is None:
            item = next(queue, None)
            if item is None:
                return
            await self._one(item)

    async def _one(self, item: ProbeItem) -> None:
        budget = self.budget
        if budget is not None:
            if not budget.admit():
                self.stopped = (f"--max-cost {budget.limit:g} USD would be exceeded (spent {budget.spent:.4f} USD "
                                "in this invocation); raise it and run again to continue")
                return
            budget.in_flight += 1
        key = self.keys[item.key]
        try:
            if self._async:
                reply = await self.backend.answer(item.request)
            else:
                reply = await asyncio.to_thread(self.backend.answer, item.request)
        except TransportError as exc:
            _record_transport(self.store, self.run_id, item, key, str(exc))
            self.progress.errors += 1
            reply = None
        finally:
            if budget is not None:
                budget.in_flight -= 1
        self.progress.sent += 1
        if reply is not None:
            _record(self.store, self.run_id, item, key, reply,
                    cache_as=self.backend if self.backend.capabilities.cacheable else None)
            self.progress.done += 1
            self.notes.update(reply.notes)
            if reply.cost_usd is not None:
                self.progress.cost_usd += reply.cost_usd
            if budget is not None:
                budget.record(reply.cost_usd)
        if self.on_progress:
            self.on_progress(self.progress)


# ── storing replies (through the runs, replies and responses owners) ──────


def _open_run(store: Store, run_id: str, backend: Backend, plan: ProbePlan, recorded: RunSettings,
              notes: dict[str, Any]) -> None:
    options = {"options": backend.options.model_dump(mode="json") if hasattr(backend, "options") else {},
               "identity": backend.cache_identity}
    notes = {**notes, "skipped": [asdict(s) for s in plan.skipped], "unreviewed": list(plan.unreviewed),
             "left_out": list(plan.left_out), "backend_notes": sorted(getattr(backend, "notes", ()) or ())}
    runs.open_run(store, run_id, model=backend.model, suite=plan.suite, options=options, cfkit_version=__version__,
                  templates_sha256=plan.templates_sha256, n_requests=len(plan.items), notes=notes,
                  recorded=recorded)


def _close_run(store: Store, run_id: str, status: str, stopped: str | None, plan: ProbePlan,
               notes: list[str], inputs_digest: str | None = None, failure: str | None = None) -> dict[str, Any]:
    """Recount the run's replies and record how this invocation ended."""
    wanted = {item.key for item in plan.items}
    present = [r for r in runs.replies(store, run_id) if r.key in wanted]
    failed = [r for r in present if r.error == "transport"]
    invalid = sum(1 for r in present if r.answer is None and r.error != "transport")
    done = len(present) - len(failed)
    if status == "done" and (failed or done < len(plan.items) or stopped):
        status = "incomplete"
    previous = runs.get_run(store, run_id)
    record = dict(previous.notes) if previous is not None else {}
    record["backend_notes"] = notes
    record["stopped"] = stopped
    runs.finish_run(store, run_id, status=status, n_done=done, n_errors=len(failed), notes=record,
                    inputs_sha256=inputs_digest if status == "done" else None, error=failure)
    return {"status": status, "done": done, "errors": len(failed), "invalid": invalid,
            "absent": len(plan.items) - len(present), "first_failure": failed[0].detail if failed else None}


def read_reply(reply: Reply, case: Case) -> ReplyFields:
    """The stored reading of a reply: answer, parse rule, error, reason, confidence, detail, reasoning, parser.

    A known answer (replay, baselines) is stored as the backend gave it; one
    without an answer keeps its reason as the detail too, so 'cfkit runs show'
    says why. Any other reply is read by :func:`cfkit.parse.parse_answer`, with
    the reasoning the server returned beside it; the reading records
    :data:`cfkit.parse.PARSER_VERSION`.
    """
    if reply.known is not None:
        k = reply.known
        detail = k.reason if k.answer is None and k.error is not None else None
        return ReplyFields(answer=k.answer, parse=k.parse, error=k.error, reason=k.reason, confidence=k.confidence,
                           detail=detail, reasoning=reply.reasoning)
    if reply.refused:
        return ReplyFields(answer=None, parse=None, error="refused", reason=reply.raw, confidence=None,
                           detail="the model declined to answer", reasoning=reply.reasoning)
    parsed = parse_answer(reply.raw, case.options, reasoning=reply.reasoning)
    return ReplyFields(answer=parsed.answer, parse=parsed.rule, error=parsed.error, reason=parsed.reason,
                       confidence=parsed.confidence, detail=parsed.detail or None, reasoning=parsed.reasoning,
                       parser=PARSER_VERSION)


def _provenance(item: ProbeItem, reply: Reply | None) -> ReplyProvenance:
    return ReplyProvenance(
        edit_id=item.edit_id,
        image_sha256=item.image_sha256,
        server_model=reply.server_model if reply is not None else None,
        system_fingerprint=reply.system_fingerprint if reply is not None else None,
    )


def _record(store: Store, run_id: str, item: ProbeItem, key: str, reply: Reply, *,
            cache_as: Backend | None) -> None:
    """Store one reply of the run (and, for a fresh response of a cacheable backend, the response)."""
    fields = read_reply(reply, item.case)
    with store.transaction() as tx:
        if cache_as is not None:
            responses.put(tx, CachedResponse(cache_key=key, raw=reply.raw, usage=reply.usage,
                                             latency_s=reply.latency_s, cost_usd=reply.cost_usd,
                                             refused=reply.refused, server_model=reply.server_model,
                                             system_fingerprint=reply.system_fingerprint,
                                             raw_chars=reply.raw_chars, reasoning=reply.reasoning),
                          backend=cache_as.kind, model=cache_as.model)
        runs.write_reply(tx, run_id, item.key, cache_key=key, raw=reply.raw, fields=fields, cost_usd=reply.cost_usd,
                         provenance=_provenance(item, reply), raw_chars=reply.raw_chars)


def _record_transport(store: Store, run_id: str, item: ProbeItem, key: str, message: str) -> None:
    fields = ReplyFields(answer=None, parse=None, error="transport", reason=None, confidence=None, detail=message)
    with store.transaction() as tx:
        runs.write_reply(tx, run_id, item.key, cache_key=key, raw=None, fields=fields,
                         provenance=_provenance(item, None))
