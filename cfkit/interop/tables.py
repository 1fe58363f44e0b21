"""``cfkit runs export --format …``: a run's records written as JSONL, CSV, Parquet or a peer's format, and the
JSONL, CSV and Parquet exports read back.

Every format carries every stored field (:data:`cfkit.interop.records.COLUMNS`):
as columns (jsonl, csv, parquet), or as cfkit's record inside the peer's
structure (an inspect sample's ``metadata.cfkit``, an lmms-eval line's
``cfkit`` key, a VLMEvalKit ``cfkit`` column), beside the fields the peer's
own tools read (the reply, the options, the gold answer).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cfkit.cases import CaseSet
from cfkit.hints import install_hint
from cfkit.errors import OutputError, PredictionError
from cfkit.files import json_value
from cfkit.interop import inspect_log, lmms, vlmevalkit
from cfkit.interop.records import COLUMNS, JSON_COLUMNS, RunRecordRow

#: What ``runs export --format`` writes.
EXPORT_FORMATS = ("predictions", "jsonl", "csv", "parquet", "inspect", "lmms", "vlmevalkit")
#: The file name an export is given when --output names a folder or nothing (binary formats need a file).
SUFFIXES = {"predictions": ".jsonl", "jsonl": ".jsonl", "csv": ".csv", "parquet": ".parquet", "inspect": ".eval",
            "lmms": ".jsonl", "vlmevalkit": ".tsv"}


def to_jsonl(rows: list[RunRecordRow]) -> str:
    return "".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in rows)


def to_csv(rows: list[RunRecordRow]) -> str:
    """One reply a row. Every text is quoted and a null is an empty unquoted cell, so that a null and an empty
    text stay apart; numbers are bare; the JSON columns (the usage record, …) are their JSON text."""
    lines = [",".join(COLUMNS)]
    for r in rows:
        lines.append(",".join(_cell(v) for v in r.to_dict().values()))
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        value = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(value)
    return '"' + str(value).replace('"', '""') + '"'


def _csv_records(text: str) -> list[list[tuple[str, bool]]]:
    """CSV cells with whether each was quoted (the csv module forgets, and so cannot tell null from \"\")."""
    rows: list[list[tuple[str, bool]]] = []
    row: list[tuple[str, bool]] = []
    cell: list[str] = []
    quoted = in_quotes = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if in_quotes:
            if ch == '"' and i + 1 < n and text[i + 1] == '"':
                cell.append('"')
                i += 1
            elif ch == '"':
                in_quotes = False
            else:
                cell.append(ch)
        elif ch == '"':
            in_quotes = quoted = True
        elif ch in ",\n":
            row.append(("".join(cell), quoted))
            cell, quoted = [], False
            if ch == "\n":
                rows.append(row)
                row = []
        elif ch != "\r":
            cell.append(ch)
        i += 1
    if cell or row:
        row.append(("".join(cell), quoted))
        rows.append(row)
    return rows


def _frame(rows: list[RunRecordRow]):
    import pandas as pd

    records = [r.to_dict() | {name: None if getattr(r, name) is None else json.dumps(getattr(r, name), sort_keys=True)
                              for name in JSON_COLUMNS} for r in rows]
    frame = pd.DataFrame.from_records(records, columns=list(COLUMNS))
    for name in ("edit_id", "raw_chars", "prompt_tokens", "completion_tokens", "total_tokens"):
        frame[name] = frame[name].astype("Int64")
    return frame


def write_parquet(rows: list[RunRecordRow], path: Path) -> None:
    try:
        _frame(rows).to_parquet(path, index=False)
    except ImportError as exc:
        raise OutputError(f"Parquet needs pandas and pyarrow: {install_hint('interop')} ({exc}).") from None


def read_export(path: Path) -> list[RunRecordRow]:
    """A JSONL, CSV or Parquet run export read back, every field as written."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            import pandas as pd

            frame = pd.read_parquet(path)
        except ImportError as exc:
            raise PredictionError(f"{path}: reading Parquet needs pandas and pyarrow ({exc}).") from None
        except Exception as exc:  # pyarrow's errors for a damaged file
            raise PredictionError(f"{path}: not a readable Parquet file ({exc}).") from exc
        records = frame.astype(object).where(frame.notna(), None).to_dict("records")
        return [RunRecordRow.from_dict(r, f"{path}, row {i}") for i, r in enumerate(records, start=1)]
    text = path.read_text(encoding="utf-8")
    if suffix == ".csv":
        records = _csv_records(text)
        header = [name for name, _ in records[0]] if records else []
        rows = []
        for number, values in enumerate(records[1:], start=2):
            record = {k: (v if quoted else (None if v == "" else _number(v))) for k, (v, quoted) in zip(header, values)}
            rows.append(RunRecordRow.from_dict(record, f"{path}:{number}"))
        return rows
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            where = f"{path}:{number}"
            out.append(RunRecordRow.from_dict(json_value(line, where, PredictionError), where))
    return out


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


def _sample_id(row: RunRecordRow) -> str:
    if row.suite == "contextcanvas" and row.condition == "image":
        return row.case
    return ":".join(part for part in (row.suite, row.case, row.pair, row.condition) if part)


def _peer_rows(rows: list[RunRecordRow], cases: CaseSet) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        case = cases.get(r.case) if r.case in cases else None
        out.append({"id": _sample_id(r), "question": case.question if case else "",
                    "choices": [o.text for o in case.options] if case else [],
                    "gold": case.gold if case and r.suite in ("contextcanvas", "modality") else None,
                    "record": r.to_dict()})
    return out


def write_export(rows: list[RunRecordRow], fmt: str, path: Path, cases: CaseSet, *, created: str,
                 version: str) -> None:
    """Write ``rows`` (one run) to ``path`` in ``fmt`` (binary formats and peers' layouts need a file)."""
    model = rows[0].model if rows else ""
    run_id = rows[0].run if rows else ""
    if fmt == "parquet":
        write_parquet(rows, path)
    elif fmt == "inspect":
        log = inspect_log.build_log(_peer_rows(rows, cases), model=model, task=rows[0].suite if rows else "",
                                    run_id=run_id, created=created, version=version)
        inspect_log.write(log, path)
    elif fmt == "lmms":
        peer = _peer_rows(rows, cases)
        path.write_text("".join(json.dumps(lmms.sample_line(i, row), ensure_ascii=False) + "\n"
                                for i, row in enumerate(peer)), encoding="utf-8")
        graded = [r for r in peer if r["gold"]]
        accuracy = (sum(r["record"]["answer"] == r["gold"] for r in graded) / len(graded)) if graded else None
        results = lmms.results_record(model=model, task=rows[0].suite if rows else "", n=len(peer),
                                      accuracy=accuracy, version=version)
        lmms.companion(path).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    elif fmt == "vlmevalkit":
        vlmevalkit.write(_peer_rows(rows, cases), path)
    else:
        text = to_jsonl(rows) if fmt == "jsonl" else to_csv(rows)
        path.write_text(text, encoding="utf-8")
