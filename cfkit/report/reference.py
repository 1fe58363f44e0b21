"""The paper's published figures (``cfkit/data/reference.json``), with their citation."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def load_reference() -> dict[str, Any]:
    """The published figures of Tables 2, 6, S7, S8, S9 and S10 (arXiv 2608.26713), with their citation."""
    text = resources.files("cfkit").joinpath("data/reference.json").read_text(encoding="utf-8")
    return json.loads(text)


def reference_label(table: str) -> str:
    ref = load_reference()
    entry = ref["tables"][table]
    page = f", p. {entry['page']}" if entry.get("page") else ""
    return f"{entry['name']}, arXiv {ref['citation']['arxiv']}{page}"
