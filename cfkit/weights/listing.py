"""What this machine has: LPIPS backbones and where they were found, models in the local Hugging Face cache."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any


from cfkit.errors import ConfigError
from cfkit.plural import plural
from cfkit.weights.locations import hf_hub_cache_dir, weights_dir
from cfkit.weights.reading import check_backbone_readable
from cfkit.weights.verify import Verification, cached_verification, refusal, verify_backbone

if TYPE_CHECKING:
    from cfkit.workspace import Workspace



#: How the problem of a backbone that failed verification begins.
REFUSED = "refused: "


@dataclass(frozen=True)
class BackboneEntry:
    """One place LPIPS weights are looked for, and what is there."""

    source: str  # "--lpips-weights", "CFKIT_LPIPS_BACKBONE", "[check] lpips_backbone in cfkit.toml", ...
    path: str
    exists: bool
    used: bool  # the one cfkit check would use
    verification: Verification | None = None
    problem: str | None = None  # why it cannot be used or verified
    stops_check: bool = False  # cfkit check ends with this problem (the file it uses is damaged or refused)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["verification"] = self.verification.to_dict() if self.verification else None
        return data


@dataclass(frozen=True)
class CachedRevision:
    commit: str
    refs: list[str]
    size_bytes: int


@dataclass(frozen=True)
class CachedModel:
    """A model repository in the local Hugging Face cache."""

    repo_id: str
    kind: str  # "diffusers" (has model_index.json), "hf" (has config.json) or "other"
    revisions: list[CachedRevision]
    size_bytes: int


@dataclass(frozen=True)
class WeightsListing:
    """What cfkit can use on this machine (see :func:`list_weights`)."""

    weights_dir: str
    lpips: list[BackboneEntry]
    hf_cache: str
    models: list[CachedModel] = field(default_factory=list)
    hf_note: str | None = None  # why the Hugging Face cache could not be read

    def stopping_problem(self) -> str | None:
        """The line cfkit check would end with over its LPIPS backbone, or None when it would not."""
        for entry in self.lpips:
            if entry.stops_check and entry.problem:
                return entry.problem.removeprefix(REFUSED)
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"weights_dir": self.weights_dir, "lpips": [e.to_dict() for e in self.lpips],
                "hf_cache": self.hf_cache, "hf_note": self.hf_note, "models": [asdict(m) for m in self.models]}


def list_weights(ws: Workspace | None = None, *, verify: bool = True) -> WeightsListing:
    """The LPIPS backbone candidates (verified, when ``verify``) and the Hugging Face cache's models.

    Reads local files only; never touches the network.
    """
    from cfkit.weights.lpips import backbone_candidates, damage_fix, missing_named

    entries: list[BackboneEntry] = []
    used_found = False
    for candidate in backbone_candidates(ws, None):
        exists = candidate.path.is_file()
        used = exists and not used_found
        if candidate.named and not used_found and not exists:
            problem = missing_named(candidate)
            used_found = True  # a named file that is missing ends the search
            entries.append(BackboneEntry(candidate.source, str(candidate.path), False, False, None, problem, True))
            continue
        used_found = used_found or used
        verification, problem, refused = None, None, False
        if exists:
            verification, problem, refused = _examine(candidate.path, candidate.source, damage_fix(candidate), verify)
        entries.append(BackboneEntry(candidate.source, str(candidate.path), exists, used, verification, problem,
                                     used and refused))
    models, note = _hf_models(hf_hub_cache_dir())
    return WeightsListing(str(weights_dir()), entries, str(hf_hub_cache_dir()), models, note)


def _examine(path: Path, source: str, fix: str | None, verify: bool) -> tuple[Verification | None, str | None, bool]:
    """The verification of a backbone file, the problem with it, and whether cfkit check refuses it.

    A damaged file is found by the reading cfkit check does, stopped before torch is
    imported (:func:`check_backbone_readable`); one already verified unchanged is not read again.
    """
    import importlib.util

    if cached_verification(path) is None:
        try:
            check_backbone_readable(path, source=source, fix=fix)
        except ConfigError as exc:
            return None, str(exc), True
    if not verify:
        return None, None, False
    if importlib.util.find_spec("lpips") is None or importlib.util.find_spec("torch") is None:
        return None, "cannot verify: the 'lpips' package (and torch) are not installed", False
    try:
        verification = verify_backbone(path, source=source, fix=fix)
    except ConfigError as exc:
        return None, str(exc), True
    if verification.ok:
        return verification, None, False
    return verification, REFUSED + refusal(verification, path, source), True


def _hf_models(cache: Path) -> tuple[list[CachedModel], str | None]:
    if not cache.is_dir():
        return [], None
    try:
        from huggingface_hub import scan_cache_dir
    except ImportError:
        return [], "huggingface_hub is not installed, so its cache was not read"
    try:
        info = scan_cache_dir(cache)
    except Exception as exc:  # huggingface_hub raises CorruptedCacheException and OSError subclasses
        return [], f"cannot read {cache} ({exc})"
    models = []
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        if repo.repo_type != "model":
            continue
        # Top-level files only: a diffusers pipeline's unet/config.json does not make it a transformers model.
        names = {f.file_name for revision in repo.revisions for f in revision.files
                 if f.file_path.parent == revision.snapshot_path}
        kind = "diffusers" if "model_index.json" in names else "hf" if "config.json" in names else "other"
        revisions = [CachedRevision(r.commit_hash, sorted(r.refs), r.size_on_disk)
                     for r in sorted(repo.revisions, key=lambda r: r.commit_hash)]
        models.append(CachedModel(repo.repo_id, kind, revisions, repo.size_on_disk))
    note = f"{plural(len(info.warnings), 'unreadable entry', 'unreadable entries')} skipped ({info.warnings[0]})" if info.warnings else None
    return models, note
