"""``cfkit edits import DIR``: a folder of edits made elsewhere, named by spec id, recorded as edits.

``CF18.png`` is an edit of spec CF18; ``CF18-2.png``, ``CF18-3.png`` … are
more candidates of it (a spec whose own id is ``CF18-2`` takes that file
itself). Each file is imported as ``cfkit edit CF18 --engine file --input
CF18.png`` would: size-checked against the source image, resized when only
the scale differs, saved raw and composited, recorded and checked.

:func:`import_edits` reads as steps:

1. every image in the folder is matched to a spec, opened, and its aspect
   ratio checked against the source; a spec without a mask needs
   ``derive_masks``; nothing is written unless every file passes;
2. a spec whose edit a person accepted is kept (unless ``again``), and a file
   already imported for its spec (same SHA-256) is not imported twice; files of
   one spec with the same bytes are imported once (the others are listed as the
   same file), and a spec with more than :data:`MAX_CANDIDATES` different files
   refuses the import; files are hashed in blocks and decoded one at a time;
3. with ``derive_masks``, a spec without a mask (or, with ``overwrite_masks``,
   any spec with a mask file) gets one derived from its files — the union of
   each file's changed region (:mod:`cfkit.mask_derive`), computed in step 1
   so that a file with no change refuses the import — flagged for review;
4. each file becomes an edit; a failure is recorded and the next file runs.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cfkit.edit import EditOutcome, make_edit
from cfkit.errors import CfkitError, InputError, NotFoundError, SpecError
from cfkit.mask_derive import DerivedMask, DerivedMaskFile, aligned_edit, derive_mask, source_image, write_derived_mask
from cfkit.masks import mask_file
from cfkit.plural import plural
from cfkit.specs import Spec, load_spec, spec_path
from cfkit.store import Store, edits, reviews
from cfkit.workspace import Workspace

#: The engine that imports an edit made elsewhere; an import is exactly its ``--input``.
IMPORT_ENGINE = "file"
#: The most different files of one spec an import takes, as 'cfkit edit -n' makes at most.
MAX_CANDIDATES = 100
#: File types read as edited images; other files in the folder are left alone.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff")
CANDIDATE = re.compile(r"^(?P<spec>.+)-(?P<n>\d+)$")


@dataclass(frozen=True)
class ImportFile:
    """One edited image of the folder and the spec it belongs to."""

    path: Path
    spec_id: str
    candidate: int  # 1 for CF18.png, 2 for CF18-2.png …
    sha256: str


@dataclass(frozen=True)
class ImportResult:
    """How one file ended: imported, check failed, failed, kept (accepted edit) or already imported."""

    file: ImportFile
    status: str
    outcome: EditOutcome | None = None
    error: CfkitError | None = None
    existing: int | None = None  # the edit that was kept, or that already holds this file
    copy_of: str | None = None  # the file of the same spec with the same bytes, imported in its place

    @property
    def failed(self) -> bool:
        return self.status in ("failed", "check failed")

    def as_dict(self) -> dict[str, Any]:
        outcome = self.outcome
        return {"file": self.file.path.name, "spec": self.file.spec_id, "candidate": self.file.candidate,
                "status": self.status, "existing": self.existing, "copy_of": self.copy_of,
                "edits": [] if outcome is None else [{"id": r.id, "check": outcome.verdicts.get(r.id)}
                                                     for r in outcome.records],
                "error": None if self.error is None else str(self.error)}


@dataclass
class ImportOutcome:
    """Every file of an import, the masks derived for it, and the files left alone."""

    results: list[ImportResult] = field(default_factory=list)
    masks: list[DerivedMaskFile] = field(default_factory=list)
    ignored: list[Path] = field(default_factory=list)

    @property
    def failed(self) -> list[ImportResult]:
        return [r for r in self.results if r.failed]

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)


# ── step 1: the folder ─────────────────────────────────────────────────────


def _spec_of(ws: Workspace, stem: str) -> tuple[str, int] | None:
    if _is_spec(ws, stem):
        return stem, 1
    match = CANDIDATE.match(stem)
    if match and _is_spec(ws, match["spec"]) and int(match["n"]) >= 1:
        return match["spec"], int(match["n"])
    return None


def _is_spec(ws: Workspace, name: str) -> bool:
    try:
        return spec_path(ws, name).is_file()
    except SpecError:  # not a spec id at all (notes.v2.png): listed with the folder's other unmatched files
        return False


def scan_folder(ws: Workspace, folder: Path) -> tuple[list[ImportFile], list[Path], list[InputError]]:
    """The folder's edited images matched to specs, the other files, and the images that match no spec."""
    if not folder.is_dir():
        raise NotFoundError(f"{folder} is not a folder; give the folder that holds the edited images "
                            "(CF18.png, CF18-2.png …).")
    files, ignored, problems = [], [], []
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue
        if path.suffix.lower() not in IMAGE_SUFFIXES:
            ignored.append(path)
            continue
        found = _spec_of(ws, path.stem)
        if found is None:
            problems.append(SpecError(f"{path.name}: no spec '{path.stem}' in {ws.interventions_dir}; name each "
                                      "file by its spec id (CF18.png, CF18-2.png for a second candidate)."))
            continue
        try:
            with path.open("rb") as handle:
                digest = hashlib.file_digest(handle, "sha256").hexdigest()  # read in blocks, never whole
        except OSError as exc:
            problems.append(InputError(f"{path.name}: cannot be read ({exc.strerror or exc})."))
            continue
        files.append(ImportFile(path, found[0], found[1], digest))
    files.sort(key=lambda f: (f.spec_id, f.candidate))
    return files, ignored, problems


def _has_mask(ws: Workspace, spec: Spec) -> bool:
    if spec.regions:
        return True
    path = mask_file(ws, spec)
    return path is not None and path.is_file()


# ── the import ─────────────────────────────────────────────────────────────


def import_edits(ws: Workspace, folder: Path, *, derive_masks: bool = False, overwrite_masks: bool = False,
                 again: bool = False, progress: Callable[[int, int, ImportResult], None] | None = None) -> ImportOutcome:
    """Import every edited image in ``folder`` (see the module docstring); ``progress(i, total, result)`` after each."""
    # 1. Every file matched, readable and aligned to its source; every spec with a mask or one to derive.
    files, ignored, problems = scan_folder(ws, folder)
    if not files and not problems:
        raise NotFoundError(f"{folder} holds no edited images ({', '.join(IMAGE_SUFFIXES)}) named by spec id.")
    # Identical files of one spec are one candidate: the first is imported, the others are named as its copies.
    by_spec: dict[str, list[ImportFile]] = {}
    copies: dict[Path, ImportFile] = {}
    first_of: dict[tuple[str, str], ImportFile] = {}
    for f in files:
        original = first_of.setdefault((f.spec_id, f.sha256), f)
        if original is f:
            by_spec.setdefault(f.spec_id, []).append(f)
        else:
            copies[f.path] = original
    for spec_id, group in by_spec.items():
        if len(group) > MAX_CANDIDATES:
            problems.append(InputError(f"spec {spec_id} has {plural(len(group), 'different file')} in {folder.name}; at most "
                                       f"{MAX_CANDIDATES} candidates a spec are imported at once (as with 'cfkit edit "
                                       "-n'). Import them in smaller folders."))
    to_derive: dict[str, DerivedMask] = {}
    for spec_id, group in by_spec.items():
        if len(group) > MAX_CANDIDATES:
            continue
        try:
            spec = load_spec(ws, spec_id).spec
            source = source_image(ws, spec)
        except InputError as exc:
            problems.append(exc)
            continue
        has_mask = _has_mask(ws, spec)
        derive = derive_masks and (not has_mask or (overwrite_masks and not spec.regions))
        size = (source.shape[1], source.shape[0])
        union = _Union(source) if derive else None
        for f in group:  # one image in memory at a time: each is checked, added to the union, let go
            try:
                edited = aligned_edit(f.path, size, what=f"{folder.name}/{f.path.name}")
            except InputError as exc:
                problems.append(exc)
                continue
            if union is not None:
                try:
                    union.add(edited)
                except InputError as exc:
                    problems.append(SpecError(f"spec {spec_id}: {exc}"))
                    union = None
        if derive and union is not None and union.derived:
            to_derive[spec_id] = union.mask()
        elif derive and union is not None:
            problems.append(SpecError(f"spec {spec_id}: none of its files could be read"))
        elif not has_mask and not derive:
            problems.append(SpecError(f"spec {spec_id} has no mask yet; pass --derive-masks to derive it from "
                                      f"{group[0].path.name}, or draw interventions/masks/{spec_id}.png."))
    if problems:
        _refuse(problems, folder)

    # 2. What is kept: accepted specs, files imported before.
    outcome = ImportOutcome(ignored=ignored)
    skipped = _already_there(ws, [f for f in files if f.path not in copies], again)

    # 3. The masks derived from the spec's files.
    for spec_id, mask in to_derive.items():
        source = ", ".join(f.path.name for f in by_spec[spec_id])
        outcome.masks.append(write_derived_mask(ws, spec_id, mask, source=source, overwrite=overwrite_masks))

    # 4. Each file an edit.
    for index, f in enumerate(files, start=1):
        if f.path in copies:
            result = ImportResult(f, "same file", copy_of=copies[f.path].path.name)
        elif f.path in skipped:
            result = skipped[f.path]
        else:
            try:
                made = make_edit(ws, f.spec_id, engine=IMPORT_ENGINE, input_path=f.path, again=True)
            except CfkitError as exc:
                result = ImportResult(f, "failed", error=exc)
            else:
                passed = made.check_error is None and all(
                    (made.verdicts.get(r.id) or "").startswith("pass") for r in made.records)
                result = ImportResult(f, "imported" if passed else "check failed", outcome=made)
        outcome.results.append(result)
        if progress is not None:
            progress(index, len(files), result)
    return outcome


def _refuse(problems: list[InputError], folder: Path) -> None:
    first = problems[0]
    if len(problems) == 1:
        raise type(first)(f"{first} Nothing was imported.")
    rest = "; ".join(str(p) for p in problems[1:])
    raise type(first)(f"{plural(len(problems), 'problem')} in {folder}, nothing was imported: {first} Also: {rest}")


def _already_there(ws: Workspace, files: list[ImportFile], again: bool) -> dict[Path, ImportResult]:
    """Files not to import: of a spec with an accepted edit (unless ``again``), or imported before."""
    if not ws.db_path.is_file():
        return {}
    skipped: dict[Path, ImportResult] = {}
    with Store(ws.db_path) as store:
        for f in files:
            accepted = None if again else reviews.accepted_edit_id(store, f.spec_id)
            if accepted is not None:
                skipped[f.path] = ImportResult(f, "kept", existing=accepted)
                continue
            same = next((r.id for r in edits.ok_edits(store, f.spec_id)
                         if r.params.get("input_sha256") == f.sha256), None)
            if same is not None:
                skipped[f.path] = ImportResult(f, "already imported", existing=same)
    return skipped


class _Union:
    """The union of the regions each candidate changed, so the mask holds every candidate's edit; built one
    candidate at a time."""

    def __init__(self, original: np.ndarray):
        self.original = original
        self.array: np.ndarray | None = None
        self.derived = 0
        self.threshold = 0.0
        self.margin_px = 0
        self.first: DerivedMask | None = None

    def add(self, image: np.ndarray) -> None:
        derived = derive_mask(self.original, image)
        if self.first is None:
            self.first, self.array, self.threshold, self.margin_px = (derived, derived.array.copy(),
                                                                      derived.threshold, derived.margin_px)
        else:
            np.maximum(self.array, derived.array, out=self.array)
            self.threshold = min(self.threshold, derived.threshold)
            self.margin_px = max(self.margin_px, derived.margin_px)
        self.derived += 1

    def mask(self) -> DerivedMask:
        if self.derived == 1:
            return self.first
        from scipy import ndimage

        _, regions = ndimage.label(self.array > 0)
        return DerivedMask(self.array, self.threshold, self.margin_px, int(regions))
