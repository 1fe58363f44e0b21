"""The LPIPS scorer (Zhang et al. 2018): spatial distance maps from an ``lpips.LPIPS`` module.

Built from AlexNet's five convolution layers (:func:`scorer_from_features`);
which weights may be used, and where they are found, is :mod:`cfkit.weights.lpips`.
torch and lpips are imported only when a scorer is built or used.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image


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
