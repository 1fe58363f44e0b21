"""Where the specs stand: validation against their cases, images and masks, and the listing.

``cfkit specs validate`` and ``cfkit specs list`` are built from these. Edit,
check and review status come from the store's table owners, always for the
edit the row shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cfkit.cases import CaseSet
from cfkit.errors import CfkitError, ImageError, InputError, SpecError
from cfkit.images import open_image
from cfkit.masks import LOCAL_MASK_MAX, derived_mask_state, load_mask, mask_coverage_standalone, mask_file
from cfkit.plural import plural
from cfkit.specs import (Spec, compress_ids, expected_ids, load_spec, load_spec_file, spec_files, spec_path,
                         try_load_cases)
from cfkit.workspace import Workspace


@dataclass
class Finding:
    spec_id: str
    level: Literal["error", "warning", "note"]
    message: str


@dataclass
class SpecReport:
    spec_id: str
    path: Path
    spec: Spec | None = None
    coverage: float | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(f.level == "error" for f in self.findings)

    def add(self, level: str, message: str) -> None:
        self.findings.append(Finding(self.spec_id, level, message))  # type: ignore[arg-type]


@dataclass(frozen=True)
class CaseUnfit:
    """Why a spec's case cannot be the source of its counterfactual pair: ``specs validate`` refuses the spec,
    ``specs list`` marks its row with ``mark``."""

    field: str  # the spec's field to fix: case | labels.original
    mark: str  # a few words, also in ``message``: "no such case", "not a Yes/No case", "gold is 'Yes', not 'No'"
    message: str  # the sentence, without the spec file's path


def case_unfit(spec: Spec, cases: CaseSet) -> CaseUnfit | None:
    """The one rule on a spec's case: it is in the cases file, is a Yes/No case and its gold is the spec's
    ``labels.original``; None when all three hold."""
    if spec.case not in cases:
        return CaseUnfit("case", "no such case",
                         f"field 'case': '{spec.case}' is not in {cases.path} (no such case). Fix the id.")
    case = cases.get(spec.case)
    if case.yes_option is None:
        return CaseUnfit("case", "not a Yes/No case", f"field 'case': {case.id} has no yes_option (not a Yes/No "
                                                      "case); counterfactual pairs need one.")
    gold = "Yes" if case.gold == case.yes_option else "No"
    if gold != spec.labels.original:
        mark = f"gold is '{gold}', not '{spec.labels.original}'"
        return CaseUnfit("labels.original", mark, f"field 'labels.original' is '{spec.labels.original}' but case "
                                                  f"{case.id}'s {mark}. Fix the label or the case id.")
    return None


def engine_option_problems(spec: Spec) -> list[str]:
    """Problems with the spec's ``engines:`` options, checked by each installed engine's ``Options``.

    An engine that is not installed here is skipped (its options cannot be
    checked); the edit itself says so if it is chosen.
    """
    from cfkit.editors import editor_class
    from cfkit.options import OptionValues, validate_options
    from cfkit.registry import EDITORS, plugins

    installed = plugins(EDITORS)
    problems = []
    for name, values in (spec.engines or {}).items():
        if name not in installed:
            continue
        try:
            validate_options(editor_class(name).Options, OptionValues.of(values, f"spec {spec.id} engines.{name}"),
                             what=f"engine '{name}'", see="cfkit edits engines")
        except InputError as exc:
            problems.append(str(exc))
    return problems


def validate_spec(ws: Workspace, path: Path, cases: CaseSet | None) -> SpecReport:
    """Check one spec file against its case, image and mask; never raises for bad input."""
    report = SpecReport(spec_id=path.stem, path=path)
    try:
        spec = load_spec_file(path).spec
    except SpecError as exc:
        report.add("error", str(exc))
        return report
    report.spec = spec
    if cases is None:
        report.add("warning", f"{path}: cases file {ws.cases_path} is missing; the case, gold and image were not checked.")
        try:
            path_of_mask = mask_file(ws, spec)
        except InputError as exc:
            report.add("error", f"{path}: {exc}")
            return report
        if path_of_mask is not None and not path_of_mask.is_file():
            report.add("error", f"{path}: mask file {path_of_mask} is missing; supply it (white = edit, at the source image's size).")
        elif path_of_mask is None and not spec.regions:
            report.add("error", f"{path}: no mask; add 'mask: masks/{spec.id}.png' or 'regions:'.")
        return report
    unfit = case_unfit(spec, cases)
    if unfit is not None:
        report.add("error", f"{path}: {unfit.message}")
        if unfit.field == "case":  # no case to read an image of, or none a pair can be made from
            return report
    case = cases.get(spec.case)
    if len(case.images) != 1:
        report.add("warning", f"{path}: case {case.id} has {plural(len(case.images), 'image')}; the first is edited.")
    image_path = cases.image_paths(case)[0]
    try:
        image = open_image(image_path, what=f"case {case.id} image")
    except ImageError as exc:
        report.add("error", f"{path}: {exc}")
        return report
    for problem in engine_option_problems(spec):
        report.add("error", f"{path}: {problem}")
    try:
        mask = load_mask(ws, spec, image.size)
    except CfkitError as exc:
        report.add("error", f"{path}: {exc}")
        return report
    if mask.note:
        report.add("warning", f"{path}: {mask.note} (the image is {image.size[0]}x{image.size[1]}); "
                              "redraw the mask at the image's size so its edges fall where you drew them.")
    report.coverage = mask.coverage
    if mask.coverage == 0.0:
        report.add("error", f"{path}: the mask is empty (no white pixels); paint the region to edit in white.")
    elif mask.coverage == 1.0:
        report.add("error", f"{path}: the mask covers the whole image; leave the non-target content black.")
    elif mask.coverage > LOCAL_MASK_MAX:
        report.add("warning", f"{path}: the mask covers {100 * mask.coverage:.1f}% of the image, more than "
                              f"{100 * LOCAL_MASK_MAX:.0f}%; the decisive cue should be local. Tighten it to the cue.")
    derived = derived_mask_state(ws, spec, image.size)
    if derived is not None and not derived.reviewed:
        report.add("warning", f"{path}: the mask was {derived.label}; look at it in 'cfkit review {spec.id}' and "
                              "accept an edit made with it, or redraw it.")
    return report


@dataclass
class SpecRow:
    """One line of ``cfkit specs list``."""

    id: str
    case: str | None
    title: str | None
    coverage: float | None  # 0..1, None when the mask is not available
    edit: str = "none"  # none | made | refused | failed
    check: str = "-"  # - | pass | fail | pass (without LPIPS) …
    review: str = "-"  # - | accept | reject | skip: the decision on the edit shown
    problem: str | None = None
    edit_id: int | None = None  # the edit the row shows: the selected one, else the newest
    selected: bool = False  # whether that edit stands for the spec in probes and reports
    candidates: int = 0  # successful edits of the spec
    mask: str = "file"  # file | regions | missing (no file where the spec says) | none (no mask field)
    mask_derived: str | None = None  # "derived from edit #12, not reviewed" for a mask derived from an edit
    case_missing: bool = False  # the cases file is there but holds no case of this id (not known without one)
    case_unfit: str | None = None  # why the case cannot make the pair, in CaseUnfit.mark's words (missing too)


def list_spec_rows(ws: Workspace) -> tuple[list[SpecRow], CaseSet | None]:
    """Rows for every spec file; a broken spec becomes a row with its problem."""
    cases = try_load_cases(ws)
    rows: list[SpecRow] = []
    for path in spec_files(ws):
        try:
            spec = load_spec_file(path).spec
        except SpecError as exc:
            rows.append(SpecRow(id=path.stem, case=None, title=None, coverage=None, problem=str(exc)))
            continue
        unfit = None if cases is None else case_unfit(spec, cases)
        row = SpecRow(id=spec.id, case=spec.case, title=spec.title, coverage=mask_coverage_standalone(ws, spec, cases),
                      mask=_mask_kind(ws, spec), case_missing=cases is not None and spec.case not in cases,
                      case_unfit=None if unfit is None else unfit.mark)
        derived = derived_mask_state(ws, spec) if row.mask == "file" else None
        row.mask_derived = None if derived is None else derived.label
        rows.append(row)
    _attach_status(ws, rows)
    return rows, cases


def _mask_kind(ws: Workspace, spec: Spec) -> str:
    if spec.regions:
        return "regions"
    try:
        path = mask_file(ws, spec)
    except InputError:
        return "missing"  # a path outside the workspace: 'specs validate' says why
    if path is None:
        return "none"
    return "file" if path.is_file() else "missing"


def _attach_status(ws: Workspace, rows: list[SpecRow]) -> None:
    """Fill edit, check and review status from the store, each for the edit the row shows."""
    if not ws.db_path.is_file():
        return
    from cfkit.store import Store, checks, edits, reviews

    with Store(ws.db_path) as store:
        for row in rows:
            edit = edits.shown(store, row.id) or edits.newest(store, row.id)
            if edit is None:
                continue
            row.edit_id = edit.id
            row.selected = edit.status == "ok" and edit == edits.selected(store, row.id)
            row.candidates = len(edits.ok_edits(store, row.id))
            row.edit = "made" if edit.status == "ok" else edit.status
            # The composite decides; an edit with only a raw output is shown by that.
            check = checks.latest(store, edit.id, variant=None)
            if check is not None:
                row.check = check.label
            decision = reviews.on_edit(store, edit.id)
            if decision is not None:
                row.review = decision.decision


def authored_summary(ws: Workspace, ids: list[str]) -> str:
    """``5 of 36 authored; not in this workspace: CF02–CF17, …``."""
    expected = expected_ids(ws.pairs, ws.config.workspace.pair_prefix)
    have = set(ids)
    missing = [i for i in expected if i not in have]
    extra = sorted(have - set(expected))
    authored = len(have & set(expected))
    text = f"{authored} of {ws.pairs} authored"
    if missing:
        text += f"; not in this workspace: {compress_ids(missing)}"
    if extra:
        text += f"; also here: {compress_ids(extra)}"
    return text


def validate_specs(ws: Workspace, spec_ids: list[str]) -> list[SpecReport]:
    """Validate the named specs, or every spec file in the workspace."""
    cases = try_load_cases(ws)
    if spec_ids:
        paths = []
        for spec_id in spec_ids:
            path = spec_path(ws, spec_id)
            if not path.is_file():
                load_spec(ws, spec_id)  # raises the helpful "no spec" error
            paths.append(path)
    else:
        paths = spec_files(ws)
        if not paths:
            raise SpecError(f"no spec files in {ws.interventions_dir}. Create one with 'cfkit specs new'.")
    return [validate_spec(ws, path, cases) for path in paths]
