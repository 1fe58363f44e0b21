"""``cfkit runs import FILE``: records from any supported format stored as replay runs, one per model and suite.

A run exported by cfkit comes back under its own id with every field it had
(the reply's reading, provenance, reasoning, tokens and usage, latency, cost,
cache key, when it was stored), and with what the run was shown of each case
(``asked``, a modality run's ``captions``), so that a report tells its stale
answers as it did before the export, with the status it ended with and the
requests it planned (an incomplete run stays incomplete, its unanswered
requests missing), and with what it recorded of what it asked: the pairs or
cases it skipped and why, the part of the suite it asked, the digest of its
probe templates and of each template its requests were rendered from, the
cases or pairs it asked with a caption or edit no person had reviewed, and
the token limit its replies were made with, so that a report says of it what
it said before.
Records from a peer's file get a run id made from the suite, the model and a
digest of the records. A run id already in the store is refused before
anything is written.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cfkit import __version__
from cfkit.cases import CaseSet
from cfkit.errors import PredictionError
from cfkit.interop.records import RunRecordRow
from cfkit.predictions import check_predictions
from cfkit.store import Store, responses, runs
from cfkit.store.responses import CachedResponse
from cfkit.store.records.runs import asks_part
from cfkit.store.runs import ReplyFields, ReplyProvenance


@dataclass(frozen=True)
class ImportedRun:
    """One run stored by an import."""

    run_id: str
    model: str
    suite: str
    replies: int
    errors: int
    cases: int | None = None  # the suite's cases, where a reply is one case's (contextcanvas): what a report counts
    status: str = "done"  # as the run's export recorded it (an incomplete run stays incomplete)
    requests: int = 0  # the requests the run planned (more than ``replies`` where some were never answered)


#: Export columns added after peers' files were first imported (see :func:`_run_id`).
_LATER = ("asked", "captions", "run_status", "run_requests", "run_stopped", "run_skipped", "run_selection",
          "run_templates", "run_unreviewed", "run_template_digests", "run_left_out", "run_max_tokens")
#: What a run records of each case it was shown (a report compares it with the workspace now).
_SHOWN = ("asked", "captions")


@dataclass(frozen=True)
class RunState:
    """How a run read from a file ended, and what it recorded of what it asked: what ``cfkit runs show`` and a
    report say of it."""

    status: str
    n_requests: int
    n_done: int
    n_errors: int
    stopped: str | None = None  # why it stopped before sending every request
    skipped: tuple[dict[str, str], ...] | None = None  # the pairs (cases) it could not ask (None: not recorded)
    selection: dict | None = None  # the part of the suite it asked (None: not recorded, the whole suite)
    templates: str = ""  # the SHA-256 of its probe templates ("": not recorded)
    unreviewed: tuple[str, ...] | None = None  # the cases (pairs) it asked with a caption (edit) no person had
    #                                            reviewed (None: not recorded)
    template_digests: dict[str, str] | None = None  # each probe template its requests were rendered from -> its
    #                                                 digest (None: not recorded, a file made before cfkit wrote it)
    left_out: tuple[str, ...] | None = None  # the units of the suite its selection left out (None: not recorded)
    asked_whole: bool = False  # its rows name every unit it planned (a row for each request it planned, of the
    #                            whole suite): the cases (pairs) they answer are all it asked (cfkit.report.absent)
    max_tokens: int | None = None  # the token limit its replies were made with (None: not recorded)

    @property
    def complete(self) -> bool:
        """As :attr:`cfkit.store.runs.RunRecord.complete`."""
        return self.status == "done" and self.n_done == self.n_requests and self.n_errors == 0


def run_state(group: Sequence[RunRecordRow]) -> RunState:
    """The state of the run whose rows are ``group``: the status and planned requests its export records (a run
    exported before it ended is incomplete here, where nothing will add to it), else done with a request a row."""
    errors = sum(r.error == "transport" for r in group)
    status = next((r.run_status for r in group if r.run_status is not None), None) or "done"
    requests = next((r.run_requests for r in group if r.run_requests is not None), None) or 0
    if status in ("running", "waiting"):
        status = "incomplete"
    stopped = next((r.run_stopped for r in group if r.run_stopped), None)
    skipped = next((r.run_skipped for r in group if r.run_skipped is not None), None)
    selection = next((r.run_selection for r in group if r.run_selection), None)
    templates = next((r.run_templates for r in group if r.run_templates), None) or ""
    unreviewed = next((r.run_unreviewed for r in group if r.run_unreviewed is not None), None)
    digests = next((r.run_template_digests for r in group if r.run_template_digests), None)
    left_out = next((r.run_left_out for r in group if r.run_left_out is not None), None)
    max_tokens = next((r.run_max_tokens for r in group if r.run_max_tokens is not None), None)
    # A row for each request it planned: its rows name every unit it asked. Of a run of part of its suite, that
    # tells a unit added since only beside the units its selection left out.
    whole = (any(r.run_requests is not None for r in group) and len(group) >= requests
             and any(r.asked is not None for r in group) and (not asks_part(selection or {}) or left_out is not None))
    return RunState(status, max(requests, len(group)), len(group) - errors, errors, stopped,
                    None if skipped is None else tuple(skipped), selection, templates,
                    None if unreviewed is None else tuple(unreviewed), digests,
                    None if left_out is None else tuple(left_out), whole, max_tokens)


def asked_pairs(group: Sequence[RunRecordRow]) -> list[str]:
    """The pairs the rows answer (of a run whose rows name every unit it planned: the pairs it asked)."""
    return sorted({r.pair for r in group if r.pair})


def shown_notes(group: Sequence[RunRecordRow]) -> dict[str, dict]:
    """What the run was shown of each case, as a run's notes record it (``asked``, ``captions``; only those the
    rows carry)."""
    notes = {}
    for name in _SHOWN:
        if shown := {r.case: getattr(r, name) for r in group if getattr(r, name) is not None}:
            notes[name] = shown
    return notes


def _run_id(rows: Sequence[RunRecordRow]) -> str:
    first = rows[0]
    if first.run:
        return first.run
    # Columns added later count only where set, so a file gets the id it was given before they were.
    records = [{k: v for k, v in r.to_dict().items() if v is not None or k not in _LATER} for r in rows]
    digest = hashlib.sha256(json.dumps(records, sort_keys=True).encode()).hexdigest()
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", first.model).strip("-")[:48]
    return f"{first.suite}-import-{slug}-{digest[:8]}"


def group_runs(rows: Sequence[RunRecordRow]) -> dict[tuple[str, str, str], list[RunRecordRow]]:
    """Rows by (run id as recorded, model, suite), in the order read."""
    grouped: dict[tuple[str, str, str], list[RunRecordRow]] = {}
    for row in rows:
        grouped.setdefault((row.run, row.model, row.suite), []).append(row)
    return grouped


def import_rows(store: Store, rows: Sequence[RunRecordRow], cases: CaseSet, pairs: dict[str, str], *,
                source: str, fmt: str, disagreements: Mapping[tuple[str, str, str], str | None] | None = None
                ) -> list[ImportedRun]:
    """Store ``rows`` as replay runs; every record is checked and every run id is new before anything is written.

    ``disagreements`` (a reply's place -> the peer's own answer, where cfkit's parser reads another) are kept in
    the run's notes (``imported.peer_disagrees``), for ``cfkit view``'s filter of that name."""
    if not rows:
        raise PredictionError(f"{source}: no records to import.")
    check_predictions([r.prediction() for r in rows], source, cases=cases, pairs=pairs)
    planned = [(_run_id(group), group) for group in group_runs(rows).values()]
    for run_id, group in planned:
        if runs.get_run(store, run_id) is not None:
            raise PredictionError(f"{source}: run {run_id} is already in the store; remove it first with "
                                  f"'cfkit runs rm {run_id}' to import it again.")
    done = []
    for run_id, group in planned:
        first = group[0]
        state = run_state(group)
        notes: dict = {"imported": {"from": source, "format": fmt}}
        if state.max_tokens is not None:  # the limit its replies were made (and cut off) with
            notes["imported"]["max_tokens"] = state.max_tokens
        peers = disagreements or {}
        keys = [(r.case, r.pair or "", r.condition) for r in group]
        differ = [{"case": c, "pair": p, "condition": k, "peer": peers[(c, p, k)]} for c, p, k in keys
                  if (c, p, k) in peers]
        if differ:
            notes["imported"]["peer_disagrees"] = differ
        notes.update(shown_notes(group))  # what the run was shown of each case (a report compares it)
        if state.stopped:
            notes["stopped"] = state.stopped
        if state.skipped is not None:
            notes["skipped"] = list(state.skipped)
        if state.unreviewed is not None:
            notes["unreviewed"] = list(state.unreviewed)
        if state.template_digests:  # each template compared on its own (cfkit.report.prompts_now)
            notes["templates"] = dict(state.template_digests)
        if state.left_out is not None:  # what its selection left out, not added since
            notes["left_out"] = list(state.left_out)
        if state.asked_whole:  # every unit it planned has a row: a unit none names was added since
            notes["asked_whole"] = True
            if pairs := asked_pairs(group):
                notes["asked_pairs"] = pairs
        runs.open_run(store, run_id, model=first.model, suite=first.suite,
                      options={"backend": "replay", "options": {}}, cfkit_version=__version__,
                      templates_sha256=state.templates, n_requests=state.n_requests, notes=notes,
                      selection=state.selection)
        with store.transaction() as tx:
            for r in group:
                if r.cache_key and (r.usage or r.latency_s is not None):
                    responses.put(tx, CachedResponse(cache_key=r.cache_key, raw=r.raw, usage=r.usage or {},
                                                     latency_s=r.latency_s or 0.0, cost_usd=r.cost_usd,
                                                     refused=r.error == "refused", server_model=r.server_model,
                                                     system_fingerprint=r.system_fingerprint, raw_chars=r.raw_chars,
                                                     reasoning=r.reasoning, truncated=r.truncated,
                                                     endpoint=r.endpoint),
                                  backend="replay", model=first.model)
                runs.write_reply(tx, run_id, (r.case, r.pair or "", r.condition), cache_key=r.cache_key, raw=r.raw,
                                 fields=ReplyFields(answer=r.answer, parse=r.parse, error=r.error, reason=r.reason,
                                                    confidence=r.confidence, detail=r.detail,
                                                    reasoning=r.reasoning, parser=r.parser),
                                 cost_usd=r.cost_usd,
                                 provenance=ReplyProvenance(edit_id=r.edit_id, image_sha256=r.image_sha256,
                                                            server_model=r.server_model,
                                                            system_fingerprint=r.system_fingerprint,
                                                            truncated=r.truncated, endpoint=r.endpoint),
                                 raw_chars=r.raw_chars, created_at=r.created_at)
        runs.finish_run(store, run_id, status=state.status, n_done=state.n_done, n_errors=state.n_errors,
                        notes=notes)
        done.append(ImportedRun(run_id, first.model, first.suite, len(group), state.n_errors,
                                len(cases) if first.suite == "contextcanvas" else None, state.status,
                                state.n_requests))
    return done
