"""The report as tables: the same cells for the terminal, Markdown and LaTeX, laid out like the paper's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cfkit.report.reference import load_reference, reference_label
from cfkit.report.rows import Report
from cfkit.vocabulary import SUITE_CONDITIONS


@dataclass(frozen=True)
class DisplayTable:
    """A table as shown in the terminal, Markdown and LaTeX: the same cells in each."""

    key: str
    title: str
    columns: list[str]
    rows: list[list[str]]
    published: list[bool]  # per row: a published reference row (not measured here)
    caption: str = ""


#: Appended to the first cell of a published reference row.
PAPER_MARK = " (paper)"
#: Appended to the first cell of a row built from an incomplete run or with units absent or failed.
INCOMPLETE_MARK = " (incomplete)"


def _name(row: dict) -> str:
    return row["model"] + (INCOMPLETE_MARK if row.get("incomplete") else "")


def _comparable(unit: str, ours: set[int], theirs: int, expected: int | None = None) -> str:
    """A caption sentence when our rows cover another number of units than the paper's; '' when they match."""
    if ours == {theirs}:
        return ""
    counted = " or ".join(map(str, sorted(ours)))
    units = unit if ours != {1} else unit.removesuffix("s")
    of = f" (this workspace expects {expected})" if expected is not None and expected != max(ours) else ""
    return (f" Not comparable as they stand: the rows measured here are over {counted} {units}{of}; "
            f"the paper's are over {theirs}.")


def fmt(value: float | None) -> str:
    """A percentage or difference for display: two decimals."""
    return "—" if value is None else f"{value:.2f}"


def fmt_p(value: float) -> str:
    """A p-value for display: four decimals, or two significant digits below 0.0001."""
    return f"{value:.4f}" if value >= 1e-4 else f"{value:.1e}"


def fmt_ci(values: Sequence[float]) -> str:
    return f"[{values[0]:.2f}, {values[1]:.2f}]"


def display_tables(report: Report, *, reference: bool = False) -> list[DisplayTable]:
    """The report's tables, laid out like the paper's Tables 2, S7, S9 and S10."""
    data = report.to_dict()
    ref = load_reference()["tables"] if reference else None
    full = {r["model"]: r["accuracy"] for r in data["contextcanvas"]}
    tables: list[DisplayTable] = []
    if data["contextcanvas"]:
        # The paper's columns plus n, the gold Yes rate and invalid answers; Yes-F1 / No-F1 are in JSON and CSV.
        rows = [[_name(r), str(r["n"]), fmt(r["accuracy"]), fmt(r["macro_f1"]), fmt(r["yes_rate"]),
                 fmt(r["gold_yes_rate"]), str(r["invalid"])] for r in data["contextcanvas"]]
        published = [False] * len(rows)
        caption = _caption("table2", reference)
        if ref:
            t = ref["table2"]
            caption += _comparable("cases", {r["n"] for r in data["contextcanvas"]}, t["n"]) + _notes(report, "contextcanvas")
            for r in t["rows"]:
                rows.append([r["model"] + PAPER_MARK, str(t["n"]), fmt(r["accuracy"]), fmt(r["macro_f1"]), fmt(r["yes_rate"]),
                             fmt(t["gold_yes_rate"]), "—"])
                published.append(True)
        tables.append(DisplayTable(
            "contextcanvas", "ContextCanvas (as in Table 2)",
            ["Model", "n", "Acc.", "Macro-F1", "Yes (%)", "Gold Yes", "Inv."],
            rows, published, caption))
    if data["counterfactual"]:
        # The paper's columns plus invalid pairs; the stuck counts are in JSON and CSV.
        rows = [[_name(r), fmt(full.get(r["model"])), fmt(r["orig_acc"]), fmt(r["edit_acc"]), fmt(r["pair_acc"]),
                 f"{r['correct']}/{r['reverse']}", str(r["invalid"]), fmt(r["ncu"]), fmt_ci(r["ncu_ci"])]
                for r in data["counterfactual"]]
        published = [False] * len(rows)
        caption = _caption("tableS7", reference)
        if ref:
            caption += _comparable("pairs", {r["n_pairs"] for r in data["counterfactual"]}, ref["tableS7"]["n_pairs"],
                                   report.expected.get("counterfactual")) + _notes(report, "counterfactual")
            for r in ref["tableS7"]["rows"]:
                rows.append([r["model"] + PAPER_MARK, fmt(r["full"]), fmt(r["orig_acc"]), fmt(r["edit_acc"]), fmt(r["pair_acc"]),
                             f"{r['correct']}/{r['reverse']}", "—", fmt(r["ncu"]), fmt_ci(r["ncu_ci"])])
                published.append(True)
        n_pairs = {r["n_pairs"] for r in data["counterfactual"]}
        title = f"Counterfactual pairs (as in Table S7; {', '.join(map(str, sorted(n_pairs)))} pairs)"
        tables.append(DisplayTable(
            "counterfactual", title,
            ["Model", "Full", "Orig.", "Edit", "Pair", "C/R", "Inv.", "NCU", "95% CI"],
            rows, published, caption))
    if data["modality"]:
        conditions = SUITE_CONDITIONS["modality"]
        rows = [[_name(r), str(r["n"]), *(fmt(r["accuracy"][c]) for c in conditions)] for r in data["modality"]]
        published = [False] * len(rows)
        caption = _caption("tableS9", reference)
        if ref:
            t = ref["tableS9"]
            caption += _comparable("cases", {r["n"] for r in data["modality"]}, t["n"]) + _notes(report, "modality")
            for r in t["rows"]:
                rows.append([r["model"] + PAPER_MARK, str(t["n"]), *(fmt(r["accuracy"][c]) for c in conditions)])
                published.append(True)
        tables.append(DisplayTable("modality", "Modality conditions (as in Table S9)",
                                   ["Model", "n", "Text", "Neutral", "Evidence", "Image"], rows, published,
                                   caption))
        if data["modality"]:
            rows = [[r["model"], f"{d['from']} → {d['to']}", fmt(d["delta"]), fmt_ci(d["ci"]), f"{d['b']}/{d['c']}",
                     fmt_p(d["p"]), fmt_p(d["p_adj"])] for r in data["modality"] for d in r["deltas"]]
            tables.append(DisplayTable("modality_deltas", "Modality changes (paired, exact McNemar, Bonferroni over 4)",
                                       ["Model", "Change", "Δ", "95% CI", "b/c", "p", "p adj"], rows,
                                       [False] * len(rows)))
    if data["compare"]:
        rows = [[f"{r['base']} → {r['other']}", fmt(r["base_acc"]), fmt(r["other_acc"]), f"{r['delta']:+.2f}",
                 f"{r['b']}/{r['c']}", fmt_ci(r["ci"]), fmt_p(r["p"]), fmt_p(r["p_adj"])] for r in data["compare"]]
        published = [False] * len(rows)
        if ref:
            for r in ref["tableS10"]["rows"]:
                rows.append([f"{r['base']} → {r['other']}{PAPER_MARK}", fmt(r["base_acc"]), fmt(r["other_acc"]),
                             f"{r['delta']:+.2f}", f"{r['b']}/{r['c']}", fmt_ci(r["ci"]), fmt_p(r["p"]),
                             fmt_p(r["p_adj"])])
                published.append(True)
        tables.append(DisplayTable(
            "compare", f"Paired comparisons (as in Table S10; Bonferroni over {len(data['compare'])})",
            ["Base → other", "Base", "Other", "Δ", "b/c", "95% CI", "p", "p adj"], rows, published,
            _caption("tableS10", reference)))
    if data["swap"]:
        tables += _swap_tables(data)
    if "ega" in data:
        tables += _ega_tables(data, ref)
    return tables


def _swap_tables(data: dict) -> list[DisplayTable]:
    """The position-bias probe: accuracy in each option order with McNemar; then what the answers follow."""
    rows = [[_name(r), str(r["n"]), fmt(r["accuracy_original"]), fmt(r["accuracy_swapped"]),
             f"{r['accuracy_delta']:+.2f}", fmt_ci(r["accuracy_delta_ci"]), f"{r['b']}/{r['c']}", fmt_p(r["p"])]
            for r in data["swap"]]
    accuracy = DisplayTable(
        "swap", "Option order: accuracy as listed and with the two options swapped (paired, exact McNemar)",
        ["Model", "n", "Original", "Swapped", "Δ", "95% CI", "b/c", "p"], rows, [False] * len(rows),
        "b: right only in the original order; c: right only in the swapped order.")
    def ci(values: list[float]) -> str:  # one decimal, so the seven columns fit 100 (exact in JSON)
        return f"[{values[0]:.1f}, {values[1]:.1f}]"

    rows = [[_name(r), fmt(r["consistency"]), ci(r["consistency_ci"]), fmt(r["first_position_rate"]),
             ci(r["first_position_rate_ci"]), fmt(r["yes_rate_original"]), fmt(r["yes_rate_swapped"])]
            for r in data["swap"]]
    bias = DisplayTable(
        "swap_bias", "Option order: content or position?",
        ["Model", "Consist.", "95% CI", "First pos.", "95% CI", "Yes orig.", "Yes swap."], rows, [False] * len(rows),
        # One short line (the terminal does not wrap captions); the README says how to read the figures.
        "Consist.: the same option text in both orders. First pos.: answers picking the first listed option.")
    return [accuracy, bias]


def _ega_tables(data: dict, ref: dict | None) -> list[DisplayTable]:
    """Table S8's columns, each with its paired interval; then the annotators' agreement before adjudication."""
    def ci(values: list[float] | None) -> str:  # one decimal, so the eight columns fit 100 (exact in JSON)
        return "—" if values is None else f"[{values[0]:.1f}, {values[1]:.1f}]"

    rows, published = [], []
    for r in data["ega"]:
        rows.append([r["model"], str(r["n"]) if not r["pending"] else f"{r['n']} of {r['planned']}",
                     fmt(r["accuracy"]), ci(r["accuracy_ci"]), fmt(r["ega"]), ci(r["ega_ci"]), fmt(r["unsupported"]),
                     ci(r["unsupported_ci"])])
        published.append(False)
    if ref:
        t = ref["tableS8"]
        for r in t["rows"]:
            rows.append([r["model"] + PAPER_MARK, str(t["n"]), fmt(r["accuracy"]), "—", fmt(r["ega"]), "—",
                         fmt(r["unsupported"]), "—"])
            published.append(True)
    audit = data["ega_audit"]
    caption = (f"Audit {audit['audit']}: {audit['cases']} of {audit['planned_cases']} cases have a final label for "
               f"every model; {audit['pending']} item(s) pending.")
    if ref:
        caption += (f" Rows marked{PAPER_MARK} are the published figures of {reference_label('tableS8')}; "
                    "Table 6 of the main text shows the first four.")
    scores = DisplayTable("ega", "Evidence-grounded accuracy (as in Table S8)",
                          ["Model", "n", "Acc.", "95% CI", "EGA", "95% CI", "Unsup.", "95% CI"], rows, published,
                          caption)
    agreement_rows = []
    for r in data["ega"]:
        a = r["agreement"]
        if a is None:
            agreement_rows.append([r["model"], "0", "—", "—", "—", "—", "—"])
            continue
        kappa = "undefined" if a["kappa"] is None else f"{a['kappa']:.3f}"
        kappa_ci = "—" if a["kappa_ci"] is None else f"[{a['kappa_ci'][0]:.3f}, {a['kappa_ci'][1]:.3f}]"
        agreement_rows.append([r["model"], str(a["n"]), fmt(a["raw"]), kappa, kappa_ci, f"{a['ac1']:.3f}",
                               f"[{a['ac1_ci'][0]:.3f}, {a['ac1_ci'][1]:.3f}]"])
    agreement = DisplayTable("ega_agreement", "Agreement on the EGA judgement, before adjudication",
                             ["Model", "n", "Agree %", "κ", "95% CI", "AC1", "95% CI"], agreement_rows,
                             [False] * len(agreement_rows),
                             "Two annotators, items both labelled; Cohen's κ, Gwet's AC1, bootstrap over items.")
    return [scores, agreement] if agreement_rows else [scores]


def _notes(report: Report, suite: str) -> str:
    """The report's coverage notes about ``suite``, for the caption beside the published rows."""
    rests = [n[len(suite) + 2:] for n in report.notes if n.startswith(f"{suite}: ")]
    # A sentence that opens with a model name keeps the name as it is written.
    return "".join(" " + ("T" + rest[1:] if rest.startswith("the ") else rest) for rest in rests)


def _caption(table: str, reference: bool) -> str:
    return f"Rows marked{PAPER_MARK} are the published figures of {reference_label(table)}." if reference else ""


class ReportView:
    """The terminal view: one Rich table per section; published reference rows dimmed and marked."""

    def __init__(self, report: Report, *, reference: bool = False):
        self.report = report
        self.reference = reference

    def __rich_console__(self, console, options):
        from rich.table import Table
        from rich.text import Text

        for table in display_tables(self.report, reference=self.reference):
            view = Table(title=table.title, title_justify="left", caption_justify="left",
                         caption=Text(table.caption) if table.caption else None)  # plain text: no markup
            for i, name in enumerate(table.columns):
                # Numbers never wrap; names and the change label fold onto a second line when narrow.
                text_column = i == 0 or name == "Change"
                longest = max([len(name)] + [len(row[i]) for row in table.rows])
                view.add_column(name, justify="left" if text_column else "right", no_wrap=not text_column,
                                overflow="fold", min_width=min(longest, 14) if text_column else None)
            for row, published in zip(table.rows, table.published):
                view.add_row(*(Text(cell) for cell in row), style="dim italic" if published else None)
            yield view
            yield Text("")
