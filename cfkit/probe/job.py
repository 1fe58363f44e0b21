"""The steps of a probe run: start-up checks and settings, plan, the finished-run lookup, sending; the dry run.

What :mod:`cfkit.probe` offers as ``prepare_probe``, ``probe_suite`` and
``preview_run`` lives here, apart from the package itself, so that reading a
room of the package (the rerun shortcut reads :mod:`~cfkit.probe.progress`
and :mod:`~cfkit.probe.selection`) does not build these classes.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cfkit.errors import NotFoundError, UsageError
from cfkit.option_words import OptionWords, probe_run_words
from cfkit.probe.prices import BATCH_PRICE_FACTOR, Prices, resolve_prices
from cfkit.probe.progress import RunProgress, RunSummary
from cfkit.probe.selection import Selection
from cfkit.store import Store, responses, runs
from cfkit.store.runs import RunRecord
from cfkit.workspace import Workspace

# The backends, their options and the protocol presets (pydantic models, built at import) load in the functions
# that use them.
if TYPE_CHECKING:
    from pathlib import Path

    from cfkit.backends import Backend, BackendContext
    from cfkit.cases import CaseSet
    from cfkit.options import Setting
    from cfkit.probe.identity import InputsDigest
    from cfkit.probe.protocol import Protocol
    from cfkit.probe.estimate import Estimate
    from cfkit.probe.image_refs import Digests
    from cfkit.probe.plan import ProbePlan


@dataclass(frozen=True)
class _Setup:
    """A run's backend settings, resolved before anything is planned or recorded."""

    model: str
    options: dict[str, Any]  # as given, plus the protocol's and the prices
    protocol: Protocol
    prices: Prices | None
    cacheable: bool
    capabilities: Any
    study: str | None = None  # the study file whose 'cfkit study run' sends the run (what asks it again)
    words: OptionWords | None = None  # how the command sets an option, for the backend's hints (None: probe run's)

    def context(self, ws: Workspace, suite: str, plan: ProbePlan | None = None) -> BackendContext:
        from cfkit.backends import BackendContext

        return BackendContext(suite=suite, gold_labels=plan.gold_labels if plan is not None else Counter(),
                              root=ws.root, store_dir=ws.store_dir,
                              words=self.words or probe_run_words(self.model.partition(':')[0]))

    def notes(self) -> dict[str, Any]:
        return {"protocol": self.protocol.record(), "prices": self.prices.record() if self.prices else None,
                **({"study": self.study} if self.study else {})}


def _model(model: str | Setting) -> tuple[str, Setting | None]:
    """``(KIND:NAME, where it came from)``; a plain string came from the caller."""
    from cfkit.options import Setting

    return (model.value, model) if isinstance(model, Setting) else (model, None)


def _setup(ws: Workspace, model: str, suite: str, options: dict[str, Any], protocol: str | None,
           max_tokens: int | None, concurrency: int | None,
           where: Setting | None = None, words: OptionWords | None = None) -> tuple[_Setup, Backend | None]:
    """Start-up checks and settings: the extra is installed, the preset resolves, the backend can be built
    (a key, local weights), and prices are known where the backend takes them. Nothing is recorded.
    ``where`` says where ``model`` came from (a flag or cfkit.toml), for a refusal of its kind."""
    from cfkit.backends import check_installed, load_backend, split_model
    from cfkit.backends.controls import split_controls
    from cfkit.options import blamed, option_names
    from cfkit.probe.protocol import resolve_protocol

    with blamed(where) if where is not None else contextlib.nullcontext():
        kind, name = split_model(model)
        cls = check_installed(kind)  # a missing extra stops here, before anything is recorded
    fields = option_names(cls)  # (a plain spec's, where the backend has one: its model is not built)
    controls, options = split_controls(options, cls.controls, kind=kind, own=fields)
    preset = resolve_protocol(protocol or ws.config.probe.protocol, remote=cls.capabilities.remote,
                              model_name=name, option_names=fields, max_tokens=max_tokens, concurrency=concurrency,
                              options=options, controls=controls)
    options = {**options, **preset.options}
    setup = _Setup(model, options, preset, None, cls.capabilities.cacheable, cls.capabilities, words=words)
    backend = None
    # Backends that need the plan's gold labels (a majority baseline) are built after planning, still before
    # a run is opened; the others now, so their checks (a key, local weights) come before any planning.
    if cls.capabilities.cacheable or {"price_in", "price_out"} <= fields:
        backend = load_backend(model, options, context=setup.context(ws, suite))
    if backend is not None and {"price_in", "price_out"} <= fields:
        prices = resolve_prices(model, name, backend.endpoint, options, ws.config.probe.prices)
        if prices is not None and options.get("price_in") is None:
            _takes_cache_writes(prices, fields, model, kind)
            options = {**options, **prices.options()}
            backend = load_backend(model, options, context=setup.context(ws, suite))
        setup = dataclasses.replace(setup, options=options, prices=prices)
    return setup, backend


def _takes_cache_writes(prices: Prices, fields: set[str], model: str, kind: str) -> None:
    """Refuse configured cache-write prices for a backend that has none to price (only Anthropic bills writes)."""
    from cfkit.probe.prices import CACHE_WRITE_KEYS, CACHE_WRITE_OPTIONS

    for key, name, price in zip(CACHE_WRITE_KEYS, CACHE_WRITE_OPTIONS, prices.cache_writes):
        if price is not None and name not in fields:
            raise UsageError(f"cfkit.toml [probe.prices.\"{model}\"] has {key}, and {kind}: models report no "
                             f"prompt-cache writes to price (anthropic: models do); remove {key} from that table.")


def _plan(ws: Workspace, store: Store | None, setup: _Setup, suite: str, selection: Selection,
          cases: CaseSet | None = None, digests: Digests | None = None) -> ProbePlan:
    from cfkit.dataset import load_cases
    from cfkit.probe.plan import plan_suite

    plan = plan_suite(ws, suite, setup.capabilities, store=store, generation=setup.protocol.generation,
                      selection=selection, cases=cases or load_cases(ws.cases_path, ws.image_root),
                      digests=digests)
    if not plan.items:
        skipped = "; ".join(f"{s.pair_id}: {s.reason}" for s in plan.skipped[:3])
        raise NotFoundError(f"the {suite} suite has no requests in {ws.root}"
                            + (f" (every {plan.skipped[0].unit} was skipped: {skipped})." if skipped else
                               " (the selection left nothing)." if plan.left_out else "."))
    return plan


def _finished_summary(store: Store, backend: Backend, suite: str, setup: _Setup, finished: RunRecord,
                      on_progress: Callable[[RunProgress], None] | None) -> RunSummary:
    """The summary of ``finished``, a run with these settings that ended complete from the same inputs."""
    from cfkit.probe.shortcut import finished_summary

    return finished_summary(store, finished, suite, priced=backend.priced, notes=tuple(backend.notes or ()),
                            protocol=setup.protocol.name, on_progress=on_progress,
                            replayed_from=backend.replayed_from)


def _already_finished(ws: Workspace, store: Store, backend: Backend, suite: str, setup: _Setup,
                      selection: Selection, digest: str | None = None) -> RunRecord | None:
    """A run with these settings that ended complete from the same inputs, if there is one.

    Without ``digest``, by its inputs manifest alone (one ``stat`` per input
    file, nothing read: :func:`~cfkit.probe.identity.inputs_unchanged`); with
    it, by the digest of the inputs' content.
    """
    from cfkit.probe.identity import inputs_unchanged, run_settings, settings_sha256

    settings = settings_sha256(run_settings(backend, setup.protocol.generation, setup.protocol.name))
    if digest is not None:
        return runs.finished_run(store, suite, settings, digest)
    recorded = selection.as_dict()
    for record, manifest in runs.complete_with_manifest(store, suite, settings):
        if inputs_unchanged(ws, suite, setup.capabilities, setup.protocol.generation, recorded, manifest):
            return record
    return None


@dataclass(frozen=True)
class ProbeJob:
    """A probe run ready to go: checked, its settings resolved and (where it can be) its backend built.

    Nothing has been recorded yet; :meth:`run` opens (or continues) the run in
    a store. ``notes`` are what the backend wants the user to know before
    anything is sent (e.g. that ``$OPENAI_API_KEY`` was withheld from a
    custom server); they are recorded with the run as well.
    """

    ws: Workspace
    model: str
    suite: str
    setup: _Setup
    backend: Backend | None  # None for backends built from the plan (baseline:majority)
    selection: Selection
    concurrency: int | None
    max_cost: float | None

    @property
    def notes(self) -> tuple[str, ...]:
        return () if self.backend is None else tuple(self.backend.notes or ())

    def remember(self, store: Store, key: str, summary: RunSummary) -> bool:
        """After a run ended complete: remember that the command ``key`` (:func:`~cfkit.probe.shortcut.command_key`)
        resolved to it, so the same command again needs no backend (:mod:`cfkit.probe.shortcut`). Only for
        backends whose settings follow from the command alone; False when nothing was remembered."""
        from cfkit.backends import split_model
        from cfkit.probe.identity import run_settings, settings_sha256
        from cfkit.probe.shortcut import SHORTCUT_KINDS, remember

        backend, setup = self.backend, self.setup
        if (summary.status != "done" or summary.missing or backend is None or not setup.cacheable
                or self.suite == "counterfactual" or split_model(self.model)[0] not in SHORTCUT_KINDS
                or backend.replicas != 1):
            return False
        settings = settings_sha256(run_settings(backend, setup.protocol.generation, setup.protocol.name))
        return remember(self.ws, store, key, run_id=summary.run_id, suite=self.suite, settings_sha256=settings,
                        priced=backend.priced, notes=tuple(backend.notes or ()), protocol=setup.protocol.name)

    def planned(self, store: Store, *, on_progress: Callable[[RunProgress], None] | None = None,
                on_plan: Callable[[ProbePlan], None] | None = None, lazy: bool = False) -> RunSummary | PlannedRun:
        """Steps 2 and 3 of :func:`probe_suite`: the summary of a run already finished from the same inputs,
        or the plan with the backend that will answer it. With ``lazy`` the plan reads no image it does not
        know yet beyond its header and end (its digest is taken when it is sent; only a run that sends
        itself can plan so, not a batch).

        The cycle collector is held off meanwhile (:mod:`cfkit.collector`): the plan is tens of thousands of
        objects made at once, none in a cycle, that live as long as the run."""
        from cfkit.collector import paused_collection

        with paused_collection():
            return self._planned(store, on_progress, on_plan, lazy)

    def _planned(self, store: Store, on_progress: Callable[[RunProgress], None] | None,
                 on_plan: Callable[[ProbePlan], None] | None, lazy: bool) -> RunSummary | PlannedRun:
        ws, suite, setup, backend = self.ws, self.suite, self.setup, self.backend
        # 2. Nothing to do? (Decided by stat alone when the inputs are as a finished run recorded them.)
        finished = None
        if setup.cacheable and backend is not None and suite != "counterfactual":
            finished = _already_finished(ws, store, backend, suite, setup, self.selection)
        if finished is not None:
            return _finished_summary(store, backend, suite, setup, finished, on_progress)
        if backend is not None:
            backend.warm_up()  # set-up of its own that can go on while this process plans
        from cfkit.backends import load_backend
        from cfkit.dataset import load_cases
        from cfkit.probe.identity import inputs_digest
        from cfkit.probe.image_refs import Digests
        from cfkit.probe.plan import select_case_ids, suite_case_ids

        inputs = None
        cases = None
        stats: dict = {}  # each image's stat, taken once for the inputs digest and the plan's header checks
        digests = Digests(store, lazy=lazy, stats=stats)  # what each image file holds, known once for the plan
        if setup.cacheable and backend is not None and suite != "counterfactual":
            # … or by the inputs' content (the same content under new mtimes).
            cases = load_cases(ws.cases_path, ws.image_root)
            case_ids, _ = select_case_ids(ws, suite, cases, self.selection)
            inputs = inputs_digest(ws, suite, setup.capabilities, setup.protocol.generation, cases, case_ids,
                                   self.selection.as_dict(), None, suite_case_ids(ws, suite, cases, self.selection),
                                   stats)
            finished = _already_finished(ws, store, backend, suite, setup, self.selection, inputs.sha256)
            if finished is not None:
                runs.record_manifest(store, finished.id, inputs.manifest)  # the next rerun needs no read
                return _finished_summary(store, backend, suite, setup, finished, on_progress)

        # 3. Plan; then the backend with the suite's gold labels.
        plan = _plan(ws, store, setup, suite, self.selection, cases, digests)
        if on_plan:
            on_plan(plan)
        if backend is None or not setup.cacheable:
            backend = load_backend(self.model, setup.options, context=setup.context(ws, suite, plan))
        concurrency = setup.protocol.concurrency or self.concurrency
        if concurrency is None and backend.capabilities.remote:
            concurrency = ws.config.probe.concurrency
        if concurrency is None and backend.batch_size > 1:  # hf batches: one gathers, one runs
            concurrency = 2 * backend.batch_size
        if backend.replicas > 1 and concurrency:  # -j at each replica in use (cfkit.backends.replicas)
            backend.set_concurrency(concurrency)
            concurrency *= backend.replicas_in_use
        return PlannedRun(plan, backend, inputs, concurrency)

    def run(self, store: Store, *, on_progress: Callable[[RunProgress], None] | None = None,
            on_plan: Callable[[ProbePlan], None] | None = None) -> RunSummary:
        """Steps 2–4 of :func:`probe_suite` in ``store``."""
        planned = self.planned(store, on_progress=on_progress, on_plan=on_plan, lazy=True)
        if isinstance(planned, RunSummary):
            return planned
        inputs = planned.inputs
        # 4. Send what is missing.
        from cfkit.probe.runner import run_probe

        return run_probe(store, planned.backend, planned.plan, concurrency=planned.concurrency,
                         max_cost=self.max_cost, on_progress=on_progress,
                         inputs_sha256=inputs.sha256 if inputs else None,
                         inputs_manifest=inputs.manifest if inputs else None, protocol=self.setup.protocol.name,
                         notes=self.setup.notes())


@dataclass(frozen=True)
class PlannedRun:
    """A run's plan and the backend that answers it (what :meth:`ProbeJob.planned` returns to run or batch)."""

    plan: ProbePlan
    backend: Backend
    inputs: InputsDigest | None
    concurrency: int | None


def prepare_probe(ws: Workspace, model: str | Setting, suite: str, *, options: dict[str, Any] | None = None,
                  concurrency: int | None = None, max_cost: float | None = None, max_tokens: int | None = None,
                  protocol: str | None = None, accepted_only: bool = False,
                  selection: Selection | None = None, study: Path | None = None,
                  words: OptionWords | None = None) -> ProbeJob:
    """Step 1 of :func:`probe_suite`: the start-up checks and settings, the backend built; nothing written.

    A bad option, a missing extra, a bad ``--base-url`` or a missing key stops
    here, before a store is opened or a progress bar drawn. ``study``: the
    study file of a ``cfkit study run`` run, kept in its notes so that what it
    says of the run names the study's commands (:func:`cfkit.report.commands.made_by`). ``words``: how the
    command sets an option (probe run's flags unless told; a study's file), for the backend's hints.
    """
    selection = selection or Selection(accepted_only=accepted_only)
    model, where = _model(model)
    setup, backend = _setup(ws, model, suite, dict(options or {}), protocol, max_tokens, concurrency, where, words)
    if study is not None:
        setup = dataclasses.replace(setup, study=str(study.resolve()))
    if max_cost is not None and backend is not None and not backend.priced:
        # Refused here, before anything is looked up: also when the run turns out to be complete already.
        raise UsageError(f"--max-cost needs prices, and {backend.model} has none. Give them as "
                         "-o price_in=USD_PER_M_INPUT_TOKENS -o price_out=USD_PER_M_OUTPUT_TOKENS, or in "
                         "cfkit.toml [probe.prices].")
    return ProbeJob(ws=ws, model=model, suite=suite, setup=setup, backend=backend, selection=selection,
                    concurrency=concurrency, max_cost=max_cost)


def probe_suite(ws: Workspace, store: Store, model: str, suite: str, *, options: dict[str, Any] | None = None,
                concurrency: int | None = None, max_cost: float | None = None, max_tokens: int | None = None,
                protocol: str | None = None, accepted_only: bool = False, selection: Selection | None = None,
                on_progress: Callable[[RunProgress], None] | None = None,
                on_plan: Callable[[ProbePlan], None] | None = None) -> RunSummary:
    """``cfkit probe run``: check, plan ``suite`` for ``model`` ("KIND:NAME"), run.

    Steps: 1. start-up checks and settings (:func:`prepare_probe`: the
    backend's extra, the protocol preset, the backend itself, prices), before
    anything is recorded; 2. when a run with the same settings already ended
    complete from identical inputs (:func:`inputs_sha256`), report it and
    stop; 3. plan, so bad inputs stop the run before a request is sent; 4.
    build the backend with the suite's gold-label distribution (only
    ``baseline:majority`` reads it) and run. ``on_plan`` sees the plan before
    anything is sent (to warn about unreviewed inputs).
    """
    job = prepare_probe(ws, model, suite, options=options, concurrency=concurrency, max_cost=max_cost,
                        max_tokens=max_tokens, protocol=protocol, accepted_only=accepted_only, selection=selection)
    return job.run(store, on_progress=on_progress, on_plan=on_plan)


@dataclass(frozen=True)
class RunPreview:
    """What ``probe run --dry-run`` prints: the run a command would make or continue, and what it would send."""

    run_id: str
    model: str
    suite: str
    endpoint: str | None
    protocol: Protocol
    prices: Prices | None
    plan: ProbePlan
    stored: int  # requests of the run that already have a reply
    cached: int  # … that the response cache would answer
    to_send: Estimate  # what would go to the model
    all_requests: Estimate  # the whole plan, as if nothing were stored


def preview_run(ws: Workspace, store: Store | None, model: str | Setting, suite: str, *,
                options: dict[str, Any] | None = None, concurrency: int | None = None,
                max_tokens: int | None = None, protocol: str | None = None,
                selection: Selection | None = None, batch: bool = False,
                words: OptionWords | None = None) -> RunPreview:
    """The dry run: the same checks and plan as :func:`probe_suite`, and what would be sent; nothing is sent or
    written. ``store`` may be None when the workspace has none yet. With ``batch`` the cost is at batch
    prices (:data:`~cfkit.probe.prices.BATCH_PRICE_FACTOR`)."""
    from cfkit.probe.estimate import estimate
    from cfkit.probe.image_refs import Digests
    from cfkit.backends import load_backend
    from cfkit.probe.runner import run_identity

    selection = selection or Selection()
    model, where = _model(model)
    setup, _ = _setup(ws, model, suite, dict(options or {}), protocol, max_tokens, concurrency, where, words)
    plan = _plan(ws, store, setup, suite, selection, digests=Digests(store, remember=False))
    backend = load_backend(model, setup.options, context=setup.context(ws, suite, plan))
    run_id, keys, recorded = run_identity(backend, plan, setup.protocol.name)
    settled = runs.settled_keys(store, run_id) if store is not None else {}
    kept = {k for k, cache_key in settled.items() if cache_key == keys.get(k)}
    pending = [item for item in plan.items if item.key not in kept]
    hits = (responses.cached(store, [keys[i.key] for i in pending])
            if store is not None and backend.capabilities.cacheable else {})
    to_send = [item.request for item in pending if keys[item.key] not in hits]
    detail = str((backend.options.model_dump() if backend.options is not None else {}).get("detail", "auto"))
    prices = setup.prices.scaled(BATCH_PRICE_FACTOR) if batch and setup.prices else setup.prices
    return RunPreview(run_id=run_id, model=backend.model, suite=suite, endpoint=recorded.endpoint,
                      protocol=setup.protocol, prices=prices, plan=plan, stored=len(kept),
                      cached=len(pending) - len(to_send), to_send=estimate(to_send, prices, detail),
                      all_requests=estimate([i.request for i in plan.items], prices, detail))
