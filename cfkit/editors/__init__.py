"""Image editors: one protocol, several interchangeable engines.

An editor turns an :class:`EditRequest` (source image, mask, prompt) into an
:class:`EditResult` (one raw image per candidate, at the source's exact size).
Inside cfkit a mask is an 8-bit array with 255 where the image may change; each
engine converts it to the convention of the service or library it calls.

Engines register in the ``cfkit.editors`` entry-point group, built-ins included
(``openai``, ``diffusers``, ``classical``, ``file``); :func:`load_editor` imports
only the chosen one, and the engine imports its heavy libraries only in ``edit``.

Failures an engine raises, and what ``auto`` does with them:

- :class:`~cfkit.errors.EditorUnavailable` — cannot run here (no key, package or
  weights): ``auto`` tries the next engine.
- :class:`~cfkit.errors.EditorTransport` — the service stayed unreachable after
  the engine's retries: ``auto`` tries the next engine.
- :class:`~cfkit.errors.EditRefused` — a content-policy refusal: recorded and
  shown, never retried and never replaced by another engine.
- :class:`~cfkit.errors.EditorError` — anything else: the edit fails.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from PIL import Image

from cfkit.errors import InputError
from cfkit.registry import EDITORS, load
from cfkit.specs import Classical

#: The engines ``--engine auto`` tries, in order.
AUTO_CHAIN = ("openai", "diffusers")


@dataclass(frozen=True)
class EditRequest:
    """Everything an engine needs for one call.

    ``image`` is the source, ``(H, W, 3)`` uint8; ``mask`` is ``(H, W)`` uint8 with
    255 where the image may change. ``classical`` and ``asset`` serve the
    classical engine, ``import_path`` the file engine; others ignore them.
    """

    spec_id: str
    prompt: str
    image: np.ndarray
    mask: np.ndarray
    n: int = 1
    seed: int | None = None
    classical: Classical | None = None
    asset: Path | None = None
    import_path: Path | None = None

    @property
    def size(self) -> tuple[int, int]:
        """``(width, height)`` of the source image."""
        return int(self.image.shape[1]), int(self.image.shape[0])


@dataclass(frozen=True)
class EditResult:
    """The raw outputs of one call, each ``(H, W, 3)`` uint8 at the source's exact size.

    ``params`` lists every setting that shaped the output (no secrets);
    ``seed`` is the seed the engine actually used for the first image (image
    ``i`` used ``seed + i``), or None when the engine takes no seed;
    ``usage`` and ``cost_usd`` are filled only when the service reports them.
    """

    images: tuple[np.ndarray, ...]
    model: str | None
    params: dict[str, Any]
    seed: int | None = None
    usage: dict[str, Any] | None = None
    cost_usd: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


@runtime_checkable
class Editor(Protocol):
    """An image editing engine; the one method is the whole seam.

    An engine may also offer ``describe(request) -> dict``, what it would send,
    which ``--dry-run`` prints; it must call nothing and write nothing.
    """

    name: str

    def edit(self, request: EditRequest) -> EditResult: ...


def editor_class(name: str) -> type:
    """The class registered as ``name``; unknown names list what is installed."""
    if name == "auto":
        raise InputError("'auto' is a chain of engines (openai, then diffusers), not one engine; name one.")
    return load(EDITORS, name)


def load_editor(name: str, options: Mapping[str, Any] | None = None) -> Editor:
    """Construct engine ``name`` with its keyword ``options`` (model, quality, steps …).

    An option the engine does not take is refused with the list it accepts.
    """
    cls = editor_class(name)
    options = dict(options or {})
    accepted = [p for p in inspect.signature(cls).parameters if p != "self"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise InputError(
            f"engine '{name}' has no option {', '.join(repr(u) for u in unknown)}; "
            f"it accepts: {', '.join(accepted) or 'none'}."
        )
    return cls(**options)


# ── shared image helpers for engines ────────────────────────────────────────


def resize_rgb(array: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Resize an RGB array to ``size = (width, height)`` with Lanczos; a no-op at that size."""
    if (array.shape[1], array.shape[0]) == tuple(size):
        return array
    return np.asarray(Image.fromarray(array).resize(size, Image.Resampling.LANCZOS))


def resize_mask(mask: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Resize a 0/255 mask to ``size`` and keep it binary (nearest neighbour)."""
    if (mask.shape[1], mask.shape[0]) == tuple(size):
        return mask
    return np.asarray(Image.fromarray(mask).resize(size, Image.Resampling.NEAREST))
