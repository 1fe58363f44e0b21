"""What a run would send, before it is sent: requests, images, approximate input tokens, estimated cost.

The token counts are approximations in OpenAI's way of counting, meant for a
budget, not a bill: text at about 4 characters a token (OpenAI's rule of thumb
for English), and each image by OpenAI's tile rule for high or auto detail —
fitted within 2048 x 2048, scaled so its short side is at most 768, then 85
tokens plus 170 for each 512-pixel tile (85 in all at low detail). Models
that count image tokens another way (patch-based ones, local models) will
differ. The cost bounds use the prices of :mod:`cfkit.probe.prices`: the
input estimate, and the most the output could cost if every reply used all of
``max_tokens``.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable
from dataclasses import dataclass

from cfkit.backends import ImageData, ProbeRequest
from cfkit.probe.prices import Prices

CHARS_PER_TOKEN = 4
IMAGE_BASE_TOKENS = 85
TILE_TOKENS = 170
TILE = 512


def image_tokens(width: int, height: int, detail: str = "auto") -> int:
    """Approximate input tokens of one image under OpenAI's tile rule (see the module docstring)."""
    if detail == "low":
        return IMAGE_BASE_TOKENS
    scale = min(1.0, 2048 / max(width, height))
    width, height = width * scale, height * scale
    scale = min(1.0, 768 / min(width, height))
    width, height = width * scale, height * scale
    return IMAGE_BASE_TOKENS + TILE_TOKENS * math.ceil(width / TILE) * math.ceil(height / TILE)


def _size(image: ImageData) -> tuple[int, int]:
    """(width, height): known for an image held by reference, else read from the bytes' header."""
    known = getattr(image, "size", None)
    if known is not None:
        return known
    from PIL import Image

    with Image.open(io.BytesIO(image.data)) as header:  # reads the header only
        return header.size


def text_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Estimate:
    """What a plan would send."""

    requests: int
    images: int  # images in the requests, as the backend would receive them
    input_tokens: int  # approximate
    max_output_tokens: int  # requests x max_tokens
    cost_in: float | None  # USD, approximate; None without prices
    cost_out_max: float | None  # USD if every reply used all of max_tokens

    @property
    def cost_max(self) -> float | None:
        return None if self.cost_in is None or self.cost_out_max is None else self.cost_in + self.cost_out_max


def estimate(requests: Iterable[ProbeRequest], prices: Prices | None, detail: str = "auto") -> Estimate:
    """The size and approximate cost of ``requests``."""
    n = images = tokens = output = 0
    sizes: dict[str, int] = {}  # an image sent by several requests is measured once
    for request in requests:
        n += 1
        tokens += text_tokens(request.system) + text_tokens(request.user)
        for image in request.images:
            images += 1
            if image.sha256 not in sizes:
                sizes[image.sha256] = image_tokens(*_size(image), detail=detail)
            tokens += sizes[image.sha256]
        output += request.generation.max_tokens
    if prices is None:
        return Estimate(n, images, tokens, output, None, None)
    return Estimate(n, images, tokens, output, tokens * prices.price_in / 1e6, output * prices.price_out / 1e6)
