"""The contact sheet: every counterfactual pair on one page, like the paper's Figure S8.

For each pair: the original, the edit, their difference (heat map), the
check's verdict, the review decision, and — once probe runs are stored — each
model's answer on the original and on the edit, marked right or wrong against
the spec's labels. An answer about another edit than the one shown (given
before a re-edit) is marked stale and judged neither right nor wrong. Written twice: a self-contained HTML file (images inlined as
base64, every piece of text escaped) and a PNG grid.
"""

from __future__ import annotations

import base64
import html
import io
import textwrap
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from cfkit.errors import CfkitError, OutputError, SpecError, UsageError
from cfkit.files import write_bytes_atomic
from cfkit.preserve import load_edit_images
from cfkit.review.panels import heat_colours, largest_change
from cfkit.specs import load_spec, spec_files, try_load_cases
from cfkit.store import Store, checks, edits, reviews
from cfkit.workspace import Workspace

#: Longest side of each picture on the sheet, in pixels.
THUMB = 256


@dataclass(frozen=True)
class ModelAnswer:
    model: str
    before: str | None  # the option text answered on the original (None: no valid answer)
    after: str | None
    before_ok: bool
    after_ok: bool
    after_edit_id: int | None = None  # the edit the 'after' answer was given on, when recorded
    stale: bool = False  # the 'after' answer is about another edit than the one the sheet shows


@dataclass(frozen=True)
class SheetPair:
    spec_id: str
    title: str
    case_id: str
    question: str
    cue: str
    replacement: str
    gold_before: str  # "No" / "Yes", from the spec's labels
    gold_after: str
    edit_id: int | None
    pictures: dict[str, np.ndarray]  # original / edit / difference thumbnails (uint8 RGB); empty without an edit
    verdict: str | None
    decision: str | None
    note: str | None
    answers: list[ModelAnswer] = field(default_factory=list)
    problem: str | None = None  # why the pair could not be drawn
    selected: bool = False  # the edit shown is the spec's selected edit (else no edit is selected: the newest is shown)

    @property
    def edit_label(self) -> str:
        """``edit #12 (selected)`` / ``edit #14 (none selected; the newest)`` / ``no edit``."""
        if self.edit_id is None:
            return "no edit"
        return f"edit #{self.edit_id} " + ("(selected)" if self.selected else "(none selected; the newest)")


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


def _answers(store: Store, notes: list[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """pair -> model -> {condition: its prediction} from the newest stored counterfactual runs."""
    try:
        from cfkit.predictions import predictions_from_store
    except ModuleNotFoundError:
        notes.append("model answers left out: cfkit.predictions is not installed.")
        return {}
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for p in predictions_from_store(store):
        if p.suite == "counterfactual" and p.pair:
            table.setdefault(p.pair, {}).setdefault(p.model, {})[p.condition] = p
    if not table:
        notes.append("no stored counterfactual probe runs yet; the sheet has no model answers.")
    return table


def collect_pairs(ws: Workspace, store: Store, spec_ids: list[str]) -> tuple[list[SheetPair], list[str]]:
    """Everything the sheet shows, one :class:`SheetPair` per spec (all specs when ``spec_ids`` is empty)."""
    notes: list[str] = []
    ids = spec_ids or [p.stem for p in spec_files(ws)]
    if not ids:
        raise SpecError(f"no spec files in {ws.interventions_dir}; nothing to put on a sheet.")
    cases = try_load_cases(ws)
    answers = _answers(store, notes)
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
        model_answers = [_model_answer(model, by_condition, case, spec, edit_id)
                         for model, by_condition in sorted(answers.get(spec_id, {}).items())]
        if edit_id is None:
            pairs.append(SheetPair(**base, edit_id=None, pictures={}, verdict=None, decision=decision, note=note,
                                   answers=model_answers, problem="no edit yet"))
            continue
        try:
            images = load_edit_images(ws, store, edit_id)
        except CfkitError as exc:
            pairs.append(SheetPair(**base, edit_id=edit_id, pictures={}, verdict=None, decision=decision, note=note,
                                   answers=model_answers, problem=str(exc)))
            continue
        variant = "composite" if "composite" in images.outputs else next(iter(images.outputs))
        edited = images.outputs[variant]
        diff = largest_change(images.original, edited)
        check = checks.latest(store, edit_id, variant)
        pairs.append(SheetPair(
            **base, edit_id=edit_id,
            pictures={"original": _thumb(images.original), "edit": _thumb(edited), "difference": _thumb(heat_colours(diff))},
            verdict=None if check is None else check.label, decision=decision, note=note, answers=model_answers,
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
        return case is not None and answer(condition) == case.option_for_label(label)

    after = by_condition.get("edit")
    after_edit = None if after is None else after.edit_id
    stale = after_edit is not None and after_edit != shown_edit
    return ModelAnswer(model, text("original"), text("edit"), correct("original", spec.labels.original),
                       correct("edit", spec.labels.edit) and not stale, after_edit_id=after_edit, stale=stale)


def _after_cell(a: ModelAnswer) -> str:
    if a.stale:
        return f"{a.after or 'no answer'} (stale: about edit #{a.after_edit_id}, not this one)"
    return a.after or "no answer"


# ── HTML ───────────────────────────────────────────────────────────────────

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
.pair{border:1px solid #ccc;border-radius:6px;padding:.8em;margin:0 0 1.2em 0}
.pics{display:flex;gap:.5em}.pics figure{margin:0}.pics img{max-width:256px;display:block}
figcaption{font-size:.8em;color:#666}.ok{background:#d8f5d8}.bad{background:#f8d8d8}
table{border-collapse:collapse;margin-top:.5em}td,th{border:1px solid #ddd;padding:.2em .5em;font-size:.9em}
.pass{color:#1a7f1a}.fail{color:#b00}.muted{color:#888}.stale{background:#eee;color:#777;font-style:italic}
"""


def _img_tag(image: np.ndarray, alt: str) -> str:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG", optimize=True)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def render_html(pairs: list[SheetPair], *, title: str = "cfkit contact sheet") -> str:
    """A self-contained HTML page; every string from specs, cases and the store is escaped."""
    e = html.escape
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{e(title)}</h1>",
             "<p class='muted'>Edited images are synthetic counterfactual diagnostics.</p>"]
    for p in pairs:
        parts.append(f"<section class='pair' id='{e(p.spec_id)}'>")
        parts.append(f"<h2>{e(p.spec_id)} · {e(p.title)} <span class='muted'>(case {e(p.case_id)}"
                     + (f", {e(p.edit_label)}" if p.edit_id is not None else "") + ")</span></h2>")
        if p.question:
            parts.append(f"<p><b>Question:</b> {e(p.question)}</p>")
        parts.append(f"<p><b>Intervention:</b> replace {e(p.cue)} with {e(p.replacement)} "
                     f"(gold {e(p.gold_before)} → {e(p.gold_after)})</p>")
        if p.pictures:
            parts.append("<div class='pics'>")
            for name, image in p.pictures.items():
                parts.append(f"<figure>{_img_tag(image, f'{p.spec_id} {name}')}<figcaption>{e(name)}</figcaption></figure>")
            parts.append("</div>")
        if p.problem:
            parts.append(f"<p class='fail'>{e(p.problem)}</p>")
        verdict_class = "pass" if (p.verdict or "").startswith("pass") else "fail"
        parts.append(f"<p><b>Check:</b> <span class='{verdict_class}'>{e(p.verdict or 'not checked')}</span> · "
                     f"<b>Review:</b> {e(p.decision or 'not reviewed')}"
                     + (f" — {e(p.note)}" if p.note else "") + "</p>")
        if p.answers:
            parts.append(f"<table><tr><th>model</th><th>original (gold {e(p.gold_before)})</th>"
                         f"<th>edit (gold {e(p.gold_after)})</th></tr>")
            for a in p.answers:
                parts.append(f"<tr><td>{e(a.model)}</td>"
                             f"<td class='{'ok' if a.before_ok else 'bad'}'>{e(a.before or 'no answer')}</td>"
                             f"<td class='{'stale' if a.stale else 'ok' if a.after_ok else 'bad'}'>"
                             f"{e(_after_cell(a))}</td></tr>")
            parts.append("</table>")
        parts.append("</section>")
    parts.append("</body></html>\n")
    return "".join(parts)


# ── PNG ────────────────────────────────────────────────────────────────────

#: Pairs per row of the PNG grid.
PNG_COLUMNS = 2
_GAP = 8
_LINE = 16


def _text_lines(p: SheetPair, width_chars: int) -> list[tuple[str, tuple[int, int, int]]]:
    black, green, red, grey = (20, 20, 20), (20, 120, 20), (180, 20, 20), (110, 110, 110)
    lines = [(f"{p.spec_id} · {p.title} (case {p.case_id}, {p.edit_label})", black)]
    lines += [(line, grey) for line in textwrap.wrap(f"replace {p.cue} with {p.replacement}", width_chars)[:2]]
    verdict = p.verdict or "not checked"
    lines.append((f"check: {verdict} · review: {p.decision or 'not reviewed'}",
                  green if verdict.startswith("pass") else red))
    if p.problem:
        lines.append((textwrap.shorten(p.problem, width_chars), red))
    for a in p.answers:
        # Plain ASCII marks: the default font has no arrows or check marks.
        after = (f"{a.after or 'none'} (stale: edit #{a.after_edit_id})" if a.stale
                 else f"{a.after or 'none'}{'' if a.after_ok else ' (wrong)'}")
        marks = f"{a.before or 'none'}{'' if a.before_ok else ' (wrong)'} -> {after}"
        ok = a.before_ok and a.after_ok
        lines.append((textwrap.shorten(f"{a.model}: {marks}", width_chars),
                      grey if a.stale else green if ok else red))
    return lines


def render_png(pairs: list[SheetPair]) -> Image.Image:
    """A grid of pairs, ``PNG_COLUMNS`` across: three pictures above each pair's text."""
    font = ImageFont.load_default(size=13)
    tile_w = 3 * THUMB + 2 * _GAP
    max_lines = max(len(_text_lines(p, tile_w // 7)) for p in pairs)
    pic_h = max((im.shape[0] for p in pairs for im in p.pictures.values()), default=THUMB)
    tile_h = pic_h + _GAP + max_lines * _LINE + 2 * _GAP
    cols = min(PNG_COLUMNS, len(pairs))
    rows = (len(pairs) + cols - 1) // cols
    sheet = Image.new("RGB", (cols * tile_w + (cols + 1) * 2 * _GAP, rows * tile_h + (rows + 1) * _GAP), "white")
    draw = ImageDraw.Draw(sheet)
    for index, p in enumerate(pairs):
        x0 = 2 * _GAP + (index % cols) * (tile_w + 2 * _GAP)
        y0 = _GAP + (index // cols) * (tile_h + _GAP)
        for k, name in enumerate(("original", "edit", "difference")):
            if name in p.pictures:
                sheet.paste(Image.fromarray(p.pictures[name]), (x0 + k * (THUMB + _GAP), y0))
            else:
                draw.rectangle([x0 + k * (THUMB + _GAP), y0, x0 + k * (THUMB + _GAP) + THUMB - 1, y0 + pic_h - 1],
                               outline=(200, 200, 200))
        y = y0 + pic_h + _GAP
        for text, colour in _text_lines(p, tile_w // 7):
            draw.text((x0, y), text, fill=colour, font=font)
            y += _LINE
    return sheet


# ── writing ────────────────────────────────────────────────────────────────


def default_sheet_path(ws: Workspace) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return ws.store_dir / "sheets" / f"sheet-{stamp}.html"


def write_sheet(ws: Workspace, spec_ids: list[str], output: Path | None = None, *,
                overwrite: bool = False) -> SheetFiles:
    """Write the HTML sheet and the PNG beside it (same name, ``.png``); existing files are kept unless ``overwrite``."""
    html_path = output or default_sheet_path(ws)
    if html_path.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"--output {html_path}: give a file name ending in .html; the PNG is written beside it.")
    png_path = html_path.with_suffix(".png")
    if not overwrite:
        for path in (html_path, png_path):
            if path.exists():
                raise OutputError(f"{path} already exists; choose another --output or pass --force to replace it.")
    with Store(ws.db_path) as store:
        pairs, notes = collect_pairs(ws, store, spec_ids)
    page = render_html(pairs, title=f"Counterfactual pairs · {ws.root.name}")
    buf = io.BytesIO()
    render_png(pairs).save(buf, format="PNG", optimize=True)
    try:
        write_bytes_atomic(html_path, page.encode("utf-8"), overwrite=overwrite)
        write_bytes_atomic(png_path, buf.getvalue(), overwrite=overwrite)
    except FileExistsError as exc:
        raise OutputError(f"{exc.filename or html_path} appeared while writing; choose another --output.") from exc
    except OSError as exc:
        raise OutputError(f"cannot write the sheet to {html_path.parent} ({exc.strerror}); choose another --output.") from exc
    return SheetFiles(html=html_path, png=png_path, pairs=len(pairs), notes=notes)
