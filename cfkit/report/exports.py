"""Report exports: JSON (docs/report-schema.md), CSV (one number a row), Markdown and LaTeX."""

from __future__ import annotations

import csv
import dataclasses
import html
import io
import json
import re
from collections.abc import Sequence
from itertools import repeat
from json.encoder import encode_basestring
from operator import add, attrgetter, itemgetter
from typing import Any

from cfkit.report.reference import load_reference
from cfkit.report.rows import Report
from cfkit.report.tables import DisplayTable, display_tables
from cfkit.report.units import FLAT_COLUMNS, ModelUnits, UnitGrid, UnitOutcome, flat_rows
from cfkit.visible import spreadsheet_cell, visible
from cfkit.vocabulary import REPORT_FORMATS

FORMATS = REPORT_FORMATS


def to_json(report: Report, *, reference: bool = False) -> str:
    data = dataclasses.replace(report, units=[]).to_dict()
    data["units"] = _units_json(report.units)  # what report.to_dict() has there, written straight as JSON
    if reference:
        data["reference"] = load_reference()
    return indented_json(data) + "\n"


def indented_json(value: Any, level: int = 0) -> str:
    """``value`` as JSON: objects indented by two spaces a level, each element of a list on one line of its own.

    ``json.dumps(..., indent=2)`` gives up the C encoder and spent most of a
    study-sized report's time (seconds for 10 models × 1,204 cases, most of it
    the per-unit list); here only the objects are walked in Python and each
    list element (a row, a unit) is written by the C encoder in one call.
    Parsed back, it equals ``json.dumps``'s output.
    """
    pad = "  " * (level + 1)
    if isinstance(value, _Encoded):  # a list of objects, each already written
        return "[\n" + ",\n".join(pad + v for v in value) + "\n" + "  " * level + "]" if value else "[]"
    if isinstance(value, dict) and value:
        # Keys as json.dumps writes them (True -> "true", None -> "null", 1 -> "1").
        items = [f"{pad}{_encode({k: 0})[1:-4]}: {indented_json(v, level + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * level + "}"
    if isinstance(value, (list, tuple)) and any(isinstance(v, (dict, list, tuple)) for v in value):
        return "[\n" + ",\n".join(pad + _encode(v) for v in value) + "\n" + "  " * level + "]"
    return _encode(value)


#: ``json.dumps(value, ensure_ascii=False)``, without the search for circular references: a report is a tree, and
#: looking each of a study's unit records up in that search took a quarter of the encoding time.
_encode = json.JSONEncoder(ensure_ascii=False, check_circular=False).encode


class _Encoded(list):
    """A list whose elements (objects) are already JSON text, written by :func:`indented_json` as they are."""


def _units_json(groups: list[ModelUnits]) -> _Encoded:
    """``[_encode(g.to_dict()) for g in groups]``, the same text made faster for a study's units.

    A case's record after its id (answers, golds, right or wrong, reasons) is
    the same for every case and model with the same answers, golds and
    reasons, which a study's hundreds of thousands of units share a few
    hundred of; each is written once and reused. A group asked as a grid is
    written from its columns (its records are never made); a pair's record is
    written in full.
    """
    tails: dict[tuple, str] = {}  # (answers, golds, reasons) -> the record's text after '{"case": ID, '
    grid_tails: dict[tuple, dict[tuple, str]] = {}  # conditions -> (answers, golds) -> that text, for grids
    heads: dict[int, list[str]] = {}  # id of a grid's units (shared by the models asked it) -> '{"case": ID, '
    out = _Encoded()
    for group in groups:
        grid = group.grid
        if grid is not None and grid.units and not any(map(_PAIR_OF_UNIT, grid.units)):
            units = _grid_units_json(grid, grid_tails.setdefault(grid.conditions, {}), heads)
        elif group.units and not any(map(_PAIR_OF, group.units)):
            units = _case_units_json(group.units, tails)  # the usual group, all cases: made in C
        else:
            units = _units_texts(group.units, tails)
        out.append('{"model": ' + _encode(group.model) + ', "suite": ' + _encode(group.suite) + ', "units": ['
                   + ", ".join(units) + "]}")
    return out


def _grid_units_json(grid: UnitGrid, tails: dict[tuple, str], heads: dict[int, list[str]]) -> list[str]:
    """:func:`_case_units_json` for a grid of cases, read from its columns: each record's text after its id
    depends only on the unit's answers and golds (a grid has no unusable answer), written once per distinct
    pair of them; the heads are written once per grid for every model."""
    keys = list(zip(grid.answers, grid.golds))
    order = grid.conditions
    for answers, golds in set(keys).difference(tails):
        unit = UnitOutcome.made("", None, dict(zip(order, answers)), dict(zip(order, golds)), {})
        tails[(answers, golds)] = _encode(unit.to_dict())[len('{"case": "", '):]
    shown = heads.get(id(grid.units))
    if shown is None:
        shown = heads[id(grid.units)] = ['{"case": ' + encode_basestring(case) + ", " for case, _ in grid.units]
    return list(map(add, shown, map(tails.__getitem__, keys)))


def _case_units_json(units: list, tails: dict[tuple, str]) -> list[str]:
    """:func:`_units_texts` for units that are all cases, each record's id and key taken in C and only the records
    of a key not seen before written in Python."""
    items = dict.items
    keys = list(zip(map(tuple, map(items, map(_ANSWERS_OF, units))), map(tuple, map(items, map(_GOLD_OF, units))),
                    map(tuple, map(items, map(_MISSING_OF, units)))))
    for key, unit in dict(zip(keys, units)).items():
        if key not in tails:
            tails[key] = _encode(unit.to_dict())[len('{"case": ' + _encode(unit.case) + ", "):]
    heads = map('{"case": '.__add__, map(encode_basestring, map(_CASE_OF, units)))  # _encode's text of a str
    return list(map(add, map(add, heads, repeat(", ")), map(tails.__getitem__, keys)))


_PAIR_OF, _CASE_OF, _PAIR_OF_UNIT = attrgetter("pair"), attrgetter("case"), itemgetter(1)
_ANSWERS_OF, _GOLD_OF, _MISSING_OF = attrgetter("answers"), attrgetter("gold"), attrgetter("missing")


def _units_texts(units: list, tails: dict[tuple, str]) -> list[str]:
    """Each unit's record as JSON text, a case's text after its id reused from ``tails`` (filled here)."""
    texts = []
    for unit in units:
        if unit.pair is not None:
            texts.append(_encode(unit.to_dict()))
            continue
        head = '{"case": ' + _encode(unit.case) + ", "
        key = (tuple(unit.answers.items()), tuple(unit.gold.items()), tuple(unit.missing.items()))
        tail = tails.get(key)
        if tail is None:
            text = _encode(unit.to_dict())
            if text.startswith(head):
                tails[key] = text[len(head):]
            texts.append(text)
        else:
            texts.append(head + tail)
    return texts


#: The published table shown beside each section with ``--reference`` (Table 6 is the first four rows of S8).
PAPER_TABLES = {"contextcanvas": ("table2", "tableS4"), "counterfactual": ("tableS7",), "modality": ("tableS9",),
                "compare": ("tableS10",), "ega": ("tableS8",)}
#: Table-wide figures of a published table, repeated on each of its rows in the CSV.
_TABLE_FIELDS = ("n", "n_binary", "gold_yes_rate", "n_pairs")


def units_csv(report: Report) -> str:
    """The per-unit outcomes flat (``report --units --format csv``): one row per unit and condition.

    Columns: ``model,suite,case,pair,condition,answer,gold,correct,category,missing``
    (``correct`` as ``true`` / ``false``; an empty cell is null; ``category``
    only for counterfactual pairs, on both of a pair's rows; ``missing`` the
    reason the unit has no usable answer, as in the JSON's ``missing``).
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(FLAT_COLUMNS)
    for row in flat_rows(report.units):
        writer.writerow([_csv_value(row[column]) for column in FLAT_COLUMNS])
    return buffer.getvalue()


def units_json(report: Report) -> str:
    """``{"units": …}``: the report's per-unit outcomes alone (``report --units --format json``)."""
    return json.dumps({"units": [u.to_dict() for u in report.units]}, indent=2, ensure_ascii=False) + "\n"


def to_csv(report: Report, *, reference: bool = False) -> str:
    """Long form: ``section,model,metric,value,source``, one figure a row at full precision.

    ``model`` is ``BASE=OTHER`` in the compare section; ``metric`` is a dotted
    path into the JSON record (``accuracy.text``, ``ncu_ci.0``,
    ``deltas.text>neutral.p``, ``agreement.kappa``); every field of a row is
    there, ``group``, ``incomplete`` and ``not_clean`` (``true`` / ``false``) and the ``runs``
    included; an empty value is a JSON null. ``source`` is ``measured``, or
    for the published rows ``--reference`` adds, ``paper:`` and the table's
    key in ``cfkit/data/reference.json`` (``paper:table2``), their table-wide
    figures (``n``, ``gold_yes_rate``) repeated on each row. Text cells are
    written so that a spreadsheet never runs them as a formula. Rows of section
    ``bootstrap`` (no model) say how every interval was drawn: ``resamples``,
    ``seed`` (empty: fresh entropy) and ``level``. Rows of section
    ``runs_read`` name the run each model's rows of a suite come from
    (``SUITE.run``, ``SUITE.replies``, ``SUITE.asked``, ``SUITE.newer_not_read``
    …), rows of section ``set_aside`` the runs left out, each line numbered
    per model (``0.runs.0``, ``0.message``), and rows of section ``notes``
    (no model; ``metric`` the line's number from 0) the lines that qualify the
    figures, :meth:`Report.said`'s, as the Markdown and LaTeX Notes and
    stderr say them. The units counted wrong for want of an answer are in the
    JSON's ``missing`` (and, a line per model and reason, among the notes).
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["section", "model", "metric", "value", "source"])

    def write(section: str, record: dict[str, Any], source: str) -> None:
        name = f"{record['base']}={record['other']}" if "base" in record else record["model"]
        for metric, value in _flatten(record):
            if metric not in ("model", "base", "other"):
                writer.writerow([section, spreadsheet_cell(name), metric, _csv_value(value), source])

    data = report.to_dict()
    sections = ("contextcanvas", "counterfactual", "modality", "compare", "swap", "ega")
    for section in sections:
        for record in data.get(section, []):
            write(section, record, "measured")
    # How every interval above was drawn, so that a CSV read on its own still says it (B, seed, level).
    write("bootstrap", {"model": "", **data["bootstrap"]}, "measured")
    # Which run each row comes from, and the runs left out with why (cfkit.report.runs_read).
    for record in data["runs_read"]:
        write("runs_read", {"model": record["model"], record["suite"]: {k: v for k, v in record.items()
                                                                         if k not in ("model", "suite")}}, "measured")
    said: dict[str, int] = {}
    for record in data["set_aside"]:
        said[record["model"]] = k = said.get(record["model"], -1) + 1
        write("set_aside", {"model": record["model"], str(k): {k2: v for k2, v in record.items() if k2 != "model"}},
              "measured")
    # What qualifies the figures above (runs left out, units counted wrong, unreviewed captions, older parsers…),
    # the lines the Markdown and LaTeX Notes give: a CSV loaded on its own still says what its numbers rest on.
    write("notes", {"model": "", **{str(k): line for k, line in enumerate(report.said())}}, "measured")
    if reference:
        tables = load_reference()["tables"]
        for section in sections:
            if not data.get(section):
                continue
            for key in PAPER_TABLES.get(section, ()):
                table = tables[key]
                shared = {k: table[k] for k in _TABLE_FIELDS if k in table}
                for row in table["rows"]:
                    write(section, {**row, **shared}, f"paper:{key}")
    return buffer.getvalue()


def _csv_value(value: Any) -> str:
    """A value as the CSV holds it: floats exactly (``repr``), JSON's spelling of booleans and null, safe text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(float(value))  # numpy floats too, whose repr names their type
    if isinstance(value, str):
        return spreadsheet_cell(value)
    return str(value)


def _flatten(record: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in record.items():
        path = f"{prefix}{key}"
        if key == "deltas":
            for d in value:
                out += _flatten({k: v for k, v in d.items() if k not in ("from", "to")}, f"{path}.{d['from']}>{d['to']}.")
        elif isinstance(value, dict):
            out += _flatten(value, path + ".")
        elif isinstance(value, list):
            out += [(f"{path}.{i}", v) for i, v in enumerate(value)]
        else:
            out.append((path, value))
    return out


def markdown_escape(text: str) -> str:
    """A cell's text for a Markdown table: control characters made visible, raw HTML and the characters that
    would end the cell or start emphasis or code escaped, a line break written as ``\\n``."""
    text = html.escape(visible(text), quote=False)
    text = re.sub(r"([\\|*`])", r"\\\1", text)
    return text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")


def _grouped(table: DisplayTable) -> list[tuple[str | None, list[str], bool]]:
    """The rows with, before the first row of each model group, that group's heading."""
    out, heading = [], None
    for k, (row, published) in enumerate(zip(table.rows, table.published)):
        if table.groups is not None and table.groups[k] != heading:
            heading = table.groups[k]
            out.append((heading, [], False))
        out.append((None, row, published))
    return out


def to_markdown(report: Report, *, reference: bool = False) -> str:
    """The report's tables in Markdown, each with its legend, then its notes."""
    return markdown_tables(display_tables(report, reference=reference), report.said())


def markdown_tables(tables: list[DisplayTable], notes: Sequence[str] = ()) -> str:
    """``tables`` in Markdown, each with its legend; then, under a heading "Notes", a list of ``notes``
    (:meth:`Report.said`: what qualifies the figures), so that the text pasted elsewhere keeps them."""
    parts = []
    for table in tables:
        columns = table.columns
        lines = [f"### {markdown_escape(table.title)}", "", "| " + " | ".join(map(markdown_escape, columns)) + " |",
                 "|" + "|".join(["---"] + ["---:"] * (len(columns) - 1)) + "|"]
        for heading, row, _ in _grouped(table):
            if heading is not None:
                lines.append(f"| **{markdown_escape(heading)}** |" + " |" * (len(columns) - 1))
            else:
                lines.append("| " + " | ".join(markdown_escape(c) for c in row) + " |")
        if table.caption:
            lines += ["", markdown_escape(table.caption)]
        parts.append("\n".join(lines))
    if notes:
        # A line that starts like a heading, quote or list of its own is escaped so that it stays one item's text.
        items = [re.sub(r"^([#>+=-])", r"\\\1", markdown_escape(note)) for note in notes]
        parts.append("\n".join(["### Notes", "", *(f"- {item}" for item in items)]))
    return "\n\n".join(parts) + "\n"


_LATEX_ESCAPES = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
                  "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}",
                  "→": r"$\rightarrow$", "Δ": r"$\Delta$", "—": "--", "κ": r"$\kappa$", "−": "$-$", "×": r"$\times$",
                  "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}", "\n": " ", "\r": " "}


def latex_escape(text: str) -> str:
    """Text for a LaTeX document: special characters escaped, a line break a space (a blank line would end a cell),
    and ``--`` of an option kept two hyphens (LaTeX would set an en dash: ``--limit`` as "–limit")."""
    shown = visible(text)
    return "".join("-{}" if ch == "-" and shown[k + 1:k + 2] == "-" else _LATEX_ESCAPES.get(ch, ch)
                   for k, ch in enumerate(shown))


def to_latex(report: Report, *, reference: bool = False) -> str:
    """One ``table`` environment per section (booktabs rules; a ``longtable`` where longer than a page); published
    rows in italics; then the notes."""
    return latex_tables(display_tables(report, reference=reference), report.said())


#: The width the LaTeX tables are fitted to: an article's text column at 10 pt (345 pt).
LATEX_WIDTH_PT = 345.0
#: The sizes a table is tried in, largest first: (the size command, its scale, the column gap \tabcolsep in pt).
LATEX_SIZES = (("", 1.0, 6.0), (r"\small", 0.9, 4.0), (r"\footnotesize", 0.8, 3.0), (r"\scriptsize", 0.7, 2.0),
               (r"\tiny", 0.5, 1.5))
#: About how wide a character of Computer Modern is at 10 pt (a little over, so the estimate errs wide).
_NARROW, _WIDE = frozenset("ijlt.,:;'!|fr()[]-"), frozenset("mwMW%")


def _text_pt(text: str) -> float:
    return sum(3.9 if ch in _NARROW else 8.4 if ch in _WIDE else 3.4 if ch == " " else 7.6 if ch.isupper() else 5.1
               for ch in visible(text))


def _latex_size(table: DisplayTable) -> tuple[str, float]:
    """The largest size (and column gap) in which ``table`` fits :data:`LATEX_WIDTH_PT`; the smallest else."""
    cells = [table.columns] + [row for heading, row, _ in _grouped(table) if heading is None]
    natural = [max(_text_pt(row[k]) for row in cells if k < len(row)) for k in range(len(table.columns))]
    for size, scale, gap in LATEX_SIZES:
        if sum(natural) * scale + 2 * gap * len(natural) <= LATEX_WIDTH_PT:
            break
    return size, gap


#: The height the LaTeX tables are fitted to: an article's text at 10 pt on letter paper (550 pt; A4's is taller).
LATEX_HEIGHT_PT = 550.0
#: A row's height (pt) in each size of :data:`LATEX_SIZES`: that size's baseline skip, a tabular row's strut.
_ROW_PT = {"": 12.0, r"\small": 11.0, r"\footnotesize": 9.5, r"\scriptsize": 8.0, r"\tiny": 6.0}
#: The caption above a table (its skip and a line or two), its rules, and what a float page keeps free.
_TABLE_FIXED_PT = 60.0
#: What a file with a table longer than a page needs, said in its first line.
LONGTABLE_NEEDS = r"% Needs \usepackage{booktabs} and \usepackage{longtable} (a table longer than a page breaks" \
                  " across pages, its header repeated)."


def _longer_than_a_page(table: DisplayTable, size: str) -> bool:
    """Whether ``table`` set in ``size``, with its caption and legend, would be taller than
    :data:`LATEX_HEIGHT_PT` (erring tall): a float that size would run off the page, its last rows lost."""
    grouped = _grouped(table)
    rules = 5.0 * sum(1 for heading, _, _ in grouped if heading is not None)  # a \midrule above each heading
    legend = 0 if not table.caption else 1 + int(_text_pt(table.caption) * 0.8 // LATEX_WIDTH_PT)
    height = _TABLE_FIXED_PT + rules + (1 + len(grouped)) * _ROW_PT[size] + legend * _ROW_PT[r"\footnotesize"]
    return height > LATEX_HEIGHT_PT


def _latex_body(table: DisplayTable) -> list[str]:
    """The lines of ``table``'s rows: a heading (over a rule) before each model group, published rows in italics."""
    lines = []
    for heading, row, published in _grouped(table):
        if heading is not None:
            if lines and lines[-1] != r"\midrule":
                lines.append(r"\midrule")
            lines.append(rf"\multicolumn{{{len(table.columns)}}}{{l}}{{\textbf{{{latex_escape(heading)}}}}} \\")
            continue
        cells = [latex_escape(c) for c in row]
        if published:
            cells = [rf"\textit{{{c}}}" for c in cells]
        lines.append(" & ".join(cells) + r" \\")
    return lines


def _long_table(table: DisplayTable, size: str, gap: float) -> list[str]:
    """``table`` as a ``longtable``: it breaks across pages, each page's part under the caption (marked
    "(continued)" after the first) and the header; set in ``size`` (the caption too), then its legend."""
    title, header = latex_escape(table.title), " & ".join(latex_escape(c) for c in table.columns) + r" \\"
    spec = "l" + "r" * (len(table.columns) - 1)
    return [r"\begingroup", rf"{size}\setlength{{\tabcolsep}}{{{gap:g}pt}}" if size else "",
            rf"\begin{{longtable}}{{{spec}}}", rf"\caption{{{title}}} \\", r"\toprule", header, r"\midrule",
            r"\endfirsthead", rf"\caption[]{{{title} (continued)}} \\", r"\toprule", header, r"\midrule",
            r"\endhead", r"\bottomrule", r"\endfoot", *_latex_body(table),
            r"\end{longtable}", rf"\par\footnotesize {latex_escape(table.caption)}" if table.caption else "",
            r"\par", r"\endgroup"]


def latex_tables(tables: list[DisplayTable], notes: Sequence[str] = ()) -> str:
    """``tables`` as ``table`` environments, each with its legend; then ``notes`` (:meth:`Report.said`: what
    qualifies the figures) as a ``\\paragraph{Notes}`` and an ``itemize``, which need no package. A table whose
    rows cannot fit on a page (:data:`LATEX_HEIGHT_PT`) is a ``longtable`` instead, which breaks across pages
    with its caption and header repeated; the file then starts with a comment that it needs that package."""
    parts, long = [], False
    for table in tables:
        spec = "l" + "r" * (len(table.columns) - 1)
        size, gap = _latex_size(table)  # fitted to an article's column: a smaller size, a narrower gap
        if _longer_than_a_page(table, size):
            long = True
            parts.append("\n".join(line for line in _long_table(table, size, gap) if line))
            continue
        lines = [r"\begin{table}[t]", r"\centering", rf"\caption{{{latex_escape(table.title)}}}",
                 rf"{size}\setlength{{\tabcolsep}}{{{gap:g}pt}}" if size else "",
                 rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
                 " & ".join(latex_escape(c) for c in table.columns) + r" \\", r"\midrule"]
        lines += [*_latex_body(table), r"\bottomrule", r"\end{tabular}"]
        if table.caption:
            lines.append(rf"\par\footnotesize {latex_escape(table.caption)}")
        lines.append(r"\end{table}")
        parts.append("\n".join(line for line in lines if line))
    if notes:
        items = [rf"\item {latex_escape(note)}" for note in notes]
        parts.append("\n".join([r"\paragraph{Notes}", r"\begin{itemize}", *items, r"\end{itemize}"]))
    return (LONGTABLE_NEEDS + "\n" if long else "") + "\n\n".join(parts) + "\n"
