"""Probe runs: build a suite's requests, send only what is missing, store every reply.

A run is one model on one suite with one set of settings and inputs. Its id is
derived from everything that can change an answer (the backend, the model, the
resolved endpoint, the generation settings, the answer-changing options, the
protocol preset and every request; :mod:`~cfkit.probe.identity`), so running
the same command again continues (or re-checks) the same run, and changing any
of them makes a new run instead of replacing stored answers. The rooms:
:mod:`~cfkit.probe.plan` (requests), :mod:`~cfkit.probe.identity` (cache keys,
run ids, input digests), :mod:`~cfkit.probe.runner` (sending and storing); runs
and replies are read back through :mod:`cfkit.store.runs`.

A run that ended complete records a digest of its inputs
(:func:`~cfkit.probe.identity.inputs_sha256`); running the same command on
unchanged inputs then returns at once, without rendering a prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cfkit.backends import Backend, BackendContext, Generation, check_installed, load_backend, split_model
from cfkit.dataset import load_cases
from cfkit.errors import NotFoundError
from cfkit.probe.identity import cache_key, inputs_sha256, run_id_for, run_settings, settings_sha256
from cfkit.probe.plan import (DEFAULT_MAX_TOKENS, ProbeItem, ProbePlan, Selection, SkippedPair, answer_schema,
                              plan_suite, select_case_ids)
from cfkit.probe.runner import RunProgress, RunSummary, read_reply, run_probe
from cfkit.store import Store, runs
from cfkit.workspace import Workspace

__all__ = ["DEFAULT_MAX_TOKENS", "ProbeItem", "ProbePlan", "RunProgress", "RunSummary", "Selection", "SkippedPair",
           "answer_schema", "cache_key", "inputs_sha256", "plan_suite", "probe_suite", "read_reply", "run_id_for",
           "run_probe"]


def _finished_summary(store: Store, backend: Backend, suite: str, generation: Generation, protocol: str | None,
                      digest: str, on_progress: Callable[[RunProgress], None] | None) -> RunSummary | None:
    """The summary of a run with these settings that ended complete from inputs with ``digest``, if there is one."""
    settings = run_settings(backend, generation, protocol)
    finished = runs.finished_run(store, suite, settings_sha256(settings), digest)
    if finished is None:
        return None
    progress = RunProgress(total=finished.n_requests, done=finished.n_requests, priced=backend.priced)
    if on_progress:
        on_progress(progress)
    return RunSummary(run_id=finished.id, model=finished.model, suite=suite, status="done",
                      total=finished.n_requests, kept=finished.n_requests, from_cache=0, sent=0, errors=0,
                      invalid=runs.count_unanswered(store, finished.id), cost_usd=0.0 if backend.priced else None,
                      skipped=(), endpoint=finished.endpoint, protocol=protocol,
                      unreviewed=tuple(finished.notes.get("unreviewed", ())))


def probe_suite(ws: Workspace, store: Store, model: str, suite: str, *, options: dict[str, Any] | None = None,
                concurrency: int | None = None, max_cost: float | None = None,
                max_tokens: int = DEFAULT_MAX_TOKENS, accepted_only: bool = False,
                selection: Selection | None = None,
                on_progress: Callable[[RunProgress], None] | None = None) -> RunSummary:
    """``cfkit probe run``: plan ``suite`` for ``model`` ("KIND:NAME"), build the backend, run.

    Steps: 1. start-up checks (the backend's extra is installed; the backend
    can be built: a key, local weights), before anything is recorded; 2. when
    a run with the same settings already ended complete from identical inputs
    (:func:`inputs_sha256`), report it and stop; 3. plan, so bad inputs stop
    the run before a request is sent; 4. build the backend with the suite's
    gold-label distribution (only ``baseline:majority`` reads it) and run.
    """
    selection = selection or Selection(accepted_only=accepted_only)
    generation = Generation(max_tokens=max_tokens)
    protocol = None
    kind, _ = split_model(model)
    capabilities = check_installed(kind).capabilities  # a missing extra stops here, before anything is recorded
    cases = load_cases(ws.cases_path, ws.image_root)

    # 1-2. Nothing to do? Building the backend here also runs its start-up checks (a key, local weights);
    # backends that need the plan's gold labels are built after planning, still before a run is opened.
    digest = None
    if capabilities.cacheable:
        backend = load_backend(model, options or {}, context=BackendContext(suite=suite, root=ws.root,
                                                                           store_dir=ws.store_dir))
        if suite != "counterfactual":
            case_ids, _ = select_case_ids(ws, suite, cases, selection)
            digest = inputs_sha256(ws, suite, capabilities, generation, cases, case_ids, selection.as_dict())
            finished = digest and _finished_summary(store, backend, suite, generation, protocol, digest, on_progress)
            if finished:
                return finished

    # 3. Plan.
    plan = plan_suite(ws, suite, capabilities, store=store, generation=generation, selection=selection, cases=cases)
    if not plan.items:
        skipped = "; ".join(f"{s.pair_id}: {s.reason}" for s in plan.skipped[:3])
        raise NotFoundError(f"the {suite} suite has no requests in {ws.root}"
                            + (f" (every pair was skipped: {skipped})." if skipped else "."))

    # 4. The backend with the suite's gold labels, then the run.
    context = BackendContext(suite=suite, gold_labels=plan.gold_labels, root=ws.root, store_dir=ws.store_dir)
    backend = load_backend(model, options or {}, context=context)
    if concurrency is None and backend.capabilities.remote:
        concurrency = ws.config.probe.concurrency
    return run_probe(store, backend, plan, concurrency=concurrency, max_cost=max_cost, on_progress=on_progress,
                     inputs_sha256=digest, protocol=protocol)
