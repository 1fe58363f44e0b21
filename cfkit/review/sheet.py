"""The contact sheet: every counterfactual pair on one page, laid out like the paper's Figure S8.

For each pair: the original and the edit (and, in the HTML, their
difference), the question, the intervention, the check's verdict, the review
decision, and each model's answer on the original and on the edit, each in a
box coloured by its agreement with that image's gold label. The answers come
from the newest stored counterfactual runs, or from predictions files
(``--predictions``, e.g. the published models' answers); ``--models`` chooses
which models and their order. An answer about another edit than the one
shown (given before a re-edit) is marked stale and judged neither right nor
wrong. Written twice: a self-contained HTML file (images inlined as base64,
every piece of text escaped) and a PNG (:mod:`cfkit.review.sheet_png`).
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from cfkit.errors import CfkitError, OutputError, SpecError, UsageError
from cfkit.files import write_bytes_atomic
from cfkit.edit_files import load_edit_images
from cfkit.review.sheet_records import THUMB, ModelAnswer, SheetPair, answer_text
from cfkit.review.panels import heat_colours, largest_change
from cfkit.specs import load_spec, spec_files, try_load_cases
from cfkit.judge.screen import doubts_said
from cfkit.store import Store, checks, edits, reviews, screens
from cfkit.workspace import Workspace

@dataclass(frozen=True)
class SheetFiles:
    html: Path
    png: Path
    pairs: int
    notes: list[str]


def _thumb(image: np.ndarray) -> np.ndarray:
    height, width = image.shape[:2]
    scale = THUMB / max(height, width)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return np.asarray(Image.fromarray(image).resize(size, Image.Resampling.LANCZOS))


def _answers(store: Store, predictions: Sequence[Any] | None, notes: list[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """pair -> model -> {condition: its prediction}, from ``predictions`` or the newest stored counterfactual runs."""
    from cfkit.predictions import predictions_from_store

    source = predictions if predictions is not None else predictions_from_store(store)
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for p in source:
        if p.suite == "counterfactual" and p.pair:
            table.setdefault(p.pair, {}).setdefault(p.model, {})[p.condition] = p
    if not table:
        notes.append("the predictions files hold no counterfactual answers; the sheet has no model answers."
                     if predictions is not None else
                     "no stored counterfactual probe runs yet; the sheet has no model answers.")
    return table


def _chosen_models(table: dict[str, dict[str, dict[str, Any]]], models: Sequence[str] | None) -> list[str]:
    known = sorted({m for by_model in table.values() for m in by_model})
    if not models:
        return known
    unknown = [m for m in models if m not in known]
    if unknown:
        raise UsageError(f"--models: no counterfactual answers from {unknown[0]!r} (models with answers: "
                         f"{', '.join(known) or 'none'}). Use the names as the predictions spell them.")
    return list(dict.fromkeys(models))


def collect_pairs(ws: Workspace, store: Store, spec_ids: list[str], *, models: Sequence[str] | None = None,
                  predictions: Sequence[Any] | None = None) -> tuple[list[SheetPair], list[str]]:
    """Everything the sheet shows, one :class:`SheetPair` per spec (all specs when ``spec_ids`` is empty).

    ``predictions`` (loaded from files) replace the stored runs as the source
    of answers; ``models`` chooses the models shown, in that order (default:
    every model with answers, by name).
    """
    notes: list[str] = []
    ids = spec_ids or [p.stem for p in spec_files(ws)]
    if not ids:
        raise SpecError(f"no spec files in {ws.interventions_dir}; nothing to put on a sheet.")
    cases = try_load_cases(ws)
    answers = _answers(store, predictions, notes)
    shown_models = _chosen_models(answers, models)
    pairs = []
    for spec_id in ids:
        spec = load_spec(ws, spec_id).spec
        case = cases.get(spec.case) if cases is not None and spec.case in cases else None
        base = dict(spec_id=spec_id, title=spec.title, case_id=spec.case, question=case.question if case else "",
                    cue=spec.cue, replacement=spec.replacement, gold_before=spec.labels.original,
                    gold_after=spec.labels.edit)
        shown = edits.shown(store, spec_id)
        edit_id = None if shown is None else shown.id
        chosen = edits.selected(store, spec_id)
        base["selected"] = chosen is not None and chosen.id == edit_id
        review = None if edit_id is None else reviews.on_edit(store, edit_id)
        decision = None if review is None else review.decision
        note = None if review is None else review.note
        by_model = answers.get(spec_id, {})
        model_answers = [_model_answer(m, by_model.get(m, {}), case, spec, edit_id) for m in shown_models
                         if models or m in by_model]
        if edit_id is None:
            pairs.append(SheetPair(**base, edit_id=None, pictures={}, verdict=None, decision=decision, note=note,
                                   answers=model_answers, problem="no edit yet"))
            continue
        try:
            images = load_edit_images(ws, store, edit_id, cases=cases)
        except CfkitError as exc:  # no pictures, but the edit's stored check stands (it said "not checked")
            stored = checks.latest(store, edit_id, None)
            pairs.append(SheetPair(**base, edit_id=edit_id, pictures={}, verdict=None if stored is None else
                                   stored.label, decision=decision, note=note, answers=model_answers,
                                   problem=str(exc)))
            continue
        variant = "composite" if "composite" in images.outputs else next(iter(images.outputs))
        edited = images.outputs[variant]
        diff = largest_change(images.original, edited)
        check = checks.latest(store, edit_id, variant)
        judge = doubts_said(screens.answers(store, [edit_id]))
        pairs.append(SheetPair(
            **base, edit_id=edit_id,
            pictures={"original": _thumb(images.original), "edit": _thumb(edited), "difference": _thumb(heat_colours(diff))},
            verdict=None if check is None else check.label, decision=decision, note=note, answers=model_answers,
            judge=judge,
        ))
    return pairs, notes


def _model_answer(model: str, by_condition: dict[str, Any], case, spec, shown_edit: int | None) -> ModelAnswer:
    """One model's before/after answers on a pair, the 'after' one marked stale when it is about another edit."""
    def answer(condition: str) -> str | None:
        p = by_condition.get(condition)
        return None if p is None else p.answer

    def text(condition: str) -> str | None:
        value = answer(condition)
        if value is None or case is None:
            return value
        return next((o.text for o in case.options if o.id == value), value)

    def correct(condition: str, label: str) -> bool:
        return case is not None and answer(condition) is not None and answer(condition) == case.option_for_label(label)

    after = by_condition.get("edit")
    after_edit = None if after is None else after.edit_id
    stale = after_edit is not None and after_edit != shown_edit
    return ModelAnswer(model, text("original"), text("edit"), correct("original", spec.labels.original),
                       correct("edit", spec.labels.edit) and not stale, after_edit_id=after_edit, stale=stale,
                       before_given="original" in by_condition, after_given=after is not None)


# ── HTML ───────────────────────────────────────────────────────────────────

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
.pair{border:1px solid #ccc;border-radius:6px;padding:.8em;margin:0 0 1.2em 0}
.pics{display:flex;gap:.5em;align-items:flex-start}.pics figure{margin:0}.pics img{max-width:256px;display:block}
figcaption{font-size:.8em;color:#555}
table{border-collapse:collapse;margin-top:.5em}td,th{border:1px solid #ddd;padding:.2em .5em;font-size:.9em}
.ok{background:#cfe3f2;border:2px solid #0072b2}.bad{background:#fbd9bf;border:2px solid #d55e00}
.stale,.absent{background:#eee;color:#666;font-style:italic}
.pass{color:#0072b2}.fail{color:#d55e00}.muted{color:#777}
.key span{display:inline-block;padding:0 .4em;margin-right:.6em}
"""

_LEGEND = ("<p class='key'><span class='ok'>agrees with the image's gold label</span>"
           "<span class='bad'>disagrees (or no valid answer)</span>"
           "<span class='stale'>stale or not asked: judged neither way</span></p>")


def _img_tag(image: np.ndarray, alt: str) -> str:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG", optimize=True)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def render_html(pairs: list[SheetPair], *, title: str = "cfkit contact sheet") -> str:
    """A self-contained HTML page; every string from specs, cases, predictions and the store is escaped."""
    e = html.escape
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{e(title)}</h1>",
             "<p class='muted'>Edited images are synthetic counterfactual diagnostics.</p>", _LEGEND]
    for p in pairs:
        parts.append(f"<section class='pair' id='{e(p.spec_id)}'>")
        parts.append(f"<h2>{e(p.spec_id)} · {e(p.title)} <span class='muted'>(case {e(p.case_id)}"
                     + (f", {e(p.edit_label)}" if p.edit_id is not None else "") + ")</span></h2>")
        if p.question:
            parts.append(f"<p><b>Question:</b> {e(p.question)}</p>")
        if p.pictures:
            captions = {"original": f"original · gold {p.gold_before}", "edit": f"edit · gold {p.gold_after}",
                        "difference": "difference"}
            parts.append("<div class='pics'>")
            for name, image in p.pictures.items():
                parts.append(f"<figure>{_img_tag(image, f'{p.spec_id} {name}')}"
                             f"<figcaption>{e(captions.get(name, name))}</figcaption></figure>")
            parts.append("</div>")
        parts.append(f"<p><b>Intervention:</b> replace {e(p.cue)} with {e(p.replacement)} "
                     f"(gold {e(p.gold_before)} → {e(p.gold_after)})</p>")
        if p.problem:
            parts.append(f"<p class='fail'>{e(p.problem)}</p>")
        if p.judge:
            parts.append(f"<p class='fail'>{e(p.judge)} (a flag for you, not a verdict)</p>")
        verdict_class = "pass" if (p.verdict or "").startswith("pass") else "fail"
        parts.append(f"<p><b>Check:</b> <span class='{verdict_class}'>{e(p.verdict or 'not checked')}</span> · "
                     f"<b>Review:</b> {e(p.decision or 'not reviewed')}"
                     + (f" — {e(p.note)}" if p.note else "") + "</p>")
        if p.answers:
            parts.append(f"<table><tr><th>model</th><th>original (gold {e(p.gold_before)})</th>"
                         f"<th>edit (gold {e(p.gold_after)})</th></tr>")
            for a in p.answers:
                parts.append(f"<tr><td>{e(a.model)}</td>"
                             f"<td class='{a.before_state}'>{e(answer_text(a, 'before'))}</td>"
                             f"<td class='{a.after_state}'>{e(answer_text(a, 'after'))}</td></tr>")
            parts.append("</table>")
        parts.append("</section>")
    parts.append("</body></html>\n")
    return "".join(parts)


# ── writing ────────────────────────────────────────────────────────────────


def default_sheet_path(ws: Workspace) -> Path:
    """``sheets/sheet-STAMP.html``, or ``sheet-STAMP-2.html`` … when a sheet of the same second is there (two
    sheets made within a second must not refuse over a name nobody gave)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    folder = ws.store_dir / "sheets"
    path, k = folder / f"sheet-{stamp}.html", 1
    while path.exists() or path.with_suffix(".png").exists():
        k += 1
        path = folder / f"sheet-{stamp}-{k}.html"
    return path


def write_sheet(ws: Workspace, spec_ids: list[str], output: Path | None = None, *, overwrite: bool = False,
                models: Sequence[str] | None = None, prediction_paths: Sequence[Path | str] = ()) -> SheetFiles:
    """Write the HTML sheet and the PNG beside it (same name, ``.png``); existing files are kept unless ``overwrite``.

    With ``prediction_paths`` the answers come from those predictions files
    (checked against the workspace's cases and specs) instead of the store.
    """
    from cfkit.review.sheet_png import render_png

    html_path = output or default_sheet_path(ws)
    if html_path.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"--output {html_path}: give a file name ending in .html; the PNG is written beside it.")
    png_path = html_path.with_suffix(".png")
    if not overwrite:
        for path in (html_path, png_path):
            if path.exists():
                raise OutputError(f"{path} already exists; choose another --output or pass --force to replace it.")
    predictions = None
    if prediction_paths:
        from cfkit.predictions import load_predictions
        from cfkit.specs import load_spec_file

        pairs = {path.stem: load_spec_file(path).spec.case for path in spec_files(ws)}
        predictions = load_predictions(prediction_paths, cases=try_load_cases(ws), pairs=pairs)
    with Store(ws.db_path) as store:
        pairs_shown, notes = collect_pairs(ws, store, spec_ids, models=models, predictions=predictions)
    title = f"Counterfactual pairs · {ws.root.name}"
    page = render_html(pairs_shown, title=title)
    buf = io.BytesIO()
    render_png(pairs_shown, title=title).save(buf, format="PNG", optimize=True)
    try:
        write_bytes_atomic(html_path, page.encode("utf-8"), overwrite=overwrite)
        write_bytes_atomic(png_path, buf.getvalue(), overwrite=overwrite)
    except FileExistsError as exc:
        raise OutputError(f"{exc.filename or html_path} appeared while writing; choose another --output.") from exc
    except OSError as exc:
        raise OutputError(f"cannot write the sheet to {html_path.parent} ({exc.strerror}); choose another --output.") from exc
    return SheetFiles(html=html_path, png=png_path, pairs=len(pairs_shown), notes=notes)
