"""Collecting a run's provider batches (``probe collect RUN``, :mod:`cfkit.probe.batch`): ask, read, store.

:func:`gather` asks the provider where each uncollected batch stands. A batch
that has ended is read (its output and error files) and each result stored
through :class:`~cfkit.probe.recording.Recorder` as a live reply is; a request
it did not answer (an error line, a batch that expired, was cancelled or
failed, an output file that leaves it out) is stored as a transport failure
with the provider's words, which the next ``probe run`` sends again (those
whose result says the account could not pay are counted, for ``probe collect``
to say once in :mod:`cfkit.backends.billing`'s words). A batch
the provider answers 404 for (:data:`~cfkit.backends.openai_batch.NOT_FOUND`)
is recorded so and left uncollected.

A batch that ended part way (expired, cancelled, failed) still holds the
results it answered before it stopped, paid for: they are read and stored
like any other, and only the rest is stored as failed.

With ``final`` (``probe collect RUN --final``) the batches that have not ended
are given up: one still running is cancelled at the provider where its API
can (said when it cannot), and collect waits, up to :data:`CANCEL_WAIT_S`
seconds, for the cancel to end the batch (a cancel is asynchronous: the batch
goes ``cancelling``, then ``cancelled`` with what it answered so far), then
reads it as any batch that ended. One still cancelling after that is left
waiting, said with how many answers it holds, unless the provider counts none
answered. Each request of a batch given up, lost or not even reachable is
stored as a transport failure "given up with --final"; the batch is marked
:data:`GIVEN_UP` and collected, so the run is no longer waiting and can be
resumed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cfkit.backends import Backend
from cfkit.backends.batch_api import NOT_FOUND, batch_api_of, can_cancel
from cfkit.cases import Case, CaseSet
from cfkit.errors import TransportError
from cfkit.plural import agree, plural
from cfkit.probe.batch_results import BatchResults
from cfkit.probe.prices import BATCH_PRICE_FACTOR
from cfkit.probe.recording import Recorder
from cfkit.store import Store, batches
from cfkit.store.batches import BatchRecord

#: The status of a batch ``probe collect --final`` stopped waiting for (its requests stored as failed).
GIVEN_UP = "given up"
#: Seconds ``--final`` waits for a batch it asked to cancel to end (OpenAI: "up to 10 minutes"), to read what
#: it answered before it stopped.
CANCEL_WAIT_S = 600.0
#: The statuses of a batch asked to stop that has not ended yet.
CANCELLING = frozenset({"cancelling", "canceling"})


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


def new_tally() -> dict[str, Any]:
    """The counts of a collect that has stored nothing yet (see :func:`gather`)."""
    return {"stored": 0, "failed": 0, "cost": 0.0, "unreported": 0, "given_up": 0, "why": {}, "said": set(),
            "unpaid": 0, "unpaid_said": None, "unpaid_in": []}


async def gather(store: Store, cases: CaseSet, waiting: list[BatchRecord], backend: Backend, recorder: Recorder,
                   problems: list[str], file_deadline_s: float | None, final: bool,
                   on_wait: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Ask the provider about each of ``waiting``; store what has ended (and, ``final``, cancel the rest, store
    what they answered before they stopped, and give up on what cannot be read). Returns the counts: stored,
    failed, cost, unreported, given_up, why (batch -> (failed for another reason than billing, the first one's reason,
    answered)), said (the notes the
    stored replies carry beyond the backend's own, e.g. cached input priced at the input rate), and unpaid (of the
    failed, those whose result says the account could not pay), unpaid_said (the first one's status and words)
    and unpaid_in (their batches). ``on_wait`` hears
    when collect waits for a cancel to end."""
    api = batch_api_of(backend)
    if file_deadline_s is not None:
        api.file_deadline_s = file_deadline_s
    tally = new_tally()
    try:
        for record in waiting:
            try:
                info = await api.get(record.provider_id)
            except TransportError as exc:  # not even asked: given up only when the user said so
                if not final:
                    raise TransportError(f"{str(exc).rstrip('.')}. What was collected is kept: run 'cfkit probe "
                                         f"collect {record.run_id}' again later, or, if the batch will never be "
                                         "reachable again, add --final.") from exc
                _give_up(store, cases, record, recorder, tally,
                         f"it could not be asked about, nor cancelled ({exc}); last seen {record.status}, it may "
                         "still run and be billed: cancel it in the provider's console")
                continue
            batches.checked(store, record.id, status=info.status, counts=info.counts or record.counts,
                            errors=info.errors, output_file_id=info.output_file_id, error_file_id=info.error_file_id)
            if info.status == NOT_FOUND:
                if final:
                    _give_up(store, cases, record, recorder, tally,
                             f"the provider no longer knows it ({'; '.join(info.errors)})")
                continue
            how = ""
            if not info.final:
                if not final:
                    continue
                info, how = await _cancel(api, record, info, on_wait)
                if not info.final:
                    _not_ended(store, cases, record, recorder, tally, problems, info, how)
                    continue
                batches.checked(store, record.id, status=info.status, counts=info.counts or record.counts,
                                errors=info.errors + (how,), output_file_id=info.output_file_id,
                                error_file_id=info.error_file_id)
            await _read_ended(store, cases, record, info, api, backend, recorder, problems, tally, how)
    finally:
        recorder.flush()
        await api.aclose()
    return tally


async def _read_ended(store: Store, cases: CaseSet, record: BatchRecord, info: Any, api: Any, backend: Backend,
                      recorder: Recorder, problems: list[str], tally: dict[str, Any], how: str = "") -> None:
    """Store every result of a batch that has ended (also one that expired, was cancelled or failed part way: what
    it answered before it stopped is kept); a request it did not answer is stored as failed, with why. ``how``:
    what ``--final`` did to end it."""
    read = BatchResults(record.id, {r.cache_key for r in record.requests}, api.endpoint)
    for file_id in (info.output_file_id, info.error_file_id):
        if file_id:
            read.add(file_id, await api.content(file_id))
    results = read.found
    problems.extend(read.problems)
    why = ("; ".join(info.errors) or read.unread or f"the batch ended {info.status} without answering it"
           + (" (cancelled by --final)" if how else ""))
    failed = unpaid = 0
    first = ""  # why the first request failed that the account could pay for (the others: said once, in their line)
    for asked in record.requests:
        if asked.case_id not in cases:
            continue  # the case left the cases file; the run keeps no reply for it
        unit = _Asked(cases.get(asked.case_id), asked.pair_id, asked.condition, asked.edit_id, asked.image_sha256)
        status_code, body, error = results.get(asked.cache_key, (None, None, None))
        error = error or read.broken.get(asked.cache_key)
        reply = None
        if status_code == 200 and isinstance(body, dict):
            try:
                reply = backend.reply_from_completion(body, price_factor=BATCH_PRICE_FACTOR)
            except TransportError as exc:
                error = str(exc)
        if reply is not None:
            recorder.reply(unit, asked.cache_key, reply)
            tally["cost"] += reply.cost_usd or 0.0
            tally["unreported"] += reply.cost_usd is None
            tally["said"].update(n for n in reply.notes if n not in backend.notes)  # the replies' own notes
        else:
            recorder.transport(unit, asked.cache_key, f"batch {record.id}: {error or why}")
            failed += 1
            if asked.cache_key in read.unpaid:  # the account could not pay for it: said once (probe collect)
                unpaid += 1
                tally["unpaid"] += 1
                tally["unpaid_said"] = tally["unpaid_said"] or read.unpaid[asked.cache_key]
                if record.id not in tally["unpaid_in"]:
                    tally["unpaid_in"].append(record.id)
            else:
                first = first or (error or why)
        tally["stored"] += 1
    recorder.flush()
    batches.collected(store, record.id)
    tally["failed"] += failed
    if failed > unpaid:  # the batch's own line: the requests it did not answer for another reason than billing
        tally["why"][record.id] = (failed - unpaid, first, sum(1 for a in record.requests if a.case_id in cases) - failed)
    if record.input_path:
        Path(record.input_path).unlink(missing_ok=True)


async def _cancel(api: Any, record: BatchRecord, info: Any,
                  on_wait: Callable[[str], None] | None) -> tuple[Any, str]:
    """Ask the provider to stop a batch given up on while it runs, and wait (up to :data:`CANCEL_WAIT_S`) for it to
    end, so that what it answered before it stopped can be read. Returns the batch as last seen, and what became
    of it in words."""
    if info.status in CANCELLING:
        how = f"it was {info.status} already"
    elif not can_cancel(api):
        return info, (f"it was {info.status}, and this backend's batch API cannot cancel it: it may still run and be "
                      "billed; cancel it in the provider's console")
    else:
        try:
            after = await api.cancel(record.provider_id)
        except TransportError as exc:
            now = await _look_again(api, record) or info  # it may have ended meanwhile (a cancel refused so)
            if now.final:
                return now, f"it was {info.status}, and ended {now.status} before the cancel reached it"
            return now, (f"it was {info.status}, and cancelling it failed ({exc}): it may still run and be billed; "
                         "cancel it in the provider's console")
        how = f"it was {info.status}; the provider was asked to cancel it (now {after.status})"
        info = after if after.status in CANCELLING or after.final else info
    ends = time.monotonic() + CANCEL_WAIT_S
    pause = 1.0
    while True:
        now = await _look_again(api, record)
        if now is None:  # it cannot be asked now: not waited for (see _not_ended)
            return info, how
        info = now
        left = ends - time.monotonic()
        if info.final or info.status not in CANCELLING or left <= 0:
            return info, how
        if on_wait is not None:
            on_wait(f"batch {record.id} is {info.status}; waiting up to {CANCEL_WAIT_S:g} s for it to end, to store "
                    "what it answered (Ctrl-C stops; nothing is lost).")
            on_wait = None  # said once
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, 15.0)


async def _look_again(api: Any, record: BatchRecord) -> Any:
    """The batch as the provider describes it now; None when it cannot be asked."""
    try:
        return await api.get(record.provider_id)
    except TransportError:
        return None


def _not_ended(store: Store, cases: CaseSet, record: BatchRecord, recorder: Recorder, tally: dict[str, Any],
               problems: list[str], info: Any, how: str) -> None:
    """``--final`` on a batch that did not end: one still cancelling that has answered requests is left waiting
    (what it answered is paid for and can still be read), said so; any other is given up."""
    answered = info.counts.get("completed") if info.counts else None
    if info.status in CANCELLING and answered != 0:
        batches.checked(store, record.id, status=info.status, counts=info.counts or record.counts,
                        errors=info.errors, output_file_id=info.output_file_id, error_file_id=info.error_file_id)
        held = "some answered requests" if answered is None else plural(answered, "answered request")
        problems.append(f"batch {record.id} was still {info.status} after {CANCEL_WAIT_S:g} s and holds {held}"
                        f"; nothing of it is given up yet: run 'cfkit probe collect "
                        f"{record.run_id} --final' again in a few minutes to store "
                        f"{'them' if answered is None else agree(answered, 'them')}.")
        return
    _give_up(store, cases, record, recorder, tally, how)


def _give_up(store: Store, cases: CaseSet, record: BatchRecord, recorder: Recorder, tally: dict[str, Any],
             what: str) -> None:
    """``--final``: every request of a batch not waited for any more is stored as failed (the next ``probe run``
    sends it again), and the batch is marked given up and collected."""
    why = f"batch {record.id} given up with --final: {what}"
    for asked in record.requests:
        if asked.case_id in cases:
            recorder.transport(_Asked(cases.get(asked.case_id), asked.pair_id, asked.condition, asked.edit_id,
                                      asked.image_sha256), asked.cache_key, why)
            tally["given_up"] += 1
    recorder.flush()
    fresh = next((b for b in batches.for_run(store, record.run_id) if b.id == record.id), record)
    batches.checked(store, record.id, status=GIVEN_UP, counts=fresh.counts, errors=(what,),
                    output_file_id=fresh.output_file_id, error_file_id=fresh.error_file_id)
    batches.collected(store, record.id)
    if record.input_path:
        Path(record.input_path).unlink(missing_ok=True)
