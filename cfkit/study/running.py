"""``cfkit study run``: every run of a study, interleaved in one event loop, each endpoint paced once.

1. Each run's start-up checks (:func:`~cfkit.study.jobs.prepare`); a run that
   fails them is marked failed and the others go on.
2. Each run is planned in turn; a run already finished from the same inputs
   is done at once (as ``probe run`` finds it), nothing asked. Each endpoint
   of a run left to send is then reached once, as ``study validate`` reaches
   it (``GET /models``): a run whose endpoint does not answer, or does not
   list its model, is skipped, nothing of it sent, and says why.
3. The rest send through
   :func:`cfkit.probe.runner.send_plan`, the runs behind one endpoint sharing
   one :class:`~cfkit.probe.pacing.Pacer`: the endpoint's concurrency, rate
   and overload back-off hold for all of them together. The models go at the
   same time, each model's suites one after the other: the swap suite's
   original-order questions are the contextcanvas suite's, and asked in turn
   the second run finds them in the response cache instead of paying for them
   twice. A run that fails
   (a rejected key, a dead server) is recorded as failed and the others go on.

Ctrl-C or SIGTERM cancels the sending; every run records what it received
(see :func:`~cfkit.probe.runner.send_plan`) and the study ends interrupted.
With ``batch``, runs whose backend has a provider batch API are submitted
(``probe run --batch``) instead of sent, and a run whose batches are in
flight is collected as far as they have ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from dataclasses import dataclass

from cfkit.backends import has_batch_api
from cfkit.errors import CfkitError, ConfigError, Incomplete, QuotaRefused
from cfkit.plural import agree, plural
from cfkit.probe import RunSummary
from cfkit.store import Store
from cfkit.study.file import Study
from cfkit.study.jobs import StudyRun, labels_of, make_pacers, prepare, study_runs
from cfkit.workspace import Workspace

Update = Callable[[list[StudyRun]], None]


@dataclass
class StudyResult:
    """What one ``study run`` did: every run with its state, and whether a signal stopped it."""

    runs: list[StudyRun]
    interrupted: bool = False
    exit_code: int = 130  # once interrupted: 130 after Ctrl-C, 143 after SIGTERM, as a process ended by it

    @property
    def incomplete(self) -> list[StudyRun]:
        return [r for r in self.runs if r.state != "done"]


def run_study(ws: Workspace, study: Study, store: Store, *, batch: bool = False,
              on_update: Update | None = None) -> StudyResult:
    """Run every (model, suite) of ``study`` that is not finished; see the module docstring."""
    with _term_interrupts():
        return _run_study(ws, study, store, batch, on_update)


@contextlib.contextmanager
def _term_interrupts():
    """SIGTERM stops the checks and the planning as Ctrl-C does (while sending, the event loop takes both)."""
    def interrupt(_sig, _frame):
        from cfkit.probe.runner import Terminated

        raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_study(ws: Workspace, study: Study, store: Store, batch: bool, on_update: Update | None) -> StudyResult:
    runs = study_runs(study)
    update = on_update or (lambda _runs: None)
    for run in runs:
        prepare(ws, study, run)
    clash = study.label_clash(labels_of(runs))
    if clash is not None:  # its runs could not be reported together: refused before anything is sent
        raise ConfigError(clash)
    update(runs)
    result = StudyResult(runs)
    planned = []
    try:
        for run in runs:
            if run.job is None:
                continue
            run.state = "planning"
            update(runs)
            got = _plan(store, run, batch)
            if got is not None:
                run.state = "waiting"
                planned.append((run, got))
            update(runs)
        planned = _reachable(study, planned)
        update(runs)
        if planned:
            signalled = _send(study, store, planned, runs, update)
            result.interrupted, result.exit_code = signalled is not None, signalled or 130
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated) while checking or planning
        from cfkit.probe.runner import Terminated

        result.interrupted, result.exit_code = True, exc.exit_code if isinstance(exc, Terminated) else 130
    if result.interrupted:
        _stopped(store, runs, planned)
    update(runs)
    return result


def _reachable(study: Study, planned: list) -> list:
    """The planned runs whose models their endpoints answer for, as ``study validate`` checks it (one
    ``GET /models`` per endpoint, :func:`cfkit.study.check.check_endpoints`); each other run is skipped, nothing
    of it sent (every request would fail: a server down, a model it does not serve), and says why."""
    from cfkit.study.check import check_endpoints

    asked = {run.model for run, _ in planned if study.endpoints_of(run.model)}
    if not asked:
        return planned
    reached = check_endpoints(study, asked)
    kept = []
    for run, p in planned:
        why = reached.refused(study, run.model) if run.model in asked else None
        if why is None:
            kept.append((run, p))
        else:
            run.state, run.error = "skipped", f"not started, nothing sent: {why}"
    return kept


def _stopped(store: Store, runs: list[StudyRun], planned: list) -> None:
    """After a stop: a run being sent is interrupted; one not begun yet is named as ``study status`` names it
    ("not started" where nothing of it is stored; it was called interrupted), its batches in flight still waiting.
    A run stopped before it was planned is "not started" when the store holds no run of its model on its suite,
    else "not planned" (what it is then, only planning says: ``study status``)."""
    from cfkit.study.state import planned_state

    plans = {id(run): p for run, p in planned}
    for run in runs:
        if run.state == "sending":
            run.state = "interrupted"
        elif run.state in ("waiting", "planning") and run.run_id is None and run.job is not None:
            p = plans.get(id(run))
            if p is not None:
                run.state = planned_state(store, run, p).state
            else:
                run.state = "not planned" if _any_run_of(store, run) else "not started"


def _any_run_of(store: Store, run: StudyRun) -> bool:
    from cfkit.store import runs as stored_runs

    model = labels_of([run])[run.model]
    return any(r.suite == run.suite and r.model == model for r in stored_runs.list_runs(store))


def _plan(store: Store, run: StudyRun, batch: bool):
    """The run's :class:`~cfkit.probe.PlannedRun`, or None when it ended here (finished, failed, submitted)."""
    job = run.job
    try:
        if batch and job.backend is not None and has_batch_api(job.backend):
            try:
                return _submit(store, run)
            except Incomplete:  # its batches are in flight: planned below, collected before anything is sent
                pass
        planned = job.planned(store, on_progress=lambda p: setattr(run, "progress", p))
    except CfkitError as exc:
        run.state, run.error = "failed", str(exc)
        return None
    if isinstance(planned, RunSummary):
        _finish(store, run, planned)
        return None
    return planned


def _submit(store: Store, run: StudyRun) -> None:
    from cfkit.probe.batch import submit_batch

    submission = submit_batch(run.job, store)
    run.run_id = submission.run_id
    run.notes.extend(submission.notes)  # the model not checked before the batch was submitted
    if submission.finished is not None:
        _finish(store, run, submission.finished)
    else:
        run.state = "submitted"
        run.notes.append(f"submitted as a batch; collect with 'cfkit probe collect {submission.run_id}'")


def _finish(store: Store, run: StudyRun, summary: RunSummary) -> None:
    from cfkit.money import Cost
    from cfkit.store import runs as stored_runs

    run.summary = summary
    run.run_id = summary.run_id
    record = stored_runs.get_run(store, summary.run_id)  # the run's total cost, as 'study status' gives it
    if record is not None:
        run.stored_cost = Cost.of_run(record)
    run.state = "done" if summary.status == "done" and not summary.missing else summary.status
    if run.state == "done" and summary.missing:
        run.state = "incomplete"


def _collect(store: Store, run: StudyRun, p) -> bool:
    """Collect the run's batches as far as they have ended; True when none is left in flight. Results the provider
    refused for quota or billing are said once (``probe collect``'s line); with none left in flight they stop the
    run as a live refusal does (:class:`QuotaRefused`): its requests without a reply are not sent to an account
    that cannot pay."""
    from cfkit.backends.billing import ASK_THE_REST
    from cfkit.dataset import load_cases
    from cfkit.probe.batch import collect_run
    from cfkit.probe.runner import run_identity
    from cfkit.store import runs as stored_runs

    run.run_id = run_identity(p.backend, p.plan, run.job.setup.protocol.name)[0]
    record = stored_runs.get_run(store, run.run_id)
    ws = run.job.ws
    with Store(store.path) as own:  # this thread's own connection; the event loop's stays with the loop
        collected = collect_run(own, load_cases(ws.cases_path, ws.image_root), record, then=ASK_THE_REST)
    if collected.unpaid_line and not collected.waiting:
        raise QuotaRefused(collected.unpaid_line)
    if collected.unpaid_line:
        run.notes.append(collected.unpaid_line)
    if collected.waiting:
        run.state = "waiting"
        if running := len(collected.running):
            run.notes.append(f"{plural(running, 'batch', 'batches')} still running; 'cfkit study run' again later "
                             f"collects {agree(running, 'them')} (or 'cfkit probe collect {run.run_id} --wait')")
        if lost := len(collected.lost):
            run.notes.append(f"{plural(lost, 'batch', 'batches')} the provider no longer knows (HTTP 404); if "
                             f"{agree(lost, 'they')} {agree(lost, 'are')} gone for good, 'cfkit probe collect "
                             f"{run.run_id} --final' stores {agree(lost, 'their')} requests as failed, and 'cfkit "
                             "study run' then sends them again")
        return False
    return True


def _send(study: Study, store: Store, planned, runs: list[StudyRun], update: Update) -> int | None:
    """Send every planned run at once (one pacer per endpoint); when a signal stopped them, the exit status it
    gives (130 after SIGINT, 143 after SIGTERM), else None."""
    pacers = make_pacers(study, [r for r, _ in planned])

    async def one(run: StudyRun, p) -> bool:
        """Send one run; True when its provider refused it for quota or billing (the model's other runs would be
        refused too: they are not started)."""
        from cfkit.probe.runner import send_plan

        run.state = "sending"

        def progress(now) -> None:
            run.progress = now
            update(runs)

        job = run.job
        ended: list[RunSummary] = []  # what the run received and spent when a signal stopped it

        async def send() -> RunSummary:
            return await send_plan(store, p.backend, p.plan, concurrency=pacers[run.pacing].limit,
                                   on_progress=progress, inputs_sha256=p.inputs.sha256 if p.inputs else None,
                                   inputs_manifest=p.inputs.manifest if p.inputs else None,
                                   protocol=job.setup.protocol.name, notes=job.setup.notes(),
                                   pacer=pacers[run.pacing], on_interrupted=ended.append)
        try:
            try:
                summary = await send()
            except Incomplete:  # batches in flight: collect what has ended, then send what they left
                if not await asyncio.to_thread(_collect, store, run, p):
                    update(runs)
                    return False
                summary = await send()
        except asyncio.CancelledError:
            run.state = "interrupted"
            if ended:  # its cost line then counts the requests in flight, with what they may have cost
                run.summary = ended[0]
            raise
        except CfkitError as exc:
            run.state, run.error = "failed", str(exc)
            update(runs)
            return isinstance(exc, QuotaRefused)
        except Exception as exc:  # one run's unexpected failure must not stop the others
            run.state, run.error = "failed", f"{type(exc).__name__}: {exc}"
        else:
            _finish(store, run, summary)
        update(runs)
        return False

    async def main() -> int | None:
        loop = asyncio.get_running_loop()
        by_model: dict[str, list] = {}
        for run, p in planned:
            by_model.setdefault(run.model, []).append((run, p))

        async def in_turn(model_runs) -> None:
            refused: StudyRun | None = None  # the run whose provider refused this model for quota or billing
            for run, p in model_runs:
                if refused is not None:  # the same account: every request would be refused; the others go on
                    run.state, run.error = "skipped", (
                        f"not started, nothing sent: the provider refused {refused.display}'s {refused.suite} run "
                        "for quota or billing; add credit to the account, then run the same command again")
                    update(runs)
                elif await one(run, p):
                    refused = run

        tasks = [asyncio.create_task(in_turn(model_runs)) for model_runs in by_model.values()]
        stopped: list[int] = []  # the signal that stopped the sending

        def stop(sig: int) -> None:
            stopped.append(sig)
            for task in tasks:
                task.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop, sig)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
                pass
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.remove_signal_handler(sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass
        return 128 + stopped[0] if stopped else None

    return asyncio.run(main())
