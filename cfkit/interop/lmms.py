"""lmms-eval per-sample logs (``--log_samples``): read, and written by ``runs export --format lmms``.

lmms-eval (like lm-evaluation-harness, whose logger it shares) writes, per
task, ``{date}_samples_{task}.jsonl`` beside ``{date}_results.json`` in
``OUTPUT/{model}/``; lm-evaluation-harness names them
``samples_{task}_{date}.jsonl`` and ``results_{date}.json``
(https://github.com/EvolvingLMMs-Lab/lmms-eval, ``lmms_eval/loggers/
evaluation_tracker.py``). A samples line holds ``doc_id``, ``target``, ``resps``
(the raw replies, one list per request) and ``filtered_resps`` (after the
task's filters: the task's own extraction), plus the task's metrics. Before
lmms-eval 0.4 it also held ``doc`` (the task's dataset row, whose id cfkit
takes) and ``arguments``; since, ``save_results_samples`` drops both (the
prompt is in ``input``), takes the per-request list off a doc of one request
(``[[reply]]`` becomes ``[reply]``, ``[value]`` becomes ``value``), and drops
``resps`` where it equals ``filtered_resps``: the task's filter left the reply
as it was, so the reply is ``filtered_resps`` and there is no extraction of its
own to compare. A doc's id is then its ``doc_id`` (``--map`` maps it to a case).
The results file names the model (``model_name``, else
``config.model_args``'s ``pretrained=``, else ``config.model``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from cfkit.errors import PredictionError
from cfkit.files import json_value
from cfkit.interop.samples import CFKIT_KEY, PeerFile, PeerSample, target_text
from cfkit.plural import plural

#: Why an empty lmms-eval reply is a failed request: the words each such sample is stored with.
EMPTY_FAILED = ("lmms-eval recorded an empty reply, which is what its API models write when every try of a request "
                "failed")

#: Keys of a dataset row taken as the sample's id, in order (else ``doc_id``).
ID_KEYS = ("id", "case", "case_id", "question_id", "index")


def results_path(samples: Path) -> Path | None:
    """The results file written beside ``samples`` by the same evaluation, if there is one."""
    name = samples.name
    candidates = []
    if (m := re.match(r"^(.*)_samples_.*\.jsonl$", name)):
        candidates.append(samples.with_name(f"{m.group(1)}_results.json"))
    if (m := re.match(r"^samples_.*_(\d{4}-\d\d-\d\dT[\d\-.]+)\.jsonl$", name)):
        candidates.append(samples.with_name(f"results_{m.group(1)}.json"))
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    found = sorted(samples.parent.glob("*results*.json"))
    return found[0] if len(found) == 1 else None


def _model_name(results: dict[str, Any]) -> str | None:
    if results.get("model_name"):
        return str(results["model_name"])
    config = results.get("config") or {}
    args = config.get("model_args")
    if isinstance(args, str) and (m := re.search(r"(?:^|,)pretrained=([^,]+)", args)):
        return m.group(1)
    return str(config["model"]) if config.get("model") else None


def _first_text(value: Any, where: str = "", field: str = "resps") -> str | None:
    """The first string in a (possibly nested) list of replies. A number there is a log-likelihood score (a
    ``multiple_choice`` task scores each option instead of letting the model write a reply): refused, since
    reading ``-1.2`` as a reply would count every answer as naming no option."""
    while isinstance(value, list):
        if not value:
            return None
        value = value[0]
    if isinstance(value, (int, float)):
        raise PredictionError(f"{where}: '{field}' holds numbers (log-likelihood scores of a multiple_choice task), "
                              "not a reply the model wrote; cfkit reads written replies: run the task with "
                              "output_type generate_until and import its samples.")
    return None if value is None else str(value)


def _replies(resps: Any) -> int:
    """How many replies a sample's ``resps`` hold: one list per request, of one reply each, or of N where the task
    ran with ``--repeats N`` (lmms_eval/evaluator.py copies each request N times and appends each reply to it)."""
    if not isinstance(resps, list):
        return 1
    return sum(len(r) if isinstance(r, list) else 1 for r in resps)


def _whole_last_line(line: str, where: str) -> None:
    """Refuse a last line cut short (lmms-eval writes a line and its newline together), saying what to do."""
    try:
        json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        raise PredictionError(f"{where}: the file ends inside this sample, with no newline: it was cut off (a copy "
                              "made while lmms-eval was still writing, or a full disk). Copy the file again once "
                              "the run has ended, or delete this last line to read the samples before it.") from None


def _filter_names(samples: Path, first: dict[str, Any], second: dict[str, Any]) -> list[str]:
    """The names of the task's filters, where the two lines (lm-evaluation-harness writes a line's ``filter``) or
    the results file beside the samples (its metrics are keyed ``METRIC,FILTER``) record them; else none."""
    named = [str(line["filter"]) for line in (first, second) if line.get("filter")]
    if len(set(named)) == 2:
        return named
    task = re.match(r"^.*?_samples_(.*)\.jsonl$|^samples_(.*)_\d{4}-\d\d-\d\dT[\d\-.]+\.jsonl$", samples.name)
    results = results_path(samples)
    if task is None or results is None:
        return []
    try:
        metrics = json.loads(results.read_text(encoding="utf-8")).get("results", {}).get(task.group(1) or task.group(2))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return []
    keys = metrics.keys() if isinstance(metrics, dict) else ()
    return sorted({k.split(",", 1)[1] for k in keys if "," in k and "_stderr," not in k})


def _one_line_per_doc(path: Path, at: str, doc_id: Any, first: tuple[int, dict[str, Any]],
                      second: dict[str, Any]) -> str:
    """Why a samples file with two lines for one doc is refused: most likely the task has several filters
    (lmms_eval/evaluator.py logs every doc once per filter key, and names no filter on the line)."""
    names = _filter_names(path, first[1], second)
    known = f" ({', '.join(repr(n) for n in names)})" if len(names) > 1 else ""
    return (f"{at}: a second line for doc_id {doc_id} (the first is line {first[0]}). lmms-eval writes one line "
            f"per filter for each doc when the task has several filters{known} in its filter_list, without naming "
            "the filter on the line, so cfkit cannot tell which line is which filter's; it reads one reply per "
            "case. Run the task with one filter (cfkit reads the raw reply with its own parser: the filter only "
            "makes the extraction it compares with), or keep one filter's lines of the file.")


def read(path: Path) -> PeerFile:
    """A samples JSONL as a :class:`PeerFile`; the model from the results file beside it."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PredictionError(f"{path}: cannot be read as UTF-8 text ({exc}).") from exc
    samples = []
    seen: dict[str, tuple[int, dict[str, Any]]] = {}  # doc_id -> (line, sample) of its first line
    lines = text.splitlines()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        if lineno == len(lines) and not text.endswith("\n"):
            _whole_last_line(line, where)
        data = json_value(line, where, PredictionError, hint="An lmms-eval samples file is JSONL.")
        if not isinstance(data, dict) or "doc_id" not in data or not ("resps" in data or "filtered_resps" in data):
            raise PredictionError(f"{where}: an lmms-eval sample has 'doc_id' and 'resps' (or, from lmms-eval 0.4 "
                                  "on, 'filtered_resps' alone); this line does not.")
        if (doc_key := json.dumps(data["doc_id"])) in seen:
            raise PredictionError(_one_line_per_doc(path, f"{where} (doc_id {data['doc_id']})", data["doc_id"],
                                                    seen[doc_key], data))
        seen[doc_key] = (lineno, data)
        doc = data.get("doc") if isinstance(data.get("doc"), dict) else {}
        sample_id = next((str(doc[k]) for k in ID_KEYS if doc.get(k) not in (None, "")), str(data["doc_id"]))
        at = f"{where} (doc_id {data['doc_id']})"
        # No 'resps' (lmms-eval 0.4 on): the filter kept the reply as it was, so the reply is 'filtered_resps' and
        # the task made no extraction of its own.
        replies = "resps" if "resps" in data else "filtered_resps"
        raw = _first_text(data[replies], at, replies)
        filtered = _first_text(data["filtered_resps"], at, "filtered_resps") if replies == "resps" else None
        if (count := _replies(data[replies])) > 1:
            raise PredictionError(f"{at}: 'resps' holds {plural(count, 'reply', 'replies')} to this sample (lmms-eval ran the task "
                                  "with --repeats, or asked it in several requests), and cfkit reads one reply per "
                                  "case and cannot tell which to take: run the task again with --repeats 1.")
        samples.append(PeerSample(
            sample_id=sample_id, raw=raw, where=at, failed=EMPTY_FAILED if not raw else None,
            target=target_text(data.get("target")),
            peer_answer=filtered, record=data.get(CFKIT_KEY) if isinstance(data.get(CFKIT_KEY), dict) else None))
    results = results_path(path)
    model, source = None, "no results file beside the samples"
    if results is not None:
        try:
            model = _model_name(json.loads(results.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PredictionError(f"{results}: the results file beside {path.name} cannot be read ({exc}).") from exc
        source = f"{results.name}"
    return PeerFile(path=path, fmt="lmms", model=model, model_source=source, samples=samples)


def sample_line(doc_id: int, row: dict[str, Any]) -> dict[str, Any]:
    """One samples line: the case as ``doc``, the raw reply in ``resps``, cfkit's reading in ``filtered_resps``."""
    record = row["record"]
    answer = record.get("answer")
    return {"doc_id": doc_id, "doc": {"id": row["id"], "question": row["question"], "options": row["choices"]},
            "target": row["gold"] or "", "arguments": [[row["question"]]], "resps": [[record.get("raw") or ""]],
            "filtered_resps": [answer or ""], "exact_match": float(answer is not None and answer == row["gold"]),
            CFKIT_KEY: record}


def companion(samples: Path) -> Path:
    """Where the results file of a samples file written by cfkit goes (the name :func:`results_path` finds)."""
    if (m := re.match(r"^(.*)_samples_.*\.jsonl$", samples.name)):
        return samples.with_name(f"{m.group(1)}_results.json")
    return samples.with_name(f"{samples.stem}_results.json")


def results_record(*, model: str, task: str, n: int, accuracy: float | None, version: str) -> dict[str, Any]:
    return {"results": {task: {"alias": task, "exact_match,none": accuracy}}, "model_name": model,
            "config": {"model": "cfkit", "model_args": f"pretrained={model}"}, "n-samples": {task: {"effective": n}},
            "cfkit_version": version}
