"""Several edits in one process: ``cfkit edit CF01 CF02 …``, ``--all``, ``--pending`` (``--shard i/N``: one of
N disjoint parts, for N processes or nodes); and one more like an edit.

:func:`make_edits` runs :func:`cfkit.edit.make_edit` for each spec in turn and
keeps going when one fails: each spec ends as one :class:`SpecEdit` — made
(and its check passed), check failed, failed (with the error), or kept (an
accepted edit stays, unless ``again``). The arguments that hold for every spec
(engines, candidates, option keys) are checked once, before the first spec.
What no later spec can fare better against stops the batch instead: a refused
key (:class:`~cfkit.errors.EditorKeyRefused`), an account without credit
(:class:`~cfkit.errors.QuotaRefused`), a server that gives no answer to the
check before a spec's call (:class:`~cfkit.errors.EditorUnanswered`: that spec
sent nothing, so it is ``not asked`` too), a server that is gone or keeps timing
out (specs in a row whose call failed on the connection after its retries, as
:class:`cfkit.probe.stopping.StopPolicy` stops a probe run: an
:class:`~cfkit.errors.EditorTransport`), Ctrl-C or SIGTERM (the spec it found
``interrupted``); the specs after it are ``not asked``, and the stop is kept as
``BatchOutcome.stop`` for the caller to raise once it said what was made and spent.

:func:`settings_of` reads back how an edit was made — engine, model, the
options it was asked for — so that "regenerate" in the review makes another
candidate the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cfkit.edit import EditOutcome, EditSession, EngineCall, make_edit
from cfkit.edit_arguments import edit_arguments
from cfkit.edit_session import EditSpend
from cfkit.editors import editor_class
from cfkit.errors import (CfkitError, EditorError, EditorKeyRefused, EditorTransport, EditorUnanswered,
                          EditorUnavailable, PluginError, QuotaRefused, SpecError, UsageError)
from cfkit.specs import load_spec, spec_files, spec_path
from cfkit.store import Store, edits, reviews
from cfkit.store.edits import EditRecord
from cfkit.workspace import Workspace


@dataclass(frozen=True)
class SpecEdit:
    """How one spec of a batch ended."""

    spec_id: str
    status: str  # made | check failed | failed | kept | interrupted | not asked
    outcome: EditOutcome | None = None
    error: CfkitError | None = None
    kept: int | None = None  # the accepted edit that was kept
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status in ("failed", "check failed", "interrupted")

    def as_dict(self) -> dict[str, Any]:
        outcome = self.outcome
        return {"spec": self.spec_id, "status": self.status, "seconds": round(self.seconds, 3),
                "engine": None if outcome is None else outcome.engine,
                "edits": [] if outcome is None else [{"id": r.id, "model": r.model, "check": outcome.verdicts.get(r.id)}
                                                     for r in outcome.records],
                "error": None if self.error is None else str(self.error), "kept": self.kept}


@dataclass
class BatchOutcome:
    """Every spec of a batch, in the order they ran."""

    results: list[SpecEdit] = field(default_factory=list)
    spend: EditSpend = field(default_factory=EditSpend)  # what its calls to a paid engine came to
    stop: BaseException | None = None  # what stopped it before its last spec (raised by the caller)

    @property
    def failed(self) -> list[SpecEdit]:
        return [r for r in self.results if r.failed]

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)


# ── which specs ────────────────────────────────────────────────────────────


def needs_edit(store: Store, spec_id: str) -> bool:
    """Whether a spec has no usable edit: none made, or every one failed, was refused or was rejected."""
    for record in edits.ok_edits(store, spec_id):
        decision = reviews.on_edit(store, record.id)
        if decision is None or decision.decision != "reject":
            return False
    return True


def pending_among(ws: Workspace, spec_ids: list[str]) -> list[str]:
    """Those of ``spec_ids`` that ``--pending`` would take up (all of them when there is no store yet)."""
    if not ws.db_path.is_file():
        return list(spec_ids)
    with Store(ws.db_path) as store:
        return [spec_id for spec_id in spec_ids if needs_edit(store, spec_id)]


def in_shard(position: int, shard: tuple[int, int] | None) -> bool:
    """Whether the spec at ``position`` (0-based, in the full list) belongs to shard ``(i, n)`` (1-based i)."""
    return shard is None or position % shard[1] == shard[0] - 1


def batch_ids(ws: Workspace, spec_ids: list[str], *, all_specs: bool = False, pending: bool = False,
              shard: tuple[int, int] | None = None) -> list[str]:
    """The specs a batch edits: the ids given, every spec (``all_specs``), or those without a usable edit.

    With ``shard`` ``(i, n)`` only the i-th of n disjoint parts: the specs at positions i-1, i-1+n, … of the
    ids given, or of every spec file (sorted) for ``all_specs`` and ``pending``. A spec's shard depends on the
    spec files alone, never on which edits exist, so n processes (or nodes) started with 1/n … n/n never make
    the same edit, even as ``pending`` shrinks while they run.
    """
    if sum([bool(spec_ids), all_specs, pending]) != 1:
        raise UsageError("give spec ids, --all or --pending (one of them). Example: 'cfkit edit CF01 CF02'.")
    if spec_ids:
        unknown = [spec_id for spec_id in spec_ids if not spec_path(ws, spec_id).is_file()]
        if unknown:
            load_spec(ws, unknown[0])  # raises the "no spec, these are there" error
        return [s for k, s in enumerate(dict.fromkeys(spec_ids)) if in_shard(k, shard)]
    ids = [path.stem for k, path in enumerate(sorted(spec_files(ws), key=lambda p: p.stem)) if in_shard(k, shard)]
    if not spec_files(ws):
        raise SpecError(f"no spec files in {ws.interventions_dir}. Create them with 'cfkit specs new'.")
    if all_specs or not ws.db_path.is_file():
        return ids
    with Store(ws.db_path) as store:
        return [spec_id for spec_id in ids if needs_edit(store, spec_id)]


# ── the batch ──────────────────────────────────────────────────────────────


def make_edits(ws: Workspace, spec_ids: list[str], *, engine: str | None = None, n: int | None = None,
               seed: int | None = None, model: str | None = None, options: Mapping[str, Any] | None = None,
               again: bool = False, engine_call: EngineCall | None = None,
               progress: Callable[[int, int, SpecEdit], None] | None = None) -> BatchOutcome:
    """Edit each spec of ``spec_ids`` in turn; a failure is recorded and the next spec runs, except one that stops
    them all (a refused key, no credit, Ctrl-C or SIGTERM: ``BatchOutcome.stop``, see the module's docstring).

    The arguments are those of :func:`cfkit.edit.make_edit` (``--input`` names
    one file, so it has no place in a batch). ``progress(i, total, result)`` is
    called after each spec.
    """
    # 1. What holds for every spec, checked once (a bad engine name must not fail 36 times).
    edit_arguments(ws.config.edit, engine=engine, n=n, model=model, options=options)
    batch = BatchOutcome()
    server = _ServerWatch()
    total = len(spec_ids)
    # One session: the cases, the LPIPS scorer and the store connection are taken once for every spec.
    with EditSession(ws, batch.spend) as session:
        for index, spec_id in enumerate(spec_ids, start=1):
            started = time.monotonic()
            try:
                result = _edit_spec(ws, session, spec_id, started, engine=engine, n=n, seed=seed, model=model,
                                    options=options, again=again, engine_call=engine_call)
            except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: what was saved is kept, the rest not asked
                result = SpecEdit(spec_id, "interrupted", seconds=time.monotonic() - started)
                batch.stop = exc
            else:
                if isinstance(result.error, (QuotaRefused, EditorKeyRefused, EditorUnanswered)):
                    batch.stop = result.error  # no later spec fares better: a refused key, no credit, no server
                elif (gone := server.told(result)) is not None:
                    batch.stop = gone  # the server is not there, or keeps timing out: the next spec learns nothing
            batch.results.append(result)
            try:
                if progress is not None:
                    progress(index, total, result)
            except KeyboardInterrupt as exc:
                batch.stop = batch.stop or exc
            if batch.stop is not None:
                batch.results.extend(SpecEdit(later, "not asked") for later in spec_ids[index:])
                break
    return batch


class _ServerWatch:
    """Whether an engine's server is gone, as a probe run learns it (:class:`cfkit.probe.stopping.StopPolicy`, the
    same counts): a spec whose call failed on the connection after its retries (refused, reset, timed out) counts
    one, a spec whose call was answered (images, or a refusal: the server is there) resets the count."""

    def __init__(self):
        self.policy = None  # made at the first transport failure, which names the server

    def told(self, result: SpecEdit) -> EditorTransport | None:
        """What stops the batch after ``result``, if anything now does."""
        from cfkit.probe.stopping import StopPolicy

        exc = result.error
        if isinstance(exc, EditorTransport):
            if self.policy is None:
                self.policy = StopPolicy(exc.endpoint or "the engine's server", lower=None,
                                         url_flag="the engine's base_url (-o base_url, or OPENAI_BASE_URL)")
            self.policy.failed(exc.failure)
        elif self.policy is not None and (result.outcome is not None or _answered(exc)):
            self.policy.answered()
        if self.policy is None or self.policy.reason is None:
            return None
        return EditorTransport(f"the edits stopped: {self.policy.reason}.", endpoint=self.policy.endpoint)


def _answered(exc: CfkitError | None) -> bool:
    """Whether an engine's server answered the call that ended in ``exc`` (a refusal, a request it rejected)."""
    return isinstance(exc, EditorError) and not isinstance(exc, (EditorTransport, EditorUnavailable))


def _edit_spec(ws: Workspace, session: EditSession, spec_id: str, started: float, *, again: bool,
               **kwargs: Any) -> SpecEdit:
    """How one spec of a batch ends; any cfkit error ends this spec only (the caller stops at the few that
    stop every spec)."""
    # 2. An accepted edit stays unless more candidates are asked for.
    kept = session.accepted(spec_id) if not again else None
    if kept is not None:
        return SpecEdit(spec_id, "kept", kept=kept)
    # 3. The edit, its files and its check.
    try:
        outcome = make_edit(ws, spec_id, again=again, session=session, **kwargs)
    except EditorUnanswered as exc:  # its server gave no answer: nothing was sent for it
        return SpecEdit(spec_id, "not asked", error=exc, seconds=time.monotonic() - started)
    except CfkitError as exc:
        return SpecEdit(spec_id, "failed", error=exc, seconds=time.monotonic() - started)
    passed = outcome.check_error is None and all(
        (outcome.verdicts.get(r.id) or "").startswith("pass") for r in outcome.records)
    return SpecEdit(spec_id, "made" if passed else "check failed", outcome=outcome,
                    seconds=time.monotonic() - started)


# ── one more like an edit ──────────────────────────────────────────────────


@dataclass(frozen=True)
class EditSettings:
    """How an edit was made, as :func:`cfkit.edit.make_edit` takes it."""

    engine: str
    model: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def as_kwargs(self) -> dict[str, Any]:
        return {"engine": self.engine, "model": self.model, "options": dict(self.options)}

    def describe(self) -> str:
        """``classical`` / ``openai gpt-image-2, quality=high``."""
        text = self.engine + (f" {self.model}" if self.model else "")
        if self.options:
            text += ", " + ", ".join(f"{key}={value}" for key, value in self.options.items())
        return text


def settings_of(record: EditRecord) -> EditSettings:
    """The engine, model and options an edit was made with, to make another candidate like it.

    The model is passed only to an engine that takes a ``model`` option; the
    options are those the edit was asked for (``-o``, ``--model``, ``--input``),
    recorded in its params; cfkit.toml and the spec add theirs again as for any
    edit. An engine that is no longer installed is refused, and so is an edit
    imported from a file (it would come back the same).
    """
    try:
        fields = editor_class(record.engine).Options.model_fields
    except PluginError as exc:
        raise PluginError(f"edit #{record.id} was made with engine '{record.engine}', which is not installed here "
                          f"({exc}). Regenerate with another engine.") from exc
    options = dict(record.params.get("requested_options") or {})
    model = options.pop("model", None) or (record.model if "model" in fields else None)
    if "input" in options:
        # An edit imported from a file (--input): the same settings would import the same file again.
        raise UsageError(f"edit #{record.id} was imported from {Path(options['input']).name}; made again it would be "
                         "the same image. Choose an engine that makes a new one (G in the review, or "
                         f"'cfkit edit {record.spec_id} --engine NAME --again').")
    return EditSettings(record.engine, model, options)
