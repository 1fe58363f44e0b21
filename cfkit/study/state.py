"""``cfkit study status``: where each run of a study stands, read from the store, nothing sent or written.

Each run is found the way ``study run`` would find it: its start-up checks,
then its plan and the run id the plan implies. Its state is then

``done``         every planned request has a stored reply (the detail says when the run is complete but
                 not clean: replies cut off at the token limit, most of them empty, or from servers that said
                 they were different models, as ``study run`` says; and notes when every reply named one
                 model plainly not the one asked, :mod:`cfkit.servers`)
``running``      a process sends it now (:mod:`cfkit.store.leases`; the detail says which, or which host
                 where it cannot be checked from here)
``incomplete``   started, some requests without a reply, and why: interrupted by Ctrl-C or SIGTERM, killed
                 ("interrupted (its process is gone)"), requests that failed; and, as for a done run, when
                 the replies it has are not clean either
``failed``       its last invocation stopped on an error, or it cannot start here (why is given)
``waiting``      provider batches in flight (``probe collect``)
``stale``        a run with the same settings exists, made from other inputs (cases, captions, edits, or
                 the probe templates its own prompts use changed since): running the study asks the new questions
``not started``  no run with these settings (the detail names a run of the model's earlier settings, and
                 what changed, where the study file was edited since; or why ``study run`` would skip it, nothing
                 of it sent: its endpoint does not answer, or does not list its model)

Nothing is sent to a model or written. The endpoints of the runs not started
are reached once each (``GET /models``, no key), as ``study validate`` and
``study run`` reach them, so a run that ``study run`` skipped says why here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cfkit.errors import CfkitError
from cfkit.money import Cost
from cfkit.plural import plural
from cfkit.probe import PlannedRun, RunSummary
from cfkit.store import Store, leases, runs
from cfkit.study.file import Study
from cfkit.study.jobs import StudyRun, prepare, study_runs
from cfkit.workspace import Workspace


@dataclass(frozen=True)
class RunState:
    """One run's row in ``study status``."""

    model: str
    display: str
    suite: str
    state: str
    run_id: str | None
    done: int
    total: int
    failed: int
    cost_usd: float | None
    detail: str | None = None
    cost_unreported: int = 0  # replies whose cost is not known: cost_usd leaves them out
    # Attempts given up after they were sent, which a provider may bill (cost_usd leaves them out), and what they
    # may have cost at most about (None: no priced reply to estimate them by), as 'cfkit runs show' gives them.
    abandoned_attempts: int = 0
    abandoned_usd: float | None = None

    @property
    def cost(self) -> Cost:
        return Cost(self.cost_usd, self.cost_unreported, self.abandoned_attempts, self.abandoned_usd)

    @property
    def said(self) -> str:
        """The run as a line names it: model, suite, state and why ("qwen contextcanvas: stale (…)")."""
        return f"{self.display} {self.suite}: {self.state}" + (f" ({self.detail})" if self.detail else "")


def study_status(ws: Workspace, study: Study, store: Store | None, *, reach=None) -> list[RunState]:
    """Every run of ``study`` with its state (see the module docstring); ``store`` None: no store yet. ``reach``:
    how the endpoints of the runs not started are checked (``reach(study, models)``, an
    :class:`~cfkit.study.check.EndpointCheck`), :func:`~cfkit.study.check.check_endpoints` unless told."""
    states, runs = [], study_runs(study)
    for run in runs:
        prepare(ws, study, run)
        states.append(_state(store, run))
    return _unreachable(study, runs, states, reach)


def _unreachable(study: Study, runs: list[StudyRun], states: list[RunState], reach=None) -> list[RunState]:
    """The states, with why of each run not started that ``study run`` would skip (and skipped, if it was run):
    its endpoint does not answer, or does not list its model (the check ``study run`` makes before it sends)."""
    from dataclasses import replace

    from cfkit.study.check import check_endpoints

    waiting = {run.model for run, x in zip(runs, states, strict=True)
               if x.state == "not started" and study.endpoints_of(run.model)}
    if not waiting:
        return states
    reached = (reach or check_endpoints)(study, waiting)
    said = []
    for run, x in zip(runs, states, strict=True):
        why = reached.refused(study, run.model) if run.model in waiting and x.state == "not started" else None
        said.append(x if why is None else replace(x, detail="; ".join(filter(None, [
            f"'study run' skips it, nothing of it sent: {why}", x.detail]))))
    return said


def _row(run: StudyRun, state: str, record=None, detail: str | None = None, total: int = 0) -> RunState:
    if record is None:
        return RunState(run.model, run.display, run.suite, state, None, 0, total, 0, None, detail)
    cost = Cost.of_run(record)
    return RunState(run.model, run.display, run.suite, state, record.id, record.n_done, record.n_requests,
                    record.n_errors, cost.usd, detail, cost.unreported, cost.abandoned, cost.abandoned_usd)


def _state(store: Store | None, run: StudyRun) -> RunState:
    if run.job is None:
        return _row(run, "failed", detail=f"cannot start: {run.error}")
    if store is None:
        return _row(run, "not started")
    try:
        planned = run.job.planned(store)
    except CfkitError as exc:
        return _row(run, "failed", detail=f"cannot be planned: {exc}")
    if isinstance(planned, RunSummary):
        record = runs.get_run(store, planned.run_id)
        return _row(run, "done", record, _done_detail(store, record, planned.truncated, planned.empty))
    return planned_state(store, run, planned)


def planned_state(store: Store, run: StudyRun, planned: PlannedRun) -> RunState:
    """The state of a run not finished from these inputs, from its plan (``study run`` asks it of the runs a
    stop left unsent, so both commands call them the same)."""
    from cfkit.probe.runner import run_identity

    run_id, _, recorded = run_identity(planned.backend, planned.plan, run.job.setup.protocol.name)
    record = runs.get_run(store, run_id)
    total = len(planned.plan.items)
    if record is None:
        same = [r for r in runs.list_runs(store) if r.suite == run.suite and r.settings_sha256 ==
                recorded.settings_sha256 and r.selection == recorded.selection]
        if same:
            newest = max(same, key=lambda r: r.last_active)
            return _row(run, "stale", newest, f"its inputs changed since run {newest.id}; "
                        f"'study run' asks the {plural(total, 'question')} of the new inputs")
        return _row(run, "not started", total=total, detail=_settings_changed(store, run, recorded))
    if record.complete:  # (so no transport failure among its replies: each is one that came back)
        _, cut, empty = runs.count_unanswered(store, run_id)
        return _row(run, "done", record, _done_detail(store, record, cut, empty))
    sending = leases.sending_of(store, [run_id])[run_id] if record.status == "running" else None
    if sending is not None and sending.live:  # another process sends it now (cfkit.store.leases)
        return _row(run, "running", record, f"sent by {sending.who()}")
    if record.status == "failed":
        return _row(run, "failed", record, record.error)
    if record.status == "waiting":
        return _row(run, "waiting", record, f"batches in flight; 'cfkit probe collect {record.id}'")
    # Why it stopped, as the run recorded it ('study run' points here for it): a server gone, requests that failed.
    why = leases.GONE if sending is not None else record.notes.get("stopped")
    if why is None and record.status == "interrupted":  # Ctrl-C or SIGTERM: it recorded how it ended, and no reason
        why = "interrupted by Ctrl-C or SIGTERM; 'study run' resumes it"
    if why is None and record.n_errors:  # each failed on its own: what the server said to the first
        said = next((detail for *_, detail, _, _ in runs.reply_states(store, record.id) if detail), None)
        why = f"{plural(record.n_errors, 'request')} failed" + (f"; the first: {said}" if said else "")
    _, cut, empty = runs.count_unanswered(store, record.id)  # what the report marks (not clean) is said here too
    trouble = _cut_or_empty(cut, empty, record.n_done)
    return _row(run, "incomplete", record, "; ".join(filter(None, [why, trouble and f"not clean either: {trouble}"]))
                or None)


def _settings_changed(store: Store, run: StudyRun, recorded) -> str | None:
    """Where the model has a run of this suite with other settings (the study file changed since): which run,
    and what differs, as the report would leave it out; else None."""
    from cfkit.report.choice import setting_values

    earlier = [r for r in runs.list_runs(store) if r.suite == run.suite and r.model == recorded.settings["model"]
               and r.selection == recorded.selection and r.settings_sha256 is not None]
    if not earlier:
        return None
    newest = max(earlier, key=lambda r: r.last_active)
    then, now = setting_values(newest.settings), setting_values(recorded.settings)
    changed = [f"{k} {then.get(k)} → {now.get(k)}" for k in sorted(then.keys() | now.keys())
               if repr(then.get(k)) != repr(now.get(k))]
    return (f"run {newest.id} has other settings than the study file now gives ({', '.join(changed)}); "
            "it is not reported as this model's")


def _done_detail(store: Store, record, truncated: int, empty: int) -> str | None:
    """The detail of a done run: why it is complete but not clean (:func:`_not_clean`), and a note when every
    reply named one model plainly not the one asked (:meth:`cfkit.servers.Servers.other_than`); else None."""
    from cfkit.servers import asked_name, servers_of

    answered_by = servers_of(runs.servers(store, record.id))
    asked = asked_name(record.model, record.replayed)
    other = answered_by.other_than(asked)
    said = [_not_clean(answered_by, truncated, empty, record.n_done),
            other and f"every reply named model '{other}', not '{asked}' as asked: check --base-url and what the "
                      "server loaded"]
    return "; ".join(filter(None, said)) or None


def _not_clean(answered_by, truncated: int, empty: int, replies: int) -> str | None:
    """The detail of a done run that is complete but not clean (:func:`cfkit.parse.trouble.not_clean`; replies
    from servers that said they were different models, :mod:`cfkit.servers`)."""
    if answered_by.mixed_models:
        return (f"complete but not clean: the replies came from servers that said they were "
                f"{plural(len(answered_by.models), 'different model')}: {answered_by.models_phrase()}")
    trouble = _cut_or_empty(truncated, empty, replies)
    return trouble and f"complete but not clean: {trouble}"


def _cut_or_empty(truncated: int, empty: int, replies: int) -> str | None:
    """How many replies were cut off at the token limit, or are empty, when that makes them not clean
    (:func:`cfkit.parse.trouble.not_clean`); else None."""
    from cfkit.parse.trouble import not_clean

    if not not_clean(truncated, empty, replies):
        return None
    if truncated:
        return f"{truncated} of {plural(replies, 'reply', 'replies')} cut off at the token limit"
    return f"{empty} of {plural(replies, 'reply', 'replies')} empty"


def study_command(root: Path, file: Path, *extra: str) -> str:
    """The command line of ``cfkit study EXTRA… FILE`` on the workspace at ``root``, quoted for a shell."""
    import shlex

    return shlex.join(["cfkit", "-w", str(root), "study", *extra, str(file)])


def status_line(root: Path, study: Study, states: list[RunState]) -> str | None:
    """What ``study status`` ends with when a run is not done (None when all are): how many runs are done and
    what to do; runs another process sends now are named as such, so a second ``study run`` is not started
    unawares (it would share their requests)."""
    left = [x for x in states if x.state != "done"]
    if not left:
        return None
    done = f"study '{study.name}': {len(states) - len(left)} of {plural(len(states), 'run')} done"
    again = study_command(root, study.path.resolve(), "run")
    sending = [x for x in left if x.state == "running"]
    if not sending:
        return f"{done}; continue with: {again}"
    names = ", ".join(f"{x.display} {x.suite}" for x in sending)
    share = "a second 'cfkit study run' would share their requests with it, not send them twice"
    if len(sending) == len(left):
        return (f"{done}; the rest ({names}) are being sent by another process now; {share}. Check again "
                f"with: {study_command(root, study.path.resolve(), 'status')}")
    return f"{done}; {names} being sent by another process now ({share}); continue the rest with: {again}"
