"""The view's pages: each a path, a content type and its bytes, rendered on demand or all at once for export.

Every page is a plain HTML file with relative links, so the same bytes work
served on loopback and opened from a folder. Templates are Jinja2 with
autoescaping on; text from a model, a case or a user goes through
:func:`cfkit.visible.visible` first, so escape sequences show as their
control pictures. No page holds a script.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

from cfkit.errors import CfkitError, OutputError
from cfkit.files import write_bytes_atomic
from cfkit.money import Cost, abandoned_note, spent
from cfkit.view.data import FILTERS, Answer, ViewData
from cfkit.visible import visible

#: Cases on one page of a case list (a page stays far under 1 MB).
PAGE_SIZE = 100
#: The longest thumbnail side, in pixels, of an image shown on a page.
THUMB = 480
#: Characters of a reply shown on the case page; the whole reply is one link away.
PREVIEW = 600
#: The mark after an answer on the pairs page that the report counts right or wrong, as on a case page.
MARKS = {"ok": "✓", "bad": "✗"}


@dataclass(frozen=True)
class Page:
    path: str
    content_type: str
    body: bytes


def _environment():
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    folder = resources.files("cfkit") / "templates" / "view"
    env = Environment(loader=FileSystemLoader(str(folder)), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["visible"] = lambda value: "" if value is None else visible(str(value))
    return env


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:16]


def _png(image) -> bytes:
    from PIL import Image

    picture = Image.fromarray(image) if not isinstance(image, Image.Image) else image
    picture.thumbnail((THUMB, THUMB))
    buffer = io.BytesIO()
    picture.convert("RGB").save(buffer, format="PNG", optimize=False)
    return buffer.getvalue()


class Site:
    """Every page of one workspace's view (rendered when asked for, each at most once)."""

    def __init__(self, data: ViewData, studies: tuple[Any, ...] = (), checks: Any = None):
        self.data = data
        self.studies = studies  # cfkit.study.file.Study of each --study FILE: the study page shows them
        self.env = _environment()
        self._raw: dict[str, tuple[str, Answer]] = {}
        from cfkit.view.study import RecentChecks

        # The study page's check of its servers, reused while recent (by the next reading's site too).
        self._checks = checks if checks is not None else RecentChecks()

    # ── routing ─────────────────────────────────────────────────────────────

    def page(self, path: str) -> Page | None:
        """The page at ``path`` (as linked from another page), or None when there is none."""
        path = path.lstrip("/") or "index.html"
        fixed: dict[str, Callable[[], Page]] = {"index.html": self._index, "report.html": self._report,
                                                "pairs.html": self._pairs, "audit.html": self._audit,
                                                "view.css": self._css}
        if self.studies:
            fixed["study.html"] = self._study
        if path in fixed:
            return fixed[path]()
        name, _, ext = path.rpartition(".")
        kind, _, rest = name.partition("-")
        if ext == "html" and kind == "cases":
            filter_name, _, number = rest.rpartition("-")
            if filter_name in FILTERS and number.isdigit():
                return self._cases(filter_name, int(number))
        if ext == "html" and kind == "case" and rest in self.data.case_ids:
            return self._case(rest)
        if ext == "txt" and kind == "raw" and rest in self.raw_index:
            return self._raw_page(rest)
        if ext == "png" and kind == "img":
            return self._image(rest)
        return None

    def paths(self) -> Iterator[str]:
        """Every page's path, for a static export."""
        yield from ("index.html", "report.html", "pairs.html", "audit.html", "view.css")
        if self.studies:
            yield "study.html"
        for name in FILTERS:
            for number in range(1, self._page_count(self.data.filtered(name)) + 1):
                yield f"cases-{name}-{number}.html"
        for case_id in self.data.case_ids:
            yield f"case-{case_id}.html"
        yield from (f"raw-{key}.txt" for key in self.raw_index)
        for case_id in self.data.case_ids:
            case = self.data.case(case_id)
            if case is not None:
                yield from (f"img-case-{case_id}-{k}.png" for k in range(len(case.images)))
        for pair in self.pairs:
            if pair.pictures:
                yield from (f"img-pair-{pair.spec_id}-{kind}.png" for kind in pair.pictures)

    # ── pages ───────────────────────────────────────────────────────────────

    def _html(self, template: str, path: str, **context: Any) -> Page:
        body = self.env.get_template(template).render(ws=self.data.ws, notes=self.data.notes, filters=FILTERS,
                                                      current=path, studies=len(self.studies),
                                                      read_at=self.data.read_at, **context)
        return Page(path, "text/html; charset=utf-8", body.encode("utf-8"))

    def _css(self) -> Page:
        css = (resources.files("cfkit") / "templates" / "view" / "view.css").read_bytes()
        return Page("view.css", "text/css; charset=utf-8", css)

    def _index(self) -> Page:
        from cfkit.report.standing import stale_groups
        from cfkit.store.leases import GONE, RESUME

        gone = (f"A run shown as {GONE} was stopped before it could record how it ended; {RESUME}."
                if GONE in self.data.statuses.values() else None)
        return self._html("runs.html", "index.html", runs=self.data.runs, statuses=self.data.statuses, gone=gone,
                          servers_said=self.data.servers_said, in_report=self.data.in_report,
                          not_clean=self.data.not_clean, standings=self.data.standings,
                          fresh={run for run, s in self.data.standings.items() if s.stale == 0},
                          spent=spent, cost_of=Cost.of_run, abandoned_note=abandoned_note, stale_groups=stale_groups)

    def _study(self) -> Page:
        from cfkit.view.study import study_shown

        shown = [study_shown(self.data.ws, study, self._checks) for study in self.studies]
        return self._html("study.html", "study.html", shown=shown, run_ids={r.id for r in self.data.runs},
                          keep_s=self._checks.keep_s)

    def _report(self) -> Page:
        report, problem = self.data.report
        tables = []
        if report is not None:
            from cfkit.report import display_tables

            tables = display_tables(report, reference=True)
        return self._html("report.html", "report.html", tables=tables, problem=problem,
                          said=report.said() if report is not None else [])

    @staticmethod
    def _page_count(ids: list[str]) -> int:
        return max(1, -(-len(ids) // PAGE_SIZE))

    def _cases(self, name: str, number: int) -> Page | None:
        ids = self.data.filtered(name)
        pages = self._page_count(ids)
        if not 1 <= number <= pages:
            return None
        shown = ids[(number - 1) * PAGE_SIZE:number * PAGE_SIZE]
        problem = self.data.report[1]
        rows = []
        for case_id in shown:
            answers = self.data.answers.get(case_id, [])
            case = self.data.case(case_id)
            # No report, no counts: a dash, never a 0 that reads as counted (the page says why).
            right, wrong, invalid = ("—",) * 3 if problem else self.data.tallies.get(case_id, (0, 0, 0))
            rows.append({"id": case_id, "question": case.question if case else "", "right": right, "wrong": wrong,
                         "invalid": invalid, "n": len(answers)})
        return self._html("cases.html", f"cases-{name}-{number}.html", rows=rows, name=name, number=number, pages=pages,
                          total=len(ids), report_problem=problem)

    def _case(self, case_id: str) -> Page:
        case = self.data.case(case_id)
        answers = self.data.answers.get(case_id, [])
        raw_keys = {id(a): key for key, (_, a) in self.raw_index.items() if a.reply.case_id == case_id}
        shown = [{"a": a, "raw_key": raw_keys.get(id(a)),
                  "preview": (a.reply.raw or "")[:PREVIEW], "cut": len(a.reply.raw or "") > PREVIEW}
                 for a in answers]
        return self._html("case.html", f"case-{case_id}.html", case_id=case_id, case=case, answers=shown,
                          left_out=_left_out(answers),
                          swap_inconsistent=self.data.swap_inconsistent(case_id),
                          missing=self.data.missing.get(case_id, []), report_problem=self.data.report[1],
                          images=range(len(case.images)) if case else range(0))

    @cached_property
    def raw_index(self) -> dict[str, tuple[str, Answer]]:
        """Each stored reply with a raw text, by a short digest of its run and unit."""
        index = {}
        for answers in self.data.answers.values():
            for a in answers:
                if a.reply.raw is not None:
                    key = _digest(a.run_id, a.reply.case_id, a.pair_id, a.condition)
                    index[key] = (a.reply.raw, a)
        return index

    def _raw_page(self, key: str) -> Page:
        raw, _ = self.raw_index[key]
        return Page(f"raw-{key}.txt", "text/plain; charset=utf-8", visible(raw).encode("utf-8"))

    @cached_property
    def pairs(self) -> list:
        from cfkit.review.sheet import collect_pairs
        from cfkit.specs import spec_files
        from cfkit.store import open_store

        if not self.data.ws.db_path.is_file() or not spec_files(self.data.ws):
            return []
        runs = self.data.pair_runs()
        try:
            with open_store(self.data.ws.db_path) as store:
                from cfkit.predictions import predictions_from_store

                # The answers of the runs the case pages show: the report's, else the left-out one, marked.
                pairs, notes = collect_pairs(self.data.ws, store, [], predictions=predictions_from_store(
                    store, list(runs)) if runs else None)
        except CfkitError as exc:
            self.data.notes.append(f"the counterfactual pairs could not be read: {exc}")
            return []
        self.data.notes.extend(notes)
        self._add_unasked(pairs)
        return pairs

    def _add_unasked(self, pairs: list) -> None:
        """A row for each model the report counts wrong on a pair it has no answer for (its run skipped the pair,
        or stopped before it): the report's numbers count it, so the pairs page shows it, as not asked."""
        from cfkit.review.sheet_records import ModelAnswer

        for pair in pairs:
            shown = {a.model for a in pair.answers}
            unasked = sorted({model for pair_id, model, _ in self._pair_missing if pair_id == pair.spec_id} - shown)
            if unasked:
                pair.answers.extend(ModelAnswer(model, None, None, False, False, before_given=False,
                                                after_given=False) for model in unasked)
                pair.answers.sort(key=lambda a: a.model)

    @cached_property
    def checks(self) -> dict[str, dict[str, Any]]:
        """The figures of each shown edit's latest check, by spec id (what the check line of the page prints)."""
        from cfkit.store import checks, open_store, screens

        found = {}
        if not self.pairs:
            return found
        with open_store(self.data.ws.db_path) as store:
            for pair in self.pairs:
                if pair.edit_id is None:
                    continue
                check = checks.latest(store, pair.edit_id, "composite") or checks.latest(store, pair.edit_id, "raw")
                doubts = [a for a in screens.answers(store, [pair.edit_id]) if a.doubts]
                if doubts:
                    found.setdefault(pair.spec_id, {"reasons": []})["judge"] = [
                        f"{a.judge}: {a.question} ({a.answer or 'no valid answer'}, expected {a.expected})"
                        for a in doubts]
                if check is not None:
                    m = check.metrics
                    found.setdefault(pair.spec_id, {}).update({"SSIM outside": m.get("ssim_out"), "PSNR outside (dB)": m.get("psnr_out"),
                                           "LPIPS outside": m.get("lpips_out"), "change inside": m.get("mad_in"),
                                           "leaks": m.get("leak_count"), "reasons": check.reasons})
        return found

    def _pairs(self) -> Page:
        return self._html("pairs.html", "pairs.html", pairs=self.pairs, box=self._box, said=self._pair_said,
                          left=self._pair_left_lines,
                          checks=self.checks)

    @cached_property
    def _pair_missing(self) -> dict[tuple[str, str, str], Any]:
        """The report's missing counterfactual units, by (pair, model, condition)."""
        return {(m.pair, m.model, m.condition): m for units in self.data.missing.values() for m in units
                if m.suite == "counterfactual" and m.pair}

    def _box(self, pair, answer, side: str) -> tuple[str, str]:
        """What one answer box on the pairs page says, and its state: as the contact sheet draws it, unless the
        report counts the unit wrong for want of a usable answer (a stale one: the case, its image or the edit
        changed since), which the box then says."""
        from cfkit.review.sheet_records import answer_text

        text = answer_text(answer, side)
        state = answer.before_state if side == "before" else answer.after_state
        left_out = self._pair_left_out.get(answer.model)
        if left_out is not None and state != "absent":
            return f"{text} ({left_out})", "left-out"
        m = self._pair_missing.get((pair.spec_id, answer.model, "original" if side == "before" else "edit"))
        if m is None or state == "stale":
            return f"{text} {MARKS[state]}" if state in MARKS else text, state  # not by its colour alone
        return f"{text} ({m.reason}: counted wrong)", "stale" if m.reason == "stale" else "bad"

    @cached_property
    def _pair_left_out(self) -> dict[str, str]:
        """By model, why the report's numbers leave out its answers on the pairs page."""
        runs = {r.id: r for r in self.data.runs}
        return {runs[run].model: why for run, why in self.data.pair_runs().items() if why is not None}

    def _pair_left_lines(self, pair) -> list[str]:
        """Whose answers on this pair the report's numbers leave out, and why: a line per model."""
        shown = {a.model for a in pair.answers}
        return [f"{model}: {why}" for model, why in sorted(self._pair_left_out.items()) if model in shown]

    def _pair_said(self, pair) -> list[str]:
        """Why the report counts answers on this pair wrong, once per reason with an example (the case page lists
        every unit)."""
        said: dict[str, str] = {}
        for (pair_id, model, _), m in self._pair_missing.items():
            if pair_id == pair.spec_id and m.reason not in said:
                said[m.reason] = f"{m.reason}: {model}: {m.detail}" if m.detail else f"{m.reason}: {model}"
        return list(said.values())

    def _outlined(self, pair) -> Any:
        """The pair's difference picture with the spec's mask drawn round in yellow (the picture alone if no mask)."""
        import numpy as np

        picture = pair.pictures["difference"]
        try:
            from PIL import Image
            from scipy import ndimage

            from cfkit.masks import load_mask
            from cfkit.specs import load_spec

            spec = load_spec(self.data.ws, pair.spec_id).spec
            case = self.data.case(spec.case)
            if case is None:
                return picture
            with Image.open(self.data.cases.image_paths(case)[0]) as source:
                size = source.size
            mask = load_mask(self.data.ws, spec, size).array
        except (CfkitError, OSError):
            return picture
        small = np.asarray(Image.fromarray(mask).resize((picture.shape[1], picture.shape[0]), Image.NEAREST)) > 0
        edge = small & ~ndimage.binary_erosion(small, iterations=2)
        outlined = picture.copy()
        outlined[edge] = (240, 228, 66)  # Okabe-Ito yellow
        return outlined

    def _audit(self) -> Page:
        from cfkit.view.audit import completed_audits

        from cfkit.report import Report, display_tables

        audits, pending = completed_audits(self.data.ws)
        shown = [{"id": s.audit, "cases": s.cases, "said": s.said(), "tables": display_tables(Report(ega=s))}
                 for s in audits]
        return self._html("audit.html", "audit.html", audits=shown, pending=pending)

    def _image(self, rest: str) -> Page | None:
        kind, _, name = rest.partition("-")
        if kind == "case":
            case_id, _, k = name.rpartition("-")
            case = self.data.case(case_id)
            if case is None or not k.isdigit() or int(k) >= len(case.images):
                return None
            from cfkit.images import open_image

            try:
                picture = open_image(self.data.cases.image_paths(case)[int(k)])
            except CfkitError:
                return None
            return Page(f"img-{rest}.png", "image/png", _png(picture))
        if kind == "pair":
            spec_id, _, which = name.rpartition("-")
            for pair in self.pairs:
                if pair.spec_id == spec_id and which in pair.pictures:
                    picture = self._outlined(pair) if which == "difference" else pair.pictures[which]
                    return Page(f"img-{rest}.png", "image/png", _png(picture))
        return None


def _left_out(answers: list[Answer]) -> list[dict[str, Any]]:
    """Each model whose answers on a case the report's numbers leave out: why, with its suites and runs (one line
    per model and reason, in the answers' order)."""
    lines: dict[tuple[str, str], dict[str, Any]] = {}
    for a in answers:
        if a.left_out is not None:
            line = lines.setdefault((a.model, a.left_out), {"model": a.model, "why": a.left_out, "suites": [],
                                                             "runs": []})
            for key, value in (("suites", a.suite), ("runs", a.run_id)):
                if value not in line[key]:
                    line[key].append(value)
    return list(lines.values())


def export(site: Site, folder: Path | str, *, overwrite: bool = False) -> int:
    """Write every page of ``site`` into ``folder`` (made if needed); return how many files were written."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"--export {folder} is a file; give a folder (it is made if it does not exist).")
    if folder.is_dir() and any(folder.iterdir()) and not overwrite:
        raise OutputError(f"--export {folder} is not empty; choose an empty folder or pass --force to write over it.")
    count = 0
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for path in site.paths():
            page = site.page(path)
            if page is None:
                continue
            write_bytes_atomic(folder / page.path, page.body, overwrite=True)
            count += 1
    except OSError as exc:
        raise OutputError(f"cannot write the view to {folder} ({exc.strerror}); choose another --export folder.") from exc
    return count
