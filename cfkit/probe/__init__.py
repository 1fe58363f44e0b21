"""Probe runs: build a suite's requests, send only what is missing, store every reply.

A run is one model on one suite. Its id is derived from the model, the suite,
the backend settings that can change answers and the templates' hash, so
running the same command again continues (or re-checks) the same run. The
rooms: :mod:`~cfkit.probe.plan` (requests), :mod:`~cfkit.probe.identity`
(cache keys, run ids, input digests), :mod:`~cfkit.probe.runner` (sending and
storing); runs and replies are read back through :mod:`cfkit.store.runs`.

A run that ended complete records a digest of its inputs
(:func:`~cfkit.probe.identity.inputs_sha256`); running the same command on
unchanged inputs then returns at once, without rendering a prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cfkit.backends import Backend, BackendContext, check_installed, load_backend, split_model
from cfkit.dataset import load_cases
from cfkit.errors import NotFoundError
from cfkit.probe.identity import cache_key, inputs_sha256, run_id_for
from cfkit.probe.plan import DEFAULT_MAX_TOKENS, ProbeItem, ProbePlan, SkippedPair, answer_schema, plan_suite
from cfkit.probe.runner import RunProgress, RunSummary, read_reply, run_probe
from cfkit.prompts import templates_sha256
from cfkit.store import Store, runs
from cfkit.store.runs import RunRecord
from cfkit.workspace import Workspace

__all__ = ["DEFAULT_MAX_TOKENS", "ProbeItem", "ProbePlan", "RunProgress", "RunSummary", "SkippedPair",
           "answer_schema", "cache_key", "inputs_sha256", "plan_suite", "probe_suite", "read_reply", "run_id_for",
           "run_probe"]


def _finished(store: Store, backend: Backend, suite: str, templates: str, digest: str) -> RunRecord | None:
    """The run of ``backend`` on ``suite`` when it ended complete from inputs with ``digest``."""
    record = runs.get_run(store, run_id_for(backend, suite, templates))
    if record is None:
        return None
    return record if record.complete and record.notes.get("inputs_sha256") == digest else None


def probe_suite(ws: Workspace, store: Store, model: str, suite: str, *, options: dict[str, Any] | None = None,
                concurrency: int | None = None, max_cost: float | None = None,
                max_tokens: int = DEFAULT_MAX_TOKENS, accepted_only: bool = False,
                on_progress: Callable[[RunProgress], None] | None = None) -> RunSummary:
    """``cfkit probe run``: plan ``suite`` for ``model`` ("KIND:NAME"), build the backend, run.

    Steps: 1. when the same run already ended complete from identical inputs
    (:func:`inputs_sha256`), report it and stop; 2. plan, so bad inputs stop
    the run before a request is sent; 3. build the backend, giving it the
    suite's gold-label distribution (only ``baseline:majority`` reads it);
    4. run.
    """
    kind, _ = split_model(model)
    capabilities = check_installed(kind).capabilities  # a missing extra stops here, before anything is recorded
    cases = load_cases(ws.cases_path, ws.image_root)

    # 1. Nothing to do?
    digest = inputs_sha256(ws, suite, capabilities, max_tokens, cases) if capabilities.cacheable else None
    if digest is not None:
        backend = load_backend(model, options or {}, context=BackendContext(suite=suite, root=ws.root,
                                                                               store_dir=ws.store_dir))
        finished = _finished(store, backend, suite, templates_sha256(ws), digest)
        if finished is not None:
            invalid = runs.count_unanswered(store, finished.id)
            progress = RunProgress(total=finished.n_requests, done=finished.n_requests, priced=backend.priced)
            if on_progress:
                on_progress(progress)
            return RunSummary(run_id=finished.id, model=finished.model, suite=suite, status="done",
                              total=finished.n_requests, kept=finished.n_requests, from_cache=0, sent=0, errors=0,
                              invalid=invalid, cost_usd=0.0 if backend.priced else None, skipped=())

    # 2. Plan.
    plan = plan_suite(ws, suite, capabilities, store=store, max_tokens=max_tokens, accepted_only=accepted_only,
                      cases=cases)
    if not plan.items:
        skipped = "; ".join(f"{s.pair_id}: {s.reason}" for s in plan.skipped[:3])
        raise NotFoundError(f"the {suite} suite has no requests in {ws.root}"
                         + (f" (every pair was skipped: {skipped})." if skipped else "."))

    # 3. The backend, then 4. the run.
    context = BackendContext(suite=suite, gold_labels=plan.gold_labels, root=ws.root, store_dir=ws.store_dir)
    backend = load_backend(model, options or {}, context=context)
    if concurrency is None and backend.capabilities.remote:
        concurrency = ws.config.probe.concurrency
    return run_probe(store, backend, plan, concurrency=concurrency, max_cost=max_cost, on_progress=on_progress,
                     inputs_sha256=digest)
