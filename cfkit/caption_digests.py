"""What a modality request takes from a caption, as digests: recorded with a run, compared by the report.

The Neutral condition shows a caption's ``neutral`` text, the Evidence
condition its ``neutral`` and ``evidence`` texts (:func:`cfkit.prompts.visual_slot`).
A modality run records a digest of each per case (its notes' ``captions``),
so that a report can tell an answer to a caption as it is now from an answer
to an older text (edited, redrafted or removed since the run): that answer is
stale, never credited to the caption now (docs/report-schema.md, ``missing``).
Author and ``reviewed`` are not in the digests: reviewing a draft does not
change what the model read. Caption files are read here with the YAML reader
alone (no pydantic), so that a report stays light.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cfkit.errors import CaptionError
from cfkit.files import read_text
from cfkit.yamlfile import load_yaml

#: The modality conditions whose prompt shows a caption.
CAPTION_CONDITIONS = ("neutral", "evidence")


def _digest(*texts: str) -> str:
    return hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()[:16]


def condition_digests(neutral: str, evidence: str | None) -> dict[str, str]:
    """Per caption condition, a digest of the caption texts its prompt shows (stripped, as the prompt shows them)."""
    neutral, evidence = neutral.strip(), (evidence or "").strip()
    return {"neutral": _digest(neutral), "evidence": _digest(neutral, evidence)}


@dataclass(frozen=True)
class CaptionNow:
    """A caption file as it is now: the digests of its texts, or why it has none; whether it is an unreviewed draft."""

    digests: Mapping[str, str] | None
    problem: str | None = None  # why there are no digests, after the file's name: "does not exist now"
    unreviewed_draft: bool = False


def caption_now(path: Path) -> CaptionNow:
    """Read ``path`` as the report compares it with what a run recorded; never raises for a bad file."""
    try:
        raw = load_yaml(read_text(path, "caption file", CaptionError), path, CaptionError)
    except FileNotFoundError:
        return CaptionNow(None, "does not exist now")
    except CaptionError:
        return CaptionNow(None, "cannot be read as a caption now ('cfkit captions lint' says why)")
    if not isinstance(raw, dict) or not isinstance(raw.get("neutral"), str) or \
            not isinstance(raw.get("evidence") or "", str):
        return CaptionNow(None, "is not a caption now ('cfkit captions lint' says why)")
    drafted = raw.get("author", "human") != "human"
    reviewed = str(raw.get("reviewed", False)).lower() in _TRUE  # as the caption's pydantic model reads a bool
    return CaptionNow(condition_digests(raw["neutral"], raw.get("evidence")), unreviewed_draft=drafted and not reviewed)


_TRUE = frozenset({"true", "1", "on", "t", "y", "yes"})
