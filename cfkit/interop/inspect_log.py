"""inspect_ai eval logs: read (``.json`` and ``.eval``) and written by ``runs export --format inspect``.

The schema is inspect_ai's ``EvalLog`` (https://inspect.aisi.org.uk/eval-logs.html
and the ``inspect_ai.log`` reference): a header (``version``, ``status``,
``eval`` with ``model``, ``task``, ``dataset``; ``plan``, ``results``,
``stats``) and ``samples``, each with ``id``, ``epoch``, ``input``,
``target``, ``choices``, ``metadata``, ``output`` (``model``, ``choices[0]
.message.content``, ``usage``) and ``scores`` (a scorer's ``value`` and the
``answer`` it extracted). A ``.json`` log is that object; a ``.eval`` log is a
zip holding ``header.json`` (the log without samples; an unfinished log has
``_journal/start.json`` instead) and one ``samples/{id}_epoch_{n}.json`` per
sample, compressed with Zstandard by current inspect_ai (read here through the
``zstandard`` package) or with deflate by older releases. When ``inspect_ai``
is installed its ``read_eval_log`` reads the file (any log version it knows);
otherwise cfkit reads the layout above itself. A log of a format version
(``version``) after 2 is refused; a version 1 log's single ``score`` is read
as its scorer's. A sample invalidated after the eval (``invalidation``) is left out
(``PeerFile.left_out``); a reply a provider's content filter blocked
(``stop_reason: content_filter``) or marked a refusal is declined, not an
answer. A request the provider refused for its length (``stop_reason:
model_length``, the provider's words as the content or its ``error``, no
usage) is a failed request, no reply; a reply the limit cut (output tokens
counted) is cut off. tests/data/inspect holds logs inspect_ai 0.3.285 wrote.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

from cfkit.errors import PredictionError
from cfkit.files import json_value
from cfkit.interop.samples import CFKIT_KEY, PeerFile, PeerSample, target_text
from cfkit.plural import plural

#: Log version written (inspect_ai's current EvalLog version).
LOG_VERSION = 2
#: The most one member of an .eval archive may hold unpacked (a sample with its messages and events), and the
#: whole archive; beyond them the archive is refused before it is unpacked (a zip bomb fills memory otherwise).
MAX_MEMBER_BYTES = 256 * 1024 * 1024
MAX_ARCHIVE_BYTES = 4 * 1024 * 1024 * 1024


#: The stop reasons of a reply cut off before its end (inspect_ai's ``StopReason``, src/inspect_ai/model/
#: _model_output.py): at the output token limit, at the model's context window, and "length", which logs written
#: before inspect_ai renamed it hold (its reader migrates it to max_tokens).
CUT_OFF = ("max_tokens", "model_length", "length")


def _with_inspect(path: Path) -> dict[str, Any] | None:
    try:
        from inspect_ai.log import read_eval_log  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        return read_eval_log(str(path)).model_dump(mode="json")
    except Exception as exc:  # inspect_ai raises its own classes; one line here
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise PredictionError(f"{path}: inspect_ai could not read this eval log ({first}).") from exc


def _load_json(data: bytes, where: str) -> Any:
    return json_value(data, where, PredictionError, hint="Is it an inspect_ai eval log?")


def _check_sizes(archive: zipfile.ZipFile, path: Path) -> None:
    """Refuse an archive whose entries unpack beyond the bounds, before anything is unpacked (by either reader)."""
    sizes = {info.filename: info.file_size for info in archive.infolist()}
    big = next((n for n, size in sizes.items() if size > MAX_MEMBER_BYTES), None)
    if big is not None or sum(sizes.values()) > MAX_ARCHIVE_BYTES:
        what = f"member {big} unpacks to {plural(sizes[big], 'byte', spec=',')}" if big else f"it unpacks to {plural(sum(sizes.values()), 'byte', spec=',')}"
        raise PredictionError(f"{path}: {what}, more than an eval log holds ({MAX_MEMBER_BYTES:,} a member, "
                              f"{MAX_ARCHIVE_BYTES:,} in all); refused unread.")


def load_log(path: Path) -> dict[str, Any]:
    """The log as a dict of inspect_ai's schema, samples included (inspect_ai's reader where installed, for the
    names it reads: .eval and .json)."""
    archive: zipfile.ZipFile | None = None
    if path.suffix == ".eval":
        try:
            archive = zipfile.ZipFile(path)
        except zipfile.BadZipFile:
            raise PredictionError(f"{path}: not a zip archive; an .eval log is one (a .json log is plain JSON).") from None
        except OSError as exc:
            raise PredictionError(f"{path}: cannot be read ({exc.strerror}).") from exc
    try:
        if archive is not None:
            _check_sizes(archive, path)
        log = _with_inspect(path) if path.suffix in (".eval", ".json") else None
        if log is not None:
            return log
        if archive is not None:
            return _from_archive(archive, path)
    finally:
        if archive is not None:
            archive.close()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PredictionError(f"{path}: cannot be read ({exc.strerror}).") from exc
    log = _load_json(data, str(path))
    if not isinstance(log, dict) or "eval" not in log:
        raise PredictionError(f"{path}: not an inspect_ai eval log (no 'eval' header).")
    return log


def _from_archive(archive: zipfile.ZipFile, path: Path) -> dict[str, Any]:
    names = archive.namelist()
    head = "header.json" if "header.json" in names else "_journal/start.json"
    if head not in names:
        raise PredictionError(f"{path}: an .eval log holds header.json; this zip has neither it nor "
                              "_journal/start.json.")
    log = _load_json(_member(archive, path, head), f"{path}:{head}")
    if not isinstance(log, dict):
        raise PredictionError(f"{path}:{head}: not an object as in inspect_ai's EvalLog.")
    log["samples"] = [_load_json(_member(archive, path, n), f"{path}:{n}") for n in names
                      if n.startswith("samples/") and n.endswith(".json")]
    return log


#: The zip compression method inspect_ai writes .eval members with (Zstandard; zipfile reads it from Python 3.14).
ZIP_ZSTANDARD = 93


def _member(archive: zipfile.ZipFile, path: Path, name: str) -> bytes:
    """One member unpacked; a Zstandard member through the ``zstandard`` package (the ``interop`` extra)."""
    info = archive.getinfo(name)
    if info.compress_type != ZIP_ZSTANDARD:
        return archive.read(name)
    try:
        import zstandard
    except ImportError:
        from cfkit.hints import install_hint

        raise PredictionError(f"{path}: this .eval log is compressed with Zstandard, which needs the zstandard "
                              f"package: {install_hint('interop')}.") from None
    assert archive.fp is not None
    archive.fp.seek(info.header_offset)
    local = archive.fp.read(30)  # the local file header; its name and extra field lengths end it
    if local[:4] != b"PK\x03\x04":
        raise PredictionError(f"{path}:{name}: a damaged zip member (no local header).")
    skip = int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little")
    archive.fp.seek(info.header_offset + 30 + skip)
    packed = archive.fp.read(info.compress_size)
    try:
        with zstandard.ZstdDecompressor().stream_reader(packed) as reader:
            data = reader.read(info.file_size + 1)  # never more than the entry says, and one byte to see a lie
    except zstandard.ZstdError as exc:
        raise PredictionError(f"{path}:{name}: a damaged Zstandard member ({exc}).") from None
    if len(data) != info.file_size:
        raise PredictionError(f"{path}:{name}: unpacks to {plural(len(data), 'byte', spec=',')}, not the {info.file_size:,} its "
                              "zip entry says; refused.")
    return data


def _content_text(content: Any) -> tuple[str | None, str | None, bool]:
    """A message's text, its reasoning, and whether a text part is marked a refusal (``ContentText.refusal``, as
    inspect_ai stores an OpenAI reply's ``refusal``); content is a string or a list of typed parts."""
    if content is None or isinstance(content, str):
        return content, None, False
    texts, reasoning, refusal = [], [], False
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and part.get("type") == "text":
            texts.append(part.get("text") or "")
            refusal = refusal or part.get("refusal") is True
        elif isinstance(part, dict) and part.get("type") == "reasoning":
            reasoning.append(part.get("reasoning") or "")
    return "".join(texts), ("\n".join(reasoning) or None), refusal


def _declined(stop_reason: Any, output: dict[str, Any], refusal: bool) -> str | None:
    """Why a sample's output is not the model's answer but a refusal, else None: a provider's content filter
    blocked it (``stop_reason: content_filter``; ``output.error`` holds what the provider said, and the content is
    often its error message), or the reply is marked a refusal."""
    if stop_reason == "content_filter":
        said = str(output.get("error") or "").strip().splitlines()
        return ("the provider's content filter blocked the reply (inspect_ai recorded stop_reason content_filter"
                + (f": {said[0][:300]})" if said else ")"))
    if refusal:
        return "the model refused (inspect_ai recorded its reply as a refusal)"
    return None


def _refused_for_length(stop_reason: Any, output: dict[str, Any], raw: str | None, reasoning: str | None) -> str | None:
    """Why a sample whose stop reason says "cut off" holds no reply at all, else None: the provider refused the
    request for its length (OpenAI's ``context_length_exceeded``, Anthropic's "prompt is too long"), which
    inspect_ai records not as a sample error but as an output it makes itself, ``ModelOutput.from_content``
    (``openai_handle_bad_request`` in src/inspect_ai/model/_providers/util/): ``stop_reason: model_length``, the
    provider's words as the content (and in ``error`` where a provider module sets one), and no usage, which every
    reply a provider returns carries. A reply the model wrote and a limit cut (output tokens counted, or reasoning
    present) is cut off, not this."""
    if stop_reason not in CUT_OFF:
        return None
    said = str(output.get("error") or "").strip().splitlines()
    usage = output.get("usage")
    made = isinstance(usage, dict) and (usage.get("output_tokens") or 0) > 0
    if not said and (stop_reason != "model_length" or made or (reasoning or "").strip()):
        return None
    words = said or (raw or "").strip().splitlines()
    return ("the provider refused the request for its length before the model replied (inspect_ai recorded "
            f"stop_reason {stop_reason} with " + (f"the words: {words[0][:300]})" if words else "no completion)"))


def _invalidated(invalidation: Any) -> str:
    """Why an invalidated sample is left out: who invalidated it, when and why (inspect_ai's ``ProvenanceData``:
    ``timestamp``, ``author``, ``reason``; src/inspect_ai/log/_edit.py, invalidate_samples)."""
    said = invalidation if isinstance(invalidation, dict) else {}
    by = f" by {said['author']}" if said.get("author") else ""
    on = f" on {str(said['timestamp'])[:10]}" if said.get("timestamp") else ""
    reason = str(said.get("reason") or "").strip().splitlines()
    return f"invalidated{by}{on} after the eval" + (f" ({reason[0][:200]})" if reason else "")


def _scored_answer(scores: Any) -> str | None:
    """The answer a scorer extracted ("" when it extracted none); None when no scorer records an answer."""
    for score in (scores or {}).values():
        if isinstance(score, dict) and "answer" in score:
            return "" if score["answer"] is None else str(score["answer"])
    return None


def _of_epoch(samples: list, path: Path, epoch: int | None) -> list[tuple[int, Any]]:
    """(number in the log, sample) of the samples of ``epoch``; every sample where the eval ran one epoch and
    none is asked for. A log of several epochs holds several replies per case, of which a report takes one."""
    def epoch_of(sample: Any) -> Any:
        return sample.get("epoch", 1) if isinstance(sample, dict) else 1

    epochs = sorted({e for e in map(epoch_of, samples) if isinstance(e, int)})
    if epoch is None:
        if len(epochs) > 1:
            raise PredictionError(f"{path}: the log holds {plural(len(epochs), 'epoch')} of each sample (the eval ran "
                                  f"--epochs {len(epochs)}), and cfkit reads one reply per case; choose one with "
                                  f"--epoch N ({', '.join(map(str, epochs))}).")
        return list(enumerate(samples, start=1))
    if epoch not in epochs:
        raise PredictionError(f"{path}: no sample of epoch {epoch}; the log holds {plural(len(epochs), 'epoch')}"
                              + (f" ({', '.join(map(str, epochs))}); choose one with --epoch N." if epochs else "."))
    return [(n, s) for n, s in enumerate(samples, start=1) if epoch_of(s) == epoch]


def _halted(limit: dict[str, Any]) -> str:
    """Why a sample that a limit halted before the model wrote anything has no reply."""
    value = f" ({limit['limit']:g})" if isinstance(limit.get("limit"), (int, float)) else ""
    return f"inspect_ai halted the sample at its {limit.get('type') or 'unnamed'} limit{value} before the model replied"


def _sample_error(error: Any) -> str | None:
    """What inspect_ai recorded as the error that halted a sample (an ``EvalError``: its message), else None."""
    if not error:
        return None
    message = error.get("message") if isinstance(error, dict) else error
    first = str(message or "an error with no message").strip().splitlines() or ["an error with no message"]
    return f"inspect_ai recorded an error that halted the sample: {first[0][:300]}"


def _known_version(version: Any, path: Path) -> None:
    """Refuse a log of a format version cfkit does not know (a later inspect_ai's), rather than read its fields as
    those of the versions it knows (1 and 2; a log that names none is of version 2, inspect_ai's default)."""
    if version is None or (isinstance(version, int) and not isinstance(version, bool) and 1 <= version <= LOG_VERSION):
        return
    from cfkit.hints import DISTRIBUTION

    raise PredictionError(f"{path}: an inspect_ai eval log of format version {version!r}; cfkit reads versions 1 to "
                          f"{LOG_VERSION}, so this log is not read rather than misread: a later cfkit may read it "
                          f"(pip install -U '{DISTRIBUTION}').")


def _dict(value: Any, where: str, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PredictionError(f"{where}: {what} is {type(value).__name__}, not an object as in inspect_ai's EvalLog.")
    return value


def read(path: Path, epoch: int | None = None) -> PeerFile:
    """An inspect_ai log as a :class:`PeerFile` (the model from the header's ``eval.model``): its samples of
    ``epoch``, which must be given when the eval ran several (``inspect eval --epochs``)."""
    log = _dict(load_log(path), str(path), "the log")
    _known_version(log.get("version"), path)
    header = _dict(log.get("eval"), str(path), "'eval'")
    if not isinstance(log.get("samples"), list):
        raise PredictionError(f"{path}: the log holds no samples (inspect_ai writes them unless --no-log-samples).")
    samples: list[PeerSample] = []
    left_out: list[tuple[str, str]] = []
    for number, sample in _of_epoch(log["samples"], path, epoch):
        where = f"{path}, sample #{number}"
        sample = _dict(sample, where, "the sample")
        where = f"{path}, sample {sample.get('id')!r} (#{number})"
        if sample.get("invalidation"):  # invalidated after the eval (inspect_ai's invalidate_samples): not counted
            left_out.append((where, _invalidated(sample["invalidation"])))
            continue
        output = _dict(sample.get("output"), where, "'output'")
        choices = output.get("choices") if isinstance(output.get("choices"), list) else []
        raw, reasoning, refusal = None, None, False
        stop = choices[0].get("stop_reason") if choices and isinstance(choices[0], dict) else None
        truncated = stop in CUT_OFF
        if choices:
            raw, reasoning, refusal = _content_text(_dict(_dict(choices[0], where, "'output.choices[0]'").get(
                "message"), where, "'message'").get("content"))
        elif isinstance(output.get("completion"), str):
            raw = output["completion"]
        metadata = _dict(sample.get("metadata"), where, "'metadata'")
        texts = sample.get("choices")
        options = {chr(ord("A") + i): str(t) for i, t in enumerate(texts)} if isinstance(texts, list) and texts else None
        scores = sample.get("scores") if isinstance(sample.get("scores"), dict) else None
        if scores is None and isinstance(sample.get("score"), dict):  # a version 1 log: one scorer's 'score'
            scores = {"score": sample["score"]}
        limit = sample.get("limit") if isinstance(sample.get("limit"), dict) else None  # the limit that halted it
        if limit is not None and raw and limit.get("type") in ("token", "context"):
            truncated = True  # a reply cut off where a token limit halted the sample
        refused = _refused_for_length(stop, output, raw, reasoning)
        if refused is not None:  # no reply was produced: a failed request, not a reply cut off
            truncated = False
        samples.append(PeerSample(
            sample_id=str(sample.get("id")), raw=raw, where=where, peer_answer=_scored_answer(scores),
            options=options, record=metadata.get(CFKIT_KEY) if isinstance(metadata.get(CFKIT_KEY), dict) else None,
            truncated=truncated, target=target_text(sample.get("target")), reasoning=reasoning,
            declined=_declined(stop, output, refusal),
            failed=_sample_error(sample.get("error")) or refused
            or (_halted(limit) if limit is not None and not raw else None)))
    dataset = header.get("dataset") if isinstance(header.get("dataset"), dict) else {}
    order = dataset.get("sample_ids")
    if isinstance(order, list):  # the dataset's order (an .eval archive, and inspect_ai's reader, may hold another)
        rank = {str(sample_id): n for n, sample_id in enumerate(order)}
        samples.sort(key=lambda s: rank.get(s.sample_id, len(rank)))
    model = header.get("model")
    return PeerFile(path=path, fmt="inspect", model=str(model) if model else None,
                    model_source="the log header's eval.model", samples=samples, unfinished=_unfinished(log),
                    left_out=left_out)


#: What a log's status says of an eval that did not finish (inspect_ai writes 'success' for one that did).
_UNFINISHED = {"started": "the eval was still running when the log was read",
               "error": "the eval stopped on an error", "cancelled": "the eval was cancelled"}


def _unfinished(log: dict[str, Any]) -> str | None:
    """The log's word that its eval did not finish, with the error that stopped it, else None."""
    said = _UNFINISHED.get(log.get("status"))  # type: ignore[arg-type]
    if said is None:
        return None
    error = log.get("error") if isinstance(log.get("error"), dict) else {}
    message = str(error.get("message") or "").strip().splitlines()
    return f"its status is '{log['status']}': {said}" + (f" ({message[0][:200]})" if message else "")


def build_log(rows: list[dict[str, Any]], *, model: str, task: str, run_id: str, created: str,
              version: str) -> dict[str, Any]:
    """An EvalLog dict of one run: ``rows`` are (sample id, question, option texts, gold, record) dicts."""
    samples = []
    for row in rows:
        record = row["record"]
        usage = {k: v for k, v in (("input_tokens", record.get("prompt_tokens")),
                                   ("output_tokens", record.get("completion_tokens")),
                                   ("total_tokens", record.get("total_tokens"))) if v is not None}
        content: Any = record.get("raw") or ""
        if record.get("reasoning"):
            content = [{"type": "reasoning", "reasoning": record["reasoning"]}, {"type": "text", "text": content}]
        stop = "max_tokens" if record.get("truncated") else "stop"
        output = {"model": record.get("server_model") or model,
                  "choices": [{"message": {"role": "assistant", "content": content}, "stop_reason": stop}]}
        if usage:
            output["usage"] = usage
        if record.get("latency_s") is not None:
            output["time"] = record["latency_s"]
        answer = record.get("answer")
        sample = {
            "id": row["id"], "epoch": 1, "input": row["question"], "target": row["gold"] or "",
            "choices": row["choices"], "metadata": {CFKIT_KEY: record},
            "messages": [{"role": "user", "content": row["question"]}, {"role": "assistant", "content": content}],
            "output": output,
            "scores": {"choice": {"value": "C" if answer is not None and answer == row["gold"] else "I",
                                  "answer": answer}},
        }
        if record.get("error") == "transport" and not record.get("raw"):  # as inspect_ai logs a failed sample
            output["choices"], sample["messages"] = [], sample["messages"][:1]
            sample["error"] = {"message": record.get("detail") or "the request failed", "traceback": "",
                               "traceback_ansi": ""}
        samples.append(sample)
    return {
        "version": LOG_VERSION, "status": "success",
        "eval": {"run_id": run_id, "created": created, "task": task, "task_id": run_id, "task_version": 0,
                 "dataset": {"name": "ContextCanvas", "samples": len(samples),
                             "sample_ids": [s["id"] for s in samples]},
                 "model": model, "config": {}, "packages": {"cfkit": version}, "metadata": {"cfkit_run": run_id}},
        "plan": {"name": "plan", "steps": [], "config": {}},
        "results": {"total_samples": len(samples), "completed_samples": len(samples), "scores": []},
        "stats": {"started_at": created, "completed_at": created, "model_usage": {}},
        "samples": samples,
    }


def write(log: dict[str, Any], path: Path) -> None:
    """A log as ``.eval`` (zip: header.json and samples/) or, for any other name, one JSON object."""
    if path.suffix != ".eval":
        path.write_text(json.dumps(log, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        return
    header = {k: v for k, v in log.items() if k != "samples"}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", json.dumps(header, ensure_ascii=False))
        for sample in log["samples"]:
            archive.writestr(f"samples/{sample['id']}_epoch_{sample['epoch']}.json",
                             json.dumps(sample, ensure_ascii=False))
