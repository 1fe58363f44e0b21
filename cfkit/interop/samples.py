"""What a peer's results file holds, read into one shape: samples with a raw reply, the peer's own reading, and
the file's model name where the peer recorded one.

Each format module (:mod:`~cfkit.interop.inspect_log`, :mod:`~cfkit.interop.lmms`,
:mod:`~cfkit.interop.vlmevalkit`) reads its files into a :class:`PeerFile`;
:mod:`~cfkit.interop.mapping` turns one into cfkit's records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The peers' formats cfkit reads and writes, and what each is.
PEER_FORMATS = {
    "inspect": "an inspect_ai eval log (.eval or .json)",
    "lmms": "an lmms-eval per-sample JSONL (--log_samples)",
    "vlmevalkit": "a VLMEvalKit prediction table (.xlsx, .tsv or .csv, or .json under PRED_FORMAT=json)",
}

#: The key under which cfkit's own fields travel in a peer's record (sample metadata, a JSONL key, columns).
CFKIT_KEY = "cfkit"


@dataclass(frozen=True)
class PeerSample:
    """One answer as a peer recorded it."""

    sample_id: str  # the peer's id for the question (a case id when the peer ran cfkit's cases)
    raw: str | None  # the model's reply as the peer kept it
    where: str  # FILE, sample N: for messages
    peer_answer: str | None = None  # the peer's own extraction of the answer, where it made one
    options: dict[str, str] | None = None  # option id -> text as the peer asked them, where it recorded them
    record: dict[str, Any] | None = None  # cfkit's own fields, when cfkit wrote the file ('runs export')
    truncated: bool = False  # the peer says generation stopped at the token limit (inspect_ai: max_tokens)
    #: The peer says the request failed and the model gave no reply: its words (inspect_ai: the sample's error;
    #: VLMEvalKit: its "Failed to obtain answer via API." in place of a prediction). A transport failure, never a
    #: reply that names no option.
    failed: str | None = None
    #: The peer says a filter of the provider blocked the reply, or the model declined: its words. Stored as a
    #: declined reply (error ``refused``), as cfkit records one of its own runs (inspect_ai: stop_reason
    #: content_filter, or a text part marked as a refusal).
    declined: str | None = None
    #: Reasoning the peer kept apart from the reply (inspect_ai: reasoning parts; VLMEvalKit: its SPLIT_THINK
    #: ``thinking`` column); kept with the reading, never graded.
    reasoning: str | None = None
    target: str | None = None  # the answer the peer held right (inspect: target; lmms: target; VLMEvalKit: answer)


@dataclass(frozen=True)
class PeerFile:
    """A peer's results file read: its samples and, where it says, the model that answered."""

    path: Path
    fmt: str
    model: str | None
    model_source: str  # where the model name came from, for messages
    samples: list[PeerSample] = field(default_factory=list)
    extracts: bool = True  # whether the peer's format has an extraction of its own to compare with
    #: The peer says its evaluation did not finish (inspect_ai: a log whose status is not success): its words.
    unfinished: str | None = None
    #: Samples the file holds but says are not to be counted, left out of the reading: (where, why) of each
    #: (inspect_ai: a sample invalidated after the eval, its ``invalidation``).
    left_out: list[tuple[str, str]] = field(default_factory=list)


def target_text(value: Any) -> str | None:
    """A peer's target for a sample as text (the first, where it records a list), None where it records none."""
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, str) and value else None
