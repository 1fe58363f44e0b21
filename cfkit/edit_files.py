"""A stored edit's files as arrays, and checking a stored edit.

``cfkit check``, the review and the contact sheet read an edit back from its
files here: the case's source image, the spec's mask at the source's size and
each output (resized when only its scale differs). The check itself is pure
(:func:`cfkit.preserve.check_images`); :func:`store_checks` writes its results,
one ``checks`` row per output. ``cfkit edit`` checks the arrays it has just made
without reading them back (:mod:`cfkit.edit`).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from cfkit.cases import CaseSet
from cfkit.errors import ConfigError, ImageError, NotFoundError, OutputError, SpecError
from cfkit.images import read_image
from cfkit.masks import load_mask
from cfkit.preserve import EditImages, LpipsScorer, OutputCheck, Thresholds, check_images, fit_output
from cfkit.specs import Spec, load_spec, try_load_cases
from cfkit.store import Store, checks, edits
from cfkit.store.checks import VARIANTS, CheckResult, NewCheck
from cfkit.weights.lpips import load_lpips
from cfkit.workspace import Workspace


@dataclass(frozen=True)
class EditFiles:
    """A stored edit read back: its spec and its images at the source's size."""

    spec_id: str
    edit_id: int
    spec: Spec
    images: EditImages
    #: Why the spec's mask now is not the one the edit was made with, or None when it is (or is not recorded).
    mask_changed: str | None = None

    @property
    def original(self) -> np.ndarray:
        return self.images.original

    @property
    def mask(self) -> np.ndarray:
        return self.images.mask

    @property
    def outputs(self) -> dict[str, np.ndarray]:
        return self.images.outputs


def spec_thresholds(spec: Spec, margin: int) -> Thresholds:
    """The check's limits for ``spec``: defaults, then ``margin`` (``[check] margin``), then the spec's ``checks:``."""
    overrides: dict[str, Any] | None = None if spec.checks is None else spec.checks.model_dump()
    return Thresholds.for_spec(overrides, margin=margin)


def load_edit_images(ws: Workspace, store: Store, edit_id: int, *, cases: CaseSet | None = None) -> EditFiles:
    """Read an edit's files and its spec's mask; outputs of another size are resized (same aspect only).

    ``cases``: the workspace's cases, when the caller has read them already (a loop over edits reads them once).
    """
    record = edits.get(store, edit_id)
    spec_id = record.spec_id
    if record.status != "ok":
        raise NotFoundError(f"edit {edit_id} of {spec_id} is '{record.status}' ({record.error or 'no image'}); "
                            f"nothing to check. Make a new one with 'cfkit edit {spec_id}'.")
    spec = load_spec(ws, spec_id).spec
    cases = try_load_cases(ws) if cases is None else cases
    if cases is None:
        raise ConfigError(f"cases file {ws.cases_path} is missing, so {spec_id}'s original image cannot be found. "
                          "Set [dataset] cases in cfkit.toml.")
    case = cases.get(spec.case)
    source = cases.image_paths(case)[0]
    read: dict[Path, str] = {}  # each file's SHA-256, from the bytes decoded here

    def array(path: Path, what: str) -> np.ndarray:
        data, image = read_image(path, what=what)
        read[path] = hashlib.sha256(data).hexdigest()
        return np.asarray(image)

    original = array(source, f"case {case.id} image")
    size = (original.shape[1], original.shape[0])
    current = load_mask(ws, spec, size)
    mask = current.array
    mask_changed = None
    if record.mask_sha256 and record.mask_sha256 != current.sha256:
        mask_changed = (f"{spec_id}'s mask ({current.source}) has changed since edit {edit_id} was made with it "
                        f"(sha256 {record.mask_sha256[:12]}… then, {current.sha256[:12]}… now)")
    outputs: dict[str, np.ndarray] = {}
    resized: dict[str, list[int]] = {}
    for variant in VARIANTS:
        path = record.image_path(variant)
        if path is None:
            continue
        if not path.exists():  # deleted or moved since the edit wrote it: the same two ways out as a replaced file
            raise ImageError(f"{spec_id}: edit {edit_id}'s {variant} image {path} is not there any more (deleted or "
                             f"moved since the edit wrote it). Make a new edit with 'cfkit edit {spec_id}', or put "
                             "the file back.")
        image = array(path, f"edit {edit_id} {variant} image")
        outputs[variant], was = fit_output(image, size, what=f"edit {edit_id} {variant} image {path}")
        if was is not None:
            resized[variant] = was
    if not outputs:
        raise NotFoundError(f"edit {edit_id} of {spec_id} records no image file; nothing to check.")
    changed = record.changed_file(source, read.get)
    if changed is not None:
        raise ImageError(f"{spec_id}: {changed}. Make a new edit with 'cfkit edit {spec_id}', or put the earlier "
                         "file back.")
    return EditFiles(spec_id, edit_id, spec, EditImages(original, mask, outputs, resized), mask_changed)


def lpips_scorer(ws: Workspace | None, lpips_weights: Path | None = None,
                 scorer: LpipsScorer | None = None) -> tuple[LpipsScorer | None, str]:
    """The scorer to use and the note stored with each check: ``scorer`` when given, else :func:`load_lpips`."""
    if scorer is not None:
        return scorer, f"LPIPS: {scorer.description}"
    loaded = load_lpips(ws, lpips_weights)
    return loaded.scorer, loaded.note


def store_checks(store: Store, edit_id: int, spec_id: str, results: list[OutputCheck]) -> list[CheckResult]:
    """One ``checks`` row per output, written together."""
    new = [NewCheck(variant=r.variant, metrics=r.metrics.to_dict(), verdict=r.verdict.verdict,
                    reasons=r.verdict.reasons, lpips_measured=r.verdict.lpips_measured) for r in results]
    return checks.insert(store, edit_id, spec_id, new)


def check_edit(ws: Workspace, store: Store, edit_id: int, *, lpips_weights: Path | None = None,
               scorer: LpipsScorer | None = None, cases: CaseSet | None = None) -> list[CheckResult]:
    """Measure every output of a stored edit, judge it and store one ``checks`` row per variant.

    An edit whose spec's mask has changed since it was made is refused (:class:`SpecError`), nothing stored:
    its keep region is the earlier mask's.

    LPIPS uses ``scorer`` when given, else :func:`load_lpips` (``lpips_weights``,
    ``$CFKIT_LPIPS_BACKBONE``, ``[check] lpips_backbone``, torch's hub cache).
    """
    files = load_edit_images(ws, store, edit_id, cases=cases)
    if files.mask_changed:
        # The edit kept everything outside the earlier mask; measured against another, its numbers mean nothing.
        raise SpecError(f"{files.mask_changed}, so it cannot be checked against the new one. Make a new edit "
                        f"with 'cfkit edit {files.spec_id}', or put the earlier mask back.")
    scorer, note = lpips_scorer(ws, lpips_weights, scorer)
    results = check_images(files.images, spec_thresholds(files.spec, ws.config.check.margin), scorer, lpips_note=note)
    return store_checks(store, edit_id, files.spec_id, results)


def check_spec(ws: Workspace, store: Store, spec_id: str, *, lpips_weights: Path | None = None,
               scorer: LpipsScorer | None = None, cases: CaseSet | None = None) -> list[CheckResult]:
    """:func:`check_edit` on the newest successful edit of a spec."""
    load_spec(ws, spec_id)  # a helpful error for an unknown id
    newest = edits.newest_ok(store, spec_id)
    if newest is None:
        raise NotFoundError(f"{spec_id} has no successful edit yet; make one with 'cfkit edit {spec_id}'.")
    return check_edit(ws, store, newest.id, lpips_weights=lpips_weights, scorer=scorer, cases=cases)


_EDIT_FILE = re.compile(r"([1-9][0-9]{0,17})-(?:raw|composite)\.png")


def refuse_stray_edit_files(store_dir: Path, db_path: Path, store: Callable[[], Store | None]) -> None:
    """Refuse, before any engine runs, edit files the store has no edit for and whose ids its next edits would
    take (a store put back from an older copy, or moved aside, beside newer edit files): those edits' files could
    not be written, as a file is never overwritten. Files are listed before the store is asked, so an edit another
    process records and writes meanwhile is never taken for a stray one (``store()``: the store, None when there is
    none yet)."""
    found = []
    for folder in (store_dir / "edits").glob("*/"):
        found += [(int(m.group(1)), folder / name) for name in _names(folder) if (m := _EDIT_FILE.fullmatch(name))]
    if not found:
        return
    last = 0 if (opened := store()) is None else edits.last_id(opened)
    stray = sorted(item for item in found if item[0] > last)
    if stray:
        first, more = stray[0][1], len(stray) - 1
        others = f" (and {more} more such file{'s' if more > 1 else ''})" if more else ""
        recorded = f"its last is #{last}" if last else "it records none"
        raise OutputError(f"{first}{others} belongs to no edit in {db_path} ({recorded}): the store looks "
                         "like an older copy than its edit files, and the next edit could not save its own. Move "
                         "those files aside, or put back the store they belong to; no engine was called.")


def _names(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []
