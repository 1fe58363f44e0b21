"""A results file of any supported format as cfkit's records: detect the format, map the peer's ids to cases,
read each raw reply with cfkit's parser, and count where the peer's own reading differs.

A sample written by ``cfkit runs export`` carries cfkit's fields and is kept
as it was (the round trip is lossless). Any other sample is a ContextCanvas
question asked with its image (suite ``contextcanvas``, condition ``image``):
its id is the case id, or is mapped to one by a ``--map`` file (two columns,
the peer's id then the case id; CSV, TSV or a JSON object). A sample whose
case is unknown, or whose options differ from the case's, refuses the whole
file with one line naming the first such sample.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cfkit.cases import Case, CaseSet
from cfkit.errors import PredictionError, UsageError
from cfkit.interop import inspect_log, lmms, vlmevalkit
from cfkit.interop.sniff import detect, refuse_compressed
from cfkit.interop.records import COLUMNS, RunRecordRow
from cfkit.interop.samples import PEER_FORMATS, PeerFile, PeerSample
from cfkit.parse import PARSER_VERSION, parse_answer
from cfkit.plural import agree, plural

#: What ``--predictions-format`` and ``runs import --format`` accept.
READ_FORMATS = ("auto", "native", "export", *PEER_FORMATS)
_READERS = {"inspect": inspect_log.read, "lmms": lmms.read, "vlmevalkit": vlmevalkit.read}


def load_map(path: Path | str) -> dict[str, str]:
    """A ``--map`` file: the peer's id → the case id (CSV or TSV with two columns, or a JSON object)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UsageError(f"--map file {path} not found.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--map file {path} cannot be read ({exc}).") from exc
    if path.suffix.lower() == ".json":
        data = json.loads(text)
        if not isinstance(data, dict):
            raise UsageError(f"--map file {path}: a JSON map is one object, peer id → case id.")
        return {str(k): str(v) for k, v in data.items()}
    out: dict[str, str] = {}
    for number, row in enumerate(csv.reader(io.StringIO(text), delimiter="\t" if "\t" in text else ","), start=1):
        if not row or (number == 1 and [c.strip().lower() for c in row[:2]] in (["peer", "case"], ["id", "case"])):
            continue
        if len(row) < 2 or not row[0].strip() or not row[1].strip():
            raise UsageError(f"--map file {path}, line {number}: two columns, the peer's id then the case id.")
        out[row[0].strip()] = row[1].strip()
    return out


@dataclass
class Imported:
    """One file read as cfkit's records, with what the reading found."""

    path: Path
    fmt: str
    rows: list[RunRecordRow] = field(default_factory=list)
    compared: int = 0  # samples that carry the peer's own extraction
    differ: int = 0  # … whose answer cfkit's parser reads differently
    model_source: str | None = None
    #: (case, pair or '', condition) -> the peer's own answer (None: it read no option), where cfkit reads another
    disagreements: dict[tuple[str, str, str], str | None] = field(default_factory=dict)
    targets: int = 0  # samples whose own target names an option of their case
    #: … of which the target is not the case's gold: (sample where, target, case, gold) of each
    wrong_targets: list[tuple[str, str, str, str]] = field(default_factory=list)
    #: Samples the file records as failed requests (stored as failures, counted wrong): (where, why) of each
    failed: list[tuple[str, str]] = field(default_factory=list)
    #: Samples the file records as declined (a provider's content filter, a refusal; stored as error 'refused',
    #: counted wrong): (where, why) of each
    declined: list[tuple[str, str]] = field(default_factory=list)
    unfinished: str | None = None  # the file says its evaluation did not finish (PeerFile.unfinished)
    left_out: list[tuple[str, str]] = field(default_factory=list)  # samples not counted (PeerFile.left_out)

    def left_out_warning(self) -> str | None:
        """A line when the file holds samples it says are not to be counted (inspect_ai: invalidated after the
        eval): they are left out, and a report counts their cases wrong (absent)."""
        if not self.left_out:
            return None
        where, why = self.left_out[0]
        n = len(self.left_out)
        them, cases = agree(n, "them"), "its case" if n == 1 else "their cases"
        return (f"{self.path.name}: {plural(n, 'sample')} left out, not counted as answers: the "
                f"log marks {them} invalidated (first: {where}: {why}); a report counts {cases} wrong "
                f"(absent). Run {them} again (inspect eval-retry, or an eval set, which retries a log with "
                f"invalidated samples) and read that log, or uninvalidate {them} in inspect_ai.")

    def unfinished_warning(self) -> str | None:
        """A line when the file says its evaluation did not finish: the cases it holds no sample for were never
        asked, and a report counts them wrong (absent)."""
        if self.unfinished is None:
            return None
        return (f"{self.path.name}: {self.unfinished}; its {plural(len(self.rows), 'sample')} "
                f"{agree(len(self.rows), 'are')} read as a run that did "
                "not finish (incomplete), and a report counts the cases it never reached wrong (absent).")

    def target_warning(self) -> str | None:
        """A line when the file's own targets disagree with the cases' golds: the ids are probably mapped to the
        wrong cases (a --map file, a peer's ids that are not these cases'), or the file is of another release."""
        if not self.wrong_targets:
            return None
        where, target, case, gold = self.wrong_targets[0]
        wrong = len(self.wrong_targets)
        return (f"{self.path.name}: {wrong} of {plural(self.targets, 'sample')} {'holds' if wrong == 1 else 'hold'} "
                f"a target that is not {agree(wrong, 'their')} case's gold (first: {where}, target {target}, case {case}'s gold {gold}); check that its "
                "ids map to these cases (--map) and that it is of this cases file: its answers are scored against "
                "the cases' golds.")

    def summary(self) -> str | None:
        """A line on how cfkit's readings compare with the peer's, where the peer made any."""
        if self.fmt in ("native", "export"):
            return None
        failed = ""
        if self.failed:
            where, why = self.failed[0]
            failed = (f"; {plural(len(self.failed), 'recorded as failed request', 'recorded as failed requests')}, "
                      f"counted wrong (first: {where}: {why})")
        if self.declined:
            where, why = self.declined[0]
            failed += (f"; {plural(len(self.declined), 'reply', 'replies')} recorded as declined (refused), "
                       f"counted wrong (first: {where}: {why})")
        if not self.compared:
            return f"{self.path.name}: {plural(len(self.rows), 'reply', 'replies')} read with cfkit's parser ({self.fmt} records no " \
                   f"extraction of its own to compare){failed}."
        return (f"{self.path.name}: {plural(len(self.rows), 'reply', 'replies')} read with cfkit's parser; {self.differ} of "
                f"{self.compared} answers {'differs' if self.differ == 1 else 'differ'} from the {self.fmt} file's own extraction{failed}.")


def _peer_option(value: str | None, case: Case) -> str | None:
    """The peer's extraction as an option id of the case (an id, or an option's exact text), else None."""
    if value is None:
        return None
    text = value.strip()
    ids = {o.id for o in case.options}
    bare = text.strip("()[]. :")  # "(A)", "A.", "[A]" as extraction filters write the letter
    if bare in ids:
        return bare
    by_text = {o.text.strip().lower(): o.id for o in case.options}
    return by_text.get(text.lower())


def _row_of(sample: PeerSample, peer: PeerFile, cases: CaseSet, mapping: Mapping[str, str],
            model: str) -> tuple[RunRecordRow, str | None]:
    case_id = mapping.get(sample.sample_id, sample.sample_id)
    if case_id not in cases:
        via = f" (mapped from '{sample.sample_id}')" if sample.sample_id in mapping else ""
        raise PredictionError(f"{sample.where}: '{case_id}'{via} is not a case of {cases.path}; the file does not "
                              "match these cases. Map its ids with --map FILE (peer id, case id).")
    case = cases.get(case_id)
    if sample.options is not None:
        theirs = {k: v.strip() for k, v in sample.options.items()}
        ours = {o.id: o.text.strip() for o in case.options}
        if theirs != ours:
            raise PredictionError(f"{sample.where}: its options ({'; '.join(f'{k}. {v}' for k, v in theirs.items())}) "
                                  f"are not case {case_id}'s ({'; '.join(f'{k}. {v}' for k, v in ours.items())}); "
                                  "the file does not match these cases.")
    if sample.failed is not None:  # no reply to read: a failed request, as cfkit records one of its own
        return RunRecordRow(run="", model=model, suite="contextcanvas", case=case_id, pair=None, condition="image",
                            answer=None, parse=None, error="transport", raw=sample.raw, reason=None,
                            confidence=None, detail=sample.failed, parser=PARSER_VERSION), None
    if sample.declined is not None:  # not the model's answer: a declined reply, as cfkit records a refusal
        return RunRecordRow(run="", model=model, suite="contextcanvas", case=case_id, pair=None, condition="image",
                            answer=None, parse=None, error="refused", raw=sample.raw, reason=None,
                            confidence=None, detail=sample.declined, reasoning=sample.reasoning,
                            parser=PARSER_VERSION), None
    parsed = parse_answer(sample.raw, case.options, reasoning=sample.reasoning)
    row = RunRecordRow(run="", model=model, suite="contextcanvas", case=case_id, pair=None, condition="image",
                       answer=parsed.answer, parse=parsed.rule, error=parsed.error, raw=sample.raw,
                       reason=parsed.reason, confidence=parsed.confidence, detail=parsed.detail or None,
                       reasoning=parsed.reasoning, parser=PARSER_VERSION, truncated=sample.truncated)
    peer_answer = _peer_option(sample.peer_answer, case) if sample.peer_answer is not None else None
    return row, (None if sample.peer_answer is None else peer_answer or "")


def _one_model(path: Path, models: list[str], label: str | None) -> None:
    """Refuse ``--label`` over a file holding several models' answers: it would give them all one name, and the
    first model's answers would be taken for the second's duplicates."""
    names = sorted(set(models))
    if label is not None and len(names) > 1:
        raise UsageError(f"{path}: --label names the one model of a file, but this one holds the answers of "
                         f"{plural(len(names), 'model')} ({', '.join(names)}); drop --label to keep each model's name, or "
                         "split the file by model.")


def _twice(case: str, first: PeerSample, second: PeerSample, mapping: Mapping[str, str]) -> str:
    """Why a peer's file that answers one case twice is refused: which two samples, and what to do."""
    via = (f" (ids '{first.sample_id}' and '{second.sample_id}', both mapped to it by --map)"
           if first.sample_id != second.sample_id else "")
    return (f"{second.where}: a second answer for case {case}{via}; the first is {first.where}. A results file "
            "holds one answer per case: remove one of the two (a run resumed into the same file can repeat "
            "samples), or fix the ids or the --map file.")


def read_file(path: Path | str, cases: CaseSet, *, fmt: str = "auto", mapping: Mapping[str, str] | None = None,
              label: str | None = None, epoch: int | None = None) -> Imported:
    """Any supported results file as cfkit's records (see the module's docstring); ``epoch`` chooses the epoch of
    an inspect_ai log that holds several."""
    from cfkit.interop.tables import read_export
    from cfkit.predictions import check_predictions, load_predictions

    path = Path(path)
    if not path.is_file():
        raise PredictionError(f"predictions file {path} not found. Check the path.")
    refuse_compressed(path)
    fmt = detect(path) if fmt == "auto" else fmt
    if epoch is not None and fmt != "inspect":
        raise UsageError(f"--epoch chooses an epoch of an inspect_ai log; {path} is read as {fmt}.")
    if fmt == "native":
        preds = load_predictions([path], cases=cases)
        _one_model(path, [p.model for p in preds], label)
        rows = [RunRecordRow(run="", model=label or p.model, suite=p.suite, case=p.case, pair=p.pair,
                             condition=p.condition, answer=p.answer, parse=p.parse, error=p.error, raw=p.raw,
                             reason=p.reason, confidence=p.confidence, edit_id=p.edit_id,
                             image_sha256=p.image_sha256, truncated=bool(p.truncated), server_model=p.server_model,
                             system_fingerprint=p.system_fingerprint, reasoning=p.reasoning, endpoint=p.endpoint)
                for p in preds]
        return Imported(path, fmt, rows)
    if fmt == "export":
        rows = read_export(path)
        check_predictions([r.prediction() for r in rows], str(path), cases=cases)
        _one_model(path, [r.model for r in rows], label)
        if label:
            rows = [RunRecordRow(**(r.to_dict() | {"model": label})) for r in rows]
        return Imported(path, fmt, rows)
    peer = inspect_log.read(path, epoch) if fmt == "inspect" else _READERS[fmt](path)
    model = label or peer.model
    if not model:
        raise UsageError(f"{path}: the {fmt} file names no model ({peer.model_source}); give one with --label NAME.")
    result = Imported(path, fmt, model_source="--label" if label else peer.model_source, unfinished=peer.unfinished,
                      left_out=list(peer.left_out))
    mapping = mapping or {}
    _one_model(path, [str(s.record.get("model")) for s in peer.samples if s.record and s.record.get("model")], label)
    first_of: dict[str, PeerSample] = {}  # case -> the sample that answered it first
    for sample in peer.samples:
        if sample.record is not None:
            data = {k: sample.record.get(k) for k in COLUMNS} | {"model": label or sample.record.get("model") or model}
            result.rows.append(RunRecordRow.from_dict(data, sample.where))
            continue
        row, peer_answer = _row_of(sample, peer, cases, mapping, model)
        if (first := first_of.setdefault(row.case, sample)) is not sample:
            raise PredictionError(_twice(row.case, first, sample, mapping))
        if peer.unfinished is not None:  # stored as a run that did not finish, as an incomplete export is
            row = RunRecordRow(**(row.to_dict() | {"run_status": "incomplete"}))
        result.rows.append(row)
        if sample.failed is not None:
            result.failed.append((sample.where, sample.failed))
        elif sample.declined is not None:
            result.declined.append((sample.where, sample.declined))
        case = cases.get(row.case)
        if sample.target is not None and (target := _peer_option(sample.target, case)) is not None:
            result.targets += 1
            if target != case.gold:
                result.wrong_targets.append((sample.where, sample.target, case.id, case.gold))
        if peer_answer is not None:
            result.compared += 1
            if (peer_answer or None) != row.answer:
                result.differ += 1
                result.disagreements[(row.case, row.pair or "", row.condition)] = peer_answer or None
    return result
