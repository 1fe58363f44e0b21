"""A probe run through a provider's Batch API: ``probe run --batch``, then ``probe collect RUN``.

:func:`submit_batch` plans the run exactly as a live run does and opens it
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
run. Collecting can be stopped and repeated: each batch is read once.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cfkit.backends import Backend, has_batch_api, load_backend
from cfkit.cases import Case, CaseSet
from cfkit.errors import NotFoundError, OutputError, TransportError, UsageError
from cfkit.money import usd
from cfkit.probe.batch_results import BatchResults
from cfkit.probe.sending_images import SendingImages
from cfkit.probe.plan import ProbeItem
from cfkit.probe.prices import BATCH_PRICE_FACTOR
from cfkit.probe.recording import Recorder
from cfkit.probe.runner import RunSummary, close_run, open_and_settle
from cfkit.store import Store, batches, runs
from cfkit.store.batches import BatchRecord, BatchRequest
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


@dataclass(frozen=True)
class BatchState:
    """One batch as ``probe collect`` left it."""

    id: str
    status: str
    counts: dict[str, Any]
    collected: bool
    errors: tuple[str, ...] = ()


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
    notes: tuple[str, ...] = ()  # what the results stored now said of their cost (cached input at the input price …)

    @property
    def waiting(self) -> tuple[BatchState, ...]:
        return tuple(b for b in self.batches if not b.collected)


# ── submitting ──────────────────────────────────────────────────────────────


def _batch_capable(backend: Backend) -> None:
    if not has_batch_api(backend):
        raise UsageError(f"--batch needs a backend with a batch API (openai:…); {backend.model} has none. "
                         "Run it without --batch.")


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
    opened = open_and_settle(store, backend, plan, protocol=job.setup.protocol.name, notes=job.setup.notes())
    wanted = {i.key for i in plan.items}
    asked = plan.asked()  # kept with the run (close_run)
    if max_cost is not None:
        most = estimate([i.request for i in opened.to_send], prices.scaled(BATCH_PRICE_FACTOR)).cost_max
        if most is not None and most > max_cost:
            why = (f"--max-cost {max_cost:g}: the batch could cost up to {usd(most)} at batch prices (if every "
                   "reply used all its tokens), and a batch cannot be stopped part way")
            close_run(store, opened.run_id, "done", why, wanted, sorted(opened.notes), asked=asked)
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
                  failure=f"{type(exc).__name__}: {exc}", asked=asked)
        raise
    status = "waiting" if ids else "done"
    close_run(store, opened.run_id, status, None, wanted, sorted(opened.notes), asked=asked)
    return BatchSubmission(opened.run_id, backend.model, plan.suite, len(plan.items), opened.kept,
                           opened.from_cache, len({r.cache_key for _, rs in files for r in rs}), tuple(ids))


async def _upload_all(store: Store, run_id: str, backend: Backend,
                      files: list[tuple[Path, list[BatchRequest]]]) -> list[str]:
    api = backend.batch_api()
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


@dataclass(frozen=True)
class _Asked:
    """A request a batch carried, as the recorder needs it: the case, its place, what it showed."""

    case: Case
    pair_id: str
    condition: str
    edit_id: int | None
    image_sha256: str | None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.case.id, self.pair_id, self.condition)


def collect_backend(run: RunRecord, overrides: dict[str, Any]) -> Backend:
    """The backend a run was made with, rebuilt from its recorded options (and ``overrides``: a base URL whose
    credentials were redacted, the key's variable)."""
    options = {k: v for k, v in (run.options.get("options") or {}).items() if v is not None}
    options.update({k: v for k, v in overrides.items() if v is not None})
    if "***@" in str(options.get("base_url") or ""):
        raise UsageError(f"run {run.id} was made with credentials in its base URL, which cfkit did not keep; "
                         "give the URL again with --base-url.")
    backend = load_backend(run.model, options)
    _batch_capable(backend)
    return backend


def collect_batches(store: Store, cases: CaseSet, run: RunRecord, backend: Backend, *,
                    file_deadline_s: float | None = None) -> Collection:
    """``cfkit probe collect RUN``: store the results of every batch of ``run`` that has ended (each result file
    downloaded within ``file_deadline_s`` seconds, every attempt together)."""
    waiting = batches.uncollected(store, run.id)
    everything = batches.for_run(store, run.id)
    recorder = Recorder(store, run.id, cache_as=backend if backend.capabilities.cacheable else None)
    problems: list[str] = []
    said: set[str] = set()  # the replies' notes, less the backend's own
    outcome = (asyncio.run(_collect(store, cases, waiting, backend, recorder, problems, said, file_deadline_s))
               if waiting else (0, 0, 0.0, 0))
    stored, failed, cost, unreported = outcome
    states = tuple(BatchState(b.id, b.status, b.counts, b.collected_at is not None, b.errors)
                   for b in batches.for_run(store, run.id))
    still = any(not s.collected for s in states)
    wanted = {r.key for b in everything for r in b.requests} | {r.key for r in runs.replies(store, run.id)}
    previous = runs.get_run(store, run.id)
    counts = close_run(store, run.id, "waiting" if still else "done", None, wanted,
                       list(dict.fromkeys((previous.notes.get("backend_notes", []) if previous else []) + sorted(said))))
    missing = 0 if still else max(run.n_requests - counts["done"], 0)
    return Collection(run.id, states, stored, failed, counts["status"], missing,
                      cost if backend.priced else None, tuple(problems), counts["invalid"], counts["truncated"],
                      counts["empty"], (run.settings.get("generation") or {}).get("max_tokens"), run.model, run.suite,
                      unreported if backend.priced else 0, tuple(sorted(said)))


async def _collect(store: Store, cases: CaseSet, waiting: list[BatchRecord], backend: Backend,
                   recorder: Recorder, problems: list[str], said: set[str],
                   file_deadline_s: float | None) -> tuple[int, int, float, int]:
    api = backend.batch_api()
    if file_deadline_s is not None:
        api.file_deadline_s = file_deadline_s
    stored = failed = unreported = 0
    cost = 0.0
    try:
        for record in waiting:
            info = await api.get(record.provider_id)
            batches.checked(store, record.id, status=info.status, counts=info.counts, errors=info.errors,
                            output_file_id=info.output_file_id, error_file_id=info.error_file_id)
            if not info.final:
                continue
            read = BatchResults(record.id, {r.cache_key for r in record.requests}, api.endpoint)
            for file_id in (info.output_file_id, info.error_file_id):
                if file_id:
                    read.add(file_id, await api.content(file_id))
            results = read.found
            problems.extend(read.problems)
            why = "; ".join(info.errors) or read.unread or f"the batch ended {info.status} without answering it"
            for asked in record.requests:
                if asked.case_id not in cases:
                    continue  # the case left the cases file; the run keeps no reply for it
                unit = _Asked(cases.get(asked.case_id), asked.pair_id, asked.condition, asked.edit_id,
                              asked.image_sha256)
                status_code, body, error = results.get(asked.cache_key, (None, None, None))
                error = error or read.broken.get(asked.cache_key)
                if status_code == 200 and isinstance(body, dict):
                    try:
                        reply = backend.reply_from_completion(body, price_factor=BATCH_PRICE_FACTOR)
                    except TransportError as exc:
                        recorder.transport(unit, asked.cache_key, f"batch {record.id}: {exc}")
                        failed += 1
                    else:
                        recorder.reply(unit, asked.cache_key, reply)
                        cost += reply.cost_usd or 0.0
                        unreported += reply.cost_usd is None
                        said.update(n for n in reply.notes if n not in backend.notes)
                else:
                    recorder.transport(unit, asked.cache_key, f"batch {record.id}: {error or why}")
                    failed += 1
                stored += 1
            recorder.flush()
            batches.collected(store, record.id)
            if record.input_path:
                Path(record.input_path).unlink(missing_ok=True)
    finally:
        recorder.flush()
        await api.aclose()
    return stored, failed, cost, unreported


def collect_run(store: Store, cases: CaseSet, run: RunRecord, *, overrides: dict[str, Any] | None = None,
                wait: bool = False, poll_s: float = 60.0, file_deadline_s: float | None = None,
                on_check: Callable[[Collection], None] | None = None) -> Collection:
    """``cfkit probe collect RUN``: collect once, or (``wait``) again every ``poll_s`` seconds while batches
    are still running (Ctrl-C stops; nothing stored is lost, and ``probe collect`` goes on from there).
    ``on_check`` sees each look but the last; ``overrides`` replace recorded backend options."""
    if not batches.for_run(store, run.id):
        raise NotFoundError(f"run {run.id} was not sent in batches (nothing to collect); 'cfkit runs show "
                            f"{run.id}' shows where it stands.")
    backend = collect_backend(run, overrides or {})
    while True:
        result = collect_batches(store, cases, run, backend, file_deadline_s=file_deadline_s)
        if not wait or not result.waiting:
            return result
        if on_check:
            on_check(result)
        time.sleep(poll_s)
