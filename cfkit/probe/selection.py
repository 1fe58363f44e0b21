"""Which part of a suite a run asks (``--limit``, ``--cases``, ``--accepted-only``, ``--reviewed-only``,
``--subset``, ``--all-cases``): a value the CLI builds before anything is planned, and the run records."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Selection:
    """Which part of a suite a run asks.

    ``limit``: the first N units (cases; pairs for counterfactual) after the
    other filters; ``cases``: a subset file of case ids (a counterfactual pair
    is kept when its case is listed); ``accepted_only``: counterfactual pairs
    whose edit a person accepted; ``reviewed_only``: modality cases whose
    caption is not an unreviewed draft (a person wrote or reviewed it).
    """

    limit: int | None = None
    cases: Path | None = None
    accepted_only: bool = False
    reviewed_only: bool = False
    #: Modality: the suite's cases from this subset file instead of the configured one, or every case.
    subset: str | Path | None = None
    all_cases: bool = False

    def as_dict(self) -> dict[str, Any]:
        """What a run records (the cases and subset files by path and content digest)."""
        recorded: dict[str, Any] = {"limit": self.limit, "accepted_only": self.accepted_only,
                                    "reviewed_only": self.reviewed_only, "cases": None}
        for key, path in (("cases", self.cases), ("subset", self.subset)):
            if path is not None:
                path = Path(path)
                data = path.read_bytes() if path.is_file() else b""
                recorded[key] = {"path": str(path), "sha256": hashlib.sha256(data).hexdigest()}
        if self.all_cases:
            recorded["all_cases"] = True
        return recorded
