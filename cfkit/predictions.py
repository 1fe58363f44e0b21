"""Predictions: one model answer a line, the export of every probe run.

The format is the "Predictions" record of docs/formats.md: the input of ``replay:`` and
``cfkit report --predictions`` and the output of ``cfkit runs export``.
Loading checks every line and names the file and line of the first problem.
An ``edit`` answer carries the id of the edit it was given on and the SHA-256
of the image sent (an addition of the second version; older files without
them still load), so an answer about an edit that is no longer the pair's
selected one can be told apart.
"""

from __future__ import annotations

import functools
import gc
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager
from itertools import repeat
from operator import attrgetter
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

#: Fields written only where they have a value (so lines of other conditions are unchanged).
OPTIONAL_FIELDS = ("edit_id", "image_sha256")
#: What the server said about a reply, on any line, written only where known (never read by a report).
PROVENANCE_FIELDS = ("server_model", "system_fingerprint", "reasoning", "endpoint")

from cfkit.cases import CaseSet
from cfkit.errors import PredictionError, describe_validation
from cfkit.files import json_value
from cfkit.parse import RULES
from cfkit.store import Store, runs
from cfkit.vocabulary import SUITE_CONDITIONS, Condition, Suite



class Prediction(BaseModel):
    """One model's answer to one case under one condition."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True, protected_namespaces=())

    model: str = Field(min_length=1)
    suite: Suite
    case: str = Field(min_length=1)
    pair: str | None = None  # counterfactual pairs only
    condition: Condition
    answer: str | None = None  # an option id; null when no unique valid option was read
    parse: str | None = None  # the rule that read the answer: one of cfkit.parse.RULES
    error: Literal["missing", "ambiguous", "conflicting", "unparseable", "refused", "transport"] | None = None
    raw: str | None = None
    reason: str | None = None
    confidence: str | None = None
    edit_id: int | None = Field(None, ge=1)  # counterfactual 'edit' answers: the edit the model was shown
    image_sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")  # … and the SHA-256 of the image sent
    truncated: bool | None = None  # true: the reply stopped at the token limit (written only then)
    server_model: str | None = None  # the model id the server said answered
    system_fingerprint: str | None = None  # the server's build fingerprint
    reasoning: str | None = None  # a reasoning text returned beside the reply or split off it; never graded
    endpoint: str | None = None  # the server that answered, when the model had several

    @field_validator("parse")
    @classmethod
    def _known_rule(cls, value: str | None) -> str | None:
        if value is not None and value not in RULES:
            raise ValueError(f"'{value}' is not a parser rule ({', '.join(RULES)})")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "Prediction":
        allowed = SUITE_CONDITIONS[self.suite]
        if self.condition not in allowed:
            raise ValueError(
                f"condition '{self.condition}' is not one of suite {self.suite}'s conditions ({', '.join(allowed)})"
            )
        if self.suite == "counterfactual" and not self.pair:
            raise ValueError("a counterfactual prediction needs 'pair' (the spec id, e.g. CF18)")
        if self.suite != "counterfactual" and self.pair:
            raise ValueError(f"'pair' is only for the counterfactual suite; remove it from this {self.suite} line")
        if self.answer is not None and self.error is not None:
            raise ValueError(f"answer '{self.answer}' comes with error '{self.error}'; an answer has no error")
        if (self.condition != "edit" or self.suite != "counterfactual") and (
                self.edit_id is not None or self.image_sha256 is not None):  # OPTIONAL_FIELDS, tested at once
            for name in OPTIONAL_FIELDS:
                if getattr(self, name) is not None:
                    raise ValueError(f"'{name}' is only for counterfactual 'edit' answers; remove it from this "
                                     f"{self.suite} {self.condition} line")
        return self

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """What may occur once: model, suite, case, pair and condition."""
        return (self.model, self.suite, self.case, self.pair or "", self.condition)


def parse_predictions(
    text: str,
    path: Path | str,
    *,
    cases: CaseSet | None = None,
    pairs: Mapping[str, str] | None = None,
    seen: dict[tuple, tuple[str, int]] | None = None,
) -> list[Prediction]:
    """Parse predictions JSONL text; every error names ``path`` and the line.

    ``cases`` (when given) must hold every case and every answer must be one of
    its options; ``pairs`` maps each known pair id to its case id. ``seen``
    carries the lines already read from other files, to catch an answer given
    twice across files.
    """
    seen = {} if seen is None else seen
    lines = text.splitlines()
    fast = _read_whole(lines, path, cases, pairs, seen)
    if fast is not None:
        return fast
    out: list[Prediction] = []
    options: dict[str, frozenset[str] | None] = {}  # a case's option ids, found once per case, not once per line
    # JSON read and checked in one pass; the two checks written in Python are made inline (see _checks_pass).
    read_line = _schema_reader() or Prediction.__pydantic_validator__.validate_json
    name = str(path)
    unseen = object()
    for lineno, line in enumerate(lines, start=1):
        if not line or line.isspace():
            continue
        try:
            pred = read_line(line)
            if not _checks_pass(pred):
                raise ValueError("refused by Prediction's own checks")  # said in their words by _plain_line
        except Exception:  # noqa: BLE001 - anything unusual is read the plain way, which accepts it or names it
            pred = _plain_line(line, f"{path}:{lineno}")
        pair, answer = pred.pair, pred.answer
        # A case seen before, no pair and an answer among its options: nothing to look up (_known_problem's checks).
        ids = options.get(pred.case, unseen) if cases is not None and pair is None else unseen
        if ids is unseen or ids is None or (answer is not None and answer not in ids):
            problem = _known_problem(pred, cases, pairs, options)
            if problem:
                raise PredictionError(f"{path}:{lineno}: {problem}")
        key = (pred.model, pred.suite, pred.case, pair or None, pred.condition)  # _KEY, a pair "" read as none
        if key in seen:
            raise PredictionError(
                f"{path}:{lineno}: a second answer from model '{pred.model}' for case {pred.case}"
                f"{f', pair {pred.pair}' if pred.pair else ''}, condition {pred.condition} "
                f"(the first is at {seen[key][0]}:{seen[key][1]}). Keep one of them."
            )
        seen[key] = (name, lineno)  # formatted only when a second answer names it
        out.append(pred)
    return out


_RULES = frozenset(RULES)
#: What :func:`_checks_pass` looks at, and what may occur once (:attr:`Prediction.key`, with the pair as read).
_SHAPE = attrgetter("suite", "condition", "pair", "parse", "answer", "error", "edit_id", "image_sha256")
_KEY = attrgetter("model", "suite", "case", "pair", "condition")
_UNIT = attrgetter("case", "pair", "answer")


def _read_whole(lines: list[str], path: Path | str, cases: CaseSet | None, pairs: Mapping[str, str] | None,
                seen: dict[tuple, tuple[str, int]]) -> list[Prediction] | None:
    """:func:`parse_predictions` for a file with nothing to report, its checks made once per distinct value rather
    than once per line (a study's lines repeat a few hundred shapes and cases); None, with ``seen`` untouched, as
    soon as anything is unusual (a blank or refused line, a problem of any kind, a pair written as ""), and the line-by-line
    reading then finds it and names its line."""
    read_line = _schema_reader()
    if read_line is None:
        return None
    try:
        out = [read_line(line) for line in lines]  # a blank line is refused here too
    except Exception:  # noqa: BLE001 - the line-by-line reading says what and where
        return None
    if not all(_shape_passes(*shape) for shape in set(map(_SHAPE, out))):
        return None
    options: dict[str, frozenset[str] | None] = {}
    for case, pair, answer in set(map(_UNIT, out)):
        if pair == "" or _unit_problem(case, pair, answer, cases, pairs, options):  # "": the same key as None
            return None
    keys = list(map(_KEY, out))
    if len(set(keys)) != len(keys) or not seen.keys().isdisjoint(keys):
        return None
    name = str(path)
    seen.update(zip(keys, zip(repeat(name), range(1, len(keys) + 1))))
    return out


def _checks_pass(pred: Prediction) -> bool:
    """Whether ``pred`` passes Prediction's ``_known_rule`` and ``_consistent`` (True only when both would)."""
    return _shape_passes(*_SHAPE(pred))


def _shape_passes(suite: str, condition: str, pair: str | None, parse: str | None, answer: str | None,
                  error: str | None, edit_id: int | None, image_sha256: str | None) -> bool:
    """:func:`_checks_pass` on the fields it reads (:data:`_SHAPE`)."""
    return ((parse is None or parse in _RULES)
            and condition in SUITE_CONDITIONS[suite]
            and (suite == "counterfactual") == bool(pair)
            and (answer is None or error is None)
            and ((edit_id is None and image_sha256 is None) or (condition == "edit" and suite == "counterfactual")))


@functools.cache
def _schema_reader() -> Callable[[str], Prediction] | None:
    """Prediction's JSON validator without its two checks written in Python, which a study's hundreds of thousands
    of lines pay for in calls from Rust (a fifth of the reading); :func:`_checks_pass` makes them inline and a line
    it refuses is read the plain way, whose messages are the model's own. None (the full validator is used) where
    pydantic's schema of the model is not laid out as expected."""
    from pydantic_core import SchemaValidator

    try:
        outer = Prediction.__pydantic_core_schema__
        model = dict(outer["schema"])
        fields_schema = dict(model["schema"])
        fields = dict(fields_schema["fields"])
        parse = dict(fields["parse"])
        default = dict(parse["schema"])
        checked = default["schema"]
        if (outer["type"], model["type"], default["type"], checked["type"]) != (
                "function-after", "model", "default", "function-after") or model.get("cls") is not Prediction:
            return None
        default["schema"] = checked["schema"]
        parse["schema"], fields["parse"], fields_schema["fields"], model["schema"] = default, parse, fields, fields_schema
        return SchemaValidator(model, model.get("config")).validate_json
    except (KeyError, TypeError):
        return None


def _known_problem(pred: Prediction, cases: CaseSet | None, pairs: Mapping[str, str] | None,
                   options: dict[str, frozenset[str] | None]) -> str | None:
    """Why ``pred`` names a pair, case or answer the workspace lacks (None when it does not).

    ``options`` remembers each case's option ids (None: not a case) between calls.
    """
    return _unit_problem(pred.case, pred.pair, pred.answer, cases, pairs, options)


def _unit_problem(case: str, pair: str | None, answer: str | None, cases: CaseSet | None,
                  pairs: Mapping[str, str] | None, options: dict[str, frozenset[str] | None]) -> str | None:
    """:func:`_known_problem` on the three fields it reads."""
    if pairs is not None and pair is not None:
        if pair not in pairs:
            known = ", ".join(sorted(pairs)[:6]) + (" …" if len(pairs) > 6 else "")
            return (f"unknown pair '{pair}' (specs in this workspace: {known or 'none'}). "
                    "Fix the pair id or add its spec.")
        if pairs[pair] != case:
            return (f"pair {pair} is made from case {pairs[pair]}, "
                    f"but the line names case {case}. Fix one of them.")
    if cases is None:
        return None
    if case in options:
        ids = options[case]
    else:
        ids = options[case] = frozenset(cases.get(case).option_ids) if case in cases else None
    if ids is None:
        return f"unknown case '{case}'; it is not in {cases.path}. Fix the case id."
    if answer is not None and answer not in ids:
        return (f"answer '{answer}' is not an option of case {case} "
                f"({', '.join(cases.get(case).option_ids)}); write null when no valid option was given.")
    return None


def _plain_line(line: str, where: str) -> Prediction:
    """One line read by ``json.loads`` and checked by the model: what a line the one-pass reading refused gets.

    The one-pass reading (pydantic's own JSON parser) gives the same prediction
    for every line it accepts; it refuses some that ``json.loads`` reads (a lone
    surrogate escape, a tab inside a string), and those are read here as always.
    """
    raw = json_value(line, where, PredictionError, hint="Each line must be one JSON object.",
                     shape="a prediction is one flat object whose 'raw' is the reply text")
    if not isinstance(raw, dict):
        raise PredictionError(f"{where}: expected a JSON object, got {type(raw).__name__}.")
    try:
        return Prediction.model_validate(raw)
    except ValidationError as exc:
        raise PredictionError(f"{where}: {describe_validation(exc)}") from exc


def check_predictions(
    preds: Sequence[Prediction],
    source: str,
    *,
    cases: CaseSet | None = None,
    pairs: Mapping[str, str] | None = None,
) -> None:
    """Apply the checks of :func:`parse_predictions` to records from elsewhere (e.g. the store)."""
    seen: dict[tuple, int] = {}  # key -> the number of the record that gave it first
    options: dict[str, frozenset[str] | None] = {}

    def where(number: int) -> str:
        pred = preds[number - 1]
        return f"{source}, record {number} (model {pred.model}, {pred.suite})"

    unseen = object()
    for number, pred in enumerate(preds, start=1):
        answer = pred.answer
        # As in parse_predictions: a seen case, no pair and one of its options need no look-up.
        ids = options.get(pred.case, unseen) if cases is not None and pred.pair is None else unseen
        if ids is unseen or ids is None or (answer is not None and answer not in ids):
            problem = _known_problem(pred, cases, pairs, options)
            if problem:
                raise PredictionError(f"{where(number)}: {problem}")
        key = pred.key
        if key in seen:
            raise PredictionError(f"{where(number)}: a second answer for case {pred.case}, condition "
                                  f"{pred.condition} (the first is {where(seen[key])}).")
        seen[key] = number


def load_predictions(
    paths: Sequence[Path | str],
    *,
    cases: CaseSet | None = None,
    pairs: Mapping[str, str] | None = None,
) -> list[Prediction]:
    """Read and check predictions JSONL files (any mix of models and suites), in order."""
    seen: dict[tuple, tuple[str, int]] = {}  # key -> the file and line that gave it first
    out: list[Prediction] = []
    with paused_collection():
        for path in paths:
            out += _read_file(Path(path), cases, pairs, seen)
    return out


@contextmanager
def paused_collection():
    """Python's cycle collector held off while a body builds many objects (none of them in a cycle).

    Each collection pass walks every object made so far: reading a study's
    predictions (a hundred thousand lines or more) spent about a seventh of
    its time there. Memory is still freed as each object is dropped.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _read_file(path: Path, cases: CaseSet | None, pairs: Mapping[str, str] | None,
               seen: dict[tuple, tuple[str, int]]) -> list[Prediction]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PredictionError(f"predictions file {path} not found. Check the path given to --predictions.") from None
    except UnicodeDecodeError as exc:
        raise PredictionError(f"{path}: not UTF-8 text ({exc.reason}); predictions are JSONL.") from exc
    except OSError as exc:
        raise PredictionError(f"{path}: cannot be read ({exc.strerror}).") from exc
    return parse_predictions(text, path, cases=cases, pairs=pairs, seen=seen)


def _record(pred: Prediction) -> dict:
    record = pred.model_dump(mode="json")
    for name in (*OPTIONAL_FIELDS, *PROVENANCE_FIELDS):
        if record[name] is None:
            del record[name]
    if not record["truncated"]:
        del record["truncated"]
    return record


def dump_predictions(preds: Iterable[Prediction]) -> str:
    """JSONL text, one record a line, fields in the documented order, nulls kept (``edit_id``,
    ``image_sha256`` and the server's provenance only where they have a value)."""
    return "".join(json.dumps(_record(p), ensure_ascii=False) + "\n" for p in preds)


def predictions_from_store(store: Store, run_ids: Sequence[str] | None = None) -> list[Prediction]:
    """The parsed replies of stored runs as predictions.

    With ``run_ids`` None, the newest run of each model and suite is read.
    Replies are returned run by run, in the order they were stored.
    """
    ids = runs.latest_run_ids(store) if run_ids is None else list(run_ids)
    out: list[Prediction] = []
    with paused_collection():
        for run_id in ids:
            out += _run_predictions(store, run_id)
    return out


def _run_predictions(store: Store, run_id: str) -> list[Prediction]:
    out: list[Prediction] = []
    run = runs.get_run(store, run_id)
    if run is None:
        raise PredictionError(f"no run '{run_id}' in store {store.path}. See 'cfkit runs list'.")
    for r in runs.replies(store, run_id):
        try:
            is_edit = run.suite == "counterfactual" and r.condition == "edit"
            out.append(Prediction(
                model=run.model, suite=run.suite, case=r.case_id, pair=r.pair_id or None,
                condition=r.condition, answer=r.answer, parse=r.parse, error=r.error,
                raw=r.raw, reason=r.reason, confidence=r.confidence,
                edit_id=r.edit_id if is_edit else None, image_sha256=r.image_sha256 if is_edit else None,
                truncated=True if r.truncated else None,
                server_model=r.server_model, system_fingerprint=r.system_fingerprint, reasoning=r.reasoning,
                endpoint=r.endpoint,
            ))
        except ValidationError as exc:
            raise PredictionError(
                f"store {store.path}: run {run_id}, case {r.case_id}: {describe_validation(exc)}"
            ) from exc
    return out


def export_run(store: Store, run_id: str) -> str:
    """A stored run's replies as predictions JSONL (docs/formats.md, "Predictions")."""
    return dump_predictions(predictions_from_store(store, [run_id]))
