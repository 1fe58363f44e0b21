"""LPIPS (Zhang et al. 2018): finding AlexNet's ImageNet weights on this machine, and the scorer.

Nothing is downloaded: the backbone is built without weights and its state
dict is read from a file the user named or from torch's local hub cache.
torch and lpips are imported only when a scorer is built.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from cfkit.errors import ConfigError
from cfkit.hints import install_hint
from cfkit.workspace import Workspace

#: File name torchvision gives AlexNet's ImageNet weights in torch's hub cache.
ALEXNET_FILE = "alexnet-owt-7be5be79.pth"
#: Environment variable naming the AlexNet weights file.
BACKBONE_ENV = "CFKIT_LPIPS_BACKBONE"


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


def backbone_candidates(ws: Workspace | None, explicit: Path | None) -> tuple[Path | None, str]:
    """The weights file the user named (option, env, config), else torch's hub cache path."""
    if explicit is not None:
        return Path(explicit).expanduser(), "--lpips-weights"
    env = os.environ.get(BACKBONE_ENV)
    if env:
        return Path(env).expanduser(), BACKBONE_ENV
    if ws is not None and ws.config.check.lpips_backbone:
        configured = Path(ws.config.check.lpips_backbone).expanduser()
        return (configured if configured.is_absolute() else ws.root / configured), "[check] lpips_backbone in cfkit.toml"
    return None, "torch hub cache"


def hub_cache_file() -> Path:
    import torch

    return Path(torch.hub.get_dir()) / "checkpoints" / ALEXNET_FILE


_LOADED: dict[str, LpipsLoad] = {}


def load_lpips(ws: Workspace | None = None, explicit: Path | None = None) -> LpipsLoad:
    """LPIPS with AlexNet's ImageNet weights from a named file or torch's local hub cache.

    Nothing is downloaded: the backbone is built without weights and the state
    dict is read from disk. A file the user named that is missing or unreadable
    is an error; an empty cache only makes LPIPS unavailable.
    """
    path, source = backbone_candidates(ws, explicit)
    try:
        import lpips  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        return LpipsLoad(None, f"LPIPS unavailable: the 'lpips' package is not installed ({exc.name}); "
                               f"run {install_hint('lpips')}.")
    if path is None:
        path = hub_cache_file()
        if not path.is_file():
            return LpipsLoad(None, f"LPIPS unavailable: AlexNet ImageNet weights are not in {path.parent}; "
                                   f"put {ALEXNET_FILE} there, or pass --lpips-weights PATH (or set {BACKBONE_ENV}).")
    elif not path.is_file():
        raise ConfigError(f"{source}: LPIPS backbone weights {path} not found. "
                          f"Give the path of torchvision's {ALEXNET_FILE}.")
    key = str(path.resolve())
    if key not in _LOADED:
        _LOADED[key] = LpipsLoad(_build_scorer(path, source), f"LPIPS: AlexNet weights from {path}")
    return _LOADED[key]


def _build_scorer(path: Path, source: str) -> LpipsScorer:
    import lpips
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises pickle, zip and runtime errors for bad files
        raise ConfigError(f"{source}: {path} is not a readable PyTorch weights file ({exc.__class__.__name__}). "
                          f"Give torchvision's {ALEXNET_FILE}.") from exc
    with warnings.catch_warnings():
        # pnet_rand=True builds the backbone without asking torchvision for weights (no download);
        # the package's own calibrated linear layers are still loaded (pretrained=True).
        warnings.simplefilter("ignore")
        module = lpips.LPIPS(net="alex", pretrained=True, pnet_rand=True, spatial=True, verbose=False)
    # torchvision names the layers features.N.*; lpips regroups them as sliceK.N.*.
    slice_of = {}
    for name, _ in module.net.named_parameters():
        slice_name, index, _param = name.split(".")
        slice_of[index] = slice_name
    mapped = {}
    for key, tensor in state.items() if isinstance(state, dict) else ():
        parts = key.split(".")
        if len(parts) == 3 and parts[0] == "features" and parts[1] in slice_of:
            mapped[f"{slice_of[parts[1]]}.{parts[1]}.{parts[2]}"] = tensor
    try:
        module.net.load_state_dict(mapped, strict=True)
    except RuntimeError as exc:
        raise ConfigError(f"{source}: {path} does not hold AlexNet's feature layers ({str(exc).splitlines()[0]}). "
                          f"Give torchvision's {ALEXNET_FILE}.") from exc
    module.eval()
    return LpipsScorer(module, description=f"AlexNet weights from {path}")
