"""Offline batch files: ``probe run --batch-file OUT.jsonl``, run elsewhere, then ``probe collect RUN --from-file``.

For a cluster job rather than a provider: :func:`write_batch_file` plans and
opens the run exactly as a live run does, writes the requests still missing
to ``OUT.jsonl`` in the OpenAI batch input format (one line a distinct
request: ``custom_id`` its cache key, ``method`` POST, ``url``
``/v1/chat/completions``, ``body`` what a live request would send), which
``vllm run-batch -i OUT.jsonl -o RESULTS.jsonl --model …`` and other offline
runners read, records the file as a batch of the run (:mod:`cfkit.store.batches`,
``endpoint`` :data:`FILE_ENDPOINT`) and leaves the run ``waiting``.

:func:`collect_from_files` reads one or more result files in the batch output
format (each line ``custom_id``, ``response: {status_code, body}``, ``error``;
an error may be an object or, as vLLM writes it, a string) and stores every
result through the same path as a live reply
(:class:`~cfkit.probe.recording.Recorder`: parsed, cached, with what the
question showed, the server's model id, and the result file's name as the
answering endpoint). It is tolerant line by line: a line that is not JSON or
has no ``custom_id`` is counted as malformed, a ``custom_id`` that is no request
of the run as unknown, an error line is stored as a transport failure with its
words (the next ``probe run`` sends it again); nothing else stops it. It can be
run again, with the same files or others (the parts of a file split ``N``
ways): a request that already has a reply is left as it is, one that failed
is stored again when a file answers it. A batch is marked collected once each
of its requests has a reply, or when the user says no more files will come
(``--final``): each request no file answered is then stored as a transport
failure, which the same ``probe run`` sends again (a run with a batch file
still open is refused, so without it a lost or cut-off part would hold the
run for ever).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cfkit.backends import Backend, as_backend
from cfkit.cases import CaseSet
from cfkit.errors import NotFoundError, TransportError, UsageError
from cfkit.probe.recording import Recorder
from cfkit.probe.runner import close_run, open_and_settle
from cfkit.store import Store, batches, runs
from cfkit.store.runs import RunRecord

#: The ``endpoint`` of a batch that is a file written for an offline runner.
FILE_ENDPOINT = "offline batch file"


@dataclass(frozen=True)
class WrittenFile:
    """What ``probe run --batch-file`` did."""

    run_id: str
    model: str
    suite: str
    path: Path | None  # None when nothing was missing
    total: int
    kept: int
    from_cache: int
    lines: int  # distinct requests written


@dataclass(frozen=True)
class FileCollection:
    """What ``probe collect --from-file`` did, counted over every line of every file."""

    run_id: str
    lines: int
    stored: int  # results stored now (answers and failures)
    failed: int  # of them, error lines (stored as transport failures)
    already: int  # lines for requests that already had a reply
    malformed: int  # lines that are not JSON objects with a custom_id
    unknown: int  # custom_ids that are no request of this run's files
    missing: int  # requests of the run's files still without a reply
    status: str
    first_problems: tuple[str, ...] = ()  # where the first malformed or unknown lines are
    invalid: int = 0  # replies of the run without a valid answer
    truncated: int = 0  # replies of the run cut off at the token limit (finish_reason "length")
    empty: int = 0  # replies of the run with no text at all
    max_tokens: int | None = None  # the run's token limit
    model: str = ""
    suite: str = ""
    closed: int = 0  # with --final: requests no result file answered, stored as failures


def _batch_body_capable(backend: Backend) -> None:
    if as_backend(backend).batch_file_format != "openai":
        raise UsageError(f"--batch-file writes OpenAI batch lines, which {backend.model} cannot make; use an "
                         "openai: model (any OpenAI-compatible server, vLLM included).")


def write_batch_file(job: Any, store: Store, path: Path, *, on_plan: Any = None) -> WrittenFile:
    """``cfkit probe run --batch-file PATH``: plan ``job``, write what is missing to ``path``, record the run waiting."""
    from cfkit.probe.batch import _write_files
    from cfkit.probe.progress import RunSummary

    if job.backend is not None:
        _batch_body_capable(job.backend)
    planned = job.planned(store, on_plan=on_plan)
    if isinstance(planned, RunSummary):
        return WrittenFile(planned.run_id, planned.model, planned.suite, None, planned.total, planned.kept, 0, 0)
    backend, plan = planned.backend, planned.plan
    _batch_body_capable(backend)
    path = path.expanduser().resolve()
    if not path.parent.is_dir():
        raise UsageError(f"--batch-file {path}: the folder {path.parent} does not exist.")
    opened = open_and_settle(store, backend, plan, protocol=job.setup.protocol.name, notes=job.setup.notes())
    wanted = {i.key for i in plan.items}
    asked = plan.asked()  # kept with the run (close_run)
    if not opened.to_send:
        close_run(store, opened.run_id, "done", None, wanted, sorted(opened.notes), asked=asked)
        return WrittenFile(opened.run_id, backend.model, plan.suite, None, len(plan.items), opened.kept,
                           opened.from_cache, 0)
    [(written, carried)] = _write_files(path.parent, f".{path.name}", backend, opened.to_send, opened.keys,
                                        max_lines=len(opened.to_send) + 1, max_bytes=1 << 62)
    os.replace(written, path)
    number = len(batches.for_run(store, opened.run_id)) + 1
    batches.add(store, f"file-{number}-{opened.run_id}", opened.run_id, endpoint=FILE_ENDPOINT,
                input_file_id=str(path), input_path=None, requests=carried, status="written")
    close_run(store, opened.run_id, "waiting", None, wanted, sorted(opened.notes), asked=asked)
    return WrittenFile(opened.run_id, backend.model, plan.suite, path, len(plan.items), opened.kept,
                       opened.from_cache, len({r.cache_key for r in carried}))


def file_batches_pending(store: Store, run_id: str) -> bool:
    """Whether ``run_id`` waits for results of a file it was written to (``probe collect`` needs ``--from-file``)."""
    return any(b.endpoint == FILE_ENDPOINT for b in batches.uncollected(store, run_id))


def _words(entry: dict[str, Any]) -> tuple[int | None, Any, str | None]:
    """(status code, body, what went wrong) of one output line."""
    response = entry.get("response") if isinstance(entry.get("response"), dict) else {}
    status, body, error = response.get("status_code"), response.get("body"), entry.get("error")
    status = status if isinstance(status, int) else None
    if isinstance(error, dict):
        return status, body, f"{error.get('code') or 'error'}: {error.get('message') or ''}".strip()
    if isinstance(error, str) and error:
        return status, body, error
    if status != 200 or not isinstance(body, dict):
        message = body.get("error") if isinstance(body, dict) else None
        message = message.get("message") if isinstance(message, dict) else message
        return status, body, f"HTTP {status}: {message or 'no answer in the line'}"
    return status, body, None


def _read_lines(path: Path) -> list[tuple[int, bytes]]:
    try:
        with path.open("rb") as fh:
            return [(number, line) for number, line in enumerate(fh, 1) if line.strip()]
    except FileNotFoundError as exc:
        raise NotFoundError(f"--from-file {path}: cannot be read ({exc.strerror}).") from exc
    except OSError as exc:
        raise UsageError(f"--from-file {path}: cannot be read ({exc.strerror}).") from exc


def collect_from_files(store: Store, cases: CaseSet, run: RunRecord, backend: Backend,
                       paths: list[Path], *, final: bool = False) -> FileCollection:
    """``cfkit probe collect RUN --from-file RESULTS.jsonl …``: store what the files answer (module docstring)."""
    import orjson

    from cfkit.probe.batch import _Asked

    written = [b for b in batches.for_run(store, run.id) if b.endpoint == FILE_ENDPOINT]
    if not written:
        raise NotFoundError(f"run {run.id} was not written to a batch file; 'cfkit runs show {run.id}' shows where "
                            "it stands.")
    asked = {r.cache_key: [] for b in written for r in b.requests}
    for b in written:
        for r in b.requests:
            asked[r.cache_key].append(r)
    settled = set(runs.settled_keys(store, run.id))
    recorder = Recorder(store, run.id, cache_as=backend if backend.capabilities.cacheable else None)
    lines = stored = failed = already = malformed = unknown = 0
    problems: list[str] = []
    try:
        for path in paths:
            for number, raw in _read_lines(path):
                lines += 1
                try:
                    entry = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    entry = None
                if not isinstance(entry, dict) or not isinstance(entry.get("custom_id"), str):
                    malformed += 1
                    problems.append(f"{path.name} line {number}: not a JSON object with a custom_id")
                    continue
                requests = asked.get(entry["custom_id"])
                if requests is None:
                    unknown += 1
                    problems.append(f"{path.name} line {number}: custom_id {entry['custom_id'][:16]}… is no request "
                                    f"of run {run.id}")
                    continue
                status, body, error = _words(entry)
                reply = None
                if error is None:
                    try:
                        reply = replace(backend.reply_from_completion(body), endpoint=f"file:{path.name}")
                    except TransportError as exc:  # a body without choices: that line failed
                        error = str(exc)
                for request in requests:
                    if request.key in settled:
                        already += 1
                        continue
                    if request.case_id not in cases:
                        continue  # the case left the cases file; the run keeps no reply for it
                    unit = _Asked(cases.get(request.case_id), request.pair_id, request.condition, request.edit_id,
                                  request.image_sha256)
                    if reply is not None:
                        recorder.reply(unit, request.cache_key, reply)
                        settled.add(request.key)
                    else:
                        recorder.transport(unit, request.cache_key, f"{path.name} line {number}: {error}")
                        failed += 1
                    stored += 1
    finally:
        recorder.flush()
    answered = {key for key, *_ in runs.reply_states(store, run.id)}
    closed = _close(recorder, cases, written, answered) if final else 0
    for b in written:
        if b.collected_at is None and (final or all(r.key in answered for r in b.requests)):
            batches.collected(store, b.id)
    missing = 0 if final else sum(1 for b in written for r in b.requests if r.key not in answered)
    still = any(b.collected_at is None for b in batches.uncollected(store, run.id))
    wanted = {r.key for b in batches.for_run(store, run.id) for r in b.requests} | answered
    counts = close_run(store, run.id, "waiting" if still else "done", None, wanted,
                       list(run.notes.get("backend_notes", [])))
    return FileCollection(run.id, lines, stored, failed, already, malformed, unknown, missing, counts["status"],
                          tuple(problems[:3]), counts["invalid"], counts["truncated"], counts["empty"],
                          (run.settings.get("generation") or {}).get("max_tokens"), run.model, run.suite, closed)


def _close(recorder: Recorder, cases: CaseSet, written: list, answered: set) -> int:
    """``--final``: each request of the run's open batch files that no result answered is stored as a transport
    failure (the same ``probe run`` sends it again); returns how many."""
    from cfkit.probe.batch import _Asked

    failed = set()
    for b in written:
        for r in b.requests:
            if b.collected_at is None and r.key not in answered and r.key not in failed and r.case_id in cases:
                recorder.transport(_Asked(cases.get(r.case_id), r.pair_id, r.condition, r.edit_id, r.image_sha256),
                                   r.cache_key, "no result file answered it (collected with --final)")
                failed.add(r.key)
    recorder.flush()
    return len(failed)
