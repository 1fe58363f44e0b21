"""Authoring specs: ``cfkit specs new``, one spec from flags or many from a YAML or JSON list, JSON Lines or a CSV table.

Every new spec is checked before anything is written: its fields against the
schema (:func:`cfkit.specs.build_spec` fills in the default prompt and mask
path), its case against the cases file (the case exists, is a Yes/No case, and
its gold answer is the spec's ``labels.original``), its id against the other
new specs and the files already there (replaced only with ``overwrite``).
Nothing is written unless every spec passes.

A CSV has one spec a row, with the spec format's field names as columns
(``id, case, title, cue, replacement, prompt, preserve, mask, source, notes``);
nested fields use dots (``labels.original``, ``checks.lpips_out_max``,
``engines.classical.op``), ``preserve`` lists its items separated by ``;``,
``regions`` is JSON, and an empty cell leaves the field out.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from cfkit.cases import CaseSet
from cfkit.errors import CaseError, InputError, OutputError, SpecError
from cfkit.files import csv_dict_reader, csv_problem, json_value, read_text, write_text_atomic
from cfkit.plural import plural
from cfkit.specs import Spec, build_spec, dump_spec, spec_path, try_load_cases
from cfkit.workspace import Workspace
from cfkit.yamlfile import load_yaml

#: Columns of a CSV that hold lists, and the separator between their items.
LIST_COLUMNS = {"preserve": ";"}
#: Columns of a CSV whose cells are JSON.
JSON_COLUMNS = ("regions",)


@dataclass(frozen=True)
class NewSpecs:
    """What ``specs new`` wrote, and what it could not check."""

    paths: list[Path]
    replaced: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The specs written whose mask file is not there yet (a spec with ``regions`` needs none): the masks to draw.
    masks_to_draw: list[str] = field(default_factory=list)


def case_problem(spec: Spec, cases: CaseSet, where: str) -> InputError | None:
    """Why ``spec``'s case cannot be its source: missing, not Yes/No, or a gold that is not ``labels.original``."""
    if spec.case not in cases:
        return CaseError(f"{where}: case '{spec.case}' is not in {cases.path}. Fix the case id "
                         "('cfkit cases validate' lists the cases).")
    case = cases.get(spec.case)
    if case.yes_option is None:
        return CaseError(f"{where}: case {case.id} has no yes_option (not a Yes/No case); a counterfactual pair "
                         "needs one.")
    gold = "Yes" if case.gold == case.yes_option else "No"
    if gold != spec.labels.original:
        return SpecError(f"{where}: case {case.id}'s gold answer is '{gold}' but labels.original is "
                         f"'{spec.labels.original}'. Choose a case answered '{spec.labels.original}' or fix the labels.")
    return None


def new_specs(ws: Workspace, rows: list[tuple[str, Mapping[str, Any]]], *, overwrite: bool = False) -> NewSpecs:
    """Check and write specs; ``rows`` pairs where each came from (for messages) with its fields.

    Raises the first problem's error class with every problem in its message;
    then nothing is written.
    """
    # 1. Every spec against the schema, and the ids against each other.
    problems: list[InputError] = []
    specs: list[tuple[str, Spec]] = []
    seen: dict[str, str] = {}
    for where, fields in rows:
        try:
            spec = build_spec(fields, where=where)
        except SpecError as exc:
            problems.append(exc)
            continue
        if spec.id in seen:
            problems.append(SpecError(f"{where}: id {spec.id} is also given at {seen[spec.id]}; give each spec once."))
            continue
        seen[spec.id] = where
        try:
            ws.confined(spec.mask or "", base=ws.interventions_dir, what=f"{where} field 'mask'")
        except InputError as exc:
            problems.append(exc)
        specs.append((where, spec))
    # 2. Their cases.
    notes: list[str] = []
    cases = try_load_cases(ws)
    if cases is None:
        notes.append(f"cases file {ws.cases_path} is missing, so the cases and their gold answers were not checked; "
                     "run 'cfkit specs validate' once it is there.")
    else:
        problems.extend(p for where, spec in specs if (p := case_problem(spec, cases, where)) is not None)
    # 3. The files already there.
    existing = [spec_path(ws, spec.id) for _, spec in specs if spec_path(ws, spec.id).exists()]
    if existing and not overwrite:
        names = ", ".join(p.name for p in existing)
        problems.append(OutputError(f"{names} already exist{'s' if len(existing) == 1 else ''} in "
                                    f"{ws.interventions_dir}; edit by hand, choose other ids, or pass --force "
                                    "to replace them."))
    if problems:
        _raise_all(problems)
    # 4. Write.
    paths: list[Path] = []
    for _, spec in specs:
        path = spec_path(ws, spec.id)
        try:
            write_text_atomic(path, dump_spec(spec), overwrite=overwrite)
        except FileExistsError:
            raise OutputError(f"{path} appeared while writing; {_written(paths)} Run the command again with other "
                              "ids, or --force to replace it.") from None
        except OSError as exc:
            raise OutputError(f"cannot write {path} ({exc.strerror or exc}); {_written(paths)} Check that "
                              f"{ws.interventions_dir} is writable and the disk has room, then run the command "
                              "again.") from exc
        paths.append(path)
    to_draw = [spec.id for _, spec in specs
               if spec.mask and not ws.confined(spec.mask, base=ws.interventions_dir).is_file()]
    return NewSpecs(paths=paths, replaced=existing, notes=notes, masks_to_draw=to_draw)


def _written(paths: list[Path]) -> str:
    if not paths:
        return "no spec was written."
    return f"{len(paths)} spec{'s were' if len(paths) > 1 else ' was'} written before it ({', '.join(p.name for p in paths)})."


def _raise_all(problems: list[InputError]) -> None:
    first = problems[0]
    if len(problems) == 1:
        raise first
    rest = "; ".join(str(p) for p in problems[1:])
    raise type(first)(f"{plural(len(problems), 'problem')}, nothing was written: {first} Also: {rest}")


# ── reading a file of specs ────────────────────────────────────────────────


def read_spec_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The specs a YAML list (``.yaml``/``.yml``) or a CSV table (``.csv``) holds, each with where it came from."""
    try:
        text = read_text(path, "spec file", SpecError)
    except FileNotFoundError:
        raise SpecError(f"--from {path}: not found.") from None
    suffix = path.suffix.lower()
    if suffix == ".csv":
        rows = _csv_rows(text, path)
    elif suffix in (".yaml", ".yml"):
        rows = _yaml_rows(text, path)
    elif suffix == ".json":
        rows = _mapping_rows(_json_value(text.lstrip("\ufeff"), str(path)), path)
    elif suffix in (".jsonl", ".ndjson"):
        rows = _jsonl_rows(text.lstrip("\ufeff"), path)
    else:
        raise SpecError(f"--from {path}: give a .yaml or .json file (a list of specs), a .jsonl file (one spec a "
                        "line) or a .csv table (one spec a row).")
    if not rows:
        raise SpecError(f"--from {path}: holds no specs.")
    return rows


def _json_value(text: str, where: str) -> Any:
    return json_value(text, where, SpecError, shape="a spec is a flat mapping")


def _jsonl_rows(text: str, path: Path) -> list[tuple[str, dict[str, Any]]]:
    rows = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        item = _json_value(line, f"{path}:{lineno}")
        if not isinstance(item, Mapping):
            raise SpecError(f"{path}:{lineno}: expected a JSON object of spec fields, got {type(item).__name__}.")
        rows.append((f"{path.name}:{lineno}" + (f" ({item['id']})" if item.get("id") else ""), dict(item)))
    return rows


def _yaml_rows(text: str, path: Path) -> list[tuple[str, dict[str, Any]]]:
    return _mapping_rows(load_yaml(text, path, SpecError), path)


def _mapping_rows(data: Any, path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The specs of a list of mappings (or one mapping, or ``{specs: [...]}``) read from YAML or JSON."""
    if isinstance(data, Mapping):
        data = data.get("specs", [data]) if set(data) == {"specs"} else [data]
    if not isinstance(data, list):
        raise SpecError(f"{path}: expected a list of specs (each a mapping of id, case, title, …).")
    rows = []
    for index, item in enumerate(data, start=1):
        if not isinstance(item, Mapping):
            raise SpecError(f"{path} item {index}: expected a mapping of spec fields, got {type(item).__name__}.")
        rows.append((f"{path.name} item {index}" + (f" ({item['id']})" if item.get("id") else ""), dict(item)))
    return rows


def _csv_rows(text: str, path: Path) -> list[tuple[str, dict[str, Any]]]:
    reader = csv_dict_reader(io.StringIO(text.lstrip("\ufeff"), newline=""))
    try:
        if not reader.fieldnames:
            raise SpecError(f"{path}: the CSV has no header row; its columns are the spec's field names.")
        records = list(reader)
    except csv.Error as exc:
        raise SpecError(f"{path}:{reader.line_num}: not valid CSV ({csv_problem(exc)}).") from exc
    rows = []
    for line, record in enumerate(records, start=2):
        where = f"{path.name} row {line}" + (f" ({record['id']})" if record.get("id") else "")
        if None in record:
            raise SpecError(f"{where}: more cells than columns; quote cells that hold a comma.")
        fields: dict[str, Any] = {}
        for column, cell in record.items():
            cell = (cell or "").strip()
            if not cell:
                continue
            _put(fields, column.strip(), _cell(column.strip(), cell, where))
        if fields:
            rows.append((where, fields))
    return rows


def _cell(column: str, cell: str, where: str) -> Any:
    if column in LIST_COLUMNS:
        return [item.strip() for item in cell.split(LIST_COLUMNS[column]) if item.strip()]
    if column in JSON_COLUMNS:
        try:
            return json.loads(cell)
        except ValueError as exc:
            raise SpecError(f"{where}: column '{column}' must be JSON, e.g. [{{\"box\": [0.1, 0.2, 0.4, 0.6]}}] "
                            f"({exc.msg}).") from exc
        except RecursionError:
            raise SpecError(f"{where}: column '{column}' is nested too deeply to read; give a list of regions, "
                            "e.g. [{\"box\": [0.1, 0.2, 0.4, 0.6]}].") from None
    return cell


def _put(fields: dict[str, Any], dotted: str, value: Any) -> None:
    """``labels.original`` → ``{"labels": {"original": value}}``."""
    *parents, last = dotted.split(".")
    target = fields
    for name in parents:
        target = target.setdefault(name, {})
    target[last] = value
