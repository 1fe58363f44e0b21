"""The EGA audit in Label Studio or Argilla: ``cfkit audit export --format label-studio|argilla`` and the import.

An export holds one annotator's blinded items in their order, exactly what
``cfkit audit items --as NAME`` shows — the case, its options, gold and
rationale, the image paths, the answer and the reply — and never a model or
a run. Label Studio gets a task list (``data``, cfkit's answer check as a
``prediction``, the annotator's own labels as an ``annotation``); Argilla
gets records (``fields``, ``metadata``, ``suggestions``, ``responses``).
The import reads the tool's own export (Label Studio's JSON export; Argilla's
``Record.to_dict()`` records, or ``to_list(flatten=True)`` rows) and saves the
labels through the worksheet import (:mod:`cfkit.audit.exchange`): the same
checks, and nothing saved if any task is malformed. The labelling interface
each tool needs is in docs/formats.md, "Audit in Label Studio and Argilla".

The questions: ``answer_ok``, ``cue``, ``link`` (each ``yes`` or ``no``),
``unsure`` (``yes`` when ticked) and ``note`` (free text).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cfkit.audit.exchange import ImportResult, import_worksheet
from cfkit.audit.items import Audit, blinded_items
from cfkit.errors import LabelError
from cfkit.store import Store

TOOL_FORMATS = ("label-studio", "argilla")
#: The questions a task asks, in order; ``note`` is text, the others yes or no.
QUESTIONS = ("answer_ok", "cue", "link", "unsure", "note")
#: What the export may show an annotator: the blinded item's fields (a test checks no model or run gets in).
SHOWN = ("item", "order", "case", "question", "options", "gold", "rationale", "images", "answer", "response")


def _yn(value: bool | None) -> str | None:
    return None if value is None else ("yes" if value else "no")


def _shown(entry: dict[str, Any]) -> dict[str, Any]:
    data = {k: entry[k] for k in SHOWN}
    data["options"] = " | ".join(f"{o['id']}: {o['text']}" for o in entry["options"])
    data["images"] = "; ".join(entry["images"])
    return data


def _values(entry: dict[str, Any]) -> dict[str, Any]:
    """The annotator's own answers to the questions (None where not given)."""
    label = entry["label"] or {}
    return {"answer_ok": _yn(label.get("answer_ok")), "cue": _yn(label.get("cue")), "link": _yn(label.get("link")),
            "unsure": "yes" if label.get("unsure") else None, "note": label.get("note")}


def _ls_result(values: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for name in QUESTIONS:
        value = values.get(name)
        if value is None:
            continue
        if name == "note":
            out.append({"from_name": name, "to_name": "response", "type": "textarea", "value": {"text": [value]}})
        else:
            out.append({"from_name": name, "to_name": "response", "type": "choices", "value": {"choices": [value]}})
    return out


def export_tasks(store: Store, audit: Audit, annotator: str, fmt: str) -> str:
    """``annotator``'s blinded items as a Label Studio task list or Argilla records (JSON text)."""
    entries = blinded_items(store, audit, annotator)
    out = []
    for entry in entries:
        values = _values(entry)
        prefill = _yn(entry["answer_ok_prefill"])
        if fmt == "label-studio":
            task: dict[str, Any] = {"data": _shown(entry)}
            if prefill is not None:
                task["predictions"] = [{"model_version": "cfkit answer check",
                                        "result": _ls_result({"answer_ok": prefill})}]
            if any(v is not None for v in values.values()):
                task["annotations"] = [{"result": _ls_result(values)}]
            out.append(task)
        else:
            data = _shown(entry)
            record: dict[str, Any] = {"id": entry["item"],
                                      "fields": {k: v for k, v in data.items() if k not in ("item", "order")},
                                      "metadata": {"order": entry["order"]},
                                      "suggestions": {} if prefill is None else {"answer_ok": {"value": prefill}},
                                      "responses": {k: [{"value": v}] for k, v in values.items() if v is not None}}
            out.append(record)
    return json.dumps(out, ensure_ascii=False, indent=1) + "\n"


def _ls_values(task: dict[str, Any], where: str) -> dict[str, Any]:
    annotations = [a for a in task.get("annotations") or [] if isinstance(a, dict) and not a.get("was_cancelled")]
    if not annotations:
        return {}
    chosen = max(enumerate(annotations), key=lambda pair: (str(pair[1].get("updated_at") or ""), pair[0]))[1]
    values: dict[str, Any] = {}
    for result in chosen.get("result") or []:
        name = result.get("from_name")
        value = result.get("value") or {}
        if name not in QUESTIONS:
            continue
        if "choices" in value:
            choices = value["choices"]
            values[name] = choices[0] if len(choices) == 1 else choices
        elif "text" in value:
            texts = value["text"]
            values[name] = "\n".join(texts) if isinstance(texts, list) else texts
    return values


def _argilla_values(record: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    responses = record.get("responses")
    for name in QUESTIONS:
        given = responses.get(name) if isinstance(responses, dict) else None
        if given is None:
            given = record.get(f"{name}.responses")  # to_list(flatten=True)
        if isinstance(given, list) and given:
            last = given[-1]
            values[name] = last.get("value") if isinstance(last, dict) else last
    return values


def import_tasks(store: Store, audit: Audit, annotator: str, path: Path, text: str, fmt: str) -> ImportResult:
    """Save the labels of a Label Studio or Argilla export as ``annotator``'s; nothing is saved if any is malformed.

    A message's ``FILE:N`` names the N-th task (or record) of the file.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LabelError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); export the "
                         f"{'project' if fmt == 'label-studio' else 'dataset'} as JSON.") from None
    if isinstance(data, dict) and isinstance(data.get("records"), list):
        data = data["records"]
    if not isinstance(data, list):
        raise LabelError(f"{path}: expected a JSON list of {'tasks' if fmt == 'label-studio' else 'records'}.")
    lines = []
    for number, task in enumerate(data, start=1):
        where = f"{path}:{number}"
        if not isinstance(task, dict):
            raise LabelError(f"{where}: expected an object, got {type(task).__name__}.")
        if fmt == "label-studio":
            item = (task.get("data") or {}).get("item")
            order = (task.get("data") or {}).get("order")
            values = _ls_values(task, where)
        else:
            item = task.get("id") or (task.get("metadata") or {}).get("item")
            order = (task.get("metadata") or {}).get("order")
            values = _argilla_values(task)
        if not item:
            raise LabelError(f"{where}: no item id (the export's 'item'); import the tool's export of the tasks "
                             "'cfkit audit export' wrote.")
        lines.append(json.dumps({"item": item, "order": order, **values}))  # order: whose export it is
    return import_worksheet(store, audit, annotator, path, "\n".join(lines) + "\n", "jsonl")
