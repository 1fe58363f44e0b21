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
words (the next ``probe run`` sends it again), and the error lines saying the
account could not pay (``insufficient_quota``, billing:
:func:`cfkit.backends.billing.result_refusal`) are counted and said in one line;
nothing else stops it. It can be
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
from cfkit.backends.billing import result_refusal, unpaid_results_line
from cfkit.cases import CaseSet, asked_digests
from cfkit.errors import NotFoundError, TransportError, UsageError
from cfkit.probe.recording import Recorder
from cfkit.probe.runner import close_run, open_and_settle
from cfkit.store import Store, batches, runs
from cfkit.store.runs import RunRecord

#: The ``endpoint`` of a batch that is a file written for an offline runner.
FILE_ENDPOINT = "offline batch file"
#: What to run once the account that could not pay for requests of a result file has credit again.
FILE_THEN = ("run the same 'cfkit probe run' again (with --batch-file it writes only the requests without a reply "
             "to a new file; without it, it sends them)")


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
    stored: int  # requests stored now, each once (an answer, or a failure no later line answered)
    failed: int  # of them, those whose lines were errors (stored as transport failures)
    already: int  # lines for requests that already had a reply
    malformed: int  # lines that are not JSON objects with a custom_id
    unknown: int  # custom_ids that are no request of this run's files
    missing: int  # requests of the run's files still without a reply
    status: str
    first_problems: tuple[str, ...] = ()  # where the first malformed or unknown lines are, the first error's words
    invalid: int = 0  # replies of the run without a valid answer
    truncated: int = 0  # replies of the run cut off at the token limit (finish_reason "length")
    empty: int = 0  # replies of the run with no text at all
    max_tokens: int | None = None  # the run's token limit
    model: str = ""
    suite: str = ""
    closed: int = 0  # with --final: requests no result file answered, stored as failures
    gone: int = 0  # lines for cases no longer in the cases file (not stored, not waited for)
    changed: int = 0  # answers stored now about a case changed since the file was written (the report: stale)
    unpaid: int = 0  # of ``failed``, those whose lines say the account could not pay (quota or billing)
    unpaid_line: str | None = None  # the one line saying so (cfkit.backends.billing.unpaid_results_line)


def _batch_body_capable(backend: Backend) -> None:
    if as_backend(backend).batch_file_format != "openai":
        raise UsageError(f"--batch-file writes OpenAI batch lines, which {backend.model} cannot make; use an "
                         "openai: model (any OpenAI-compatible server, vLLM included).")


def write_batch_file(job: Any, store: Store, path: Path, *, on_plan: Any = None, force: bool = False) -> WrittenFile:
    """``cfkit probe run --batch-file PATH``: plan ``job``, write what is missing to ``path``, record the run waiting.

    An existing ``path`` is replaced only with ``force``: it may hold the requests another run waits for (the
    same name given to two suites), and that run could then never be answered from a file."""
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
    if path.exists() and not force:
        raise UsageError(f"--batch-file {path} already exists (it may hold the requests of a run still waiting for "
                         "its results); choose another file name or pass --force to replace it. Nothing was recorded.")
    opened = open_and_settle(store, backend, plan, protocol=job.setup.protocol.name, notes=job.setup.notes())
    wanted = {i.key for i in plan.items}
    asked, pairs = plan.asked(), plan.asked_pairs()  # kept with the run (close_run)
    if not opened.to_send:
        close_run(store, opened.run_id, "done", None, wanted, sorted(opened.notes), asked=asked, pairs=pairs)
        return WrittenFile(opened.run_id, backend.model, plan.suite, None, len(plan.items), opened.kept,
                           opened.from_cache, 0)
    [(written, carried)] = _write_files(path.parent, f".{path.name}", backend, opened.to_send, opened.keys,
                                        max_lines=len(opened.to_send) + 1, max_bytes=1 << 62)
    os.replace(written, path)
    number = len(batches.for_run(store, opened.run_id)) + 1
    batches.add(store, f"file-{number}-{opened.run_id}", opened.run_id, endpoint=FILE_ENDPOINT,
                input_file_id=str(path), input_path=None, requests=carried, status="written")
    close_run(store, opened.run_id, "waiting", None, wanted, sorted(opened.notes), asked=asked, pairs=pairs)
    return WrittenFile(opened.run_id, backend.model, plan.suite, path, len(plan.items), opened.kept,
                       opened.from_cache, len({r.cache_key for r in carried}))


def file_batches_pending(store: Store, run_id: str) -> bool:
    """Whether ``run_id`` waits for results of a file it was written to (``probe collect`` needs ``--from-file``)."""
    return any(b.endpoint == FILE_ENDPOINT for b in batches.uncollected(store, run_id))


def _words(entry: dict[str, Any]) -> tuple[int | None, Any, str | None]:
    """(status code, body, what went wrong) of one output line. vLLM writes a failed request's error as a string
    or as its error response, ``{"error": {"message", "type", "code"}}`` (older versions: the fields at the top)."""
    response = entry.get("response") if isinstance(entry.get("response"), dict) else {}
    status, body, error = response.get("status_code"), response.get("body"), entry.get("error")
    status = status if isinstance(status, int) else None
    if isinstance(error, dict):
        inner = error.get("error") if isinstance(error.get("error"), dict) else error
        message = inner.get("message") or (error.get("error") if isinstance(error.get("error"), str) else "")
        kind = " ".join(str(w) for w in (inner.get("type"), inner.get("code") or status) if w)
        return status, body, f"{kind or 'error'}: {message or 'no words given'}"
    if isinstance(error, str) and error:
        return status, body, error
    if status != 200 or not isinstance(body, dict):
        message = body.get("error") if isinstance(body, dict) else None
        message = message.get("message") if isinstance(message, dict) else message
        return status, body, f"HTTP {status}: {message or 'no answer in the line'}"
    return status, body, None


_REQUEST = "a request, not a result (a line of a batch input file)"


def _not_a_result(entry: dict[str, Any]) -> str | None:
    """Why a line with a ``custom_id`` is no result (None when it is one): it holds neither a ``response`` nor an
    ``error``; a line with a ``body`` and a ``url`` is a request of a batch input file."""
    if isinstance(entry.get("response"), dict) or entry.get("error"):
        return None
    if "body" in entry and "url" in entry:
        return _REQUEST
    return "neither a response nor an error"


def _read_lines(path: Path) -> list[tuple[int, Any]]:
    """The lines of a result file that are not blank, each parsed (None when it is not JSON), with its number."""
    import orjson

    try:
        with path.open("rb") as fh:
            raw = [(number, line) for number, line in enumerate(fh, 1) if line.strip()]
    except FileNotFoundError as exc:
        raise NotFoundError(f"--from-file {path}: cannot be read ({exc.strerror}).") from exc
    except OSError as exc:
        raise UsageError(f"--from-file {path}: cannot be read ({exc.strerror}).") from exc
    entries = []
    for number, line in raw:
        try:
            entries.append((number, orjson.loads(line)))
        except orjson.JSONDecodeError:
            entries.append((number, None))
    return entries


def _refuse_input_files(run_id: str, written: list, read: list[tuple[Path, list]]) -> None:
    """Refuse, before anything is stored, a file given to ``--from-file`` that is a batch input file (each line a
    request, none a result): stored, each request would be a failure "no answer"."""
    ours = {Path(b.input_file_id) for b in written if b.input_file_id}
    for path, entries in read:
        results = [e for _, e in entries if isinstance(e, dict) and isinstance(e.get("custom_id"), str)]
        requests = [e for e in results if _not_a_result(e) == _REQUEST]
        if results and len(requests) == len(results):
            what = (f"the batch file run {run_id} was written to" if path.resolve() in ours
                    else "a batch input file")
            raise UsageError(f"--from-file {path}: its lines are requests, not results: it is {what}. Give the file "
                             "the offline runner wrote (vllm run-batch -o RESULTS.jsonl).")


def collect_from_files(store: Store, cases: CaseSet, run: RunRecord, backend: Backend,
                       paths: list[Path], *, final: bool = False) -> FileCollection:
    """``cfkit probe collect RUN --from-file RESULTS.jsonl …``: store what the files answer (module docstring)."""
    from cfkit.probe.batch import _Asked

    written = [b for b in batches.for_run(store, run.id) if b.endpoint == FILE_ENDPOINT]
    if not written:
        raise NotFoundError(f"run {run.id} was not written to a batch file; 'cfkit runs show {run.id}' shows where "
                            "it stands.")
    read = [(path, _read_lines(path)) for path in paths]  # every file read and checked before anything is stored
    _refuse_input_files(run.id, written, read)
    asked: dict[str, dict] = {}  # custom_id -> the requests it answers, each once (a request written again is in
    for b in written:  # two files)
        for r in b.requests:
            asked.setdefault(r.cache_key, {}).setdefault(r.key, r)
    settled = set(runs.settled_keys(store, run.id))
    recorder = Recorder(store, run.id, cache_as=backend if backend.capabilities.cacheable else None)
    lines = already = malformed = unknown = gone = 0
    outcome: dict = {}  # request -> whether it holds an answer now (a failure a later line answered counts once)
    problems: list[str] = []
    errors: list[str] = []
    unpaid: dict = {}  # request -> (status, words) of a line saying the account could not pay for it
    try:
        for path, entries in read:
            for number, entry in entries:
                lines += 1
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
                if (why := _not_a_result(entry)) is not None:
                    malformed += 1
                    problems.append(f"{path.name} line {number}: {why}")
                    continue
                requests = [r for r in requests.values() if r.case_id in cases]
                if not requests:  # the case left the cases file; the run keeps no reply for it
                    gone += 1
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
                    unit = _Asked(cases.get(request.case_id), request.pair_id, request.condition, request.edit_id,
                                  request.image_sha256)
                    if reply is not None:
                        recorder.reply(unit, request.cache_key, reply)
                        settled.add(request.key)
                    else:
                        recorder.transport(unit, request.cache_key, f"{path.name} line {number}: {error}")
                        refused = result_refusal(status, body, entry.get("error"))
                        if refused is not None:  # the account could not pay for it: said once, in its own line
                            unpaid[request.key] = refused
                        else:
                            unpaid.pop(request.key, None)
                            errors = errors or [f"{path.name} line {number}: {error}"]  # the first error's words
                    outcome[request.key] = reply is not None
    finally:
        recorder.flush()
    answered = {key for key, *_ in runs.reply_states(store, run.id) if key[0] in cases}
    closed = _close(recorder, cases, written, answered) if final else 0
    for b in written:
        if b.collected_at is None and (final or all(r.key in answered for r in b.requests if r.case_id in cases)):
            batches.collected(store, b.id)
    missing = 0 if final else len({r.key for b in written for r in b.requests
                                   if r.case_id in cases and r.key not in answered})
    still = any(b.collected_at is None for b in batches.uncollected(store, run.id))
    wanted = {r.key for b in batches.for_run(store, run.id) for r in b.requests if r.case_id in cases} | answered
    counts = close_run(store, run.id, "waiting" if still else "done", None, wanted,
                       list(run.notes.get("backend_notes", [])))
    failed = sum(1 for answer in outcome.values() if not answer)
    refused = [unpaid[key] for key, answer in outcome.items() if not answer and key in unpaid]
    then, now = run.notes.get("asked") or {}, asked_digests(cases)  # what the file asked; the cases as they are
    changed = sum(1 for (case_id, *_), answer in outcome.items() if answer and then.get(case_id, now[case_id])
                  != now[case_id])
    return FileCollection(run.id, lines, len(outcome), failed, already, malformed, unknown, missing, counts["status"],
                          tuple(problems[:3] + errors[:1]), counts["invalid"], counts["truncated"], counts["empty"],
                          (run.settings.get("generation") or {}).get("max_tokens"), run.model, run.suite, closed,
                          gone, changed, len(refused), unpaid_results_line(
                              f"run {run.id}, {', '.join(p.name for p in paths)}", len(refused), *refused[0],
                              then=FILE_THEN) if refused else None)


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
