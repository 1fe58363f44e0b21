"""The records of the ``runs`` and ``replies`` tables as :mod:`cfkit.store.runs`, their owner, reads and writes
them: a run (:class:`RunRecord`, what it recorded when it opened: :class:`RunSettings`) and a reply
(:class:`ReplyRecord`; what the runner stores for it: :class:`ReplyFields` and :class:`ReplyProvenance`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: A reply's place in its run: (case id, pair id or '', condition).
ReplyKey = tuple[str, str, str]


def asks_part(selection: dict[str, Any]) -> bool:
    """Whether a run's recorded selection asks only part of its suite (``--limit``, ``--cases``,
    ``--reviewed-only``)."""
    return any(selection.get(k) for k in ("limit", "cases", "reviewed_only"))


@dataclass(frozen=True)
class RunRecord:
    """One row of the runs table."""

    id: str
    model: str
    suite: str
    status: str
    started_at: str
    finished_at: str | None
    n_requests: int
    n_done: int
    n_errors: int
    cost_usd: float | None
    cfkit_version: str
    templates_sha256: str | None
    options: dict[str, Any]
    notes: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)
    settings_sha256: str | None = None  # None for runs recorded before cfkit recorded settings
    requests_sha256: str | None = None
    inputs_sha256: str | None = None
    endpoint: str | None = None
    versions: dict[str, Any] = field(default_factory=dict)
    protocol: str | None = None
    selection: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def complete(self) -> bool:
        """Every planned request has a stored reply (the run ended 'done', with no transport failure left)."""
        return self.status == "done" and self.n_done == self.n_requests and self.n_errors == 0

    @property
    def last_active(self) -> str:
        """When an invocation of the run last ended (or, while one runs, when the run began)."""
        return self.finished_at or self.started_at

    @property
    def subset(self) -> bool:
        """Asked only part of its suite (``--limit``, ``--cases``, ``--reviewed-only``)."""
        return asks_part(self.selection)

    @property
    def cost_unreported(self) -> int:
        """Replies of a priced run whose cost is not known (the server reported no usable token counts): the
        run's ``cost_usd`` leaves them out, so it is at least what the run spent."""
        found = self.notes.get("cost_unreported")
        return found if isinstance(found, int) else 0

    @property
    def priced(self) -> bool:
        """Whether the run is priced: a reply of it carries a cost, or its newest invocation had prices (a run
        stopped or failed before any reply came is priced all the same: it spent $0.00 that is known)."""
        return self.cost_usd is not None or self.cost_unreported > 0 or bool(self.notes.get("prices"))

    @property
    def abandoned_attempts(self) -> int:
        """Attempts given up after they were sent (timeouts, connections dropped mid-reply), over the run's
        invocations: a provider may bill them, and ``cost_usd`` leaves them out."""
        found = self.notes.get("abandoned_attempts")
        return found if isinstance(found, int) else 0

    @property
    def largest_reply_usd(self) -> float | None:
        """The largest cost a reply of this priced run reported (what each abandoned attempt may have cost)."""
        found = self.notes.get("largest_reply_usd")
        return float(found) if isinstance(found, (int, float)) and not isinstance(found, bool) else None

    @property
    def imported(self) -> dict[str, Any] | None:
        """Where a run ``cfkit runs import`` stored came from (``from``, ``format``, ``peer_disagrees``), else None."""
        found = self.notes.get("imported")
        return found if isinstance(found, dict) else None

    @property
    def replayed(self) -> bool:  # its replies were read from a file made elsewhere (replay:, runs import)
        return "replay" in (self.settings.get("backend"), self.options.get("backend"))

    @property
    def made_with_max_tokens(self) -> int | None:
        """The token limit its replies were made with, where known: a run that asked a model, its own
        (``settings.generation.max_tokens``); a run ``runs import`` stored from a cfkit export, the exported run's
        (``notes.imported.max_tokens``); a replay's own limit is not the one its replies were cut at: None."""
        if self.imported is not None:
            found = self.imported.get("max_tokens")
        elif self.replayed:
            return None
        else:
            found = (self.settings.get("generation") or {}).get("max_tokens")
        return found if isinstance(found, int) and not isinstance(found, bool) and found > 0 else None


@dataclass(frozen=True)
class ReplyRecord:
    """One row of the replies table."""

    run_id: str
    case_id: str
    pair_id: str
    condition: str
    cache_key: str | None
    answer: str | None
    parse: str | None
    error: str | None
    reason: str | None
    confidence: str | None
    raw: str | None
    detail: str | None
    created_at: str
    cost_usd: float | None
    edit_id: int | None = None
    image_sha256: str | None = None
    server_model: str | None = None
    system_fingerprint: str | None = None
    raw_chars: int | None = None  # the reply's full length when ``raw`` was cut to the storage cap
    reasoning: str | None = None  # never graded
    parser: str | None = None  # the parser version of the reading; None for known answers and older stores
    truncated: bool = False  # the reply stopped at the token limit, not at its end
    endpoint: str | None = None  # the server that answered, when the model had several (provenance)

    @property
    def key(self) -> ReplyKey:
        return (self.case_id, self.pair_id, self.condition)


@dataclass(frozen=True)
class ReplyFields:
    """What the runner stores for one reply (the parsed reading and why)."""

    answer: str | None
    parse: str | None
    error: str | None
    reason: str | None
    confidence: str | None
    detail: str | None
    reasoning: str | None = None  # split off the reply or returned beside it; never graded
    parser: str | None = None  # cfkit.parse.PARSER_VERSION when the parser read it


@dataclass(frozen=True)
class ReplyProvenance:
    """What a reply was about and who gave it: the edit and image shown, the server's model id and build, and
    whether it stopped at the token limit."""

    edit_id: int | None = None
    image_sha256: str | None = None
    server_model: str | None = None
    system_fingerprint: str | None = None
    truncated: bool = False
    endpoint: str | None = None  # the server that answered, when the model had several


@dataclass(frozen=True)
class RunSettings:
    """What a run records when it opens, besides its id, model and suite."""

    settings: dict[str, Any]
    settings_sha256: str
    requests_sha256: str
    endpoint: str | None
    versions: dict[str, Any]
    protocol: str | None
    selection: dict[str, Any]
