"""Making a counterfactual edit: the procedure behind ``cfkit edit CF18``.

:func:`make_edit` reads as numbered steps:

1. check every input before anything runs or is written (spec, case, image,
   mask, engine names and options, classical field, asset, ``--input``);
2. refuse to add candidates to a spec whose edit a person has accepted, unless
   asked to (``again``) — the accepted edit stays selected either way;
3. run the engine, or the ``auto`` chain (openai, then diffusers), falling back
   only when an engine cannot run here or its service stayed unreachable, never
   after a refusal;
4. for every candidate, write the raw output and a composite (the source's own
   pixels outside a slightly dilated mask) atomically under
   ``<store>/edits/SPEC/<id>-raw.png`` / ``<id>-composite.png``, both at the
   source's exact size, and record the provenance in the store's ``edits`` table;
5. run the preservation check on each new edit, when ``cfkit.preserve`` exists.

Files are never overwritten: each candidate gets a new edit id. Every edit is
labelled a "synthetic counterfactual diagnostic". No secret is recorded.

:func:`select_edit` picks the edit that stands for a spec in probes and reports.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cfkit.editors import AUTO_CHAIN, EditRequest, EditResult, Editor, load_editor
from cfkit.errors import (CaseError, CfkitError, EditorError, EditorTransport, EditorUnavailable, EditRefused,
                          ImageError, InputError, SpecError)
from cfkit.files import write_bytes_atomic
from cfkit.images import open_image
from cfkit.specs import load_mask, load_spec
from cfkit.store import Store, now, to_json
from cfkit.workspace import Workspace

LABEL = "synthetic counterfactual diagnostic"
#: Composite: pixels this far (px) or farther from the mask keep the source's exact values …
COMPOSITE_DILATE_PX = 4
#: … and over the last this-many px inside that band the edit fades out.
COMPOSITE_FEATHER_PX = 2
#: Engines whose model --model may set.
MODEL_ENGINES = ("openai", "diffusers")


# ── records ────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class EditRecord:
    """One row of the ``edits`` table, with output paths made absolute."""

    id: int
    spec_id: str
    candidate: int
    engine: str
    model: str | None
    status: str  # ok | refused | failed
    raw_path: Path | None
    composite_path: Path | None
    params: dict[str, Any]
    seed: int | None
    prompt: str | None
    spec_sha256: str | None
    source_sha256: str | None
    mask_sha256: str | None
    raw_sha256: str | None
    composite_sha256: str | None
    error: str | None
    fallback: str | None
    usage: dict[str, Any] | None
    cost_usd: float | None
    started_at: str
    finished_at: str | None
    label: str

    @classmethod
    def from_row(cls, ws: Workspace, row) -> "EditRecord":
        def path(value: str | None) -> Path | None:
            return None if not value else ws.store_dir / value

        return cls(id=row["id"], spec_id=row["spec_id"], candidate=row["candidate"], engine=row["engine"],
                   model=row["model"], status=row["status"], raw_path=path(row["raw_path"]),
                   composite_path=path(row["composite_path"]), params=json.loads(row["params"] or "{}"),
                   seed=row["seed"], prompt=row["prompt"], spec_sha256=row["spec_sha256"],
                   source_sha256=row["source_sha256"], mask_sha256=row["mask_sha256"], raw_sha256=row["raw_sha256"],
                   composite_sha256=row["composite_sha256"], error=row["error"], fallback=row["fallback"],
                   usage=json.loads(row["usage"]) if row["usage"] else None, cost_usd=row["cost_usd"],
                   started_at=row["started_at"], finished_at=row["finished_at"], label=row["label"])

    def as_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["raw_path"] = None if self.raw_path is None else str(self.raw_path)
        data["composite_path"] = None if self.composite_path is None else str(self.composite_path)
        return data


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
    checks: dict[int, list] | None = None  # edit id -> CheckResults; None when the check module is absent
    check_error: str | None = None
    verdicts: dict[int, str] = field(default_factory=dict)  # edit id -> composite verdict: "pass", "fail (without LPIPS)" …

    @property
    def engine(self) -> str | None:
        return next((a.engine for a in self.attempts if a.outcome == "used"), None)


@dataclass
class _Prepared:
    plan: EditPlan
    request: EditRequest
    editors: dict[str, Editor]
    source_sha256: str
    mask_sha256: str
    mask: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)


# ── composite ──────────────────────────────────────────────────────────────


def _distance_from_mask(mask: np.ndarray) -> np.ndarray:
    from scipy.ndimage import distance_transform_edt

    edit = mask > 127
    if not edit.any():
        return np.full(mask.shape, np.inf)
    return distance_transform_edt(~edit)


def composite_region(mask: np.ndarray, dilate: int = COMPOSITE_DILATE_PX) -> np.ndarray:
    """Pixels (bool) where a composite may differ from the source: closer than ``dilate`` px to the mask."""
    return _distance_from_mask(mask) < dilate


def composite_weight(mask: np.ndarray, dilate: int = COMPOSITE_DILATE_PX,
                     feather: int = COMPOSITE_FEATHER_PX) -> np.ndarray:
    """Weight of the edit (0..1): 1 on and near the mask, fading to 0 at ``dilate`` px from it."""
    distance = _distance_from_mask(mask)
    if feather <= 0:
        return (distance < dilate).astype(np.float64)
    return np.clip((dilate - distance) / feather, 0.0, 1.0)


def composite(source: np.ndarray, raw: np.ndarray, mask: np.ndarray, *, dilate: int = COMPOSITE_DILATE_PX,
              feather: int = COMPOSITE_FEATHER_PX) -> np.ndarray:
    """The raw edit inside the dilated mask, the source's exact pixels everywhere else."""
    weight = composite_weight(mask, dilate, feather)[..., None]
    blended = np.rint(weight * raw.astype(np.float64) + (1.0 - weight) * source.astype(np.float64))
    return np.where(weight > 0, np.clip(blended, 0, 255), source).astype(np.uint8)


def labelled_png(array: np.ndarray, description: str) -> bytes:
    """PNG bytes carrying ``description`` in a tEXt chunk, so a shared file still says what it is."""
    from PIL import Image, PngImagePlugin

    from cfkit import __version__

    info = PngImagePlugin.PngInfo()
    info.add_text("Description", description)
    info.add_text("Software", f"cfkit {__version__}")
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


# ── step 1: inputs ─────────────────────────────────────────────────────────


def _engine_options(ws: Workspace, engine: str, model: str | None,
                    options: dict[str, dict[str, Any]] | None) -> dict[str, Any]:
    cfg = ws.config.edit
    base: dict[str, Any] = {}
    if engine == "openai":
        base = {"model": cfg.openai_model, "quality": cfg.quality}
    elif engine == "diffusers":
        base = {"model": cfg.diffusers_model}
    base.update((options or {}).get(engine, {}))
    if model is not None:
        base["model"] = model
    return base


def prepare_edit(ws: Workspace, spec_id: str, *, engine: str | None = None, n: int | None = None,
                 seed: int | None = None, model: str | None = None,
                 options: dict[str, dict[str, Any]] | None = None, input_path: Path | None = None) -> _Prepared:
    """Check every input and build the request; reads files, writes nothing, calls no engine."""
    # a. The arguments, and the engines they name (unknown names and options fail here).
    engine = engine or ws.config.edit.engine
    n = ws.config.edit.candidates if n is None else n
    chain = AUTO_CHAIN if engine == "auto" else (engine,)
    _check_arguments(engine, chain, n, model, input_path)
    editors = {name: load_editor(name, _engine_options(ws, name, model, options)) for name in chain}

    # b. The spec, its case, the source image and the mask.
    spec_file = load_spec(ws, spec_id)
    spec = spec_file.spec
    case, source_path = _source_of(ws, spec_file)
    notes: list[str] = []
    if len(case.images) > 1:
        notes.append(f"case {case.id} has {len(case.images)} images; the first, {case.images[0]}, is edited")
    source = np.asarray(open_image(source_path, what=f"case {case.id} image"))
    size = (source.shape[1], source.shape[0])
    mask = load_mask(ws, spec, size)
    if mask.note:
        notes.append(mask.note)
    if mask.coverage == 0.0:
        raise SpecError(f"spec {spec.id}: the mask is empty (no white pixels); paint the region to edit in white.")
    if mask.coverage == 1.0:
        raise SpecError(f"spec {spec.id}: the mask covers the whole image; leave the non-target content black.")

    # c. What particular engines need: the classical field and its asset, the imported file.
    asset = None
    if spec.classical and spec.classical.asset:
        asset = ws.confined(spec.classical.asset, base=ws.interventions_dir, what=f"spec {spec.id} field 'classical.asset'")
    if "classical" in chain:
        if spec.classical is None:
            raise SpecError(f"spec {spec.id} has no 'classical:' field, so the classical engine does not know what "
                            "to do. Add e.g. 'classical: {op: recolor, color: \"#2a7d3c\"}', or use another --engine.")
        if asset is not None:
            from cfkit.editors.classical import read_png_asset

            read_png_asset(asset, spec_id=spec.id)
    if input_path is not None:
        input_path = Path(input_path)
        open_image(input_path, what="--input")  # fail now, before the store is touched

    request = EditRequest(spec_id=spec.id, prompt=spec.prompt, image=source, mask=mask.array, n=n, seed=seed,
                          classical=spec.classical, asset=asset, import_path=input_path)
    previews = {name: _preview(ed, request) for name, ed in editors.items()}
    plan = EditPlan(spec_id=spec.id, spec_sha256=spec_file.sha256, case_id=case.id, prompt=spec.prompt,
                    source_path=source_path, source_size=size, mask_source=mask.source, mask_coverage=mask.coverage,
                    engines=tuple(chain), n=n, seed=seed, previews=previews, notes=tuple(notes))
    return _Prepared(plan=plan, request=request, editors=editors,
                     source_sha256=hashlib.sha256(source_path.read_bytes()).hexdigest(), mask_sha256=mask.sha256,
                     mask=mask.array)


def _check_arguments(engine: str, chain: tuple[str, ...], n: int, model: str | None,
                     input_path: Path | None) -> None:
    if n < 1:
        raise InputError(f"-n {n}: the number of candidates must be at least 1.")
    if engine in ("classical", "file") and n != 1:
        raise InputError(f"--engine {engine} makes one image per call; -n {n} would repeat it. Use -n 1.")
    if "openai" in chain and n > 10:
        raise InputError(f"-n {n}: the openai images API makes at most 10 images per call.")
    if model is not None and engine not in MODEL_ENGINES:
        raise InputError(f"--model sets the model of one engine ({', '.join(MODEL_ENGINES)}); "
                         f"with --engine {engine} name the engine explicitly, e.g. --engine openai --model NAME.")
    if input_path is not None and engine != "file":
        raise InputError("--input imports an edit made elsewhere and needs --engine file.")
    if engine == "file" and input_path is None:
        raise InputError("--engine file imports an edit made elsewhere; give the image with --input PATH.")


def _source_of(ws: Workspace, spec_file) -> tuple[Any, Path]:
    """The spec's case and the path of the image to edit (the case's first)."""
    from cfkit.specs import try_load_cases

    spec = spec_file.spec
    cases = try_load_cases(ws)
    if cases is None:
        raise CaseError(f"cases file {ws.cases_path} is missing; set [dataset] cases in {ws.config_path}.")
    if spec.case not in cases:
        raise SpecError(f"{spec_file.path}: field 'case': '{spec.case}' is not in {cases.path}. Fix the id.")
    case = cases.get(spec.case)
    return case, cases.image_paths(case)[0]


def _preview(editor: Editor, request: EditRequest) -> dict[str, Any]:
    """What the engine would send, for --dry-run; engines may offer ``describe(request)`` for this."""
    describe = getattr(editor, "describe", None)
    return dict(describe(request)) if callable(describe) else {}


def plan_edit(ws: Workspace, spec_id: str, **kwargs: Any) -> EditPlan:
    """The dry run: check inputs and say what would be sent, without calling or writing anything."""
    return prepare_edit(ws, spec_id, **kwargs).plan


# ── steps 2-5 ──────────────────────────────────────────────────────────────


def accepted_edit_id(store: Store, spec_id: str) -> int | None:
    """The edit id a person accepted for ``spec_id`` (newest review row wins), or None."""
    rows = store.query("SELECT decision, edit_id FROM reviews WHERE spec_id = ? ORDER BY id DESC LIMIT 1", (spec_id,))
    if rows and rows[0]["decision"] == "accept":
        return rows[0]["edit_id"]
    return None


def make_edit(ws: Workspace, spec_id: str, *, engine: str | None = None, n: int | None = None,
              seed: int | None = None, model: str | None = None,
              options: dict[str, dict[str, Any]] | None = None, input_path: Path | None = None,
              again: bool = False) -> EditOutcome:
    """Make, save, record and check ``n`` candidate edits of spec ``spec_id``.

    ``engine`` is a registered engine name or "auto" (default: cfkit.toml);
    ``options`` maps an engine name to its keyword options (model, quality,
    steps …) over cfkit.toml's defaults; ``model`` overrides the named engine's model.
    Raises :class:`EditRefused` (after recording it) on a refusal, and
    :class:`EditorUnavailable` naming every engine tried when none could run.
    """
    # 1. Inputs, all checked before anything is written.
    prep = prepare_edit(ws, spec_id, engine=engine, n=n, seed=seed, model=model, options=options,
                        input_path=input_path)
    plan = prep.plan

    # 2. An accepted edit stays; more candidates only when asked for.
    if ws.db_path.is_file() and not again:
        with Store(ws.db_path) as store:
            accepted = accepted_edit_id(store, plan.spec_id)
        if accepted is not None:
            raise InputError(
                f"spec {plan.spec_id} already has an accepted edit (#{accepted}); it is kept and stays selected. "
                "Pass --again to make more candidates anyway."
            )

    # 3. Run the engine or the chain.
    attempts: list[Attempt] = []
    result: EditResult | None = None
    started = now()
    for index, name in enumerate(plan.engines):
        last = index == len(plan.engines) - 1
        started = now()
        try:
            result = prep.editors[name].edit(prep.request)
        except EditorUnavailable as exc:
            attempts.append(Attempt(name, "unavailable", str(exc)))
            continue
        except EditorTransport as exc:
            attempts.append(Attempt(name, "unreachable", str(exc)))
            if last:
                with Store(ws.db_path) as store:
                    edit_id = _record_without_output(store, prep, name, "failed", str(exc), attempts, started)
                raise EditorTransport(f"{exc} (recorded as edit #{edit_id}, failed)") from exc
            continue
        except EditRefused as exc:
            attempts.append(Attempt(name, "refused", str(exc)))
            with Store(ws.db_path) as store:
                edit_id = _record_without_output(store, prep, name, "refused", str(exc), attempts, started)
            raise EditRefused(
                f"{exc} Recorded as edit #{edit_id} (refused); no other engine was tried. "
                f"Rephrase the prompt in interventions/{plan.spec_id}.yaml or choose another --engine."
            ) from exc
        except EditorError as exc:
            attempts.append(Attempt(name, "failed", str(exc)))
            with Store(ws.db_path) as store:
                edit_id = _record_without_output(store, prep, name, "failed", str(exc), attempts, started)
            raise EditorError(f"{exc} (recorded as edit #{edit_id}, failed)") from exc
        attempts.append(Attempt(name, "used"))
        break
    if result is None:
        tried = " ".join(f"({i}) {a.reason.rstrip('.')}." for i, a in enumerate(attempts, start=1))
        if len(plan.engines) > 1:
            offline = (f" or run 'cfkit edit {plan.spec_id} --engine classical' (offline)"
                       if prep.request.classical is not None else "")
            raise EditorUnavailable(f"auto: no engine could run here. Tried {tried} Fix one of them{offline}.")
        raise EditorUnavailable(attempts[0].reason or "the engine cannot run here")
    used = attempts[-1].engine

    # 4. Save each candidate with its provenance.
    self_notes = list(plan.notes) + list(result.notes)
    records: list[EditRecord] = []
    with Store(ws.db_path) as store:
        for candidate, raw in enumerate(result.images):
            records.append(_save_candidate(ws, store, prep, used, result, raw, candidate, attempts, started,
                                           self_notes))

        # 5. Check each new edit, when the check exists.
        checks, check_error = _run_checks(ws, store, [r.id for r in records])
        verdicts = {r.id: c["verdict"] + ("" if c["lpips"] else " (without LPIPS)")
                    for r in records if (c := latest_check(store, r.id)) is not None}
    return EditOutcome(plan=plan, records=records, attempts=attempts, notes=self_notes, checks=checks,
                       check_error=check_error, verdicts=verdicts)


def _fallback_text(attempts: list[Attempt]) -> str | None:
    skipped = [f"{a.engine} {a.outcome}: {a.reason}" for a in attempts if a.outcome in ("unavailable", "unreachable")]
    return "; ".join(skipped) or None


def _record_without_output(store: Store, prep: _Prepared, engine: str, status: str, error: str,
                           attempts: list[Attempt], started: str) -> int:
    editor = prep.editors[engine]
    with store.transaction() as conn:
        cursor = conn.execute(
            "INSERT INTO edits (spec_id, spec_sha256, candidate, engine, model, params, seed, prompt, source_sha256, "
            "mask_sha256, status, error, fallback, started_at, finished_at, label) "
            "VALUES (?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (prep.plan.spec_id, prep.plan.spec_sha256, engine, getattr(editor, "model", None),
             to_json({"preview": prep.plan.previews.get(engine, {}), "n": prep.plan.n}), prep.plan.seed,
             prep.plan.prompt, prep.source_sha256, prep.mask_sha256, status, error, _fallback_text(attempts),
             started, now(), LABEL),
        )
        return int(cursor.lastrowid)


def _save_candidate(ws: Workspace, store: Store, prep: _Prepared, engine: str, result: EditResult,
                    raw: np.ndarray, candidate: int, attempts: list[Attempt], started: str,
                    notes: list[str]) -> EditRecord:
    plan = prep.plan
    width, height = plan.source_size
    if raw.shape != (height, width, 3) or raw.dtype != np.uint8:
        raise EditorError(f"engine {engine} returned an image of shape {raw.shape} ({raw.dtype}); "
                          f"expected ({height}, {width}, 3) uint8. This is a bug in the engine.")
    params = dict(result.params)
    params.update({"n": plan.n, "case": plan.case_id, "source_image": plan.source_path.name,
                   "mask_source": plan.mask_source, "mask_coverage_pct": round(100 * plan.mask_coverage, 4),
                   "composite": {"dilate_px": COMPOSITE_DILATE_PX, "feather_px": COMPOSITE_FEATHER_PX}})
    if notes:
        params["notes"] = notes
    # The row comes first, so the id names the files; it says "failed" until the files exist.
    with store.transaction() as conn:
        cursor = conn.execute(
            "INSERT INTO edits (spec_id, spec_sha256, candidate, engine, model, params, seed, prompt, source_sha256, "
            "mask_sha256, status, error, fallback, usage, cost_usd, started_at, label) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'failed', 'interrupted before its files were written', ?, ?, ?, ?, ?)",
            (plan.spec_id, plan.spec_sha256, candidate, engine, result.model, to_json(params),
             None if result.seed is None else result.seed + candidate,
             plan.prompt, prep.source_sha256, prep.mask_sha256, _fallback_text(attempts),
             None if result.usage is None else to_json(result.usage), result.cost_usd, started, LABEL),
        )
        edit_id = int(cursor.lastrowid)
    folder = Path("edits") / plan.spec_id
    raw_rel = folder / f"{edit_id}-raw.png"
    comp_rel = folder / f"{edit_id}-composite.png"
    about = f"{LABEL}: cfkit edit #{edit_id} of spec {plan.spec_id}, engine {engine}"
    raw_png = labelled_png(raw, f"{about}, raw output")
    comp_png = labelled_png(composite(prep.request.image, raw, prep.mask), f"{about}, composite")
    try:
        write_bytes_atomic(ws.store_dir / raw_rel, raw_png, overwrite=False)
        write_bytes_atomic(ws.store_dir / comp_rel, comp_png, overwrite=False)
    except FileExistsError as exc:
        raise EditorError(f"{exc.filename} already exists and is never overwritten; move it aside "
                          "(the store may have been reset while edit files were kept).") from exc
    except OSError as exc:
        raise ImageError(f"cannot write edit files under {ws.edits_dir} ({exc.strerror}).") from exc
    with store.transaction() as conn:
        conn.execute(
            "UPDATE edits SET status = 'ok', error = NULL, raw_path = ?, raw_sha256 = ?, composite_path = ?, "
            "composite_sha256 = ?, finished_at = ? WHERE id = ?",
            (raw_rel.as_posix(), hashlib.sha256(raw_png).hexdigest(), comp_rel.as_posix(),
             hashlib.sha256(comp_png).hexdigest(), now(), edit_id),
        )
    return get_edit(ws, store, edit_id)


def _run_checks(ws: Workspace, store: Store, edit_ids: list[int]) -> tuple[dict[int, list] | None, str | None]:
    try:
        from cfkit.preserve import check_edit
    except ModuleNotFoundError as exc:
        if exc.name == "cfkit.preserve":
            return None, None
        raise
    checks: dict[int, list] = {}
    for edit_id in edit_ids:
        try:
            checks[edit_id] = check_edit(ws, store, edit_id)
        except CfkitError as exc:
            # The edit is saved; a check that cannot run is reported, not fatal.
            return checks, f"the preservation check could not run on edit #{edit_id}: {exc}"
    return checks, None


# ── reading edits back ─────────────────────────────────────────────────────


def get_edit(ws: Workspace, store: Store, edit_id: int) -> EditRecord:
    rows = store.query("SELECT * FROM edits WHERE id = ?", (edit_id,))
    if not rows:
        raise InputError(f"no edit #{edit_id} in {ws.db_path}. See 'cfkit edits list'.")
    return EditRecord.from_row(ws, rows[0])


def list_edits(ws: Workspace, store: Store, spec_ids: list[str] | None = None) -> list[EditRecord]:
    """Every recorded edit, oldest first, optionally only of ``spec_ids``."""
    if spec_ids:
        marks = ",".join("?" * len(spec_ids))
        rows = store.query(f"SELECT * FROM edits WHERE spec_id IN ({marks}) ORDER BY id", tuple(spec_ids))
    else:
        rows = store.query("SELECT * FROM edits ORDER BY id")
    return [EditRecord.from_row(ws, row) for row in rows]


def latest_check(store: Store, edit_id: int, variant: str = "composite") -> dict[str, Any] | None:
    rows = store.query("SELECT verdict, lpips, metrics, reasons FROM checks WHERE edit_id = ? AND variant = ? "
                       "ORDER BY id DESC LIMIT 1", (edit_id, variant))
    if not rows:
        return None
    row = rows[0]
    return {"verdict": row["verdict"], "lpips": bool(row["lpips"]), "metrics": json.loads(row["metrics"]),
            "reasons": json.loads(row["reasons"])}


def select_edit(ws: Workspace, store: Store, spec_id: str, *, require_accepted: bool = False) -> EditRecord | None:
    """The edit that stands for ``spec_id``.

    The edit a person accepted, when the spec's newest review is an accept;
    otherwise (unless ``require_accepted``) the newest successful edit whose
    composite passed its check and that no review rejected; otherwise None.
    """
    accepted = accepted_edit_id(store, spec_id)
    if accepted is not None:
        rows = store.query("SELECT * FROM edits WHERE id = ? AND status = 'ok'", (accepted,))
        if rows:
            return EditRecord.from_row(ws, rows[0])
    if require_accepted:
        return None
    rejected = {row["edit_id"] for row in store.query(
        "SELECT edit_id, decision FROM reviews r WHERE spec_id = ? AND edit_id IS NOT NULL AND id = "
        "(SELECT MAX(id) FROM reviews WHERE edit_id = r.edit_id)", (spec_id,)) if row["decision"] == "reject"}
    for row in store.query("SELECT * FROM edits WHERE spec_id = ? AND status = 'ok' ORDER BY id DESC", (spec_id,)):
        if row["id"] in rejected:
            continue
        check = latest_check(store, row["id"])
        if check is not None and check["verdict"] == "pass":
            return EditRecord.from_row(ws, row)
    return None
