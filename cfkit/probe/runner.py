"""Running a probe plan: send only what is missing, with bounded concurrency, storing every reply.

For each request the runner, in order:

1. keeps the run's stored reply when it was made from the identical request
   and is not a transport failure;
2. otherwise answers from the response cache, keyed by a SHA-256 over backend
   kind, model, answer-changing options and the exact request
   (:func:`cfkit.probe.identity.cache_key`);
3. otherwise sends it (:mod:`cfkit.probe.sending`): at most ``concurrency``
   requests in flight, fewer while the server says it is overloaded; only the
   requests no other process running the same run has taken
   (:mod:`cfkit.probe.sharing`); each image read when its request is sent.

Replies are committed in small batches (:mod:`cfkit.probe.recording`: every
few dozen replies or a tenth of a second), so a rerun makes no model call,
and a run stopped by Ctrl-C, a crash or a ``kill -9`` resumes with only the
missing requests (a crash loses at most the last uncommitted batch). Replies
are parsed with :func:`cfkit.parse.parse_answer`; transport failures are
stored as error ``transport`` with a null answer, the server's last word as
the detail, and retried on the next run.

The run id covers the settings and every request
(:mod:`cfkit.probe.identity`), so a stored reply is only ever completed, never
replaced by an answer to another question. The run records its settings, the
library versions, the backend's notes, and why it failed if it did; each
reply records the edit and image it was about and the model id and build the
server reported.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from cfkit import __version__
from cfkit.backends import Backend, as_backend
from cfkit.errors import BackendError, Incomplete, QuotaRefused, UsageError
from cfkit.plural import agree, plural
from cfkit.probe.cache_keys import RunKeys
from cfkit.probe.identity import library_versions, requests_sha256, run_id_for, run_settings, settings_sha256
from cfkit.probe.plan import ProbeItem, ProbePlan
from cfkit.probe.progress import Budget, RunInterrupted, RunProgress, RunSummary
from cfkit.store import Store, batches, responses, runs
from cfkit.money import Cost, abandoned_usd, cost_notes
from cfkit.store.runs import RunRecord, RunSettings

if TYPE_CHECKING:
    from cfkit.probe.pacing import Pacer


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a job scheduler's stop) while a run sends: handled as Ctrl-C is, the run marked
    interrupted; the command exits 143, as a process ended by SIGTERM does."""

    exit_code = 143


@contextmanager
def stopped_by_sigterm_as_by_ctrl_c() -> Iterator[None]:
    """While inside, SIGTERM raises :class:`Terminated` (only the main thread can set a signal handler)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum: int, frame: Any) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


__all__ = ["OpenedRun", "RunInterrupted", "RunProgress", "RunSummary", "Terminated", "close_run", "open_and_settle",
           "run_identity", "run_probe", "send_plan", "stopped_by_sigterm_as_by_ctrl_c"]


@dataclass
class OpenedRun:
    """A run opened (or continued) in the store, with what is already answered set apart (steps 2 and 3)."""

    run_id: str
    keys: dict[tuple[str, str, str], str]  # each planned request's cache key
    recorded: RunSettings
    kept: int  # replies already stored for identical requests
    from_cache: int  # answered from the response cache just now
    to_send: list[ProbeItem]  # what neither answers
    recorder: Any  # the Recorder the run's replies go through
    notes: set[str]
    earlier: Cost = Cost()  # the run's cost as its earlier invocations left it


def open_and_settle(store: Store, backend: Backend, plan: ProbePlan, *, protocol: str | None = None,
                    notes: dict[str, Any] | None = None, owner: str | None = None) -> OpenedRun:
    """Open (or continue) the run of ``plan`` on ``backend``, keep what is stored, answer what the cache can.

    ``owner`` (a process about to send the run) says so as the run opens
    (:func:`cfkit.probe.sharing.announce`), so the run is seen as being sent
    while the cache answers what it can; the caller gives that up when it ends.

    Raises :class:`~cfkit.errors.Incomplete` when the run has batches in
    flight (``probe run --batch``): their requests must not be paid for twice.
    """
    backend = as_backend(backend)

    # 2. Open (or continue) the run: its id covers the settings and every request.
    run_id, keys, recorded = run_identity(backend, plan, protocol)
    waiting = batches.uncollected(store, run_id)
    if waiting and waiting[0].status == "written":  # a batch file (probe run --batch-file), run elsewhere
        raise Incomplete(f"run {run_id} waits for the results of its batch file {waiting[0].input_file_id}; store "
                         f"them with 'cfkit probe collect {run_id} --from-file RESULTS.jsonl' (add --final if some "
                         "never came: what no file answered is then sent again) before running it again.")
    if waiting:
        raise Incomplete(f"run {run_id} has {plural(len(waiting), 'batch', 'batches')} in flight "
                         f"({waiting[0].status}); collect {agree(len(waiting), 'their')} results with 'cfkit probe collect {run_id}' before running it again.")
    previous = runs.get_run(store, run_id)
    _open_run(store, run_id, backend, plan, recorded, notes or {}, previous)
    if owner is not None:
        from cfkit.probe.sharing import announce, withdraw

        announce(store, run_id, owner)
        try:
            return _settle(store, backend, plan, run_id, keys, recorded, previous)
        except BaseException:
            with suppress(Exception):  # the store's own failure is the one to say
                withdraw(store, run_id, owner)
            raise
    return _settle(store, backend, plan, run_id, keys, recorded, previous)


def _settle(store: Store, backend: Backend, plan: ProbePlan, run_id: str, keys: dict, recorded: RunSettings,
            previous) -> OpenedRun:
    """Step 3 of :func:`open_and_settle`: keep what is stored, answer from the cache what can be."""
    from cfkit.probe.recording import Recorder, cached_reply

    run_notes: set[str] = set(backend.notes or ())  # said at the start, and kept with the run
    if previous is not None and previous.versions and previous.versions != recorded.versions:
        changed = sorted(k for k in set(previous.versions) | set(recorded.versions)
                         if previous.versions.get(k) != recorded.versions.get(k))
        run_notes.add(f"resumed with other library versions than before ({', '.join(changed)})")
    if previous is None:
        run_notes.update(_older_rule_runs(store, run_id, plan.suite, recorded.settings_sha256))

    # 3. Keep what is stored; answer from the cache what can be.
    settled = runs.settled_keys(store, run_id)  # keys alone: a large run's raw texts are not read here
    # A request whose cache key is not known yet (its image not read) is settled by any reply the run has for
    # it: the run id covers the image's path, size and mtime.
    pending = [item for item in plan.items if not _settled(settled.get(item.key), keys[item.key])]
    del settled
    recorder = Recorder(store, run_id, cache_as=backend if backend.capabilities.cacheable else None)
    to_send: list[ProbeItem] = []
    known = [keys[i.key] for i in pending if keys[i.key] is not None]
    cached = responses.cached(store, known) if backend.capabilities.cacheable and known else {}
    for item in pending:
        hit = cached.get(keys[item.key]) if keys[item.key] is not None else None
        if hit is None:
            to_send.append(item)
        else:
            recorder.reply(item, keys[item.key], cached_reply(hit, backend.priced), fresh=False)
    recorder.flush()
    earlier = Cost.of_run(previous) if previous is not None else Cost()
    return OpenedRun(run_id, keys, recorded, len(plan.items) - len(pending), len(pending) - len(to_send), to_send,
                     recorder, run_notes, earlier)


def _settled(stored: str | None, key: str | None) -> bool:
    """Whether a stored reply with cache key ``stored`` answers a request whose cache key is ``key``."""
    return stored is not None and (key is None or stored == key)


def run_probe(store: Store, backend: Backend, plan: ProbePlan, *, concurrency: int | None = None,
              max_cost: float | None = None, on_progress: Callable[[RunProgress], None] | None = None,
              inputs_sha256: str | None = None, protocol: str | None = None,
              notes: dict[str, Any] | None = None, inputs_manifest: dict[str, Any] | None = None) -> RunSummary:
    """Ask ``backend`` every request of ``plan`` that has no stored reply; see the module docstring.

    ``inputs_sha256`` and ``inputs_manifest`` (from
    :func:`~cfkit.probe.identity.inputs_digest`) are recorded when the run
    ends complete, so the next identical command can skip planning;
    ``protocol`` names the preset the settings came from; ``notes`` are
    recorded with the run (e.g. where prices came from).

    Raises :class:`BackendError` (after recording the run as failed, with why)
    when the backend cannot go on, e.g. a rejected key.
    """
    backend = as_backend(backend)
    # 1. Check the inputs.
    if concurrency is None:
        concurrency = 4 if backend.capabilities.remote else 1
    if concurrency < 1:
        raise UsageError(f"--concurrency {concurrency}: must be at least 1.")
    if max_cost is not None and not backend.priced:
        raise UsageError(f"--max-cost needs prices, and {backend.model} has none. Give them as "
                         "-o price_in=USD_PER_M_INPUT_TOKENS -o price_out=USD_PER_M_OUTPUT_TOKENS, or in "
                         "cfkit.toml [probe.prices].")

    import asyncio

    ended: list[RunSummary] = []  # what an interrupted run received and spent
    with stopped_by_sigterm_as_by_ctrl_c():
        try:
            return asyncio.run(send_plan(store, backend, plan, concurrency=concurrency, max_cost=max_cost,
                                         on_progress=on_progress, inputs_sha256=inputs_sha256, protocol=protocol,
                                         notes=notes, inputs_manifest=inputs_manifest, on_interrupted=ended.append))
        except KeyboardInterrupt as exc:
            if not ended:
                raise
            raise RunInterrupted(ended[0], getattr(exc, "exit_code", 130)) from None


async def send_plan(store: Store, backend: Backend, plan: ProbePlan, *, concurrency: int,
                    max_cost: float | None = None, on_progress: Callable[[RunProgress], None] | None = None,
                    inputs_sha256: str | None = None, protocol: str | None = None, notes: dict[str, Any] | None = None,
                    inputs_manifest: dict[str, Any] | None = None, pacer: Pacer | None = None,
                    on_interrupted: Callable[[RunSummary], None] | None = None) -> RunSummary:
    """Steps 2–4 of :func:`run_probe` inside a running event loop, so several runs can send at once.

    ``pacer`` is shared with the other runs that send to the same endpoint
    (``cfkit study run``); without it the run paces itself at ``concurrency``.
    A cancelled run (Ctrl-C, SIGTERM) is recorded as interrupted with every
    reply received so far (its requests in flight as abandoned attempts), told
    to ``on_interrupted`` as a summary, and the cancellation goes on.
    """
    import asyncio

    from cfkit.probe.sending import Sender
    from cfkit.probe.sharing import owner_id, withdraw

    # 2–3. Open the run; keep what is stored; answer from the cache what can be.
    owner = owner_id()
    opened = open_and_settle(store, backend, plan, protocol=protocol, notes=notes, owner=owner)
    run_id = opened.run_id

    # 4. Send the rest.
    progress = RunProgress(total=len(plan.items), done=opened.kept + opened.from_cache, priced=backend.priced,
                           earlier=opened.earlier)
    if on_progress:
        on_progress(progress)
    sender = Sender(store, run_id, backend, opened.keys, progress, on_progress,
                    Budget(max_cost) if max_cost is not None else None, opened.recorder)
    sender.owner = owner
    sender.notes.update(opened.notes)
    status = "failed"
    failure: str | None = None
    stop: BackendError | None = None
    cancelled: BaseException | None = None
    try:
        if opened.to_send:
            await sender.send_all(opened.to_send, concurrency, pacer)
        status = "done"
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        status = "interrupted"
        cancelled = exc
    except BaseException as exc:
        # Recorded with the run, so 'cfkit runs show' says why it stopped.
        failure = f"{type(exc).__name__}: {exc}"
        stop = exc if isinstance(exc, BackendError) else None
        raise
    finally:
        with suppress(Exception):  # a store that cannot be written says so in close_run
            withdraw(store, run_id, owner)
        counts = close_run(store, run_id, status, sender.stopped, {i.key for i in plan.items}, sorted(sender.notes),
                           inputs_sha256, failure, inputs_manifest, asked=plan.asked(),
                           pairs=plan.asked_pairs(), abandoned=progress.abandoned)
        if stop is not None and (backend.priced and progress.sent or progress.abandoned):  # what may be billed
            stop.args = (f"{stop} {_spent_before_stop(progress, counts['abandoned_usd'], backend.priced)}",)
        if isinstance(stop, QuotaRefused):  # the line says what was kept, and how to go on once there is credit
            stop.args = (f"{stop} {_kept_after_refusal(run_id, progress.done, len(plan.items))}",)
    summary = RunSummary(
        run_id=run_id, model=backend.model, suite=plan.suite, status=counts["status"], total=len(plan.items),
        kept=opened.kept, from_cache=opened.from_cache + sender.from_cache, sent=progress.sent, errors=progress.errors,
        invalid=counts["invalid"], truncated=counts["truncated"], empty=counts["empty"],
        max_tokens=plan.generation.max_tokens, cost_usd=progress.cost_usd if backend.priced else None, skipped=plan.skipped,
        stopped=sender.stopped, notes=tuple(sorted(sender.notes)), failed=counts["errors"],
        not_sent=counts["absent"], first_failure=counts["first_failure"], unreviewed=plan.unreviewed,
        endpoint=opened.recorded.endpoint, protocol=protocol, elsewhere=progress.elsewhere,
        cost_unreported=progress.unpriced, replayed_from=backend.replayed_from,
        abandoned=progress.abandoned, abandoned_usd=counts["abandoned_usd"],
    )
    if cancelled is not None:
        if on_interrupted is not None:
            on_interrupted(summary)
        raise cancelled
    return summary


def _kept_after_refusal(run_id: str, stored: int, total: int) -> str:
    """What a run stopped by a billing refusal kept, and how it goes on (the same command asks only the rest)."""
    return f"Run {run_id} keeps its {plural(stored, 'stored reply', 'stored replies')} of {total}; {total - stored} missing."


def _spent_before_stop(progress: RunProgress, abandoned_bound: float | None, priced: bool) -> str:
    """What a run stopped by its backend spent in this invocation, attempts given up once sent included (without
    prices, only those: a provider may bill them all the same)."""
    from cfkit.money import abandoned_note, usd

    if not priced:
        return f"(Before it stopped: {Cost(abandoned=progress.abandoned).shown()}.)"
    return (f"(This invocation spent {usd(progress.cost_usd)} before it stopped"
            f"{abandoned_note(progress.abandoned, abandoned_bound)}.)")


def run_identity(backend: Backend, plan: ProbePlan,
                 protocol: str | None = None) -> tuple[str, dict[tuple[str, str, str], str], RunSettings]:
    """(run id, cache key of each request, what the run records) of ``plan`` on ``backend``.

    The run id covers each request's :func:`~cfkit.probe.identity.request_key` (images by path, size and
    mtime), so it is known before any image is read; a cache key is None while the bytes of one of its
    request's images are not known (a lazy plan): the sender takes it from the bytes it reads.
    """
    backend = as_backend(backend)
    run_keys = RunKeys(backend)  # the same keys as cache_key and request_key, the shared parts serialised once
    keys = {item.key: run_keys.cache_key(item.request) for item in plan.items}
    settings = run_settings(backend, plan.generation, protocol)
    # Each request's key goes into the digest as it is made, in the order of the places.
    requests_digest = requests_sha256(
        (item.key, run_keys.request_key(item.request), (item.edit_id, _file(item.image_file)))
        for item in _last_of_each_place(plan.items))
    recorded = RunSettings(settings=settings, settings_sha256=settings_sha256(settings),
                           requests_sha256=requests_digest, endpoint=backend.endpoint,
                           versions=_versions(backend), protocol=protocol, selection=plan.selection.as_dict())
    return run_id_for(backend, plan.suite, recorded.settings_sha256, recorded.requests_sha256), keys, recorded


def _last_of_each_place(items: Sequence[ProbeItem]) -> Iterator[ProbeItem]:
    """``items`` in the order of their places, each place once: where a place is asked twice, its last request
    counts (as in a map by place)."""
    held = None
    for item in sorted(items, key=attrgetter("key")):  # a stable sort: a place's requests keep their order
        if held is not None and held.key != item.key:
            yield held
        held = item
    if held is not None:
        yield held


@functools.cache
def _installed_versions() -> tuple[tuple[str, str], ...]:
    """:func:`~cfkit.probe.identity.library_versions` without a backend, read once per process (reading the
    installed packages' metadata took 20-40 ms a run): what a process runs does not change under it, even if
    a package is upgraded meanwhile."""
    return tuple(library_versions().items())


def _versions(backend: Backend) -> dict[str, str]:
    """:func:`~cfkit.probe.identity.library_versions` of ``backend``: the installed versions, then its own."""
    return {**dict(_installed_versions()), **(backend.versions or {})}


#: Recorded in the notes of every run whose id follows :func:`run_identity` (images by path, size and mtime).
RUN_ID_RULE = "images by path, size and mtime"


def _older_rule_runs(store: Store, run_id: str, suite: str, settings_digest: str) -> list[str]:
    """A note for an unfinished run with these settings stored under an id of the earlier rule (over image
    contents): it cannot be continued under its own id; what it answered comes from the response cache."""
    alike = [r for r in runs.list_runs(store)
             if r.suite == suite and r.settings_sha256 == settings_digest and r.id != run_id]
    if any("run_id_rule" in r.notes for r in alike):
        return []  # said when the first run under the new rule opened
    older = [r.id for r in alike if not r.complete]
    return [f"an unfinished run with these settings, {older[-1]}, was stored by an earlier cfkit whose run ids "
            "covered image contents; this run goes on under a new id, and what that run had answered for the same "
            "requests came from the response cache, not sent again"] if older else []


def _file(state) -> list | None:
    return None if state is None else [state.path, state.size, state.mtime_ns]


# ── storing replies (through the runs, replies and responses owners) ──────


def _open_run(store: Store, run_id: str, backend: Backend, plan: ProbePlan, recorded: RunSettings,
              notes: dict[str, Any], previous: RunRecord | None = None) -> None:
    """Open the run; a resumed one keeps its earlier invocations' notes on how its cost was worked out."""
    options = {"options": backend.options.model_dump(mode="json") if backend.options is not None else {},
               "identity": backend.cache_identity}
    earlier = cost_notes(previous.notes.get("backend_notes")) if previous is not None else []
    if previous is not None and previous.abandoned_attempts:  # they are still part of what the run may have cost
        notes = {**notes, "abandoned_attempts": previous.abandoned_attempts}
    notes = {**notes, "run_id_rule": RUN_ID_RULE, "skipped": [asdict(s) for s in plan.skipped], "unreviewed": list(plan.unreviewed),
             "left_out": list(plan.left_out), "backend_notes": sorted({*(backend.notes or ()), *earlier})}
    if plan.captions:  # what each case's caption conditions showed, for the report to compare (cfkit.caption_digests)
        notes["captions"] = {case: dict(digests) for case, digests in plan.captions.items()}
    if plan.templates:  # each probe template the requests were rendered from, for the report to compare
        notes["templates"] = dict(plan.templates)
    runs.open_run(store, run_id, model=backend.model, suite=plan.suite, options=options, cfkit_version=__version__,
                  templates_sha256=plan.templates_sha256, n_requests=len(plan.items), notes=notes,
                  recorded=recorded)


def close_run(store: Store, run_id: str, status: str, stopped: str | None, wanted: set[tuple[str, str, str]],
              notes: list[str], inputs_digest: str | None = None, failure: str | None = None,
              inputs_manifest: dict[str, Any] | None = None, *, asked: dict[str, str] | None = None,
              pairs: list[str] | None = None, abandoned: int = 0) -> dict[str, Any]:
    """Recount the replies to the ``wanted`` requests and record how this invocation ended.

    ``status`` "done" becomes "incomplete" when a wanted request has no reply
    or a transport failure; "waiting" (batches in flight) is kept as it is.
    ``asked`` (:meth:`ProbePlan.asked`) is kept in
    the run's notes, and ``pairs`` (:meth:`ProbePlan.asked_pairs`, counterfactual)
    as ``asked_pairs``: the run id covers every request's text, so every reply of
    the run was asked about the cases (pairs) as they were then. They are taken here, after
    sending, rather than when the run opens, to keep them off the first request's path.
    ``abandoned``: this invocation's attempts given up after they were sent, added to the run's.
    """
    states = [state for state in runs.reply_states(store, run_id) if state[0] in wanted]
    present = [(error, detail, answered) for _, answered, error, detail, _, _ in states]
    failed = [detail for error, detail, _ in present if error == "transport"]
    invalid = sum(1 for error, _, answered in present if not answered and error != "transport")
    cut = sum(truncated for *_, truncated, _ in states)  # stopped at the token limit
    empty = sum(blank for *_, blank in states)  # no text at all
    done = len(present) - len(failed)
    if status == "done" and (failed or done < len(wanted) or stopped):
        status = "incomplete"
    previous = runs.get_run(store, run_id)
    record = dict(previous.notes) if previous is not None else {}
    record["backend_notes"] = list(dict.fromkeys([*notes, *cost_notes(record.get("backend_notes"))]))
    record["stopped"] = stopped
    if abandoned:
        record["abandoned_attempts"] = (previous.abandoned_attempts if previous is not None else 0) + abandoned
    if asked:
        record["asked"] = asked
    if pairs:
        record["asked_pairs"] = pairs
    runs.finish_run(store, run_id, status=status, n_done=done, n_errors=len(failed), notes=record,
                    inputs_sha256=inputs_digest if status == "done" else None, error=failure,
                    inputs_manifest=inputs_manifest if status == "done" else None)
    largest = runs.get_run(store, run_id).largest_reply_usd if abandoned else None  # type: ignore[union-attr]
    return {"status": status, "done": done, "errors": len(failed), "invalid": invalid, "truncated": cut, "empty": empty,
            "absent": len(wanted) - len(present), "first_failure": failed[0] if failed else None,
            "abandoned_usd": abandoned_usd(abandoned, largest)}
