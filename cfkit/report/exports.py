"""Report exports: JSON (docs/report-schema.md), CSV (one number a row), Markdown and LaTeX."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from cfkit.report.reference import load_reference
from cfkit.report.rows import Report
from cfkit.report.tables import display_tables
from cfkit.vocabulary import REPORT_FORMATS

FORMATS = REPORT_FORMATS


def to_json(report: Report, *, reference: bool = False) -> str:
    data = report.to_dict()
    if reference:
        data["reference"] = load_reference()
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def to_csv(report: Report) -> str:
    """Long form: ``section,model,metric,value``, one number a row at full precision.

    ``model`` is ``BASE=OTHER`` in the compare section; ``metric`` is a dotted
    path into the JSON record (``accuracy.text``, ``ncu_ci.0``,
    ``deltas.text>neutral.p``, ``agreement.kappa``). Missing units, the rows'
    ``incomplete`` marks and run ids, and audit items still without a final
    label are not in the CSV (it holds numbers); the command reports them on
    stderr.
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["section", "model", "metric", "value"])
    data = report.to_dict()
    for section in ("contextcanvas", "counterfactual", "modality", "compare", "swap", "ega"):
        for record in data.get(section, []):
            name = f"{record['base']}={record['other']}" if section == "compare" else record["model"]
            for metric, value in _flatten(record):
                if metric in ("model", "base", "other", "incomplete") or metric.startswith("runs."):
                    continue
                writer.writerow([section, name, metric, repr(float(value)) if isinstance(value, float) else value])
    return buffer.getvalue()


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


def to_markdown(report: Report, *, reference: bool = False) -> str:
    parts = []
    for table in display_tables(report, reference=reference):
        columns = table.columns
        lines = [f"### {table.title}", "", "| " + " | ".join(columns) + " |",
                 "|" + "|".join(["---"] + ["---:"] * (len(columns) - 1)) + "|"]
        for row in table.rows:
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
        if table.caption:
            lines += ["", table.caption]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


_LATEX_ESCAPES = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
                  "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}",
                  "→": r"$\rightarrow$", "Δ": r"$\Delta$", "—": "--", "κ": r"$\kappa$"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in text)


def to_latex(report: Report, *, reference: bool = False) -> str:
    """One ``table`` environment per section (booktabs rules); published rows in italics."""
    parts = []
    for table in display_tables(report, reference=reference):
        spec = "l" + "r" * (len(table.columns) - 1)
        lines = [r"\begin{table}[t]", r"\centering", rf"\caption{{{latex_escape(table.title)}}}",
                 rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
                 " & ".join(latex_escape(c) for c in table.columns) + r" \\", r"\midrule"]
        for row, published in zip(table.rows, table.published):
            cells = [latex_escape(c) for c in row]
            if published:
                cells = [rf"\textit{{{c}}}" for c in cells]
            lines.append(" & ".join(cells) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}"]
        if table.caption:
            lines.append(rf"\par\footnotesize {latex_escape(table.caption)}")
        lines.append(r"\end{table}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"
