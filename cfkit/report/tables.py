"""The report as tables: the same cells for the terminal, Markdown and LaTeX, laid out like the paper's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cfkit.plural import agree, plural, plural_list
from cfkit.report import legends
from cfkit.report.groups import group_label, group_rank, paper_groups
from cfkit.report.reference import load_reference, reference_label
from cfkit.report.rows import Report
from cfkit.report.runs_read import COLUMNS, runs_table
from cfkit.report.units import flat_rows
from cfkit.vocabulary import SUITE_CONDITIONS


@dataclass(frozen=True)
class DisplayTable:
    """A table as shown in the terminal, Markdown and LaTeX: the same cells in each."""

    key: str
    title: str
    columns: list[str]
    rows: list[list[str]]
    published: list[bool]  # per row: a published reference row (not measured here)
    caption: str = ""  # what the columns and marks mean, then where published rows come from
    groups: list[str] | None = None  # per row: the heading of its model group; None when the table is not grouped


#: Appended to the first cell of a published reference row.
PAPER_MARK = " (paper)"
#: Appended to the first cell of a row built from an incomplete run or with units absent or failed.
INCOMPLETE_MARK = " (incomplete)"
#: Appended to the first cell of a row whose replies are not clean (:func:`cfkit.parse.trouble.not_clean`: cut off at
#: the token limit, or mostly empty), so that a table copied on its own still says so.
NOT_CLEAN_MARK = " (not clean)"
#: Appended to the first cell of a modality row whose Neutral and Evidence answers include answers to captions that
#: are still a model's drafts no person has reviewed.
UNREVIEWED_MARK = " (unreviewed captions)"


def marked_name(row: dict) -> str:
    """A row's model name with the marks its ``incomplete``, ``not_clean`` and ``unreviewed`` fields call for, as
    every table and figure shows it."""
    return (row["model"] + (INCOMPLETE_MARK if row.get("incomplete") else "")
            + (NOT_CLEAN_MARK if row.get("not_clean") else "") + (UNREVIEWED_MARK if row.get("unreviewed") else ""))


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


def fmt_delta(value: float | None) -> str:
    """A difference in points for display: two decimals, the sign always shown (``+28.57``, ``-3.10``)."""
    return "—" if value is None else f"{value + 0.0:+.2f}"  # + 0.0 turns -0.0 into 0.0


def fmt_opt_ci(values: Sequence[float] | None) -> str:
    """An interval, or a dash where there is none (a published row, a figure with no two-option case)."""
    return "—" if values is None else fmt_ci(values)


class _Rows:
    """A table's rows as they are built: cells, whether published, and the model's group."""

    def __init__(self) -> None:
        self.items: list[tuple[list[str], bool, str | None]] = []

    def add(self, cells: list[str], published: bool, group: str | None) -> None:
        self.items.append((cells, published, group))

    def table(self, key: str, title: str, columns: list[str], caption: str) -> DisplayTable:
        """The table; when a measured row has a group, rows go under their groups' headings in the paper's order."""
        items = self.items
        grouped = any(group is not None for _, published, group in items if not published)
        if grouped:
            rank = group_rank(group for _, _, group in items)
            items = sorted(items, key=lambda item: rank[item[2]])  # stable: measured rows stay before published
        return DisplayTable(key, title, columns, [c for c, _, _ in items], [p for _, p, _ in items], caption,
                            [group_label(g) for _, _, g in items] if grouped else None)


def _join(*parts: str) -> str:
    return " ".join(p.strip() for p in parts if p and p.strip())


def display_tables(report: Report, *, reference: bool = False) -> list[DisplayTable]:
    """The report's tables, laid out like the paper's Tables 2, S4, S7, S9 and S10, each with its legend."""
    data = report.to_dict()
    ref = load_reference()["tables"] if reference else None
    paper = paper_groups()
    boot = data.get("bootstrap", {})
    full = {r["model"]: r["accuracy"] for r in data["contextcanvas"]}
    canvas = {r["model"]: r for r in data["contextcanvas"]}  # the rows Full and the compare pairs are read from
    tables: list[DisplayTable] = []
    if data["contextcanvas"]:
        rows, classes = _Rows(), _Rows()
        for r in data["contextcanvas"]:
            name = marked_name(r)
            rows.add([name, str(r["n"]), fmt(r["accuracy"]), fmt_opt_ci(r["accuracy_ci"]), fmt(r["macro_f1"]),
                      fmt_opt_ci(r["macro_f1_ci"]), fmt(r["yes_rate"]), str(r["invalid"])], False, r["group"])
            classes.add([name, fmt(r["yes_f1"]), fmt(r["no_f1"]), fmt(r["yes_rate"]), fmt_opt_ci(r["yes_rate_ci"]),
                         fmt(r["gold_yes_rate"]), str(r["invalid"])], False, r["group"])
        caption = legends.contextcanvas(data["contextcanvas"][0], boot)
        caption_s4 = legends.classes(data["contextcanvas"][0], boot)
        if ref:
            t, s4 = ref["table2"], ref["tableS4"]
            for r in t["rows"]:
                rows.add([r["model"] + PAPER_MARK, str(t["n"]), fmt(r["accuracy"]), "—", fmt(r["macro_f1"]), "—",
                          fmt(r["yes_rate"]), "—"], True, r["group"])
            for r in s4["rows"]:
                classes.add([r["model"] + PAPER_MARK, fmt(r["yes_f1"]), fmt(r["no_f1"]), fmt(r["yes_rate"]), "—",
                             fmt(s4["gold_yes_rate"]), "—"], True, paper.get(r["model"]))
            comparable = (_comparable("cases", {r["n"] for r in data["contextcanvas"]}, t["n"])
                          + _notes(report, "contextcanvas"))
            caption = _join(caption, _caption("table2"), comparable)
            caption_s4 = _join(caption_s4, _caption("tableS4"), comparable)
        marks = _marks(data["contextcanvas"], reference)
        tables.append(rows.table("contextcanvas", "ContextCanvas (as in Table 2)",
                                 ["Model", "n", "Acc.", "95% CI", "Macro-F1", "95% CI", "Yes (%)", "Inv."],
                                 _join(caption, marks)))
        if any(r["n_binary"] for r in data["contextcanvas"]):  # without a two-option case there are no classes
            tables.append(classes.table("contextcanvas_classes", "ContextCanvas by class (as in Table S4)",
                                        ["Model", "Yes F1", "No F1", "Pred. Yes", "95% CI", "Gold Yes", "Inv."],
                                        _join(caption_s4, marks)))
    if data["counterfactual"]:
        rows = _Rows()
        for r in data["counterfactual"]:
            rows.add([marked_name(r), fmt(full.get(r["model"])), fmt(r["orig_acc"]), fmt(r["edit_acc"]), fmt(r["pair_acc"]),
                      f"{r['correct']}/{r['reverse']}", str(r["invalid"]), fmt(r["ncu"]), fmt_ci(r["ncu_ci"])],
                     False, r["group"])
        caption = _join(legends.counterfactual(boot), _full_marked([canvas[r["model"]] for r in data["counterfactual"]
                                                                   if r["model"] in canvas]))
        if ref:
            for r in ref["tableS7"]["rows"]:
                rows.add([r["model"] + PAPER_MARK, fmt(r["full"]), fmt(r["orig_acc"]), fmt(r["edit_acc"]),
                          fmt(r["pair_acc"]), f"{r['correct']}/{r['reverse']}", "—", fmt(r["ncu"]),
                          fmt_ci(r["ncu_ci"])], True, paper.get(r["model"]))
            caption = _join(caption, _caption("tableS7"),
                            _comparable("pairs", {r["n_pairs"] for r in data["counterfactual"]},
                                        ref["tableS7"]["n_pairs"], report.expected.get("counterfactual")),
                            _notes(report, "counterfactual"))
        n_pairs = {r["n_pairs"] for r in data["counterfactual"]}
        title = f"Counterfactual pairs (as in Table S7; {plural_list(sorted(n_pairs), 'pair')})"
        tables.append(rows.table("counterfactual", title,
                                 ["Model", "Full", "Orig.", "Edit", "Pair", "C/R", "Inv.", "NCU", "95% CI"],
                                 _join(caption, _marks(data["counterfactual"], reference))))
    if data["modality"]:
        conditions = SUITE_CONDITIONS["modality"]
        rows, deltas = _Rows(), _Rows()
        for r in data["modality"]:
            rows.add([marked_name(r), str(r["n"]), *(fmt(r["accuracy"][c]) for c in conditions),
                      "/".join(str(r["invalid"].get(c, 0)) for c in conditions)], False, r["group"])
            for d in r["deltas"]:
                # No Inv. here: the modality table above gives it per condition, and 100 columns have no room.
                deltas.add([marked_name(r), f"{d['from']} → {d['to']}", fmt_delta(d["delta"]), fmt_ci(d["ci"]),
                            f"{d['b']}/{d['c']}", fmt_p(d["p"]), fmt_p(d["p_adj"])], False, r["group"])
        caption = legends.modality(data["modality"][0]["n"])
        if ref:
            t = ref["tableS9"]
            for r in t["rows"]:
                rows.add([r["model"] + PAPER_MARK, str(t["n"]), *(fmt(r["accuracy"][c]) for c in conditions), "—"],
                         True, paper.get(r["model"]))
            caption = _join(caption, _caption("tableS9"),
                            _comparable("cases", {r["n"] for r in data["modality"]}, t["n"]),
                            _notes(report, "modality"))
        marks = _marks(data["modality"], reference)
        tables.append(rows.table("modality", "Modality conditions (as in Table S9)",
                                 ["Model", "n", "Text", "Neutral", "Evidence", "Image", "Inv."], _join(caption, marks)))
        tables.append(deltas.table("modality_deltas", "Modality changes (paired, exact McNemar, Bonferroni over 4)",
                                   ["Model", "Change", "Δ", "95% CI", "b/c", "p", "p adj"],
                                   _join(legends.modality_deltas(boot), _marks(data["modality"], False))))
    if data["compare"]:  # each model's Inv. is in the ContextCanvas table (and base_invalid, other_invalid in JSON)
        rows = _Rows()
        # A model's accuracy here is its ContextCanvas row's: the pair carries that row's marks, as a table copied
        # on its own must say a figure counts missing answers wrong.
        compared = [canvas.get(m, {"model": m}) for r in data["compare"] for m in (r["base"], r["other"])]
        for r in data["compare"]:
            base, other = (marked_name(canvas.get(m, {"model": m})) for m in (r["base"], r["other"]))
            rows.add([f"{base} → {other}", fmt(r["base_acc"]), fmt(r["other_acc"]), fmt_delta(r["delta"]),
                      f"{r['b']}/{r['c']}", fmt_ci(r["ci"]), fmt_p(r["p"]), fmt_p(r["p_adj"])], False, None)
        caption = _join(legends.compare(data["compare"][0]["n"], len(data["compare"]), boot), _marks(compared, False))
        if ref:
            for r in ref["tableS10"]["rows"]:
                rows.add([f"{r['base']} → {r['other']}{PAPER_MARK}", fmt(r["base_acc"]), fmt(r["other_acc"]),
                          fmt_delta(r["delta"]), f"{r['b']}/{r['c']}", fmt_ci(r["ci"]), fmt_p(r["p"]),
                          fmt_p(r["p_adj"])], True, None)
            caption = _join(caption, _caption("tableS10"), legends_marks(published=True, incomplete=False))
        tables.append(rows.table(
            "compare", f"Paired comparisons (as in Table S10; Bonferroni over {len(data['compare'])})",
            ["Base → other", "Base", "Other", "Δ", "b/c", "95% CI", "p", "p adj"], caption))
    if data["swap"]:
        tables += _swap_tables(data)
    if (read := runs_table(report)) is not None:  # the run each row above comes from, and those left out (the EGA
        tables.append(DisplayTable("runs_read", "Runs read", COLUMNS, read[0], [False] * len(read[0]), read[2],
                                   read[1]))  # section below counts the audited replies, and says whose)
    if "ega" in data:
        tables += _ega_tables(data, ref)
    return tables


def _swap_tables(data: dict) -> list[DisplayTable]:
    """The position-bias probe: accuracy in each option order with McNemar and the invalid answers; then what the
    answers follow (no room for another column in 100: the first table's Inv. is about the same rows)."""
    rows = [[marked_name(r), str(r["n"]), fmt(r["accuracy_original"]), fmt(r["accuracy_swapped"]),
             f"{r['accuracy_delta']:+.2f}", fmt_ci(r["accuracy_delta_ci"]), f"{r['b']}/{r['c']}", fmt_p(r["p"]),
             f"{r['invalid_original']}/{r['invalid_swapped']}"] for r in data["swap"]]
    accuracy = DisplayTable(
        "swap", "Option order: accuracy as listed and with the two options swapped (paired, exact McNemar)",
        ["Model", "n", "Original", "Swapped", "Δ", "95% CI", "b/c", "p", "Inv."], rows, [False] * len(rows),
        _join("b: right only in the original order; c: right only in the swapped order. Inv.: cases with no "
              "valid option (unparsed or with no usable answer) in the original / swapped order, counted wrong.",
              _marks(data["swap"], False)))
    def ci(values: list[float]) -> str:  # one decimal, so the seven columns fit 100 (exact in JSON)
        return f"[{values[0]:.1f}, {values[1]:.1f}]"

    rows = [[marked_name(r), fmt(r["consistency"]), ci(r["consistency_ci"]), fmt(r["first_position_rate"]),
             ci(r["first_position_rate_ci"]), fmt(r["yes_rate_original"]), fmt(r["yes_rate_swapped"])]
            for r in data["swap"]]
    bias = DisplayTable(
        "swap_bias", "Option order: content or position?",
        ["Model", "Consist.", "95% CI", "1st pos.", "95% CI", "Yes as is", "Yes swap"], rows, [False] * len(rows),
        # Short (the README says how to read the figures); where answers are null, that they are in every share:
        # a model that always picks the first option, half its replies unparsed, would read as position-blind.
        "Consist.: the same option text in both orders. 1st pos.: answers picking the first listed option."
        + (" Null answers (Inv. above) count in every share, as neither first-listed nor Yes."
           if any(r["invalid_original"] or r["invalid_swapped"] for r in data["swap"]) else ""))
    return [accuracy, bias]


def _marks(rows: list[dict], reference: bool) -> str:
    return legends_marks(published=reference, incomplete=any(r.get("incomplete") for r in rows),
                         not_clean=any(r.get("not_clean") for r in rows),
                         unreviewed=any(r.get("unreviewed") for r in rows))


def _full_marked(rows: list[dict]) -> str:
    """A caption sentence naming the models whose Full figure is copied from a ContextCanvas row that is marked
    there (incomplete or not clean); '' when none is."""
    marked = [marked_name(r) for r in rows if r.get("incomplete") or r.get("not_clean")]
    if not marked:
        return ""
    return f"Full is each model's ContextCanvas accuracy, and that row is marked for {', '.join(marked)}."


def legends_marks(*, published: bool, incomplete: bool, not_clean: bool = False, unreviewed: bool = False) -> str:
    """What the marks appended to a model name mean, for a table that carries them."""
    parts = []
    if incomplete:
        parts.append(f"Rows marked{INCOMPLETE_MARK} come from a run that did not finish, or lack a usable answer "
                     "for some units, which are counted wrong (listed under 'missing').")
    if not_clean:
        parts.append(f"Rows marked{NOT_CLEAN_MARK} rest on replies cut off at the token limit, or mostly empty; "
                     "the report says which, how many and what to do (on stderr, and as reply_problems in the JSON "
                     "report).")
    if unreviewed:
        parts.append(f"Rows marked{UNREVIEWED_MARK} count Neutral and Evidence answers to captions a model drafted "
                     "and no person has reviewed ('unreviewed' in the JSON: how many cases; stderr names them).")
    if published:
        parts.append("'—': a figure the paper does not give.")
    return " ".join(parts)


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
    if "withheld" in audit and not ref:
        return []
    caption = (f"{legends.ega()} Audit {audit['audit']}: {audit['cases']} of {plural(audit['planned_cases'], 'case')} "
               f"{agree(audit['cases'], 'have')} a "
               f"final label for every model; {plural(audit['pending'], 'item')} pending.")
    if audit.get("labels", "people") != "people":
        caption += (f" Counted with {audit['labels']} labels: {plural(audit['judge_labelled'], 'item')} carry the judge "
                    f"model {audit['judge']}'s labels, not a person's.")
    if audit.get("inputs_changed"):
        caption += (f" Since the audit was planned, {'; '.join(audit['inputs_changed'])}: these rows count the "
                    "items as they were audited, not as the other tables read them now.")
    if audit.get("other_runs"):
        caption += (f" Not the replies the other tables count: {'; '.join(audit['other_runs'])}; these rows count "
                    "the audited replies.")
    if "withheld" in audit:
        caption = f"{legends.ega()} {audit['withheld']}"
    if ref:
        caption += (f" Rows marked{PAPER_MARK} are the published figures of {reference_label('tableS8')}; "
                    "Table 6 of the main text shows the first four. " + legends_marks(published=True, incomplete=False))
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
                             "Two annotators, items both labelled. Agree %: the share of items they judged alike; "
                             "κ: Cohen's kappa; AC1: Gwet's AC1; 95% CI: bootstrap over items.")
    return [scores, agreement] if agreement_rows else [scores]


def _notes(report: Report, suite: str) -> str:
    """The report's coverage notes about ``suite``, for the caption beside the published rows."""
    rests = [n[len(suite) + 2:] for n in report.notes if n.startswith(f"{suite}: ")]
    # A sentence that opens with a model name keeps the name as it is written.
    return "".join(" " + ("T" + rest[1:] if rest.startswith("the ") else rest) for rest in rests)


def _caption(table: str) -> str:
    return f"Rows marked{PAPER_MARK} are the published figures of {reference_label(table)}."


def units_table(report: Report) -> DisplayTable:
    """The per-unit outcomes as one table (``report --units``): a row per unit and condition."""
    rows = [[r["model"], r["suite"], r["case"], r["pair"] or "—", r["condition"], r["answer"] or "—", r["gold"],
             "yes" if r["correct"] else "no", (r["category"] or "—").replace("_", " "), r["missing"] or "—"]
            for r in flat_rows(report.units)]
    return DisplayTable("units", "Per-unit outcomes",
                        ["Model", "Suite", "Case", "Pair", "Condition", "Answer", "Gold", "Right", "Category",
                         "Missing"], rows, [False] * len(rows),
                        "Answer: the option the model chose, '—' without a usable one (Missing says why: absent, "
                        "transport, refused, stale, skipped). Right: the answer is the gold option. Category of a pair: "
                        "correct (No→Yes update), reverse, stuck original, stuck edit, or invalid.")


class TablesView:
    """Display tables in the terminal: published reference rows dimmed and marked.

    No cell ever wraps: a model name, a number and an interval each stay on
    one line. A table wider than the terminal is printed at the width its
    cells need (the terminal may fold those lines; a pipe keeps them). Rows
    of one model group sit under the group's heading, sections ruled apart.
    """

    def __init__(self, tables: Sequence[DisplayTable]):
        self.tables = tables

    def __rich_console__(self, console, options):
        from rich.measure import Measurement
        from rich.table import Table
        from rich.text import Text

        for table in self.tables:
            view = Table(title=table.title, title_justify="left", caption_justify="left",
                         caption=Text(table.caption, no_wrap=False, overflow="fold") if table.caption else None)  # no markup; wraps in a pipe too
            for i, name in enumerate(table.columns):
                text_column = i == 0 or name in ("Change", "Run")
                view.add_column(name, justify="left" if text_column else "right", no_wrap=True, overflow="fold")
            heading = None
            for k, (row, published) in enumerate(zip(table.rows, table.published)):
                if table.groups is not None and table.groups[k] != heading:
                    heading = table.groups[k]
                    if k:
                        view.add_section()
                    view.add_row(Text(heading, style="bold"), *([""] * (len(row) - 1)))
                view.add_row(*(Text(cell) for cell in row), style="dim italic" if published else None)
            # Rich would squeeze a table wider than the console, cutting cells; give it the width its cells need.
            needed = Measurement.get(console, options.update_width(10_000), view).maximum
            yield from console.render(view, options.update_width(max(options.max_width, needed)))
            yield Text("")


class ReportView(TablesView):
    """The terminal view of a report: one Rich table per section, each with its legend."""

    def __init__(self, report: Report, *, reference: bool = False):
        super().__init__(display_tables(report, reference=reference))
        self.report = report
        self.reference = reference
