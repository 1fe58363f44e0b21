"""Worksheets: an annotator's blinded items as JSON Lines or CSV, filled in elsewhere and imported back.

``cfkit audit export --as NAME`` writes one row per item in NAME's order:
the case and response columns to read, and the label columns to fill
(``answer_ok`` pre-filled from the parser, ``cue``, ``link``, ``unsure``,
``note``; NAME's own labels where there are some). ``cfkit audit import FILE
--as NAME`` reads the label columns back: a row whose ``cue`` and ``link``
are both blank is left out; every filled row is checked before any is saved.
The ``order`` column, where kept, must be NAME's own order (another
annotator's worksheet is refused, not saved as NAME's labels), and a row of an
adjudicated item is left out when it repeats NAME's saved label, refused when
it would change it.

CSV cells that a spreadsheet would run as a formula (starting ``=``, ``+``,
``-``, ``@``, a tab or a carriage return) are written with a leading ``'``,
which the import takes off again.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cfkit.audit.items import Audit, annotator_order, blinded_items
from cfkit.audit.labelling import NO_WORDS, YES_WORDS, update_label
from cfkit.errors import LabelError
from cfkit.files import csv_problem, json_value
from cfkit.store import Store, audit_labels
from cfkit.store.audit_labels import Final, Label
from cfkit.store.audits import AuditItem
from cfkit.visible import from_spreadsheet_cell, spreadsheet_cell
from cfkit.vocabulary import AUDIT_FORMATS

#: Worksheet columns, in order; the last five are the ones an annotator fills in.
COLUMNS = ("order", "item", "case", "question", "options", "gold", "rationale", "images", "answer", "response",
           "answer_ok", "cue", "link", "unsure", "note")
LABEL_COLUMNS = COLUMNS[-5:]


def format_for(path: Path | None, given: str | None) -> str:
    """The worksheet format: as given, else from the file's suffix (``.csv``), else JSON Lines."""
    if given is not None:
        if given not in AUDIT_FORMATS:
            raise LabelError(f"format '{given}' is not one of {', '.join(AUDIT_FORMATS)}.")
        return given
    return "csv" if path is not None and path.suffix.lower() == ".csv" else "jsonl"


def _rows(store: Store, audit: Audit, annotator: str) -> list[dict[str, Any]]:
    rows = []
    for entry in blinded_items(store, audit, annotator):
        label = entry["label"] or {}
        rows.append({
            "order": entry["order"], "item": entry["item"], "case": entry["case"], "question": entry["question"],
            "options": entry["options"], "gold": entry["gold"], "rationale": entry["rationale"],
            "images": entry["images"], "answer": entry["answer"], "response": entry["response"],
            "answer_ok": label.get("answer_ok", entry["answer_ok_prefill"]), "cue": label.get("cue"),
            "link": label.get("link"), "unsure": label.get("unsure", False), "note": label.get("note"),
        })
    return rows


def export_worksheet(store: Store, audit: Audit, annotator: str, fmt: str) -> str:
    """``annotator``'s worksheet as text in ``fmt`` (jsonl or csv)."""
    rows = _rows(store, audit, annotator)
    if fmt == "jsonl":
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        cells = []
        for column in COLUMNS:
            value = row[column]
            if column == "options":
                value = " | ".join(f"{o['id']}: {o['text']}" for o in value)
            elif column == "images":
                value = "; ".join(value)
            elif isinstance(value, bool):
                value = "yes" if value else "no"
            cells.append(spreadsheet_cell("" if value is None else str(value)))
        writer.writerow(cells)
    return buffer.getvalue()


@dataclass(frozen=True)
class ImportResult:
    new: int  # labels of items the annotator had not labelled: saved
    changed: int  # labels that differ from the annotator's saved ones: saved
    unchanged: int  # rows that give the saved label again: nothing to save
    blank: int  # rows left out: neither cue nor link filled in
    adjudicated: int = 0  # rows left out: an adjudicated item's label given again unchanged

    @property
    def saved(self) -> int:
        """Labels written: the new and the changed ones."""
        return self.new + self.changed


@dataclass(frozen=True)
class _Row:
    where: str
    item: AuditItem
    answer_ok: bool | None
    cue: bool
    link: bool
    unsure: bool | None
    note: str | None


def _flag(value: Any, where: str, column: str, *, blank: bool | None = None) -> bool | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return blank
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in YES_WORDS:
        return True
    if word in NO_WORDS:
        return False
    raise LabelError(f"{where}: {column} is {value!r}; write yes or no (or leave it blank).")


def _records(text: str, path: Path, fmt: str) -> list[tuple[str, dict[str, Any]]]:
    if fmt == "csv":
        reader = csv.DictReader(io.StringIO(text.removeprefix("\ufeff")))
        missing = [c for c in ("item", "cue", "link") if c not in (reader.fieldnames or [])]
        if missing:
            raise LabelError(f"{path}: the header lacks {', '.join(missing)}; start from 'cfkit audit export "
                             "--format csv'.")
        try:
            rows = list(reader)
        except csv.Error as exc:
            raise LabelError(f"{path}:{reader.line_num}: not valid CSV ({csv_problem(exc)}).") from exc
        return [(f"{path}:{n}", {k: from_spreadsheet_cell(v) if isinstance(v, str) else v for k, v in row.items()})
                for n, row in enumerate(rows, start=2)]
    records = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        record = json_value(line, f"{path}:{n}", LabelError, shape="a label is one flat object")
        if not isinstance(record, dict):
            raise LabelError(f"{path}:{n}: expected a JSON object, got {type(record).__name__}.")
        records.append((f"{path}:{n}", record))
    return records


@dataclass(frozen=True)
class _Known:
    """What a worksheet is checked against: the annotator's order, saved labels, and the adjudicated items."""

    annotator: str
    order: dict[str, int]
    own: dict[str, Label]
    resolved: dict[str, Final]


def _check_order(record: dict[str, Any], where: str, ref: str, known: _Known) -> None:
    """Refuse a row whose ``order`` is not the item's place in the annotator's own order (another's worksheet)."""
    given = record.get("order")
    try:
        number = int(str(given).strip()) if given is not None and str(given).strip() else None
    except ValueError:
        return  # a column for reading, overwritten by hand: nothing to compare
    if number is not None and number != known.order[ref]:
        raise LabelError(f"{where}: item {ref} is number {number} in this worksheet but number {known.order[ref]} in "
                         f"{known.annotator}'s order, so the worksheet was exported for another annotator; import it "
                         "under the name it was exported for, or label your own from 'cfkit audit export --as "
                         f"{known.annotator}'.")


def _repeats_own(row: _Row, own: Label | None) -> bool:
    """Whether ``row`` gives again exactly the saved label ``own`` (blank fields keep what is saved)."""
    if own is None:
        return False
    saved = own.judgement
    return ((row.cue, row.link) == (saved.cue, saved.link)
            and row.answer_ok in (None, saved.answer_ok) and row.unsure in (None, own.unsure)
            and row.note in (None, own.note))


def _read(text: str, path: Path, fmt: str, audit: Audit, known: _Known) -> tuple[list[_Row], int, int]:
    rows: list[_Row] = []
    seen: dict[str, str] = {}
    blank = adjudicated = 0
    for where, record in _records(text, path, fmt):
        ref = str(record.get("item") or "").strip().lower()
        if not ref:
            raise LabelError(f"{where}: no item id; keep the worksheet's item column.")
        item = audit.by_id.get(ref)
        if item is None:
            raise LabelError(f"{where}: item '{ref}' is not in audit {audit.id}; was the worksheet exported from "
                             "another audit?")
        if ref in seen:
            raise LabelError(f"{where}: item {ref} is labelled again (first at {seen[ref]}); keep one row.")
        seen[ref] = where
        _check_order(record, where, ref, known)
        cue, link = _flag(record.get("cue"), where, "cue"), _flag(record.get("link"), where, "link")
        if cue is None and link is None:
            blank += 1
            continue
        if cue is None or link is None:
            raise LabelError(f"{where}: item {ref} has {'link' if cue is None else 'cue'} but no "
                             f"{'cue' if cue is None else 'link'}; give both, or leave both blank.")
        note = record.get("note")
        row = _Row(where, item, _flag(record.get("answer_ok"), where, "answer_ok"), cue, link,
                   _flag(record.get("unsure"), where, "unsure"),
                   str(note).strip() if note is not None and str(note).strip() else None)
        final = known.resolved.get(ref)
        if final is not None:
            if not _repeats_own(row, known.own.get(ref)):
                raise LabelError(f"{where}: item {ref} was adjudicated on {final.decided_at} and its final label "
                                 "stands, so this row's change of its label cannot be saved; put back the values "
                                 "you exported, or blank its cue and link.")
            adjudicated += 1
            continue
        rows.append(row)
    return rows, blank, adjudicated


def import_worksheet(store: Store, audit: Audit, annotator: str, path: Path, text: str,
                     fmt: str | None = None) -> ImportResult:
    """Save the filled rows of a worksheet as ``annotator``'s labels; nothing is saved if any row is malformed."""
    finals = audit_labels.finals(store, audit.id)
    known = _Known(annotator, {item.id: n for n, item in enumerate(annotator_order(audit, annotator), start=1)},
                   audit_labels.labels_by(store, audit.id, annotator),
                   {ref: final for ref, final in finals.items() if final.basis == "resolved"})
    rows, blank, adjudicated = _read(text, path, format_for(path, fmt), audit, known)
    new = sum(known.own.get(row.item.id) is None for row in rows)
    unchanged = [row for row in rows if _repeats_own(row, known.own.get(row.item.id))]
    for row in (r for r in rows if r not in unchanged):  # a label given again is left as it is saved
        fields: dict[str, Any] = {"cue": row.cue, "link": row.link}
        if row.answer_ok is not None:
            fields["answer_ok"] = row.answer_ok
        if row.unsure is not None:
            fields["unsure"] = row.unsure
        if row.note is not None:
            fields["note"] = row.note
        update_label(store, audit, row.item, annotator, **fields)
    return ImportResult(new, len(rows) - new - len(unchanged), len(unchanged), blank, adjudicated)
