"""VLMEvalKit prediction tables: read (``.xlsx``, ``.tsv``, ``.csv``), and written by ``runs export --format vlmevalkit``.

VLMEvalKit's inference writes ``{model}_{dataset}.xlsx`` (``.tsv`` or
``.json`` under ``PRED_FORMAT=tsv`` or ``json``: vlmeval/smp/file.py,
get_pred_file_path) in ``outputs/{model}/``: the dataset's TSV columns —
``index``, ``question``, one column per option (``A``, ``B``, …), ``answer``
(gold) — with the model's raw reply added as ``prediction``
(https://github.com/open-compass/VLMEvalKit, ``vlmeval/inference.py`` and
``docs/en/Development.md``). As ``.json`` the table is a list of one object
per row (``dump``: ``DataFrame.to_dict('records')``; an empty cell is
``NaN``). Under ``SPLIT_THINK=True`` the reply's ``<think>`` part is split off
into a ``thinking`` column, read here as the reply's reasoning. The file holds no extraction of its own (that is
made at evaluation time), so nothing is compared. The model is the folder's
name when the file is named after it, else the file name before its last
``_`` (:func:`model_of`).
xlsx needs openpyxl (the ``interop`` extra).
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

from cfkit.hints import install_hint
from cfkit.errors import PredictionError
from cfkit.interop.samples import CFKIT_KEY, PeerFile, PeerSample

#: Columns VLMEvalKit writes besides the option letters; cfkit's own fields go in one more, ``cfkit`` (JSON).
BASE_COLUMNS = ("index", "question", "answer", "prediction")


def _open_xlsx(path: Path) -> list[dict[str, Any]]:
    try:
        import openpyxl
    except ImportError:
        raise PredictionError(f"{path}: reading .xlsx needs openpyxl: {install_hint('interop')} "
                              "(or save the sheet as .tsv).") from None
    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises several unrelated classes for a damaged file
        raise PredictionError(f"{path}: not a readable .xlsx workbook ({exc}).") from exc
    rows = list(book.worksheets[0].iter_rows(values_only=True))
    book.close()
    if not rows:
        return []
    header = [str(h) if h is not None else "" for h in rows[0]]
    return [dict(zip(header, row)) for row in rows[1:] if any(v is not None for v in row)]


def _open_json(path: Path) -> list[dict[str, Any]]:
    """The rows of a prediction table VLMEvalKit saved as JSON (PRED_FORMAT=json): a list of row objects."""
    from cfkit.files import json_value

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PredictionError(f"{path}: cannot be read ({exc.strerror}).") from exc
    rows = json_value(data, str(path), PredictionError, hint="Is it a VLMEvalKit prediction file (PRED_FORMAT=json)?")
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise PredictionError(f"{path}: a VLMEvalKit prediction file saved as JSON (PRED_FORMAT=json) is a list of "
                              f"one object per row; this one is not. An inspect_ai log is one object with an 'eval' "
                              "header: give --format inspect if it is one.")
    return rows


def table(path: Path) -> list[dict[str, Any]]:
    """The rows of a prediction table, one dict per row."""
    if path.suffix.lower() == ".xlsx":
        return _open_xlsx(path)
    if path.suffix.lower() == ".json":
        return _open_json(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise PredictionError(f"{path}: cannot be read as UTF-8 text ({exc}).") from exc
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    return list(csv.DictReader(io.StringIO(text), delimiter=delimiter))


#: What VLMEvalKit's API models return, and its tables hold as the prediction, when every try of a request failed.
FAIL_MSG = "Failed to obtain answer via API."
#: What its local models' predictions begin with where generation raised and the run went on (``SKIP_ERR=1``):
#: ``Failed to obtain answer: {type(err)} {err}`` (vlmeval/inference.py, infer_data).
SKIP_ERR_MSG = "Failed to obtain answer: "
#: The folder of one run inside ``outputs/{model}/`` (vlmeval/smp/file.py: build_eval_id, and the older name).
RUN_FOLDER = re.compile(r"^T\d{8}-\d{6}$|^T\d{8}_G[0-9a-fA-F]+$")


def _cell(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value)
    return text if text != "" else None


def read(path: Path) -> PeerFile:
    """A VLMEvalKit prediction table as a :class:`PeerFile`."""
    rows = table(path)
    if rows and not {"index", "prediction"} <= set(rows[0]):
        raise PredictionError(f"{path}: a VLMEvalKit prediction table has 'index' and 'prediction' columns; "
                              f"this one has {', '.join(map(str, rows[0]))}.")
    samples = []
    for number, row in enumerate(rows, start=2):
        letters = sorted(k for k in row if len(k) == 1 and k.isalpha() and k.isupper() and _cell(row[k]) is not None)
        record = None
        if _cell(row.get(CFKIT_KEY)):
            try:
                record = json.loads(row[CFKIT_KEY])
            except json.JSONDecodeError as exc:
                raise PredictionError(f"{path}, row {number}: the '{CFKIT_KEY}' column is not JSON ({exc.msg}).") from None
        prediction = _cell(row.get("prediction"))
        failed = None
        if prediction is not None and prediction.startswith(FAIL_MSG):
            failed = f"VLMEvalKit recorded '{FAIL_MSG}' in place of a prediction: its request to the model failed"
        elif prediction is not None and prediction.startswith(SKIP_ERR_MSG):
            failed = (f"VLMEvalKit recorded '{prediction.splitlines()[0][:200]}' in place of a prediction: the "
                      "model raised an error and the run went on (SKIP_ERR)")
        samples.append(PeerSample(sample_id=_cell(row["index"]) or "", raw=prediction,
                                  where=f"{path}, row {number} (index {_cell(row['index'])})",
                                  options={k: _cell(row[k]) or "" for k in letters} or None, record=record,
                                  failed=failed, target=_cell(row.get("answer")),
                                  reasoning=_cell(row.get("thinking"))))  # SPLIT_THINK's split-off <think>
    model, source = model_of(path)
    return PeerFile(path=path, fmt="vlmevalkit", model=model, model_source=source, samples=samples, extracts=False)


def model_of(path: Path) -> tuple[str | None, str]:
    """The model a prediction table names: its folder's name when the file is ``{folder}_{dataset}`` (VLMEvalKit
    writes ``outputs/{model}/{run}/{model}_{dataset}.xlsx``, ``{run}`` being ``T{date}-{time}`` or, before,
    ``T{date}_G{commit}``, and links it into ``outputs/{model}/``; a model or dataset name may hold ``_``), else
    the file name before its last ``_``."""
    stem, folder = path.stem, path.parent.name
    if RUN_FOLDER.match(folder):  # outputs/{model}/{run}/{model}_{dataset}: the model is the folder above
        folder = path.parent.parent.name
    if folder and stem.startswith(f"{folder}_") and len(stem) > len(folder) + 1:
        return folder, f"its folder {folder}/"
    if "_" in stem:
        return stem.rsplit("_", 1)[0], f"the file name {path.name}"
    return None, f"the file name {path.name}, which is not {{model}}_{{dataset}}"


def write(rows: list[dict[str, Any]], path: Path) -> None:
    """A prediction table: ``rows`` are (id, question, choices, gold, record) dicts, as for the other writers."""
    letters = sorted({chr(ord("A") + i) for row in rows for i in range(len(row["choices"]))})
    header = ["index", "question", *letters, "answer", "prediction", CFKIT_KEY]
    records = []
    for row in rows:
        options = {chr(ord("A") + i): text for i, text in enumerate(row["choices"])}
        failed = row["record"].get("error") == "transport" and not row["record"].get("raw")
        records.append([row["id"], row["question"], *[options.get(k, "") for k in letters], row["gold"] or "",
                        FAIL_MSG if failed else row["record"].get("raw") or "",  # as VLMEvalKit writes a failure
                        json.dumps(row["record"], ensure_ascii=False)])
    if path.suffix.lower() == ".json":  # as VLMEvalKit saves one under PRED_FORMAT=json
        path.write_text(json.dumps([dict(zip(header, record)) for record in records], ensure_ascii=False, indent=4)
                        + "\n", encoding="utf-8")
        return
    if path.suffix.lower() == ".xlsx":
        try:
            import openpyxl
        except ImportError:
            raise PredictionError(f"writing .xlsx needs openpyxl: {install_hint('interop')} "
                                  "(or name the output .tsv).") from None
        book = openpyxl.Workbook()
        sheet = book.active
        sheet.append(header)
        for record in records:
            sheet.append(record)
        book.save(path)
        return
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter="\t" if path.suffix.lower() == ".tsv" else ",", lineterminator="\n")
    writer.writerow(header)
    writer.writerows(records)
    path.write_text(buffer.getvalue(), encoding="utf-8")
