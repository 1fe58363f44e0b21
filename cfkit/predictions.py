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

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

#: Fields written only where they have a value (so lines of other conditions are unchanged).
OPTIONAL_FIELDS = ("edit_id", "image_sha256")
#: What the server said about a reply, on any line, written only where known (a report reads them for its notes only).
PROVENANCE_FIELDS = ("server_model", "system_fingerprint", "reasoning", "endpoint")

from cfkit.cases import CaseSet
from cfkit.collector import paused_collection
from cfkit.errors import PredictionError, describe_validation
from cfkit.prediction_record import (  # noqa: F401 - FIELDS and Prediction are this module's too, as always
    _FIELD_SET,
    _REQUIRED,
    _REPEATED_FIELDS,
    FIELDS,
    Prediction,
    _all_none,
    _checks_pass,
    _columns_pass,
    _restored,
    _rows_pass,
    _shared_values,
)

if TYPE_CHECKING:
    from cfkit.store import Store


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
    fast = _read_whole(text, path, cases, pairs, seen)
    if fast is not None:
        return fast
    return _read_lines(text, path, cases, pairs, seen)


def _read_lines(text: str, path: Path | str, cases: CaseSet | None, pairs: Mapping[str, str] | None,
                seen: dict[tuple, tuple[str, int]]) -> list[Prediction]:
    """:func:`parse_predictions` line by line, each line by the full check where it is not plain."""
    lines = text.splitlines()
    out: list[Prediction] = []
    options: dict[str, frozenset[str] | None] = {}  # a case's option ids, found once per case, not once per line
    # The full check (pydantic), line by line: JSON read and checked in one pass, the model's two checks written in
    # Python made inline (see _checks_pass); a line that fails either is read the plain way, in the model's words.
    from cfkit.predictions_schema import one_pass_reader, plain_line, values_of

    read_line = one_pass_reader()
    name = str(path)
    unseen = object()
    for lineno, line in enumerate(lines, start=1):
        if not line or line.isspace():
            continue
        try:
            model = read_line(line)
            if not _checks_pass(model):
                raise ValueError("refused by Prediction's own checks")  # said in their words by plain_line
            pred = _restored(values_of(model))
        except Exception:  # noqa: BLE001 - anything unusual is read the plain way, which accepts it or names it
            pred = _restored(plain_line(line, f"{path}:{lineno}"))
        pair, answer = pred.pair, pred.answer
        # A case seen before, no pair and an answer among its options: nothing to look up (_unit_problem's checks).
        ids = options.get(pred.case, unseen) if cases is not None and pair is None else unseen
        if ids is unseen or ids is None or (answer is not None and answer not in ids):
            problem = _unit_problem(pred.case, pred.pair, pred.answer, cases, pairs, options)
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


def _array_loads() -> tuple[Callable[[str], Any], bool]:
    """orjson's reading where installed (a third of the time of json's; the HTTP backends bring it), imported on
    first use so that a report from the store does not load it; else json's own. With it, whether the strings it
    gives are whole (orjson refuses a lone surrogate escape; json's own reads one into the string)."""
    try:
        from orjson import loads
    except ImportError:
        return json.loads, False
    return loads, True


#: What str.splitlines() breaks a line at besides "\n" and "\r\n", which JSON allows inside a string.
_OTHER_BREAKS = re.compile("[\x85\u2028\u2029]")
#: What :func:`_read_whole` looks for and writes, in text and in UTF-8 bytes (the breaks above, encoded).
_TEXT = ("\n", "\r", "\r\n", "\n,", ("[", "]"), _OTHER_BREAKS)
_BYTES = (b"\n", b"\r", b"\r\n", b"\n,", (b"[", b"]"), re.compile(b"\xc2\x85|\xe2\x80[\xa8\xa9]"))


def _read_whole(text: str | bytes, path: Path | str, cases: CaseSet | None, pairs: Mapping[str, str] | None,
                seen: dict[tuple, tuple[str, int]], *, remember: bool = True, repeats: bool = True
                ) -> list[Prediction] | None:
    """:func:`parse_predictions` without pydantic for a file with nothing to report: the lines read as one JSON
    array, then checked a column at a time (:func:`_columns_pass`) and once per distinct case, pair and answer
    rather than once per line; None, with ``seen`` untouched, as soon as anything is unusual (a blank line, JSON
    any line would not give alone, a value not plainly of its type, a problem of any kind, a pair written as ""),
    and the line-by-line reading then finds it and names its line. Without ``remember`` (the last file read
    together) its units are checked against ``seen`` but not added to it, nor their lines kept; without
    ``repeats``, units are not looked for in ``seen`` at all (see :func:`load_predictions`)."""
    raw = isinstance(text, bytes)  # a file's UTF-8 bytes, read by orjson only (which checks the encoding)
    newline, cr, crlf, comma, brackets, breaks = _BYTES if raw else _TEXT
    size = len(text) - 1 if text.endswith(newline) else len(text)  # the lines, without the last one's break
    if not size:
        return [] if not text else None
    if (not text.isascii() and breaks.search(text)) or (cr in text and text.count(cr) != text.count(crlf)):
        return None  # a line of str.splitlines() that is not one between "\n"s
    loads, whole_strings = _array_loads()
    if raw and not whole_strings:
        return None  # json's own would take other encodings too
    # A file is read a part of about _PART bytes at a time (whole lines), so that the records JSON gives, which
    # take several times the file's size, are never there all at once; the predictions are the same.
    name, out, found, lineno, begin = str(path), [], {} if repeats else None, 1, 0
    options: dict[str, frozenset[str] | None] = {}  # each case's option ids, looked up once for all the parts
    shared = _shared_values(None if cases is None else cases.ids)  # one string per repeated value
    while True:
        end = text.find(newline, begin + _PART, size) if begin + _PART < size else -1
        part = _read_part(text[begin:size if end < 0 else end], lineno, name, cases, pairs, loads,
                          whole_strings, brackets, newline, comma, options, found, remember, shared)
        if part is None:
            return None
        out += part
        if end < 0:
            break
        lineno, begin = lineno + len(part), end + 1
    if found is not None:
        if seen and not seen.keys().isdisjoint(found):
            return None
        if remember:
            seen.update(found)
    return out


#: About how many bytes of a predictions file :func:`_read_whole` reads at a time.
_PART = 1 << 21


def _read_part(body, lineno: int, name: str, cases: CaseSet | None, pairs: Mapping[str, str] | None,
               loads: Callable[[Any], Any], whole_strings: bool, brackets, newline, comma,
               options: dict[str, frozenset[str] | None], found: dict[tuple, tuple[str, int]] | None,
               remember: bool = True, shared: dict[str, str] | None = None) -> list[Prediction] | None:
    """The lines of ``body`` (the first is line ``lineno``) as :func:`_read_whole` reads them: their predictions,
    each one's unit key added to ``found`` (the keys of the earlier parts) with its file and line; None as soon as
    anything is unusual, a unit answered twice among them (without ``remember``, each key is added with None,
    the lines being needed only where a later file repeats one). ``options``: the option ids of the cases earlier
    parts named (:func:`_units_pass`). ``found`` None: units answered twice are not looked for here. ``shared``:
    each value of :data:`_REPEATED_FIELDS` read so far, as the one string every line holding it gets."""
    # Each line break followed by a comma, so that no string runs across two lines (JSON refuses a raw line break
    # in one, and "\r" before it is only white space); a container that would (an array opened on one line, closed
    # on the next) is not a flat record and fails the checks below, and a count of records other than lines (a
    # blank line, two records on one) fails at once.
    array = body[:0].join((brackets[0], body.replace(newline, comma), brackets[1]))  # (one copy, not two)
    n = len(array) - len(body) - 1  # the lines, as str.splitlines() counts them: one comma more a line break
    try:
        records = loads(array)
    except (ValueError, RecursionError):
        return None
    del array
    if len(records) != n or set(map(type, records)) != {dict} or not _REQUIRED <= records[0].keys():
        return None
    names = [name for name in FIELDS if name in records[0]]
    try:  # the same fields on every line, the first one's, and no other (each record has as many as it)
        rows = list(map(itemgetter(*names), records))
        if sum(map(len, records)) != n * len(names):
            raise KeyError(names)
    except KeyError:  # fields on some lines only, or unknown ones
        present = set().union(*records)
        if not present <= _FIELD_SET:
            return None
        names = [name for name in FIELDS if name in present]
        rows = [tuple(map(record.get, names)) for record in records]
    del records
    cols, rows = dict(zip(names, zip(*rows))), None
    try:  # each repeated value as one string (prediction_record._shared_values), which the checks then find faster
        for field in _REPEATED_FIELDS if shared is not None else ():
            if field in cols and not _all_none(cols[field]):
                cols[field] = list(map(shared.setdefault, cols[field], cols[field]))
    except TypeError:  # a list or an object: not a flat record's value (only strings pass, each as it was)
        return None
    distinct: dict[str, set] = {}
    if not _columns_pass(cols, n, whole_strings=whole_strings, distinct=distinct):
        return None
    if not _units_pass(cols, n, cases, pairs, options, distinct):
        return None
    if found is not None:
        keys = zip(cols["model"], cols["suite"], cols["case"], cols.get("pair") or repeat(None, n), cols["condition"])
        known = len(found)
        found.update(zip(keys, zip(repeat(name), range(lineno, lineno + n)) if remember else repeat(None)))
        if len(found) != known + n:
            return None  # a unit answered twice, here or in an earlier part: the line-by-line reading names both
    # Each record straight from the columns (zip's tuple, copied into the record, is made once and reused).
    return list(map(tuple.__new__, repeat(Prediction, n),
                    zip(*(cols[name] if name in cols else repeat(None, n) for name in FIELDS))))


def _units_pass(cols: dict[str, Sequence], n: int, cases: CaseSet | None, pairs: Mapping[str, str] | None,
                options: dict[str, frozenset[str] | None], distinct: Mapping[str, set]) -> bool:
    """Whether no line names a pair, case or answer the workspace lacks (:func:`_unit_problem` finds none), nor a
    pair written as "" (the same key as none): each distinct (case, pair, answer) looked at once; without pairs,
    each distinct case, and the answers at once where every case has them among its options.

    ``options`` holds the option ids of the cases found so far (every one a known case: an unknown one ends the
    reading), kept between the parts of a file so that each case is looked up once. ``distinct``: each column's
    distinct values (:func:`cfkit.prediction_record._columns_pass`)."""
    case, answer = cols["case"], cols.get("answer") or repeat(None, n)
    if distinct.get("pair", _NO_VALUE) <= _NO_VALUE:
        if any(_unit_problem(c, None, None, cases, pairs, options) for c in distinct["case"].difference(options)):
            return False
        answers = distinct.get("answer", _NO_VALUE) - _NO_VALUE
        if cases is None or not answers or answers <= frozenset.intersection(*options.values()):
            return True  # (every case is known now: its option ids are in ``options``)
    for unit in set(zip(case, cols.get("pair") or repeat(None, n), answer)):
        if unit[1] == "" or _unit_problem(*unit, cases, pairs, options):
            return False
    return True


_NO_VALUE = frozenset((None,))


def _unit_problem(case: str, pair: str | None, answer: str | None, cases: CaseSet | None,
                  pairs: Mapping[str, str] | None, options: dict[str, frozenset[str] | None]) -> str | None:
    """Why a line's case, pair or answer is one the workspace lacks (None when it is not).

    ``options`` remembers each case's option ids (None: not a case) between calls.
    """
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
            problem = _unit_problem(pred.case, pred.pair, pred.answer, cases, pairs, options)
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
    repeats: bool = True,
) -> list[Prediction]:
    """Read and check predictions JSONL files (any mix of models and suites), in order.

    Without ``repeats``, a unit answered twice may be let through (a file read
    whole is not searched for one): for a caller that counts the units anyway
    (a report indexes every answer by unit) and, finding fewer units than
    predictions, reads again with ``repeats`` to name the two lines.
    """
    seen: dict[tuple, tuple[str, int]] = {}  # key -> the file and line that gave it first
    out: list[Prediction] = []
    with paused_collection():
        for number, path in enumerate(paths, start=1):  # the last file's lines are not kept for a later one
            out += _read_file(Path(path), cases, pairs, seen, remember=number < len(paths), repeats=repeats)
    return out


def _read_file(path: Path, cases: CaseSet | None, pairs: Mapping[str, str] | None,
               seen: dict[tuple, tuple[str, int]], *, remember: bool = True, repeats: bool = True
               ) -> list[Prediction]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise PredictionError(f"predictions file {path} not found. Check the path given to --predictions.") from None
    except OSError as exc:
        raise PredictionError(f"{path}: cannot be read ({exc.strerror}).") from exc
    # The bytes read whole as they are (orjson checks the UTF-8); decoded only for the line-by-line reading.
    fast = _read_whole(data, path, cases, pairs, seen, remember=remember, repeats=repeats)
    if fast is not None:
        return fast
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PredictionError(f"{path}: not UTF-8 text ({exc.reason}); predictions are JSONL.") from exc
    del data
    if _array_loads()[1]:  # the whole reading was tried on the bytes, by orjson: as it would on the text
        return _read_lines(text, path, cases, pairs, seen)
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
    """The parsed replies of stored runs as predictions (with ``run_ids`` None, of the newest run of each model and
    suite), run by run, each run's in the order they were stored."""
    from cfkit.store import runs  # the store's owners load only for a report from the store, not from files

    ids = runs.latest_run_ids(store) if run_ids is None else list(run_ids)
    out: list[Prediction] = []
    shared = _shared_values(None)  # each repeated value as one string, as a file's reading keeps them
    with paused_collection():
        for run_id in ids:
            out += _run_predictions(store, run_id, shared)
    return out


def unit_predictions(store: Store, run_ids: Sequence[str]) -> list[Prediction]:
    """The replies of stored runs as predictions that hold what tells a stale answer (model, suite, case, pair,
    condition, answer, parse rule, error, and an edit answer's edit and image), not the raw replies and what is
    stored beside them: for the listings of runs, which count stale answers and show none (on a study's store of
    180,600 replies, reading the raw replies was 0.8 s of a 1.1 s ``cfkit runs list``). Read as stored, unchecked."""
    from cfkit.store import runs

    out: list[Prediction] = []
    rest = (None,) * (len(FIELDS) - 13)  # truncated, the server's provenance, reasoning, endpoint
    with paused_collection():
        for run_id in run_ids:
            run = runs.get_run(store, run_id)
            if run is None:
                raise PredictionError(f"no run '{run_id}' in store {store.path}. See 'cfkit runs list'.")
            model, suite = run.model, run.suite
            out += [tuple.__new__(Prediction, (
                model, suite, case, pair or None, condition, answer, parse, error, None, None, None,
                *((edit_id, sha) if suite == "counterfactual" and condition == "edit" else (None, None)), *rest))
                for case, pair, condition, answer, parse, error, edit_id, sha in runs.reply_units(store, run_id)]
    return out


def _run_predictions(store: Store, run_id: str, shared: dict[str, str]) -> list[Prediction]:
    from cfkit.store import runs

    run = runs.get_run(store, run_id)
    if run is None:
        raise PredictionError(f"no run '{run_id}' in store {store.path}. See 'cfkit runs list'.")
    model, suite, one = run.model, run.suite, shared.setdefault
    records = runs.replies(store, run_id)
    rows = [(model, suite, one(r.case_id, r.case_id), r.pair_id or None, one(r.condition, r.condition),
             one(r.answer, r.answer), one(r.parse, r.parse), r.error, r.raw, r.reason, r.confidence,
             *((r.edit_id, r.image_sha256) if suite == "counterfactual" and r.condition == "edit" else (None, None)),
             True if r.truncated else None, r.server_model, r.system_fingerprint, r.reasoning, r.endpoint)
            for r in records]
    if _rows_pass(rows):  # all plainly right, checked a column at a time
        return list(map(tuple.__new__, repeat(Prediction, len(rows)), rows))
    out: list[Prediction] = []
    for r, row in zip(records, rows):  # one at a time, by the full check where needed, to name the first problem
        try:
            out.append(Prediction(**dict(zip(FIELDS, row))))
        except ValueError as exc:  # pydantic's ValidationError
            raise PredictionError(
                f"store {store.path}: run {run_id}, case {r.case_id}: {describe_validation(exc)}"
            ) from exc
    return out


def export_run(store: Store, run_id: str) -> str:
    """A stored run's replies as predictions JSONL (docs/formats.md, "Predictions")."""
    return dump_predictions(predictions_from_store(store, [run_id]))
