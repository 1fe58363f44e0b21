"""The names the record formats and the commands share: suites, conditions, report formats, audit criteria
(and the one bound cfkit.toml and a flag both check: requests in flight).

Every module that names a suite, a condition or an output format takes it from
here (see docs/formats.md, "Predictions", and docs/report-schema.md).
"""

from __future__ import annotations

from typing import Literal

#: The most requests a probe run keeps in flight ([probe] concurrency, probe run -j).
MAX_CONCURRENCY = 256
#: The widest gap (pixels) between an edit mask and the region whose preservation is checked ([check] margin).
MAX_MARGIN_PX = 512

Suite = Literal["contextcanvas", "counterfactual", "modality", "swap"]
Condition = Literal["image", "original", "edit", "text", "neutral", "evidence", "original-order", "swapped-order"]

#: The conditions each suite asks under, in report order.
SUITE_CONDITIONS: dict[str, tuple[str, ...]] = {
    "contextcanvas": ("image",),
    "counterfactual": ("original", "edit"),
    "modality": ("text", "neutral", "evidence", "image"),
    # The position-bias probe: each two-option case with its options as given, then with their texts exchanged.
    "swap": ("original-order", "swapped-order"),
}

SUITES: tuple[str, ...] = tuple(SUITE_CONDITIONS)

#: The modality conditions, in the order the paper's Table S9 lists them.
MODALITY_CONDITIONS: tuple[str, ...] = SUITE_CONDITIONS["modality"]

#: The swap suite's two option orders: as the cases file lists them, and with the two option texts exchanged.
SWAP_CONDITIONS: tuple[str, ...] = SUITE_CONDITIONS["swap"]
ORIGINAL_ORDER, SWAPPED_ORDER = SWAP_CONDITIONS

#: Every condition in report order (a condition shared by two suites appears once).
CONDITION_ORDER: tuple[str, ...] = tuple(dict.fromkeys(c for cs in SUITE_CONDITIONS.values() for c in cs))


def condition_rank(condition: str) -> tuple[int, str]:
    """A sort key putting conditions in report order, unknown ones last."""
    order = CONDITION_ORDER
    return (order.index(condition) if condition in order else len(order), condition)


#: ``cfkit report --format`` values: Rich tables, the JSON object, long CSV, Markdown, LaTeX.
REPORT_FORMATS: tuple[str, ...] = ("table", "json", "csv", "md", "latex")

#: The criteria of the evidence-grounding audit (docs/metrics.md): the answer is correct, the decisive cue is
#: identified, the cue is linked to the stated use, and all three together (the EGA judgement).
AUDIT_CRITERIA: tuple[str, ...] = ("answer", "cue", "link", "ega")

#: ``cfkit audit export`` / ``import`` formats: JSON Lines, and CSV for spreadsheets.
AUDIT_FORMATS: tuple[str, ...] = ("jsonl", "csv")


def verdict_label(verdict: str, lpips_measured: bool) -> str:
    """``pass``, ``fail``, ``pass (without LPIPS)`` …: the one way a verdict is written for people."""
    return verdict + ("" if lpips_measured else " (without LPIPS)")
