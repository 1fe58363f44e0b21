"""Every stored field of a run's replies as one flat record: what ``cfkit runs export`` writes in each format.

A :class:`RunRecordRow` is a predictions line (docs/formats.md, "Predictions")
plus what the store keeps beside it: the run, why no answer was read
(``detail``), the reasoning text, the parser version, the server's model id
and build fingerprint, the reply's full length when it was cut, whether it
stopped at the token limit, the server that answered (replicas), token counts
and the whole usage record, the latency, the cost, the request's cache key
and when the reply was stored; and, from the run's record, what the run was
shown of the reply's case then (``asked``, and a modality run's caption
digests, ``captions``), which a report compares with the workspace now to tell
a stale answer, and how the run ended (``run_status``, ``run_requests``,
``run_stopped``: an incomplete run's export says so, how many requests it
planned and why it stopped) and what it recorded of what it asked
(``run_skipped``, the pairs or cases it could not ask and why;
``run_selection``, the part of the suite it asked; ``run_templates``, the
digest of the probe templates it was asked with; ``run_template_digests``,
the digest of each probe template its requests were rendered from, what a
report compares template by template; ``run_unreviewed``, the cases or pairs
it asked with a caption or edit no person had reviewed; ``run_left_out``, the
cases or pairs its selection left out, which tells them from units added to
the suite since; ``run_max_tokens``, the token limit its replies were made
with, which a line on replies cut off names).
``cfkit runs import`` reads it back unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from pydantic import ValidationError

from cfkit.errors import PredictionError, describe_validation
from cfkit.plural import plural
from cfkit.predictions import Prediction
from cfkit.store import Store, responses, runs

#: Token counts copied out of the usage record into their own columns (the whole record stays in ``usage``).
TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")


@dataclass(frozen=True)
class RunRecordRow:
    """One stored reply with its run's model and suite, every field the store holds."""

    run: str
    model: str
    suite: str
    case: str
    pair: str | None
    condition: str
    answer: str | None
    parse: str | None
    error: str | None
    raw: str | None
    reason: str | None
    confidence: str | None
    detail: str | None = None
    reasoning: str | None = None
    parser: str | None = None
    edit_id: int | None = None
    image_sha256: str | None = None
    server_model: str | None = None
    system_fingerprint: str | None = None
    raw_chars: int | None = None
    truncated: bool = False  # the reply stopped at the token limit
    endpoint: str | None = None  # the server that answered, when the model had several
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    usage: dict[str, Any] | None = None
    latency_s: float | None = None
    cost_usd: float | None = None
    cache_key: str | None = None
    created_at: str | None = None
    asked: str | None = None  # the run's digest of what it was shown of the case (cfkit.cases.asked_digests)
    captions: dict[str, str] | None = None  # modality: the case's caption digests as asked, by condition
    run_status: str | None = None  # the run's status when exported (RUN_STATUSES)
    run_requests: int | None = None  # the requests the run planned (more than its rows where some have no reply)
    run_stopped: str | None = None  # why the run stopped before sending every request (its notes' ``stopped``)
    run_skipped: list[dict[str, str]] | None = None  # the pairs (cases) the run could not ask, and why
    run_selection: dict[str, Any] | None = None  # the part of the suite the run asked (--limit, --cases, --subset)
    run_templates: str | None = None  # the SHA-256 of the probe templates the run was asked with
    run_unreviewed: list[str] | None = None  # the cases (pairs) the run asked with a caption (edit) no person reviewed
    run_template_digests: dict[str, str] | None = None  # each probe template its requests were rendered from -> its
    #                                                      digest (its notes' ``templates``; cfkit.report.prompts_now)
    run_left_out: list[str] | None = None  # the cases (pairs) of the suite its selection left out (its notes'
    #                                        ``left_out``; None: not recorded)
    run_max_tokens: int | None = None  # the token limit its replies were made with (RunRecord.made_with_max_tokens)

    def prediction(self) -> Prediction:
        """The predictions line of this reply (docs/formats.md)."""
        is_edit = self.suite == "counterfactual" and self.condition == "edit"
        return Prediction(model=self.model, suite=self.suite, case=self.case, pair=self.pair or None,
                          condition=self.condition, answer=self.answer, parse=self.parse, error=self.error,
                          raw=self.raw, reason=self.reason, confidence=self.confidence,
                          edit_id=self.edit_id if is_edit else None,
                          image_sha256=self.image_sha256 if is_edit else None, truncated=self.truncated or None,
                          server_model=self.server_model, system_fingerprint=self.system_fingerprint,
                          reasoning=self.reasoning, endpoint=self.endpoint)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> "RunRecordRow":
        """A record from an export (every column of :data:`COLUMNS`; unknown ones refused)."""
        unknown = sorted(set(data) - set(COLUMNS))
        if unknown:
            raise PredictionError(f"{where}: {plural(len(unknown), 'unknown field')} ({', '.join(unknown)}); a run export has "
                                  f"{', '.join(COLUMNS)}.")
        missing = [name for name in ("run", "model", "suite", "case", "condition") if not data.get(name)]
        if missing:
            raise PredictionError(f"{where}: no {', '.join(missing)}; every record of a run export names them.")
        values = {name: data.get(name) for name in COLUMNS}
        for name in ("edit_id", "raw_chars", "run_requests", "run_max_tokens", *TOKEN_FIELDS):
            if values[name] is not None:
                values[name] = _integer(values[name], name, where)
        for name in ("latency_s", "cost_usd"):
            if values[name] is not None:
                try:
                    values[name] = float(values[name])
                except (TypeError, ValueError):
                    raise PredictionError(f"{where}: '{name}' must be a number, not {values[name]!r}.") from None
        values["truncated"] = _flag(values["truncated"], "truncated", where)
        values["usage"] = _json_text(values["usage"], "usage", where)
        if values["usage"] is not None and not isinstance(values["usage"], dict):
            raise PredictionError(f"{where}: 'usage' must be an object (the usage record), not {values['usage']!r}.")
        values["captions"] = _digests(values["captions"], where)
        values["run_skipped"] = _skipped(values["run_skipped"], where)
        values["run_selection"] = _selection(values["run_selection"], where)
        values["run_unreviewed"] = _units(values["run_unreviewed"], "run_unreviewed", "the cases or pairs the run "
                                          "asked with a caption or edit no person had reviewed", where)
        values["run_template_digests"] = _template_digests(values["run_template_digests"], where)
        values["run_left_out"] = _units(values["run_left_out"], "run_left_out", "the cases or pairs the run's "
                                        "selection left out", where)
        if values["run_status"] is not None and values["run_status"] not in RUN_STATUSES:
            raise PredictionError(f"{where}: 'run_status' must be one of {', '.join(RUN_STATUSES)}, not "
                                  f"{values['run_status']!r}.")
        if values["run_requests"] is not None and values["run_requests"] < 0:
            raise PredictionError(f"{where}: 'run_requests' must be a count, not {values['run_requests']}.")
        if values["run_max_tokens"] is not None and values["run_max_tokens"] < 1:
            raise PredictionError(f"{where}: 'run_max_tokens' must be a token limit of 1 or more, not "
                                  f"{values['run_max_tokens']}.")
        for name in _TEXT_FIELDS:
            if values[name] is not None and not isinstance(values[name], str):
                raise PredictionError(f"{where}: '{name}' must be text, not {type(values[name]).__name__}.")
        row = cls(**values)
        try:
            row.prediction()
        except ValidationError as exc:
            raise PredictionError(f"{where}: {describe_validation(exc)}") from exc
        return row


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(RunRecordRow))
#: A run's statuses (cfkit.probe.runner): how it ended, or 'running' / 'waiting' (batches in flight) for one
#: exported before it ended.
RUN_STATUSES = ("done", "incomplete", "failed", "interrupted", "running", "waiting")
_TEXT_FIELDS = ("run", "model", "suite", "case", "pair", "condition", "answer", "parse", "error", "raw", "reason",
                "confidence", "detail", "reasoning", "parser", "image_sha256", "server_model", "system_fingerprint",
                "endpoint", "cache_key", "created_at", "asked", "run_status", "run_stopped", "run_templates")
#: Columns that hold JSON (in CSV and Parquet, its text).
JSON_COLUMNS = ("usage", "captions", "run_skipped", "run_selection", "run_unreviewed", "run_template_digests",
                "run_left_out")


def _json_text(value: Any, name: str, where: str) -> Any:
    """A JSON column's value, read from its text where CSV or Parquet gives one (empty: none)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value) if value else None
    except json.JSONDecodeError as exc:
        raise PredictionError(f"{where}: '{name}' is not JSON ({exc.msg}).") from None


def _skipped(value: Any, where: str) -> list[dict[str, str]] | None:
    """The ``run_skipped`` column: a list of objects of texts (``pair_id``, ``reason``, ``unit``)."""
    value = _json_text(value, "run_skipped", where)
    if value is not None and not (isinstance(value, list) and all(
            isinstance(s, dict) and isinstance(s.get("pair_id"), str)
            and all(isinstance(v, str) for v in s.values()) for s in value)):
        raise PredictionError(f"{where}: 'run_skipped' must be a list of objects with a 'pair_id' and a 'reason' "
                              f"(the pairs or cases the run could not ask), not {value!r}.")
    return value


def _selection(value: Any, where: str) -> dict[str, Any] | None:
    """The ``run_selection`` column: an object (the run's recorded selection)."""
    value = _json_text(value, "run_selection", where)
    if value is not None and not isinstance(value, dict):
        raise PredictionError(f"{where}: 'run_selection' must be an object (the part of the suite the run asked), "
                              f"not {value!r}.")
    return value


def _units(value: Any, column: str, what: str, where: str) -> list[str] | None:
    """A column that holds a list of case or pair ids (``run_unreviewed``, ``run_left_out``); ``what`` says which."""
    value = _json_text(value, column, where)
    if value is not None and not (isinstance(value, list) and all(isinstance(u, str) for u in value)):
        raise PredictionError(f"{where}: '{column}' must be a list of texts ({what}), not {value!r}.")
    return value


def _template_digests(value: Any, where: str) -> dict[str, str] | None:
    """The ``run_template_digests`` column: template file name -> the SHA-256 of its text as the run used it."""
    value = _json_text(value, "run_template_digests", where)
    if value is not None and not (isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v) for k, v in value.items())):
        raise PredictionError(f"{where}: 'run_template_digests' must be an object of template names and SHA-256 "
                              f"digests (the probe templates the run's prompts were rendered from), not {value!r}.")
    return value


def _digests(value: Any, where: str) -> dict[str, str] | None:
    """The ``captions`` column: condition -> digest, as JSON (its text in CSV and Parquet)."""
    value = _json_text(value, "captions", where)
    if value is not None and not (isinstance(value, dict)
                                  and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
        raise PredictionError(f"{where}: 'captions' must be an object of texts (condition: digest), not {value!r}.")
    return value


def _flag(value: Any, name: str, where: str) -> bool:
    """A yes/no column as JSON, CSV or a spreadsheet gives it back (absent or empty: no)."""
    if value is None or value == "" or isinstance(value, bool):
        return bool(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise PredictionError(f"{where}: '{name}' must be true or false, not {value!r}.")


def _integer(value: Any, name: str, where: str) -> int:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int):
        return value
    try:
        return int(str(value))
    except (TypeError, ValueError):
        raise PredictionError(f"{where}: '{name}' must be a whole number, not {value!r}.") from None


def run_rows(store: Store, run_id: str) -> list[RunRecordRow]:
    """Every reply of a stored run, with its cached response's usage and latency, in the order stored."""
    run = runs.get_run(store, run_id)
    if run is None:
        raise PredictionError(f"no run '{run_id}' in store {store.path}. See 'cfkit runs list'.")
    replies = runs.replies(store, run_id)
    cache = responses.cached(store, [r.cache_key for r in replies if r.cache_key])
    asked, captions = run.notes.get("asked") or {}, run.notes.get("captions") or {}
    stopped = run.notes.get("stopped") if isinstance(run.notes.get("stopped"), str) else None
    skipped = [s for s in run.notes.get("skipped") or () if isinstance(s, dict)] if "skipped" in run.notes else None
    unreviewed = [u for u in run.notes.get("unreviewed") or () if isinstance(u, str)] \
        if "unreviewed" in run.notes else None
    templates = run.notes.get("templates")
    templates = dict(templates) if isinstance(templates, dict) and templates else None
    left_out = [u for u in run.notes.get("left_out") or () if isinstance(u, str)] \
        if "left_out" in run.notes else None
    out = []
    for r in replies:
        hit = cache.get(r.cache_key or "")
        usage = dict(hit.usage) if hit is not None and hit.usage else None
        tokens = {name: _token(usage, name) for name in TOKEN_FIELDS}
        out.append(RunRecordRow(
            run=run.id, model=run.model, suite=run.suite, case=r.case_id, pair=r.pair_id or None,
            condition=r.condition, answer=r.answer, parse=r.parse, error=r.error, raw=r.raw, reason=r.reason,
            confidence=r.confidence, detail=r.detail, reasoning=r.reasoning, parser=r.parser, edit_id=r.edit_id,
            image_sha256=r.image_sha256, server_model=r.server_model, system_fingerprint=r.system_fingerprint,
            raw_chars=r.raw_chars, truncated=r.truncated, endpoint=r.endpoint, **tokens, usage=usage, latency_s=None if hit is None else hit.latency_s,
            cost_usd=r.cost_usd, cache_key=r.cache_key, created_at=r.created_at, asked=asked.get(r.case_id),
            captions=captions.get(r.case_id), run_status=run.status, run_requests=run.n_requests,
            run_stopped=stopped or None, run_skipped=skipped, run_selection=run.selection or None,
            run_templates=run.templates_sha256 or None, run_unreviewed=unreviewed,
            run_template_digests=templates, run_left_out=left_out, run_max_tokens=run.made_with_max_tokens))
    return out


def _token(usage: dict[str, Any] | None, name: str) -> int | None:
    value = (usage or {}).get(name)
    return value if isinstance(value, int) else None


def rows_of(store: Store, run_ids: Sequence[str]) -> list[RunRecordRow]:
    """The rows of several runs, run by run."""
    return [row for run_id in run_ids for row in run_rows(store, run_id)]
