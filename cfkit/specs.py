"""Edit specs (``interventions/CFnn.yaml``), their masks, and validation.

A spec says which decisive cue of a "No" case to replace, with what, and what
must stay untouched. The region to edit comes from a mask PNG (white = edit) or
from ``regions`` (boxes and polygons in 0..1 image coordinates) rasterised at the
source image's size. Inside cfkit a mask is always an 8-bit array, 255 = edit.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import yaml
from PIL import Image, ImageDraw
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cfkit.cases import CaseSet
from cfkit.errors import CfkitError, ImageError, InputError, SpecError, describe_validation
from cfkit.images import open_image
from cfkit.workspace import Workspace

SPEC_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")

#: A rescaled mask may differ from the image's aspect ratio by at most this much.
ASPECT_TOLERANCE = 0.01


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Region(_Strict):
    """A box ``[x0, y0, x1, y1]`` or a polygon ``[[x, y], …]``, in 0..1 image coordinates."""

    box: tuple[float, float, float, float] | None = None
    polygon: list[tuple[float, float]] | None = None

    @model_validator(mode="after")
    def _one_shape(self) -> "Region":
        if (self.box is None) == (self.polygon is None):
            raise ValueError("give exactly one of 'box' or 'polygon'")
        points = list(self.polygon or [])
        if self.box is not None:
            x0, y0, x1, y1 = self.box
            if not (x0 < x1 and y0 < y1):
                raise ValueError(f"box {list(self.box)} needs x0 < x1 and y0 < y1")
            points = [(x0, y0), (x1, y1)]
        elif len(points) < 3:
            raise ValueError("a polygon needs at least 3 points")
        for x, y in points:
            if not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0):
                raise ValueError(f"point ({x}, {y}) is outside 0..1; regions use fractions of the image size")
        return self


class Labels(_Strict):
    original: Literal["Yes", "No"] = "No"
    edit: Literal["Yes", "No"] = "Yes"


class Checks(_Strict):
    """Per-spec overrides of the preservation thresholds."""

    lpips_out_max: float | None = Field(None, ge=0)
    ssim_out_min: float | None = Field(None, le=1)
    psnr_out_min: float | None = None
    change_in_min: float | None = Field(None, ge=0)
    leak_max: float | None = Field(None, ge=0, le=1)
    margin: int | None = Field(None, ge=0)


class Classical(_Strict):
    """How the offline classical engine makes this edit, for cues it can change."""

    op: Literal["remove", "recolor", "paste"]
    color: str | None = None  # recolor: target colour, "#rrggbb"
    strength: float = Field(1.0, ge=0, le=1)  # recolor: how far toward the target
    asset: str | None = None  # paste: PNG relative to the interventions folder
    feather: float = Field(3.0, ge=0)

    @model_validator(mode="after")
    def _needs(self) -> "Classical":
        if self.op == "recolor":
            if not self.color or not re.fullmatch(r"#[0-9a-fA-F]{6}", self.color):
                raise ValueError("recolor needs 'color' as '#rrggbb'")
        if self.op == "paste" and not self.asset:
            raise ValueError("paste needs 'asset', a PNG path relative to the interventions folder")
        return self


class Spec(_Strict):
    id: str
    case: str = Field(min_length=1)
    title: str = Field(min_length=1)
    cue: str = Field(min_length=1)
    replacement: str = Field(min_length=1)
    prompt: str = Field(min_length=1)
    preserve: list[str] = Field(default_factory=lambda: ["medium", "composition", "palette", "viewpoint", "non-target content"])
    mask: str | None = None
    regions: list[Region] | None = None
    labels: Labels = Labels()
    checks: Checks | None = None
    classical: Classical | None = None
    source: str | None = None
    notes: str | None = None

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not SPEC_ID.match(value):
            raise ValueError(f"id '{value}' must start with a letter and use only letters, digits, '-' and '_'")
        return value

    @model_validator(mode="after")
    def _mask_source(self) -> "Spec":
        if self.mask and self.regions:
            raise ValueError("give either 'mask' or 'regions', not both")
        if self.labels.original == self.labels.edit:
            raise ValueError("labels.original and labels.edit must differ; the edit should flip the answer")
        return self


@dataclass(frozen=True)
class SpecFile:
    """A spec as loaded from disk, with its file and content hash."""

    spec: Spec
    path: Path
    sha256: str


def spec_path(ws: Workspace, spec_id: str) -> Path:
    return ws.interventions_dir / f"{spec_id}.yaml"


def parse_spec(text: str, path: Path) -> Spec:
    """Parse spec YAML; every error names the file and the field."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "malformed YAML"
        raise SpecError(f"{path}{where}: not valid YAML ({problem}). Fix the syntax.") from exc
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: expected a mapping of fields (id, case, title, …), got {type(raw).__name__}.")
    try:
        spec = Spec.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(f"{path}: {describe_validation(exc)}") from exc
    if spec.id != path.stem:
        raise SpecError(f"{path}: field 'id' is '{spec.id}' but the file is named {path.name}; make them agree.")
    return spec


def load_spec_file(path: Path) -> SpecFile:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SpecError(f"spec {path} not found.") from None
    spec = parse_spec(data.decode("utf-8", errors="replace"), path)
    return SpecFile(spec=spec, path=path, sha256=hashlib.sha256(data).hexdigest())


def load_spec(ws: Workspace, spec_id: str) -> SpecFile:
    path = spec_path(ws, spec_id)
    if not path.is_file():
        known = ", ".join(p.stem for p in spec_files(ws)) or "none"
        raise SpecError(
            f"no spec '{spec_id}' in {ws.interventions_dir} (specs there: {known}). "
            "Create one with 'cfkit specs new'."
        )
    return load_spec_file(path)


def spec_files(ws: Workspace) -> list[Path]:
    folder = ws.interventions_dir
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.yaml") if not p.name.startswith("."))


def expected_ids(pairs: int, prefix: str = "CF") -> list[str]:
    return [f"{prefix}{i:02d}" for i in range(1, pairs + 1)]


def compress_ids(ids: list[str]) -> str:
    """``CF02, CF03, CF04, CF07`` → ``CF02–CF04, CF07``."""
    out: list[str] = []
    run: list[tuple[str, int]] = []

    def flush() -> None:
        if not run:
            return
        if len(run) > 2:
            out.append(f"{run[0][0]}–{run[-1][0]}")
        else:
            out.extend(name for name, _ in run)
        run.clear()

    for name in ids:
        m = re.fullmatch(r"([A-Za-z_-]*)(\d+)", name)
        num = int(m.group(2)) if m else None
        if run and num is not None and num == run[-1][1] + 1:
            run.append((name, num))
        else:
            flush()
            if num is None:
                out.append(name)
            else:
                run.append((name, num))
    flush()
    return ", ".join(out)


# ── masks ──────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Mask:
    """An edit mask at the source image's size: uint8, 255 = edit, 0 = keep."""

    array: np.ndarray
    source: str  # "file:masks/CF18.png" or "regions"
    note: str | None = None

    @property
    def coverage(self) -> float:
        """Fraction of pixels to edit, 0..1."""
        return float(np.count_nonzero(self.array)) / self.array.size

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.array.tobytes() + repr(self.array.shape).encode()).hexdigest()


def mask_file(ws: Workspace, spec: Spec) -> Path | None:
    if not spec.mask:
        return None
    return ws.confined(spec.mask, base=ws.interventions_dir, what=f"spec {spec.id} field 'mask'")


def rasterize_regions(regions: list[Region], size: tuple[int, int]) -> np.ndarray:
    """Draw regions at ``size = (width, height)``; 255 inside any region."""
    width, height = size
    canvas = Image.new("L", size, 0)
    draw = ImageDraw.Draw(canvas)
    for region in regions:
        if region.box is not None:
            x0, y0, x1, y1 = region.box
            draw.rectangle([x0 * width, y0 * height, x1 * width - 1, y1 * height - 1], fill=255)
        else:
            draw.polygon([(x * width, y * height) for x, y in region.polygon], fill=255)
    return np.asarray(canvas, dtype=np.uint8).copy()


def load_mask(ws: Workspace, spec: Spec, size: tuple[int, int]) -> Mask:
    """The spec's mask at ``size = (width, height)`` of its source image.

    A mask file of another size but the same aspect ratio is rescaled (nearest
    neighbour) and the returned note says so; any other mismatch is an error.
    """
    if spec.regions:
        return Mask(rasterize_regions(spec.regions, size), source="regions")
    path = mask_file(ws, spec)
    if path is None:
        raise SpecError(
            f"spec {spec.id}: no mask; add 'mask: masks/{spec.id}.png' (white = edit) or 'regions:' boxes/polygons."
        )
    if not path.is_file():
        raise SpecError(
            f"spec {spec.id}: mask file {path} is missing. Draw it at the source image's size "
            f"({size[0]}x{size[1]}), white where the edit goes, and save it there."
        )
    try:
        image = Image.open(path)
        image.load()
    except Exception as exc:  # PIL raises several unrelated types for bad files
        raise SpecError(f"spec {spec.id}: mask {path} is not a readable image ({exc}).") from exc
    if image.mode in ("RGBA", "LA") and image.getextrema()[-1][0] < 255:
        # Transparent-where-edit masks (the OpenAI convention) are read the same way.
        gray = 255 - np.asarray(image.getchannel("A"), dtype=np.uint8)
    else:
        gray = np.asarray(image.convert("L"), dtype=np.uint8)
    note = None
    if image.size != size:
        mask_ratio = image.size[0] / image.size[1]
        image_ratio = size[0] / size[1]
        if abs(mask_ratio / image_ratio - 1) > ASPECT_TOLERANCE:
            raise SpecError(
                f"spec {spec.id}: mask {path} is {image.size[0]}x{image.size[1]} but the image is "
                f"{size[0]}x{size[1]} (another aspect ratio). Redraw the mask at the image's size."
            )
        gray = np.asarray(Image.fromarray(gray).resize(size, Image.Resampling.NEAREST))
        note = f"mask rescaled from {image.size[0]}x{image.size[1]} to {size[0]}x{size[1]}"
    return Mask(np.where(gray > 127, 255, 0).astype(np.uint8), source=f"file:{spec.mask}", note=note)


# ── validation ─────────────────────────────────────────────────────────────


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
    if spec.case not in cases:
        report.add("error", f"{path}: field 'case': '{spec.case}' is not in {cases.path}. Fix the id.")
        return report
    case = cases.get(spec.case)
    if case.yes_option is None:
        report.add(
            "error",
            f"{path}: field 'case': {case.id} has no yes_option (not a Yes/No case); counterfactual pairs need one.",
        )
        return report
    gold_label = "Yes" if case.gold == case.yes_option else "No"
    if gold_label != spec.labels.original:
        report.add(
            "error",
            f"{path}: field 'labels.original' is '{spec.labels.original}' but case {case.id}'s gold is "
            f"'{gold_label}'. Fix the label or the case id.",
        )
    if len(case.images) != 1:
        report.add("warning", f"{path}: case {case.id} has {len(case.images)} images; the first is edited.")
    image_path = cases.image_paths(case)[0]
    try:
        image = open_image(image_path, what=f"case {case.id} image")
    except ImageError as exc:
        report.add("error", f"{path}: {exc}")
        return report
    if spec.classical and spec.classical.asset:
        try:
            ws.confined(spec.classical.asset, base=ws.interventions_dir, what=f"spec {spec.id} field 'classical.asset'")
        except InputError as exc:
            report.add("error", f"{path}: {exc}")
    try:
        mask = load_mask(ws, spec, image.size)
    except CfkitError as exc:
        report.add("error", f"{path}: {exc}")
        return report
    if mask.note:
        report.add("note", f"{path}: {mask.note}")
    report.coverage = mask.coverage
    if mask.coverage == 0.0:
        report.add("error", f"{path}: the mask is empty (no white pixels); paint the region to edit in white.")
    elif mask.coverage == 1.0:
        report.add("error", f"{path}: the mask covers the whole image; leave the non-target content black.")
    return report


def try_load_cases(ws: Workspace) -> CaseSet | None:
    """The workspace's cases, or None when the cases file is absent (bad files still raise)."""
    from cfkit.cases import load_cases

    if not ws.cases_path.is_file():
        return None
    return load_cases(ws.cases_path, ws.image_root)


def dump_spec(spec: Spec) -> str:
    """YAML text for a spec: fields in the schema's (documented) order, empty ones left out."""
    return yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True), sort_keys=False, allow_unicode=True,
                          width=100)


# ── listing ────────────────────────────────────────────────────────────────


@dataclass
class SpecRow:
    """One line of ``cfkit specs list``."""

    id: str
    case: str | None
    title: str | None
    coverage: float | None  # 0..1, None when the mask is not available
    edit: str = "none"  # none | made | refused | failed
    check: str = "-"  # - | pass | fail | pass (without LPIPS) …
    review: str = "-"  # - | accept | reject | skip
    problem: str | None = None


def mask_coverage_standalone(ws: Workspace, spec: Spec, cases: CaseSet | None) -> float | None:
    """Coverage of the mask at the source image's size, or of the mask file alone when the image is absent."""
    size = None
    if cases is not None and spec.case in cases:
        case = cases.get(spec.case)
        path = cases.image_paths(case)[0]
        if path.is_file():
            try:
                with Image.open(path) as im:
                    size = im.size if (im.getexif().get(0x0112, 1) not in (5, 6, 7, 8)) else im.size[::-1]
            except Exception:
                size = None
    try:
        if size is not None:
            return load_mask(ws, spec, size).coverage
        if spec.regions:
            return load_mask(ws, spec, (1000, 1000)).coverage
        path = mask_file(ws, spec)
        if path is not None and path.is_file():
            with Image.open(path) as im:
                return load_mask(ws, spec, im.size).coverage
    except CfkitError:
        return None
    return None


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
        rows.append(SpecRow(id=spec.id, case=spec.case, title=spec.title,
                            coverage=mask_coverage_standalone(ws, spec, cases)))
    _attach_status(ws, rows)
    return rows, cases


def _attach_status(ws: Workspace, rows: list[SpecRow]) -> None:
    """Fill edit, check and review status from the store, when the workspace has one."""
    if not ws.db_path.is_file():
        return
    from cfkit.store import Store

    with Store(ws.db_path) as store:
        for row in rows:
            edit = store.query(
                "SELECT id, status FROM edits WHERE spec_id = ? ORDER BY id DESC LIMIT 1", (row.id,)
            )
            if edit:
                row.edit = "made" if edit[0]["status"] == "ok" else edit[0]["status"]
                # The composite decides; an edit with only a raw output is shown by that.
                check = store.query(
                    "SELECT verdict, lpips FROM checks WHERE edit_id = ? "
                    "ORDER BY variant = 'composite' DESC, id DESC LIMIT 1",
                    (edit[0]["id"],),
                )
                if check:
                    row.check = check[0]["verdict"] + ("" if check[0]["lpips"] else " (without LPIPS)")
            review = store.query(
                "SELECT decision FROM reviews WHERE spec_id = ? ORDER BY id DESC LIMIT 1", (row.id,)
            )
            if review:
                row.review = review[0]["decision"]


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


def create_spec(ws: Workspace, *, spec_id: str, case: str, title: str, cue: str, replacement: str,
                prompt: str | None = None, mask: str | None = None, source: str | None = None) -> Path:
    """Write a new spec file; refuses to overwrite one that exists."""
    from cfkit.files import write_text_atomic

    path = spec_path(ws, spec_id)
    if path.exists():
        raise SpecError(f"{path} already exists; edit it by hand or choose another --id.")
    prompt = prompt or (
        f"Replace {cue} with {replacement}. Keep the medium, composition, palette, lighting, viewpoint "
        "and every other part of the image unchanged."
    )
    try:
        spec = Spec(id=spec_id, case=case, title=title, cue=cue, replacement=replacement, prompt=prompt,
                    mask=mask or f"masks/{spec_id}.png", source=source)
    except ValidationError as exc:
        raise SpecError(f"specs new: {describe_validation(exc)}") from exc
    ws.confined(spec.mask or "", base=ws.interventions_dir, what="--mask")
    write_text_atomic(path, dump_spec(spec), overwrite=False)
    return path
