"""Re-reading stored replies with the current parser, and listing the replies that gave no answer.

Every reply the parser read records the parser's version
(:data:`cfkit.parse.PARSER_VERSION`). :func:`reparse_run` reads a run's stored
raw replies again with the current parser — no model is asked — and stores the
new readings with the new version; it says which answers changed and why.
Replies a backend gave already read (replay, baselines), transport failures
and replies the model declined through the API are not the parser's and are
left as they are.

A reply stored before cfkit recorded the parser version has none; it counts
as read by an older parser when its backend's replies are parsed (a cacheable
backend: API and local models) and it is not a refusal the server flagged.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from cfkit.backends import Reply, backend_class, split_model
from cfkit.cases import CaseSet
from cfkit.errors import PluginError
from cfkit.parse import PARSER_VERSION
from cfkit.probe.recording import read_reply
from cfkit.store import Store, responses, runs
from cfkit.store.runs import ReplyFields, ReplyKey, ReplyRecord, RunRecord


@dataclass(frozen=True)
class Reading:
    """One reading of a reply: the answer (or None), the rule that read it, the error when none was read."""

    answer: str | None
    rule: str | None
    error: str | None
    parser: str | None  # the version that read it; None when not recorded

    def describe(self) -> str:
        """``A (json)``, ``no answer (ambiguous)``."""
        return f"{self.answer} ({self.rule})" if self.answer is not None else f"no answer ({self.error})"


@dataclass(frozen=True)
class ChangedReading:
    """A reply the current parser reads differently, with why (its detail)."""

    key: ReplyKey
    old: Reading
    new: Reading
    detail: str | None

    @property
    def unit(self) -> str:
        return " ".join(part for part in self.key if part)


@dataclass(frozen=True)
class ReparseResult:
    """What ``cfkit runs reparse`` did to one run."""

    run_id: str
    parser: str  # the version the replies were read with now
    reread: int  # replies read again (their new readings stored)
    current: int  # replies already read by this parser version, left alone (without --all)
    not_parsed: int  # replies the parser does not read: known answers, refusals, transport failures
    missing_case: tuple[str, ...]  # cases no longer in the cases file; their replies were left alone
    changed: tuple[ChangedReading, ...]

    def why(self) -> list[tuple[str, int]]:
        """(``old → new``, how many), most frequent first: what the changes were."""
        counts = Counter(f"{c.old.describe()} → {c.new.describe()}" for c in self.changed)
        return counts.most_common()


def _reading(reply: ReplyRecord) -> Reading:
    return Reading(reply.answer, reply.parse, reply.error, reply.parser)


def _parsed_by_backend(run: RunRecord) -> bool:
    """Whether the run's backend hands back text for the parser (not answers it already read). A run imported
    from a file is a replay run, whatever its model is called ('Peer-VLM' is no KIND:NAME): what cfkit's parser
    read of it carries the parser's version, and the rest are answers the file held."""
    try:
        cls = backend_class("replay" if run.imported is not None else split_model(run.model)[0])
    except PluginError:
        return True  # an uninstalled plug-in: judge by the replies alone
    return bool(cls.capabilities is None or cls.capabilities.cacheable)


def reparse_run(store: Store, cases: CaseSet, run: RunRecord, *, everything: bool = False) -> ReparseResult:
    """Read ``run``'s stored replies again with the current parser and store the new readings.

    Without ``everything`` only replies read by another parser version (or by
    one that was not recorded) are read again; with it, every reply the
    parser reads. Nothing is sent to a model. The cached response gives the
    reasoning the server returned beside a reply, and tells a refusal the
    server flagged from one the parser read.
    """
    stored = runs.replies(store, run.id)
    cached = responses.cached(store, [r.cache_key for r in stored if r.cache_key])
    parsed_backend = _parsed_by_backend(run)
    changed: list[ChangedReading] = []
    rereads: list[tuple[ReplyRecord, ReplyFields]] = []
    current = not_parsed = 0
    missing: list[str] = []
    for reply in stored:
        hit = cached.get(reply.cache_key) if reply.cache_key else None
        if reply.error == "transport" or reply.raw is None or (hit is not None and hit.refused):
            not_parsed += 1
            continue
        if reply.parser is None and not parsed_backend:
            not_parsed += 1  # a known answer (replay, baselines): the backend read it, not the parser
            continue
        if reply.parser == PARSER_VERSION and not everything:
            current += 1
            continue
        if reply.case_id not in cases:
            missing.append(reply.case_id)
            continue
        fields = read_reply(Reply(raw=reply.raw, reasoning=hit.reasoning if hit else None),
                            cases.get(reply.case_id))
        rereads.append((reply, fields))
        new = Reading(fields.answer, fields.parse, fields.error, fields.parser)
        old = _reading(reply)
        if (old.answer, old.rule, old.error) != (new.answer, new.rule, new.error):
            changed.append(ChangedReading(reply.key, old, new, fields.detail))
    with store.transaction() as tx:
        for reply, fields in rereads:
            runs.reread_reply(tx, run.id, reply.key, fields)
    return ReparseResult(run_id=run.id, parser=PARSER_VERSION, reread=len(rereads), current=current,
                         not_parsed=not_parsed, missing_case=tuple(dict.fromkeys(missing)),
                         changed=tuple(changed))


def unparsed(store: Store, run: RunRecord) -> list[ReplyRecord]:
    """The replies of ``run`` that gave no answer although a reply came (transport failures left out)."""
    return [r for r in runs.unanswered(store, run.id) if r.error != "transport"]
