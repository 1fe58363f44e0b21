"""Probe runs: build a suite's requests, send only what is missing, store every reply.

A run is one model on one suite with one set of settings and inputs. Its id is
derived from everything that can change an answer (the backend, the model, the
resolved endpoint, the generation settings, the answer-changing options, the
protocol preset and every request; :mod:`~cfkit.probe.identity`), so running
the same command again continues (or re-checks) the same run, and changing any
of them makes a new run instead of replacing stored answers. The rooms:
:mod:`~cfkit.probe.job` (the steps of a run, the dry run),
:mod:`~cfkit.probe.plan` (requests, selections), :mod:`~cfkit.probe.identity`
(cache keys, run ids, input digests), :mod:`~cfkit.probe.runner` (sending and
storing), :mod:`~cfkit.probe.protocol` (presets), :mod:`~cfkit.probe.prices`
and :mod:`~cfkit.probe.estimate` (what a run would cost); runs and replies are
read back through :mod:`cfkit.store.runs`.

A run that ended complete records a digest of its inputs
(:func:`~cfkit.probe.identity.inputs_sha256`); running the same command on
unchanged inputs then returns at once, without rendering a prompt.
"""

from __future__ import annotations

from typing import Any

#: Names this package offers from its rooms, imported when first asked for: a rerun that finds its run
#: finished (most of what ``cfkit probe run`` does the second time, :mod:`~cfkit.probe.shortcut`) needs neither
#: the steps of a run (:mod:`~cfkit.probe.job`) nor planning nor sending.
_LAZY = {"DEFAULT_MAX_TOKENS": "plan", "ProbeItem": "plan", "ProbePlan": "plan", "SkippedPair": "plan",
         "answer_schema": "plan", "plan_suite": "plan", "Estimate": "estimate", "cache_key": "identity",
         "inputs_sha256": "identity", "run_id_for": "identity", "run_probe": "runner", "Protocol": "protocol",
         "Prices": "prices", "RunProgress": "progress", "RunSummary": "progress", "Selection": "selection",
         "ProbeJob": "job", "PlannedRun": "job", "RunPreview": "job", "prepare_probe": "job", "preview_run": "job",
         "probe_suite": "job"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"cfkit.probe.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'cfkit.probe' has no attribute {name!r}")


__all__ = ["DEFAULT_MAX_TOKENS", "Estimate", "PlannedRun", "ProbeItem", "ProbeJob", "ProbePlan", "Prices", "Protocol",
           "RunPreview", "RunProgress", "RunSummary", "Selection", "SkippedPair", "answer_schema", "cache_key",
           "inputs_sha256", "plan_suite", "prepare_probe", "preview_run", "probe_suite", "run_id_for", "run_probe"]
