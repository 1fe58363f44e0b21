"""A probe run through a provider's Batch API: ``probe run --batch``, then ``probe collect RUN``.

:func:`submit_batch` plans the run exactly as a live run does, asks the
server whether it serves the model (``GET /models``, as a replica set's
start-up check does: a model it lists its models without is refused in one
line before anything is recorded, uploaded or created), and opens the run
(same run id, same stored and cached replies kept); the requests still
missing are written as batch input files (one line a distinct request, its
``custom_id`` the request's cache key; each image read and encoded as its
line is written, so memory stays flat), uploaded, and started as batches,
each recorded in the store (:mod:`cfkit.store.batches`) as soon as the
provider accepts it. The run is then ``waiting``.

:func:`collect_batches` asks the provider where each uncollected batch of a
run stands; a batch that has ended is read (its output file, and its error
file) and every result is stored through the same path as a live reply
(:class:`~cfkit.probe.recording.Recorder`: parsed, cached, with the edit and
image the question showed and the server's model id), at batch prices
(:data:`~cfkit.probe.prices.BATCH_PRICE_FACTOR` of the live ones). A request a
batch did not answer (an error line, an expired or failed batch) is stored as
a transport failure with the provider's words, and is sent again by the next
run; what a batch answered before it expired or was cancelled is kept.
Collecting can be stopped and repeated: each batch is read once. With
``final`` (``probe collect RUN --final``) the batches that have not ended are
cancelled where still running and, once the cancel has ended them, read as
any other (what they answered is stored); those that cannot be read, or that
the provider no longer knows, are given up, their requests stored as failed,
so the run can be resumed (the reading and giving up:
:mod:`cfkit.probe.batch_collect`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cfkit.backends import Backend, BackendContext, batch_members_missing, has_batch_api, load_backend
from cfkit.backends.batch_api import NOT_FOUND, batch_api_of, unchecked
from cfkit.cases import CaseSet
from cfkit.errors import NotFoundError, OutputError, PluginError, UsageError
from cfkit.money import usd
from cfkit.option_words import COLLECT
from cfkit.probe.batch_collect import _Asked as _Asked, gather, new_tally
from cfkit.probe.sending_images import SendingImages
from cfkit.probe.plan import ProbeItem
from cfkit.probe.prices import BATCH_PRICE_FACTOR
from cfkit.probe.recording import Recorder
from cfkit.probe.runner import RunSummary, close_run, open_and_settle
from cfkit.store import Store, batches, runs
from cfkit.store.batches import BatchRequest
from cfkit.store.runs import RunRecord


@dataclass(frozen=True)
class BatchSubmission:
    """What ``probe run --batch`` did."""

    run_id: str
    model: str
    suite: str
    total: int  # planned requests
    kept: int  # already stored
    from_cache: int
    submitted: int  # distinct requests sent in batches
    batch_ids: tuple[str, ...]
    finished: RunSummary | None = None  # the run was already complete: nothing was submitted
    notes: tuple[str, ...] = ()  # told once when it was submitted (the model not checked first), kept with the run


@dataclass(frozen=True)
class BatchState:
    """One batch as ``probe collect`` left it."""

    id: str
    status: str
    counts: dict[str, Any]
    collected: bool
    errors: tuple[str, ...] = ()
    # Of its requests, those it ended without answering, stored as failed by this collect, and why the first of them
    # has no answer, in the provider's words: those refused for quota or billing left out (said once for the run:
    # Collection.unpaid_line)
    unanswered: int = 0
    reason: str = ""
    answered: int = 0  # with unanswered: those it did answer (also before it expired or was cancelled), stored

    @property
    def lost(self) -> bool:
        """The provider answers 404 for it: it deleted or forgot it (or the URL is another server's)."""
        return not self.collected and self.status == NOT_FOUND


@dataclass(frozen=True)
class Collection:
    """What ``probe collect`` did."""

    run_id: str
    batches: tuple[BatchState, ...]
    stored: int  # results stored now
    failed: int  # of them, requests a batch did not answer (stored as transport failures)
    status: str  # the run's status afterwards
    missing: int  # planned requests without a reply, once every batch is collected
    cost_usd: float | None = None
    problems: tuple[str, ...] = ()  # lines of result files left out (not JSON, repeated, not asked), each said
    invalid: int = 0  # replies of the run without a valid answer
    truncated: int = 0  # replies of the run cut off at the token limit (finish_reason "length")
    empty: int = 0  # replies of the run with no text at all
    max_tokens: int | None = None  # the run's token limit
    model: str = ""
    suite: str = ""
    cost_unreported: int = 0  # results stored now without a known cost (no usable token counts): not in cost_usd
    given_up: int = 0  # with --final: requests of batches not waited for any more, stored as failed
    notes: tuple[str, ...] = ()  # what the results stored now said of their cost (cached input at the input price …)
    unpaid: int = 0  # of ``failed``, the requests the provider refused for quota or billing (the account cannot pay)
    unpaid_line: str | None = None  # the one line saying so (cfkit.backends.billing.unpaid_results_line)

    @property
    def waiting(self) -> tuple[BatchState, ...]:
        """The batches not collected yet: still running, or (:attr:`lost`) unknown to the provider."""
        return tuple(b for b in self.batches if not b.collected)

    @property
    def running(self) -> tuple[BatchState, ...]:
        return tuple(b for b in self.waiting if not b.lost)

    @property
    def lost(self) -> tuple[BatchState, ...]:
        return tuple(b for b in self.waiting if b.lost)


# ── submitting ──────────────────────────────────────────────────────────────


def _batch_capable(backend: Backend) -> None:
    if not has_batch_api(backend):
        raise UsageError(f"--batch needs a backend with a batch API (openai:…); {backend.model} has none. "
                         "Run it without --batch.")
    missing = batch_members_missing(backend)
    if missing:  # its batches could be paid for and never read: refused before anything is sent
        raise PluginError(f"{backend.model} has a batch API but defines no {' and no '.join(missing)} (see "
                          "'Adding a backend' in the README); nothing was sent. Run it without --batch.")


class _BatchFile:
    """One batch input file being written line by line (nothing of it held in memory), renamed when complete."""

    def __init__(self, path: Path):
        self.path = path
        self.partial = path.with_name(path.name + ".partial")
        self.lines = 0
        self.size = 0
        self.carried: list[BatchRequest] = []
        self._fh = self._guard(lambda: self.partial.open("wb"))

    def _guard(self, action):
        try:
            return action()
        except OSError as exc:
            raise OutputError(f"batch file {self.path}: cannot be written ({exc.strerror}). Check free disk "
                              "space; nothing was sent.") from exc

    def add(self, line: bytes, carried: list[BatchRequest]) -> None:
        self._guard(lambda: self._fh.write(line))
        self.lines += 1
        self.size += len(line)
        self.carried.extend(carried)

    def close(self) -> tuple[Path, list[BatchRequest]]:
        self._guard(self._fh.close)
        self._guard(lambda: os.replace(self.partial, self.path))
        return self.path, self.carried


def _write_files(folder: Path, run_id: str, backend: Backend, items: list[ProbeItem], keys: dict,
                 max_lines: int, max_bytes: int) -> list[tuple[Path, list[BatchRequest]]]:
    """Batch input files for ``items``: one line per distinct request, each file within the provider's limits."""
    import orjson

    from cfkit.backends.openai_batch import ENDPOINT

    by_key: dict[str, list[ProbeItem]] = {}
    for item in items:
        by_key.setdefault(keys[item.key], []).append(item)
    files: list[tuple[Path, list[BatchRequest]]] = []
    current: _BatchFile | None = None
    images = SendingImages()
    for key, group in by_key.items():
        request = images.acquire(group[0].request)  # read and encoded now, dropped once its line is written
        try:
            line = orjson.dumps({"custom_id": key, "method": "POST", "url": ENDPOINT,
                                 "body": backend.batch_body(request)}) + b"\n"
        finally:
            images.release(group[0].request)
        if current is not None and (current.lines >= max_lines or current.size + len(line) > max_bytes):
            files.append(current.close())
            current = None
        if current is None:
            current = _BatchFile(folder / f"{run_id}-{len(files) + 1}.jsonl")
        current.add(line, [BatchRequest(i.case.id, i.pair_id, i.condition, key, i.edit_id, i.image_sha256)
                           for i in group])
    if current is not None:
        files.append(current.close())
    return files


def submit_batch(job: Any, store: Store, *, on_plan: Callable | None = None,
                 max_cost: float | None = None) -> BatchSubmission:
    """``cfkit probe run --batch``: plan ``job`` (a :class:`~cfkit.probe.ProbeJob`), submit what is missing.

    A batch is paid as a whole, so ``max_cost`` is checked before anything is
    written: the batch is refused when the most it could cost (every reply
    using all its tokens, at batch prices) passes it.
    """
    from cfkit.backends.openai_batch import MAX_FILE_BYTES, MAX_LINES
    from cfkit.probe.estimate import estimate

    if job.backend is not None:
        _batch_capable(job.backend)
    planned = job.planned(store, on_plan=on_plan)
    if isinstance(planned, RunSummary):
        return BatchSubmission(planned.run_id, planned.model, planned.suite, planned.total, planned.kept, 0, 0, (),
                               finished=planned)
    backend, plan = planned.backend, planned.plan
    _batch_capable(backend)
    prices = job.setup.prices
    if max_cost is not None and prices is None:
        raise UsageError(f"--max-cost needs prices, and {backend.model} has none. Give them as -o price_in=… "
                         "-o price_out=…, or in cfkit.toml [probe.prices].")
    # A model the server does not serve: refused before anything is recorded; one the API could not check: said.
    said = tuple(unchecked(backend.model, why) for why in [asyncio.run(_check_model(backend))] if why)
    opened = open_and_settle(store, backend, plan, protocol=job.setup.protocol.name, notes=job.setup.notes())
    opened.notes.update(said)
    wanted = {i.key for i in plan.items}
    asked, pairs = plan.asked(), plan.asked_pairs()  # kept with the run (close_run)
    if max_cost is not None:
        most = estimate([i.request for i in opened.to_send], prices.scaled(BATCH_PRICE_FACTOR)).cost_max
        if most is not None and most > max_cost:
            why = (f"--max-cost {max_cost:g}: the batch could cost up to {usd(most)} at batch prices (if every "
                   "reply used all its tokens), and a batch cannot be stopped part way")
            close_run(store, opened.run_id, "done", why, wanted, sorted(opened.notes), asked=asked, pairs=pairs)
            raise UsageError(f"{why}. Nothing was sent. Raise --max-cost, or ask part of the suite (--limit, "
                             "--cases).")
    folder = job.ws.store_dir / "batches"
    folder.mkdir(parents=True, exist_ok=True)
    files = _write_files(folder, opened.run_id, backend, opened.to_send, opened.keys, MAX_LINES,
                         MAX_FILE_BYTES - 1024 * 1024)  # a margin under the provider's limit
    try:
        ids = asyncio.run(_upload_all(store, opened.run_id, backend, files)) if files else []
    except BaseException as exc:  # the batches accepted so far are recorded; the rest is sent by the next run
        sent = batches.for_run(store, opened.run_id)
        close_run(store, opened.run_id, "waiting" if sent else "done", None, wanted, sorted(opened.notes),
                  failure=f"{type(exc).__name__}: {exc}", asked=asked, pairs=pairs)
        raise
    status = "waiting" if ids else "done"
    close_run(store, opened.run_id, status, None, wanted, sorted(opened.notes), asked=asked, pairs=pairs)
    return BatchSubmission(opened.run_id, backend.model, plan.suite, len(plan.items), opened.kept,
                           opened.from_cache, len({r.cache_key for _, rs in files for r in rs}), tuple(ids),
                           notes=said)


async def _check_model(backend: Backend) -> str | None:
    """Refuse, in one line, a model the server says it does not serve (``GET /models``: a typo, the wrong server),
    before a file is uploaded or a batch created: a batch would only fail on it hours later. Why the batch API
    could not check it (:meth:`cfkit.backends.batch_api.BatchAPI.check_model`), or None."""
    api = batch_api_of(backend)
    try:
        return await api.check_model()
    finally:
        await api.aclose()


async def _upload_all(store: Store, run_id: str, backend: Backend,
                      files: list[tuple[Path, list[BatchRequest]]]) -> list[str]:
    api = batch_api_of(backend)
    ids = []
    try:
        for path, carried in files:
            file_id = await api.upload(path)
            info = await api.create(file_id, metadata={"cfkit_run": run_id[:512]})
            ids.append(batches.add(store, info.id, run_id, endpoint=api.endpoint, input_file_id=file_id,
                                   input_path=str(path), requests=carried, status=info.status))
    finally:
        await api.aclose()
    return ids


# ── collecting ──────────────────────────────────────────────────────────────


def collect_backend(run: RunRecord, overrides: dict[str, Any]) -> Backend:
    """The backend a run was made with, rebuilt from its recorded options (and ``overrides``: a base URL whose
    credentials were redacted, the key's variable)."""
    options = {k: v for k, v in (run.options.get("options") or {}).items() if v is not None}
    options.update({k: v for k, v in overrides.items() if v is not None})
    if "***@" in str(options.get("base_url") or ""):
        raise UsageError(f"run {run.id} was made with credentials in its base URL, which cfkit did not keep; "
                         "give the URL again with --base-url.")
    # 'cfkit probe collect' takes --base-url and --api-key-env: its hints name them.
    backend = load_backend(run.model, options, context=BackendContext(words=COLLECT))
    _batch_capable(backend)
    return backend


def collect_batches(store: Store, cases: CaseSet, run: RunRecord, backend: Backend, *,
                    file_deadline_s: float | None = None, final: bool = False,
                    on_wait: Callable[[str], None] | None = None, then: str | None = None) -> Collection:
    """``cfkit probe collect RUN``: store the results of every batch of ``run`` that has ended (each result file
    downloaded within ``file_deadline_s`` seconds, every attempt together); ``final``: cancel the others where
    still running and store what they answered before they stopped, give up on the rest (their requests stored as
    failed), so the run can be resumed. ``on_wait`` hears when it waits for a cancel to end; ``then``: what the
    line of results refused for quota or billing says to run once the account has credit (else the same probe run)."""
    waiting = batches.uncollected(store, run.id)
    everything = batches.for_run(store, run.id)
    recorder = Recorder(store, run.id, cache_as=backend if backend.capabilities.cacheable else None)
    problems: list[str] = []
    tally = (asyncio.run(gather(store, cases, waiting, backend, recorder, problems, file_deadline_s, final, on_wait))
             if waiting else new_tally())
    said = tally["said"]
    states = tuple(BatchState(b.id, b.status, b.counts, b.collected_at is not None, b.errors,
                              *tally["why"].get(b.id, (0, "", 0))) for b in batches.for_run(store, run.id))
    still = any(not s.collected for s in states)
    wanted = {r.key for b in everything for r in b.requests} | {r.key for r in runs.replies(store, run.id)}
    previous = runs.get_run(store, run.id)
    counts = close_run(store, run.id, "waiting" if still else "done", None, wanted,
                       list(dict.fromkeys((previous.notes.get("backend_notes", []) if previous else []) + sorted(said))))
    missing = 0 if still else max(run.n_requests - counts["done"], 0)
    return Collection(run.id, states, tally["stored"], tally["failed"], counts["status"], missing,
                      tally["cost"] if backend.priced else None, tuple(problems), counts["invalid"],
                      counts["truncated"], counts["empty"], (run.settings.get("generation") or {}).get("max_tokens"),
                      run.model, run.suite, tally["unreported"] if backend.priced else 0, tally["given_up"],
                      tuple(sorted(said)), tally["unpaid"], _unpaid_line(run.id, tally, then))


def _unpaid_line(run_id: str, tally: dict[str, Any], then: str | None = None) -> str | None:
    """The one line saying that the account could not pay for requests of the batches read now, or None."""
    if not tally["unpaid"]:
        return None
    from cfkit.backends.billing import ASK_THE_FAILED, unpaid_results_line

    ids = tally["unpaid_in"]
    where = f"run {run_id}, {'batch' if len(ids) == 1 else 'batches'} {', '.join(ids)}"
    return unpaid_results_line(where, tally["unpaid"], *tally["unpaid_said"], then=then or ASK_THE_FAILED)


def collect_run(store: Store, cases: CaseSet, run: RunRecord, *, overrides: dict[str, Any] | None = None,
                wait: bool = False, poll_s: float = 60.0, file_deadline_s: float | None = None,
                on_check: Callable[[Collection], None] | None = None, final: bool = False,
                on_wait: Callable[[str], None] | None = None, then: str | None = None) -> Collection:
    """``cfkit probe collect RUN``: collect once, or (``wait``) again every ``poll_s`` seconds while batches
    are still running (Ctrl-C stops; nothing stored is lost, and ``probe collect`` goes on from there; a batch
    the provider no longer knows is not waited for). ``final`` gives up on the batches that have not ended
    (:func:`collect_batches`). ``on_check`` sees each look but the last; ``overrides`` replace recorded backend
    options; ``then`` as for :func:`collect_batches`."""
    if final and wait:
        raise UsageError("--final stops waiting for the batches that have not ended, and --wait waits for them; "
                         "give one of the two.")
    if not batches.for_run(store, run.id):
        raise NotFoundError(f"run {run.id} was not sent in batches (nothing to collect); 'cfkit runs show "
                            f"{run.id}' shows where it stands.")
    backend = collect_backend(run, overrides or {})
    while True:
        result = collect_batches(store, cases, run, backend, file_deadline_s=file_deadline_s, final=final,
                                 on_wait=on_wait, then=then)
        if not wait or not result.running:
            return result
        if on_check:
            on_check(result)
        time.sleep(poll_s)
