"""Storing replies: each reply read once, and written with others in small transactions.

One SQLite commit per reply was a few percent of a fast run; a
:class:`Recorder` keeps the replies that arrived and commits them together
every :data:`BATCH_REPLIES` replies or :data:`BATCH_S` seconds, whichever comes
first (and when the run ends, fails or is interrupted). A crash or ``kill -9``
loses at most the replies of the batch not yet committed; they are sent again
on the next run. Each commit stores the replies, their cached responses and
gives up their leases (:mod:`cfkit.probe.sharing`; a transport failure's is
kept, marked failed) at once.

A reply is read (:func:`read_reply`: parsed) when its batch is committed, not
when it arrives, and a reply queued without its cache key (a lazy plan's,
when the response cache cannot answer it: :mod:`cfkit.probe.sending`) is
keyed then too, from the digests of the images it sent. At 64 requests in
flight a run is bound by the event loop's CPU: the same work done for a
batch of replies at once, its code and data still in the processor's caches,
cost about half as much as done reply by reply between the requests' image
traffic. The stored rows are the same either way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

from cfkit.backends import Backend, Reply
from cfkit.cases import Case
from cfkit.probe.plan import ProbeItem
from cfkit.store import Store, leases, now, responses, runs
from cfkit.store.responses import CachedResponse
from cfkit.store.runs import ReplyFields, ReplyProvenance

#: Replies committed together at most …
BATCH_REPLIES = 64
#: … and the longest a reply waits for its commit (seconds).
BATCH_S = 0.1


def read_reply(reply: Reply, case: Case) -> ReplyFields:
    """The stored reading of a reply: answer, parse rule, error, reason, confidence, detail, reasoning, parser.

    A known answer (replay, baselines) is stored as the backend gave it; one
    without an answer keeps its reason as the detail too, so 'cfkit runs show'
    says why. Any other reply is read by :func:`cfkit.parse.parse_answer`, with
    the reasoning the server returned beside it; the reading records
    :data:`cfkit.parse.PARSER_VERSION`.
    """
    if reply.known is not None:
        k = reply.known
        detail = k.reason if k.answer is None and k.error is not None else None
        return ReplyFields(answer=k.answer, parse=k.parse, error=k.error, reason=k.reason, confidence=k.confidence,
                           detail=detail, reasoning=reply.reasoning)
    if reply.refused:
        return ReplyFields(answer=None, parse=None, error="refused", reason=reply.raw, confidence=None,
                           detail="the model declined to answer", reasoning=reply.reasoning)
    global _parser
    if _parser is None:  # loaded with the first reply, off the path to the first request; then kept here
        from cfkit.parse import PARSER_VERSION, parse_answer

        _parser = (parse_answer, PARSER_VERSION)
    parse_answer, parser_version = _parser
    parsed = parse_answer(reply.raw, case.options, reasoning=reply.reasoning)
    return ReplyFields(answer=parsed.answer, parse=parsed.rule, error=parsed.error, reason=parsed.reason,
                       confidence=parsed.confidence, detail=parsed.detail or None, reasoning=parsed.reasoning,
                       parser=parser_version)


#: (:func:`cfkit.parse.parse_answer`, :data:`cfkit.parse.PARSER_VERSION`) once :func:`read_reply` has read a reply
#: (the import statement and the lazy package's look-up cost a few microseconds a reply).
_parser: tuple | None = None


def cached_reply(hit: CachedResponse, priced: bool) -> Reply:
    """A cached response as the reply it was, at no cost: nothing is paid for it again (its first cost stays with
    the cache and the run that paid it, so a run's cost is what it spent). ``priced``: the backend has prices
    (else the cost is None, as for its sent replies)."""
    return Reply(raw=hit.raw, usage=hit.usage, latency_s=hit.latency_s, cost_usd=0.0 if priced else None,
                 refused=hit.refused, server_model=hit.server_model, system_fingerprint=hit.system_fingerprint,
                 raw_chars=hit.raw_chars, reasoning=hit.reasoning, truncated=hit.truncated, endpoint=hit.endpoint)


def provenance(item: ProbeItem, reply: Reply | None) -> ReplyProvenance:
    """What a reply was about (the edit and image shown) and who gave it (the server's model id and build)."""
    return ReplyProvenance(
        edit_id=item.edit_id,
        image_sha256=item.image_sha256,
        server_model=reply.server_model if reply is not None else None,
        system_fingerprint=reply.system_fingerprint if reply is not None else None,
        truncated=reply is not None and reply.truncated,
        endpoint=reply.endpoint if reply is not None else None,
    )


class _Pending(NamedTuple):
    item: ProbeItem
    cache_key: str | None  # None: taken from ``shas`` when committed (:attr:`Recorder.keyer`)
    reply: Reply | None  # None: a transport failure
    fields: ReplyFields | None  # None: read from the reply when committed
    cache: bool  # also store the response in the cache
    shas: tuple | None = None  # the SHA-256 of each image the request sent, for a key not taken yet


#: (the item, the SHA-256 of each image its request sent) -> (its cache key, the item with its image's digest).
Keyer = Callable[[ProbeItem, tuple], tuple[str, ProbeItem]]


class Recorder:
    """Writes a run's replies in small transactions (see the module docstring).

    ``cache_as`` is the backend whose fresh responses go to the response cache
    (None for backends whose replies are not cached); ``lease_owner`` the
    owner whose leases each stored reply gives up; ``keyer`` keys the replies
    queued without a cache key.
    """

    def __init__(self, store: Store, run_id: str, *, cache_as: Backend | None, lease_owner: str | None = None,
                 batch: int = BATCH_REPLIES, seconds: float = BATCH_S):
        self.store = store
        self.run_id = run_id
        self.cache_as = cache_as
        self.lease_owner = lease_owner
        self.batch = batch
        self.seconds = seconds
        self._pending: list[_Pending] = []
        self._oldest = 0.0
        self.commits = 0
        self.keyer: Keyer | None = None

    def reply(self, item: ProbeItem, cache_key: str | None, reply: Reply, *, fresh: bool = True,
              shas: tuple | None = None) -> None:
        """Queue ``reply`` (read when committed); ``fresh`` when it came from the model (not from the cache).
        A ``cache_key`` of None is taken when committed, by :attr:`keyer`, from ``shas`` (the SHA-256 of each
        image the request sent)."""
        if cache_key is None and (shas is None or self.keyer is None):
            raise ValueError("a reply queued without its cache key needs its images' digests and a keyer")
        self._add(_Pending(item, cache_key, reply, None, fresh and self.cache_as is not None, shas))

    def transport(self, item: ProbeItem, cache_key: str, message: str) -> None:
        """Queue a transport failure (no reply; retried on the next run) with what the server said."""
        fields = ReplyFields(answer=None, parse=None, error="transport", reason=None, confidence=None, detail=message)
        self._add(_Pending(item, cache_key, None, fields, False))

    def _add(self, pending: _Pending) -> None:
        if not self._pending:
            self._oldest = time.monotonic()
        self._pending.append(pending)
        if len(self._pending) >= self.batch:
            self.flush()

    def due(self) -> bool:
        """Whether the oldest queued reply has waited :data:`BATCH_S`."""
        return bool(self._pending) and time.monotonic() - self._oldest >= self.seconds

    def flush(self) -> None:
        """Commit every queued reply in one transaction (with their cached responses and lease releases).

        Each reply is read (and, queued without its key, keyed) here. A reply that cannot be read does not
        keep the others of its batch from being stored: its error is raised once they are committed, and it is
        sent again on the next run."""
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        stamp = now()  # one clock reading for the batch: its replies are committed together
        cached, stored, answered, failed = [], [], [], []
        failure: Exception | None = None
        for p in batch:
            item, cache_key, reply, fields = p.item, p.cache_key, p.reply, p.fields
            try:
                if cache_key is None:
                    cache_key, item = self.keyer(item, p.shas)
                if fields is None:
                    fields = read_reply(reply, item.case)
            except Exception as exc:  # noqa: BLE001 - raised below, once the rest of the batch is stored
                failure = failure or exc
                continue
            if p.cache and reply is not None:
                cached.append(responses.reply_response_row(cache_key, reply, backend=self.cache_as.kind,
                                                           model=self.cache_as.model, created_at=stamp))
            stored.append(runs.reply_row(self.run_id, item.key, cache_key=cache_key,
                                         raw=reply.raw if reply is not None else None, fields=fields,
                                         cost_usd=reply.cost_usd if reply is not None else None,
                                         provenance=provenance(item, reply),
                                         raw_chars=reply.raw_chars if reply is not None else None, created_at=stamp))
            (answered if reply is not None else failed).append(item.key)
        with self.store.transaction() as tx:
            if cached:
                responses.put_rows(tx, cached)
            runs.write_replies(tx, stored)
            if self.lease_owner is not None:
                leases.release(tx, self.run_id, answered, self.lease_owner)
                leases.mark_failed(tx, self.run_id, failed, self.lease_owner)
        self.commits += 1
        if failure is not None:
            raise failure
