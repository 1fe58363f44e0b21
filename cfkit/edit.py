"""Making a counterfactual edit: the procedure behind ``cfkit edit CF18``.

:func:`make_edit` reads as numbered steps:

1. check every input before anything runs or is written (spec, case, image,
   mask, engine names and each engine's options, whatever the engine itself
   checks — an asset, an imported file);
2. refuse to add candidates to a spec whose edit a person has accepted, unless
   asked to (``again``) — the accepted edit stays selected either way;
3. run the engine, or the ``auto`` chain (:func:`cfkit.editors.auto_chain`),
   falling back only when an engine cannot run here or its service stayed
   unreachable, never after a refusal; a remote engine's server is asked for a
   connection first (``Editor.server``), and nothing is sent when none opens;
4. for every candidate, write the raw output and a composite (the source's own
   pixels outside a slightly dilated mask, :mod:`cfkit.composite`) atomically
   under ``<store>/edits/SPEC/<id>-raw.png`` / ``<id>-composite.png``, both at
   the source's exact size, and record the provenance (:mod:`cfkit.store.edits`);
5. check each new edit from the arrays just made (:func:`cfkit.preserve.check_images`;
   nothing is read back from disk) and store its checks.

Step 1 (:func:`prepare_edit`, with the LPIPS scorer) is the one place an edit
reads the workspace; steps 2-5 take the plain values it holds. One store
connection serves the whole edit; it is opened when the first thing is read
from or written to the store.

An engine's options come from ``cfkit.toml [edit.engines.NAME]``, then the
spec's ``engines: {NAME: …}``, then ``-o KEY=VALUE`` (``--model`` and
``--input`` set the ``model`` and ``input`` options); each engine's ``Options``
model checks them. Files are never overwritten: each candidate gets a new edit
id. Every edit is labelled a "synthetic counterfactual diagnostic". No secret
is recorded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cfkit.composite import COMPOSITE_DILATE_PX, COMPOSITE_FEATHER_PX, composite, labelled_png
from cfkit.edit_arguments import SpecEngine, edit_arguments, spec_engines
from cfkit.editors import EditRequest, EditResult
from cfkit.errors import (CfkitError, EditRefused, EditorError, EditorKeyRefused, EditorTransport, EditorUnanswered,
                          EditorUnavailable, ImageError, QuotaRefused, SpecError, UsageError, sent_before_stop)
from cfkit.files import write_bytes_atomic
from cfkit.images import read_image
from cfkit.edit_files import refuse_stray_edit_files, spec_thresholds, store_checks
from cfkit.edit_session import EditSession, EditSpend, Scorer, held_stop  # noqa: F401 (EditSpend: for callers)
from cfkit.masks import load_mask
from cfkit.plural import plural
from cfkit.preserve import EditImages, Thresholds, check_images
from cfkit.cases import CaseSet
from cfkit.specs import load_spec
from cfkit.store import Store, edits, now, reviews
from cfkit.store.checks import CheckResult
from cfkit.store.edits import LABEL, EditRecord, NewEdit
from cfkit.workspace import Workspace


#: Entered around each engine call with the spec id, the engine's name and its model (a spinner, a timer).
EngineCall = Callable[[str, str, "str | None"], AbstractContextManager[Any]]

# ── records ────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Attempt:
    """What happened with one engine of the chain."""

    engine: str
    outcome: str  # used | unavailable | unreachable | refused | failed
    reason: str | None = None


@dataclass(frozen=True)
class EditPlan:
    """What an edit will do; also what ``--dry-run`` prints."""

    spec_id: str
    spec_sha256: str
    case_id: str
    prompt: str
    source_path: Path
    source_size: tuple[int, int]
    mask_source: str
    mask_coverage: float
    engines: tuple[str, ...]
    n: int
    seed: int | None
    previews: dict[str, dict[str, Any]]
    notes: tuple[str, ...]


@dataclass
class EditOutcome:
    """The result of :func:`make_edit`."""

    plan: EditPlan
    records: list[EditRecord]
    attempts: list[Attempt]
    notes: list[str]
    checks: dict[int, list[CheckResult]] = field(default_factory=dict)  # edit id -> its checks
    check_error: CfkitError | None = None  # why the check could not run (the edit is saved all the same)
    verdicts: dict[int, str] = field(default_factory=dict)  # edit id -> composite verdict: "pass", "fail (without LPIPS)" …

    @property
    def engine(self) -> str | None:
        return next((a.engine for a in self.attempts if a.outcome == "used"), None)

    def check_failures(self) -> dict[int, list[str]]:
        """Edit id -> why its own check did not pass, for every new edit whose composite failed or went unchecked.

        The composite's check is the one that decides whether an edit can stand
        for its spec (:func:`cfkit.store.edits.selected`); an edit with no check
        at all (the check could not run) is listed with the reason it could not.
        """
        failures: dict[int, list[str]] = {}
        for record in self.records:
            results = self.checks.get(record.id, [])
            result = next((r for r in results if r.variant == "composite"), results[0] if results else None)
            if result is None:
                failures[record.id] = [f"not checked ({self.check_error})" if self.check_error else "not checked"]
            elif result.verdict != "pass":
                failures[record.id] = list(result.reasons) or [f"verdict {result.label}"]
        return failures


@dataclass
class _Prepared:
    """Everything an edit takes from the workspace, read and checked once, before anything runs or is written."""

    plan: EditPlan
    request: EditRequest
    engines: dict[str, SpecEngine]  # each engine of the chain, built with its options for this spec
    spec_engines: tuple[str, ...]  # the engines the spec configures (named when ``auto`` finds none that runs)
    source_sha256: str
    mask_sha256: str
    mask: np.ndarray
    thresholds: Thresholds  # the preservation check's limits for this spec
    store_dir: Path  # the edit files go under its ``edits/``


# ── step 1: inputs ─────────────────────────────────────────────────────────


def prepare_edit(ws: Workspace, spec_id: str, *, engine: str | None = None, n: int | None = None,
                 seed: int | None = None, model: str | None = None, options: Mapping[str, Any] | None = None,
                 input_path: Path | None = None, session: EditSession | None = None) -> _Prepared:
    """Check every input and build the request; reads files, writes nothing, calls no engine.
    ``session`` shares the cases between the specs of a batch."""
    return _prepare(ws, spec_id, (session or EditSession(ws)).cases, engine=engine, n=n, seed=seed, model=model,
                    options=options, input_path=input_path)


def _prepare(ws: Workspace, spec_id: str, cases: Callable[[], CaseSet], *, engine: str | None = None,
             n: int | None = None, seed: int | None = None, model: str | None = None,
             options: Mapping[str, Any] | None = None, input_path: Path | None = None) -> _Prepared:
    """Step 1, the one place an edit reads the workspace; ``cases()`` gives the cases (read once per session)."""
    # a. The engines the arguments name (unknown names fail here).
    arguments = edit_arguments(ws.config.edit, engine=engine, n=n, model=model, options=options,
                               input_path=input_path)

    # b. The spec, its case, the source image and the mask.
    spec_file = load_spec(ws, spec_id)
    spec = spec_file.spec
    cases_set = cases()
    if spec.case not in cases_set:
        raise SpecError(f"{spec_file.path}: field 'case': '{spec.case}' is not in {cases_set.path}. Fix the id.")
    case = cases_set.get(spec.case)
    source_path = cases_set.image_paths(case)[0]  # the case's first image is edited
    notes: list[str] = []
    if len(case.images) > 1:
        notes.append(f"case {case.id} has {plural(len(case.images), 'image')}; the first, {case.images[0]}, is edited")
    source_bytes, image = read_image(source_path, what=f"case {case.id} image")  # one read: decoded and hashed
    source = np.asarray(image)
    size = (source.shape[1], source.shape[0])
    mask = load_mask(ws, spec, size)
    if mask.note:
        notes.append(mask.note)
    if mask.coverage == 0.0:
        raise SpecError(f"spec {spec.id}: the mask is empty (no white pixels); paint the region to edit in white.")
    if mask.coverage == 1.0:
        raise SpecError(f"spec {spec.id}: the mask covers the whole image; leave the non-target content black.")

    mask.array.setflags(write=False)  # the check measures these very arrays after the engine ran
    # c. Each engine with its options, and whatever it checks itself before anything is written.
    engines = spec_engines(arguments, spec, ws.config.edit.engines)
    request = EditRequest(spec_id=spec.id, prompt=spec.prompt, image=source, mask=mask.array, n=arguments.n,
                          seed=seed, files=ws.interventions_dir, root=ws.root)
    for setup in engines.values():
        setup.editor.check(request)

    # What each engine would send, for --dry-run (its ``describe(request)``; nothing by default).
    previews = {name: dict(setup.editor.describe(request)) for name, setup in engines.items()}
    plan = EditPlan(spec_id=spec.id, spec_sha256=spec_file.sha256, case_id=case.id, prompt=spec.prompt,
                    source_path=source_path, source_size=size, mask_source=mask.source, mask_coverage=mask.coverage,
                    engines=arguments.chain, n=arguments.n, seed=seed, previews=previews, notes=tuple(notes))
    return _Prepared(plan=plan, request=request, engines=engines, spec_engines=tuple(spec.engines or {}),
                     source_sha256=hashlib.sha256(source_bytes).hexdigest(), mask_sha256=mask.sha256,
                     mask=mask.array, thresholds=spec_thresholds(spec, ws.config.check.margin),
                     store_dir=ws.store_dir)


def plan_edit(ws: Workspace, spec_id: str, **kwargs: Any) -> EditPlan:
    """The dry run: check inputs and say what would be sent, without calling or writing anything."""
    return prepare_edit(ws, spec_id, **kwargs).plan


# ── steps 2-5 ──────────────────────────────────────────────────────────────


def make_edit(ws: Workspace, spec_id: str, *, engine: str | None = None, n: int | None = None,
              seed: int | None = None, model: str | None = None, options: Mapping[str, Any] | None = None,
              input_path: Path | None = None, again: bool = False, engine_call: EngineCall | None = None,
              session: EditSession | None = None) -> EditOutcome:
    """Make, save, record and check ``n`` candidate edits of spec ``spec_id``.

    ``engine`` is a registered engine name or "auto" (default: cfkit.toml);
    ``options`` are ``-o`` values (``ENGINE.KEY`` with a chain); ``model`` and
    ``input_path`` set the engine's ``model`` and ``input`` options.
    ``engine_call(spec_id, engine, model)``, when given, is entered around each engine
    call (the CLI shows a spinner with it while a remote call runs).
    Raises :class:`EditRefused` (after recording it) on a refusal, and
    :class:`EditorUnavailable` naming every engine tried when none could run.
    ``session`` shares the cases, the LPIPS scorer and the store connection between edits (a batch passes
    one); without it the edit has its own.
    """
    with EditSession(ws) if session is None else nullcontext(session) as shared:
        # 1. Inputs, all checked before anything is written.
        prep = _prepare(ws, spec_id, shared.cases, engine=engine, n=n, seed=seed, model=model, options=options,
                        input_path=input_path)
        # 2-5. Engine, files, check and records, from the plain values ``prep`` holds.
        return _edit_with(prep, shared.scorer(), shared, again=again, engine_call=engine_call)


def _edit_with(prep: _Prepared, scorer: Scorer, span: EditSession, *, again: bool,
               engine_call: EngineCall | None) -> EditOutcome:
    plan = prep.plan
    # 2. An accepted edit stays; more candidates only when asked for.
    existing = None if again else span.existing()
    if existing is not None:
        accepted = reviews.accepted_edit_id(existing, plan.spec_id)
        if accepted is not None:
            raise UsageError(
                f"spec {plan.spec_id} already has an accepted edit (#{accepted}); it is kept and stays selected. "
                "Pass --again to make more candidates anyway."
            )

    refuse_stray_edit_files(prep.store_dir, span._path, span.existing)  # before an engine is paid for
    # 3. Run the engine or the chain.
    attempts: list[Attempt] = []
    result: EditResult | None = None
    started = now()
    for index, name in enumerate(plan.engines):
        last = index == len(plan.engines) - 1
        started = now()
        editor = prep.engines[name].editor
        unanswered = span.unanswered(editor.server())  # nothing is sent to a server that gives no answer
        if unanswered is not None:
            attempts.append(Attempt(name, "unreachable", f"{name}: {unanswered}"))
            continue
        paid = type(editor).paid  # a call the service bills: counted, answered or not
        sending = False
        try:
            with engine_call(plan.spec_id, name, editor.model) if engine_call else nullcontext():
                sending = paid
                result = editor.edit(prep.request)
                sending = False
        except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: what the paid call had sent may be billed
            if sending:
                span.spend.stopped(name, sent_before_stop(stop, unmarked=None))
            raise
        except EditorUnavailable as exc:
            attempts.append(Attempt(name, "unavailable", str(exc)))
            continue
        except CfkitError as exc:
            if paid and isinstance(exc, (EditorError, QuotaRefused)):  # sent (an unavailable engine sent nothing)
                span.spend.sent(name)
                span.spend.unanswered += 1
                span.spend.abandoned += exc.abandoned if isinstance(exc, EditorError) else 0
            _engine_failed(exc, span, prep, name, attempts, started, last)
            continue
        if paid:
            span.spend.sent(name)
            span.spend.came(len(result.images), result.usage)
            span.spend.abandoned += result.abandoned  # attempts given up once sent before the reply came
        attempts.append(Attempt(name, "used"))
        break
    if result is None:
        # The last engine's server gave no answer (nothing was sent, nothing recorded), or none could run here.
        kind = EditorUnanswered if attempts[-1].outcome == "unreachable" else EditorUnavailable
        tried = " ".join(f"({i}) {a.reason.rstrip('.')}." for i, a in enumerate(attempts, start=1))
        if len(plan.engines) > 1:
            configured = [name for name in prep.spec_engines if name not in plan.engines]
            other = (f" or use an engine the spec configures: 'cfkit edit {plan.spec_id} --engine {configured[0]}'"
                     if configured else "")
            raise kind(f"auto: no engine could run here. Tried {tried} Fix one of them{other}.")
        if kind is EditorUnanswered:
            raise EditorUnanswered(f"{attempts[0].reason}; nothing was sent.")
        raise EditorUnavailable(attempts[0].reason or "the engine cannot run here")
    used = attempts[-1].engine

    # 4. Save each candidate with its provenance: received (and paid for), so Ctrl-C or SIGTERM waits for it.
    self_notes = list(plan.notes) + list(result.notes)
    saved = []
    with held_stop():
        for candidate, raw in enumerate(result.images):
            saved.append(_save_candidate(span.store, prep, used, result, raw, candidate, attempts, started,
                                         self_notes))
            span.spend.saved.append((plan.spec_id, saved[-1][0].id))

    # 5. Check each new edit from the arrays in hand, and store the checks.
    results, check_error = _run_checks(span.store, prep, scorer, saved)
    span.spend.checked.update(results)
    verdicts = {edit_id: r.label for edit_id, rows in results.items()
                if (r := next((c for c in rows if c.variant == "composite"), None)) is not None}
    return EditOutcome(plan=plan, records=[record for record, _ in saved], attempts=attempts, notes=self_notes,
                       checks=results, check_error=check_error, verdicts=verdicts)


def _engine_failed(exc: CfkitError, span: EditSession, prep: _Prepared, name: str, attempts: list[Attempt],
                   started: str, last: bool) -> None:
    """Record how engine ``name`` failed with ``exc``: returns when the chain goes on to its next engine (a
    service unreachable), else raises (a refusal, a failure, a refused key or an account without credit stop it)."""
    plan = prep.plan
    if isinstance(exc, EditorTransport):
        attempts.append(Attempt(name, "unreachable", str(exc)))
        if last:
            edit_id = _record_without_output(span.store, prep, name, "failed", str(exc), attempts, started)
            raise EditorTransport(f"{exc} (recorded as edit #{edit_id}, failed)", failure=exc.failure, endpoint=exc.endpoint,
                                  abandoned=exc.abandoned) from exc
        return
    if isinstance(exc, EditRefused):
        attempts.append(Attempt(name, "refused", str(exc)))
        edit_id = _record_without_output(span.store, prep, name, "refused", str(exc), attempts, started)
        raise EditRefused(
            f"{exc} Recorded as edit #{edit_id} (refused); no other engine was tried. "
            f"Rephrase the prompt in interventions/{plan.spec_id}.yaml or choose another --engine."
        ) from exc
    if isinstance(exc, EditorError):
        attempts.append(Attempt(name, "failed", str(exc)))
        edit_id = _record_without_output(span.store, prep, name, "failed", str(exc), attempts, started)
        kind = EditorKeyRefused if isinstance(exc, EditorKeyRefused) else EditorError  # a refused key stops a batch
        raise kind(f"{exc} (recorded as edit #{edit_id}, failed)") from exc
    raise exc  # an account without credit (QuotaRefused), an input the engine refused: nothing to record


def _fallback_text(attempts: list[Attempt]) -> str | None:
    skipped = [f"{a.engine} {a.outcome}: {a.reason}" for a in attempts if a.outcome in ("unavailable", "unreachable")]
    return "; ".join(skipped) or None


def _new_edit(prep: _Prepared, engine: str, model: str | None, params: dict[str, Any], attempts: list[Attempt],
              started: str, *, seed: int | None, candidate: int = 0, result: EditResult | None = None) -> NewEdit:
    plan = prep.plan
    return NewEdit(spec_id=plan.spec_id, spec_sha256=plan.spec_sha256, engine=engine, model=model, params=params,
                   seed=seed, prompt=plan.prompt, source_sha256=prep.source_sha256, mask_sha256=prep.mask_sha256,
                   started_at=started, candidate=candidate, fallback=_fallback_text(attempts),
                   usage=None if result is None else result.usage, cost_usd=None if result is None else result.cost_usd)


def _record_without_output(store: Store, prep: _Prepared, engine: str, status: str, error: str,
                           attempts: list[Attempt], started: str) -> int:
    model = prep.engines[engine].editor.model
    params = {"preview": prep.plan.previews.get(engine, {}), "n": prep.plan.n}
    new = _new_edit(prep, engine, model, params, attempts, started, seed=prep.plan.seed)
    return edits.insert_without_output(store, new, status, error)


def _save_candidate(store: Store, prep: _Prepared, engine: str, result: EditResult,
                    raw: np.ndarray, candidate: int, attempts: list[Attempt], started: str,
                    notes: list[str]) -> tuple[EditRecord, dict[str, np.ndarray]]:
    """Write one candidate's raw output and composite and record them; returns the record and both arrays."""
    plan = prep.plan
    width, height = plan.source_size
    if raw.shape != (height, width, 3) or raw.dtype != np.uint8:
        raise EditorError(f"engine {engine} returned an image of shape {raw.shape} ({raw.dtype}); "
                          f"expected ({height}, {width}, 3) uint8. This is a bug in the engine.")
    params = dict(result.params)
    if prep.engines[engine].asked:
        params["requested_options"] = prep.engines[engine].asked  # what this edit was asked for, so it can be made again
    params.update({"n": plan.n, "case": plan.case_id, "source_image": plan.source_path.name,
                   "mask_source": plan.mask_source, "mask_coverage_pct": round(100 * plan.mask_coverage, 4),
                   "composite": {"dilate_px": COMPOSITE_DILATE_PX, "feather_px": COMPOSITE_FEATHER_PX}})
    if notes:
        params["notes"] = notes
    # The row comes first, so the id names the files; it says "failed" until the files exist.
    new = _new_edit(prep, engine, result.model, params, attempts, started, candidate=candidate,
                    seed=None if result.seed is None else result.seed + candidate, result=result)
    edit_id = edits.insert_pending(store, new)
    folder = Path("edits") / plan.spec_id
    raw_rel = folder / f"{edit_id}-raw.png"
    comp_rel = folder / f"{edit_id}-composite.png"
    about = f"{LABEL}: cfkit edit #{edit_id} of spec {plan.spec_id}, engine {engine}"
    raw_png = labelled_png(raw, f"{about}, raw output")
    pasted = composite(prep.request.image, raw, prep.mask)
    comp_png = labelled_png(pasted, f"{about}, composite")
    try:
        write_bytes_atomic(prep.store_dir / raw_rel, raw_png, overwrite=False)
        write_bytes_atomic(prep.store_dir / comp_rel, comp_png, overwrite=False)
    except FileExistsError as exc:
        raise EditorError(f"{exc.filename} already exists and is never overwritten; move it aside "
                          "(the store may have been reset while edit files were kept).") from exc
    except OSError as exc:
        raise ImageError(f"cannot write edit files under {prep.store_dir / 'edits'} ({exc.strerror}).") from exc
    edits.mark_written(store, edit_id, raw_path=raw_rel.as_posix(), raw_sha256=hashlib.sha256(raw_png).hexdigest(),
                       composite_path=comp_rel.as_posix(), composite_sha256=hashlib.sha256(comp_png).hexdigest())
    return edits.get(store, edit_id), {"raw": raw, "composite": pasted}


def _run_checks(store: Store, prep: _Prepared, scorer: Scorer, saved: list[tuple[EditRecord, dict[str, np.ndarray]]]
                ) -> tuple[dict[int, list[CheckResult]], CfkitError | None]:
    """Check each saved candidate from its arrays (the PNGs hold the same pixels) and store the results."""
    results: dict[int, list[CheckResult]] = {}
    if isinstance(scorer, CfkitError):
        return results, scorer  # the edits are saved; a check that cannot run is reported with them, not fatal
    lpips, note = scorer
    try:
        for record, outputs in saved:
            images = EditImages(original=prep.request.image, mask=prep.mask, outputs=outputs)
            measured = check_images(images, prep.thresholds, lpips, lpips_note=note)
            results[record.id] = store_checks(store, record.id, record.spec_id, measured)
    except CfkitError as exc:
        return results, exc
    return results, None
