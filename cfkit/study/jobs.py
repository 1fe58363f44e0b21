"""A study's runs: each (model, suite) of the file as a probe job, checked and ready to plan.

Each run goes through the same start-up checks as ``cfkit probe run`` (the
backend's extra is installed, its key is there, its options are valid); a run
that fails them is kept with why, and the others go on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cfkit.errors import CfkitError, UsageError
from cfkit.money import Cost
from cfkit.plural import plural
from cfkit.probe import ProbeJob, RunProgress, RunSummary, Selection, prepare_probe
from cfkit.study.file import Study
from cfkit.workspace import Workspace

if TYPE_CHECKING:
    from cfkit.option_words import OptionWords
    from cfkit.probe.pacing import Pacer


@dataclass
class StudyRun:
    """One (model, suite) of a study and where it stands in this invocation."""

    model: str  # the study's name for the model
    suite: str
    display: str
    pacing: str  # runs with the same pacing key share one pacer: 'endpoint NAME' or 'model NAME'
    job: ProbeJob | None = None
    # waiting | planning | sending | done | incomplete | failed | interrupted | submitted | skipped (its endpoint
    # does not answer, or does not list its model: nothing sent); after a stop, a run not
    # begun is named as 'study status' names it (not started, incomplete, …), or "not planned"
    state: str = "waiting"
    error: str | None = None
    run_id: str | None = None
    progress: RunProgress | None = None
    summary: RunSummary | None = None
    notes: list[str] = field(default_factory=list)
    stored_cost: Cost | None = None  # the run's cost as stored once this invocation ended with it

    @property
    def label(self) -> str:
        return f"{self.display} {self.suite}"

    @property
    def cost(self) -> Cost:
        """The run's total cost, every invocation's, as 'study status' and 'cfkit runs show' give it: as stored
        once this invocation ended with it; while it sends, what it had before plus what it spent since."""
        if self.stored_cost is not None:
            return self.stored_cost
        return self.progress.run_cost if self.progress is not None else Cost()

    @property
    def spent_now(self) -> Cost:
        """What this invocation spent on the run (nothing for a run it found finished)."""
        if self.summary is not None:
            return Cost(self.summary.cost_usd, self.summary.cost_unreported, self.summary.abandoned,
                        self.summary.abandoned_usd)
        return self.progress.spent_now if self.progress is not None else Cost()


def _path(study: Study, ws: Workspace, value: str | None) -> Path | None:
    """A file the study names: as given when absolute, else next to the study file, else in the workspace."""
    if value is None:
        return None
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    beside = study.path.parent / path
    return beside if beside.exists() else ws.root / path


def selection_of(ws: Workspace, study: Study, suite: str) -> Selection:
    from cfkit.subsets import resolve_subset

    s = study.suites[suite]
    subset = None
    if s.subset is not None:
        beside = _path(study, ws, s.subset)
        subset = beside if beside is not None and beside.exists() else resolve_subset(ws, s.subset)
    return Selection(limit=s.limit, cases=_path(study, ws, s.cases), accepted_only=s.accepted_only,
                     reviewed_only=s.reviewed_only, subset=subset, all_cases=s.all_cases)


def model_options(study: Study, name: str) -> dict[str, Any]:
    """The model's backend options, with its endpoint's URL (a list for replicas) and key variable."""
    options = dict(study.models[name].options)
    endpoints = study.endpoints_of(name)
    if endpoints:
        urls = [e.url for _, e in endpoints]
        options["base_url"] = urls[0] if len(urls) == 1 else urls
        if endpoints[0][1].api_key_env:
            options["api_key_env"] = endpoints[0][1].api_key_env
    return options


def words_of(study: Study, name: str) -> OptionWords:
    """Where the study file sets model ``name``'s options: what a hint of its backend tells the user to set."""
    from cfkit.option_words import study_words

    endpoints = study.endpoints_of(name)
    endpoint = endpoints[0][0] if endpoints else None
    return study_words(study.path.resolve(), name, endpoint, endpoint in study.data.endpoints, len(endpoints) > 1)


def replicas_refused(study: Study, name: str) -> str | None:
    """Why model ``name``'s several endpoints cannot be used here (its backend takes one base URL), or None."""
    endpoints = study.endpoints_of(name)
    if len(endpoints) < 2:
        return None
    from cfkit.backends import check_installed, split_model

    field = check_installed(split_model(study.models[name].model)[0]).Options.model_fields.get("base_url")
    if field is not None and "list" in str(field.annotation):
        return None
    return (f"model '{name}' lists {plural(len(endpoints), 'endpoint')} (replicas), and this cfkit's "
            f"{study.models[name].model.split(':', 1)[0]} backend takes one base URL; give one endpoint.")


def study_runs(study: Study) -> list[StudyRun]:
    """Every run of the study, not yet checked."""
    made = []
    for model, suite in study.pairs():
        endpoint = study.endpoint_of(model)
        pacing = f"endpoint {endpoint[0]}" if endpoint is not None else f"model {model}"
        made.append(StudyRun(model, suite, study.display(model), pacing))
    return made


def prepare(ws: Workspace, study: Study, run: StudyRun) -> None:
    """The run's start-up checks (see the module docstring); a refusal is kept as the run's error."""
    m = study.models[run.model]
    try:
        refused = replicas_refused(study, run.model)
        if refused is not None:
            raise UsageError(refused)
        # The concurrency of a model behind an endpoint is the endpoint's pacer's (shared), not the run's.
        run.job = prepare_probe(ws, m.model, run.suite, options=model_options(study, run.model),
                                concurrency=m.concurrency, max_tokens=m.max_tokens,
                                protocol=m.protocol, selection=selection_of(ws, study, run.suite), study=study.path,
                                words=words_of(study, run.model))
    except CfkitError as exc:
        run.state, run.error = "failed", str(exc)


def labels_of(runs: list[StudyRun]) -> dict[str, str]:
    """Each study model's label, as its runs will record it (see :meth:`Study.label_clash`), for the models
    whose runs passed their start-up checks."""
    return {run.model: run.job.backend.model if run.job.backend is not None else run.job.model
            for run in runs if run.job is not None}


def make_pacers(study: Study, runs: list[StudyRun]) -> dict[str, Pacer]:
    """One pacer per endpoint (and per model without one), shared by every run that uses it."""
    from cfkit.probe.pacing import Pacer

    pacers: dict[str, Pacer] = {}
    for run in runs:
        if run.pacing in pacers or run.job is None:
            continue
        endpoint = study.endpoint_of(run.model)
        if endpoint is not None:
            pacers[run.pacing] = Pacer(endpoint[1].concurrency, endpoint[1].rate)
        else:
            remote = bool(run.job.setup.capabilities.remote)
            limit = study.models[run.model].concurrency or (run.job.ws.config.probe.concurrency if remote else 1)
            pacers[run.pacing] = Pacer(limit)
    return pacers
