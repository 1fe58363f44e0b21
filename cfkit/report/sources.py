"""Where a report's predictions come from: files, or stored runs chosen so that nothing is merged silently.

From the store, :func:`choose_runs` takes the runs named with ``--run``, or by
default the newest run of each model and suite, and refuses when one model
label has runs with different settings (endpoint, generation settings,
options, protocol): rows of one label must come from one set of settings, and
only the user can say which. Among runs with the same settings the newest run
of the whole suite stands for it (a ``--limit`` smoke test only when there is
no other). With the predictions come what the report needs to say why a unit
has no answer: the run it came from and whether that run was complete, what
the server said for a failed request, and each pair's selected edit now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cfkit.errors import NotFoundError, UsageError
from cfkit.predictions import Prediction, predictions_from_store
from cfkit.store import Store, edits, runs
from cfkit.store.runs import RunRecord

#: A unit of a model's answers: (model, suite, case, pair or '', condition).
UnitKey = tuple[str, str, str, str, str]


@dataclass(frozen=True)
class RunInfo:
    """What the report says about a run its rows come from."""

    id: str
    model: str
    suite: str
    status: str
    complete: bool
    subset: bool
    n_requests: int
    n_done: int
    stopped: str | None
    max_tokens: int | None = None  # the run's token limit
    skipped: tuple[tuple[str, str], ...] = ()  # (pair or case, why the run did not ask it)

    @classmethod
    def of(cls, record: RunRecord) -> "RunInfo":
        skipped = tuple((s.get("pair_id", ""), s.get("reason", "")) for s in record.notes.get("skipped") or ()
                        if isinstance(s, dict))
        return cls(record.id, record.model, record.suite, record.status, record.complete, record.subset,
                   record.n_requests, record.n_done, record.notes.get("stopped"),
                   (record.settings.get("generation") or {}).get("max_tokens"), skipped)


@dataclass
class Sources:
    """Predictions and what is known about where they came from."""

    preds: list[Prediction]
    runs: dict[tuple[str, str], RunInfo] = field(default_factory=dict)  # (model, suite) -> its run
    details: dict[UnitKey, str] = field(default_factory=dict)  # why a stored reply has no answer
    selected_edits: dict[str, int | None] | None = None  # pair -> its selected edit now; None without a store


def _differences(records: Sequence[RunRecord]) -> list[str]:
    """Per run, the settings in which it differs from the others (what the refusal shows)."""
    def flat(record: RunRecord) -> dict[str, Any]:
        if record.settings_sha256 is None:
            return {"settings": "not recorded (a run from before cfkit recorded them)"}
        s = record.settings
        values = {"endpoint": s.get("endpoint"), "protocol": s.get("protocol") or "default"}
        values.update({k: v for k, v in (s.get("generation") or {}).items()})
        values.update({f"option {k}": v for k, v in (s.get("identity") or {}).items()})
        return values

    flats = [flat(r) for r in records]
    keys = sorted({k for f in flats for k in f})
    differing = [k for k in keys if len({repr(f.get(k)) for f in flats}) > 1]
    return [f"{r.id} ({', '.join(f'{k} {f.get(k)}' for k in differing)})" for r, f in zip(records, flats)]


def choose_runs(store: Store, refs: Sequence[str] = ()) -> list[RunRecord]:
    """The runs a report reads: those named in ``refs``, or by default one per model and suite.

    Raises :class:`UsageError` when two named runs are of the same model and
    suite, or (by default) when a model label has runs with different settings.
    """
    if refs:
        chosen = list({r.id: r for r in (runs.find_run(store, ref) for ref in refs)}.values())
        seen: dict[tuple[str, str], str] = {}
        for record in chosen:
            key = (record.model, record.suite)
            if key in seen:
                raise UsageError(f"--run {seen[key]} and --run {record.id} are both {record.model} on the "
                                 f"{record.suite} suite; a report shows one run per model and suite. Keep one.")
            seen[key] = record.id
        return chosen
    # The run used last first: a run resumed after a newer one stands for its settings again.
    every = sorted(runs.list_runs(store), key=lambda r: r.last_active, reverse=True)
    by_model: dict[str, list[RunRecord]] = {}
    for record in every:
        by_model.setdefault(record.model, []).append(record)
    chosen = []
    for model, records in by_model.items():
        if len({r.settings_sha256 for r in records}) > 1:
            newest = {}
            for r in records:  # the newest run of each set of settings, to keep the message short
                newest.setdefault(r.settings_sha256, r)
            listing = "; ".join(_differences(list(newest.values())))
            raise UsageError(
                f"model {model} has runs with different settings in {store.path}: {listing}. A report shows one set "
                f"of settings per model, so it will not merge them. Choose with --run RUN (repeatable; 'cfkit runs "
                f"list' shows them), or remove the runs you do not want with 'cfkit runs rm RUN'.")
        for suite in dict.fromkeys(r.suite for r in records):
            of_suite = [r for r in records if r.suite == suite]
            chosen.append(next((r for r in of_suite if not r.subset), of_suite[0]))
    return chosen


def from_store(store: Store, refs: Sequence[str] = ()) -> Sources:
    """The predictions of the chosen runs, with their run records, failure details and the selected edits."""
    chosen = choose_runs(store, refs)
    if not chosen:
        raise NotFoundError(f"no stored runs in {store.path}. Run 'cfkit probe run' first, or pass --predictions FILE.")
    sources = Sources(preds=predictions_from_store(store, [r.id for r in chosen]))
    for record in chosen:
        sources.runs[(record.model, record.suite)] = RunInfo.of(record)
        for reply in runs.unanswered(store, record.id):
            if reply.detail:
                key = (record.model, record.suite, reply.case_id, reply.pair_id, reply.condition)
                sources.details[key] = reply.detail
    sources.selected_edits = {}
    for pred in sources.preds:
        if pred.pair and pred.pair not in sources.selected_edits:
            edit = edits.selected(store, pred.pair)
            sources.selected_edits[pred.pair] = None if edit is None else edit.id
    return sources
