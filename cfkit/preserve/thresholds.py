"""The limits of a preservation verdict and the geometry of its regions (defaults: :mod:`cfkit.preserve`'s table)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Thresholds:
    """Limits of the verdict and the geometry of the regions (see the module docstring)."""

    margin: int = 4
    border: int = 4
    ssim_out_min: float = 0.95
    psnr_out_min: float = 30.0
    lpips_out_max: float = 0.05
    leak_max: float = 0.01
    leak_delta: int = 24
    mad_in_min: float = 0.02
    change_in_min: float = 0.05

    @classmethod
    def for_spec(cls, checks: Mapping[str, Any] | None, *, margin: int | None = None) -> "Thresholds":
        """Defaults, then the workspace's margin, then the spec's own overrides (its ``checks:`` as a mapping)."""
        base = cls() if margin is None else cls(margin=margin)
        if not checks:
            return base
        return replace(base, **{k: v for k, v in checks.items() if v is not None})
