"""Edit specs (``interventions/CFnn.yaml``): the schema, loading and writing.

A spec says which decisive cue of a "No" case to replace, with what, and what
must stay untouched. The region to edit comes from a mask PNG or from
``regions`` (:mod:`cfkit.masks`); engines may take per-spec options from its
``engines:`` table. Validation and listing are in :mod:`cfkit.spec_status`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cfkit.cases import CaseSet
from cfkit.errors import SpecError, describe_validation
from cfkit.suggest import did_you_mean
from cfkit.workspace import MAX_MARGIN_PX, Workspace
from cfkit.yamlfile import load_yaml

SPEC_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


def _shoelace_area(points: list[tuple[float, float]]) -> float:
    return abs(sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in zip(points, points[1:] + points[:1]))) / 2


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
        elif _shoelace_area(points) == 0:
            raise ValueError("the polygon has no area (its points lie on one line); give at least three corners")
        for x, y in points:
            if not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0):
                raise ValueError(f"point ({x}, {y}) is outside 0..1; regions use fractions of the image size")
        return self


class Labels(_Strict):
    original: Literal["Yes", "No"] = "No"
    edit: Literal["Yes", "No"] = "Yes"


class Checks(_Strict):
    """Per-spec overrides of the preservation thresholds."""

    lpips_out_max: float | None = Field(None, ge=0, le=2)
    ssim_out_min: float | None = Field(None, ge=-1, le=1)
    psnr_out_min: float | None = Field(None, ge=0, le=100)
    change_in_min: float | None = Field(None, ge=0, le=1)
    leak_max: float | None = Field(None, ge=0, le=1)
    margin: int | None = Field(None, ge=0, le=MAX_MARGIN_PX)


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
    engines: dict[str, dict[str, Any]] | None = None  # per-engine options, checked by each engine
    source: str | None = None
    notes: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _first_version_spelling(cls, data: Any) -> Any:
        # The first version wrote the classical engine's options as a top-level field.
        if isinstance(data, dict) and "classical" in data:
            data = dict(data)
            legacy = data.pop("classical")
            engines = dict(data.get("engines") or {})
            if "classical" in engines:
                raise ValueError("give the classical engine's options once, under 'engines: {classical: …}'")
            engines["classical"] = legacy
            data["engines"] = engines
        return data

    @field_validator("engines")
    @classmethod
    def _engine_tables(cls, value: dict[str, dict[str, Any]] | None) -> dict[str, dict[str, Any]] | None:
        for name, options in (value or {}).items():
            if not isinstance(options, dict):
                raise ValueError(f"engines.{name} must be a mapping of option names to values")
        return value

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
    """The file of spec ``spec_id``; an id that is not a spec id (``../../x``) never becomes a path."""
    if not SPEC_ID.fullmatch(spec_id):
        raise SpecError(f"{spec_id!r} is not a spec id: one starts with a letter and uses only letters, digits, "
                        "'-' and '_' (e.g. CF18). See 'cfkit specs list'.")
    return ws.interventions_dir / f"{spec_id}.yaml"


def parse_spec(text: str, path: Path) -> Spec:
    """Parse spec YAML; every error names the file and the field."""
    raw = load_yaml(text, path, SpecError)
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: expected a mapping of fields (id, case, title, …), got {type(raw).__name__}.")
    try:
        spec = Spec.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(f"{path}: {describe_validation(exc, Spec)}") from exc
    if spec.id != path.stem:
        raise SpecError(f"{path}: field 'id' is '{spec.id}' but the file is named {path.name}; make them agree.")
    return spec


def load_spec_file(path: Path) -> SpecFile:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SpecError(f"spec {path} not found.") from None
    except IsADirectoryError:
        raise SpecError(f"{path} is a folder, not a spec file; move it aside.") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8.") from exc
    spec = parse_spec(text, path)
    return SpecFile(spec=spec, path=path, sha256=hashlib.sha256(data).hexdigest())


def load_spec(ws: Workspace, spec_id: str) -> SpecFile:
    path = spec_path(ws, spec_id)
    if not path.is_file():
        if path.is_dir():
            raise SpecError(f"{path} is a folder, not a spec file; move it aside.")
        stems = [p.stem for p in spec_files(ws)]
        known = ", ".join(stems) or "none"
        raise SpecError(
            f"no spec '{spec_id}' in {ws.interventions_dir}.{did_you_mean(spec_id, stems)} (specs there: {known}). "
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


def try_load_cases(ws: Workspace) -> CaseSet | None:
    """The workspace's cases, or None when the cases file is absent (bad files still raise)."""
    from cfkit.dataset import load_cases

    if not ws.cases_path.exists():  # a folder there is an error load_cases names, not an absent file
        return None
    return load_cases(ws.cases_path, ws.image_root)


def dump_spec(spec: Spec) -> str:
    """YAML text for a spec: fields in the schema's (documented) order, empty ones left out."""
    import yaml

    return yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True), sort_keys=False, allow_unicode=True,
                          width=100)


def default_prompt(cue: str, replacement: str) -> str:
    """The editor instruction ``specs new`` writes when none is given."""
    return (f"Replace {cue} with {replacement}. Keep the medium, composition, palette, lighting, viewpoint "
            "and every other part of the image unchanged.")


def build_spec(fields: Mapping[str, Any], *, where: str) -> Spec:
    """A new spec from its fields, with the defaults ``specs new`` fills in: a prompt built from the cue
    and the replacement, and ``mask: masks/ID.png`` unless ``regions`` are given. ``where`` names the
    input in errors (``specs new``, ``specs.csv row 3``)."""
    data = {key: value for key, value in fields.items() if value is not None}
    if not data.get("prompt") and data.get("cue") and data.get("replacement"):
        data["prompt"] = default_prompt(str(data["cue"]), str(data["replacement"]))
    if not data.get("mask") and not data.get("regions") and data.get("id"):
        data["mask"] = f"masks/{data['id']}.png"
    try:
        return Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(f"{where}: {describe_validation(exc, Spec)}") from exc


def set_spec_mask(spec_file: SpecFile, mask: str) -> SpecFile:
    """Give a spec without a mask the field ``mask: MASK``, keeping the rest of its file (comments included)."""
    from cfkit.files import write_text_atomic

    spec = spec_file.spec
    if spec.mask or spec.regions:
        raise SpecError(f"{spec_file.path}: the spec already has a mask ('{spec.mask or 'regions'}'); it is kept.")
    text = spec_file.path.read_text(encoding="utf-8")
    import yaml

    text = text + ("" if text.endswith("\n") or not text else "\n") + yaml.safe_dump({"mask": mask}, width=1000)
    parse_spec(text, spec_file.path)  # still a valid spec before it replaces the file
    write_text_atomic(spec_file.path, text)
    return load_spec_file(spec_file.path)
