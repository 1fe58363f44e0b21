"""Reports: the paper's tables computed from predictions, and their exports.

``make_report`` reads gold answers from the workspace (cases, and for the
counterfactual pairs the specs' labels mapped through each case's Yes option),
reads predictions from files or from the store, and computes four sections:

``contextcanvas``   accuracy, per-class F1, Macro-F1 and Yes rate (the paper's Table 2)
``counterfactual``  pair accuracy, directional updates and NCU (Table S7)
``modality``        accuracy per condition and the four paired deltas (Table S9)
``compare``         paired base-vs-other accuracy tests (Table S10)

A case or pair a model did not answer is counted wrong and listed in
``Report.missing`` (the JSON export's ``"missing"`` field); nothing is dropped.
Exports: JSON (DESIGN.md's schema plus ``missing``), CSV (one number a row, full
precision), Markdown and LaTeX (the table view's cells), and a Rich renderable.
All display formats print the same cells, produced once by ``display_tables``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from cfkit import stats
from cfkit.cases import Case, CaseSet
from cfkit.errors import InputError, PredictionError
from cfkit.predictions import SUITE_CONDITIONS, Prediction
from cfkit.workspace import Workspace

#: The modality deltas of DESIGN.md, in report order.
MODALITY_DELTAS: tuple[tuple[str, str], ...] = (
    ("text", "neutral"), ("neutral", "evidence"), ("evidence", "image"), ("neutral", "image"),
)
FORMATS = ("table", "json", "csv", "md", "latex")


# ── results ────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Missing:
    """A unit a model gave no answer for; it is counted wrong."""

    model: str
    suite: str
    case: str
    pair: str | None
    condition: str


@dataclass(frozen=True)
class ContextCanvasRow:
    model: str
    scores: stats.ContextCanvasScores


@dataclass(frozen=True)
class CounterfactualRow:
    model: str
    scores: stats.CounterfactualScores


@dataclass(frozen=True)
class Delta:
    """One modality change, e.g. text → neutral, with its McNemar p and Bonferroni adjustment."""

    first: str
    second: str
    comparison: stats.PairedComparison
    p_adj: float


@dataclass(frozen=True)
class ModalityRow:
    model: str
    n: int
    accuracy: dict[str, float]
    accuracy_ci: dict[str, stats.Interval]
    deltas: list[Delta]


@dataclass(frozen=True)
class CompareRow:
    base: str
    other: str
    comparison: stats.PairedComparison
    p_adj: float


@dataclass(frozen=True)
class Report:
    contextcanvas: list[ContextCanvasRow] = field(default_factory=list)
    counterfactual: list[CounterfactualRow] = field(default_factory=list)
    modality: list[ModalityRow] = field(default_factory=list)
    compare: list[CompareRow] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """DESIGN.md's report object, plus ``missing`` (the units counted wrong for want of an answer)."""
        return {
            "contextcanvas": [{"model": r.model, **_fields(r.scores)} for r in self.contextcanvas],
            "counterfactual": [
                {"model": r.model, **_fields(r.scores, skip=("ncu_ci",)), "ncu_ci": r.scores.ncu_ci.as_list()}
                for r in self.counterfactual
            ],
            "modality": [
                {
                    "model": r.model,
                    "n": r.n,
                    "accuracy": dict(r.accuracy),
                    "accuracy_ci": {c: ci.as_list() for c, ci in r.accuracy_ci.items()},
                    "deltas": [
                        {"from": d.first, "to": d.second, "delta": d.comparison.delta, "ci": d.comparison.ci.as_list(),
                         "b": d.comparison.mcnemar.b, "c": d.comparison.mcnemar.c,
                         "p": d.comparison.mcnemar.p_value, "p_adj": d.p_adj}
                        for d in r.deltas
                    ],
                }
                for r in self.modality
            ],
            "compare": [
                {"base": r.base, "other": r.other, "n": r.comparison.n, "base_acc": r.comparison.first_acc,
                 "other_acc": r.comparison.second_acc, "delta": r.comparison.delta, "ci": r.comparison.ci.as_list(),
                 "b": r.comparison.mcnemar.b, "c": r.comparison.mcnemar.c, "p": r.comparison.mcnemar.p_value,
                 "p_adj": r.p_adj}
                for r in self.compare
            ],
            "missing": [m.__dict__.copy() for m in self.missing],
        }


def _fields(obj: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    return {k: v for k, v in obj.__dict__.items() if k not in skip}


# ── gold answers ───────────────────────────────────────────────────────────


@dataclass(frozen=True)
class PairGold:
    pair: str
    case: str
    original: str
    edit: str


@dataclass(frozen=True)
class Gold:
    """What the predictions are scored against."""

    cases: CaseSet
    pairs: dict[str, PairGold]
    modality_cases: list[str] | None  # None when the workspace has no subset file

    @property
    def pair_cases(self) -> dict[str, str]:
        return {p.pair: p.case for p in self.pairs.values()}


def load_gold(ws: Workspace) -> Gold:
    """Cases, pair golds from the specs, and the modality subset of a workspace."""
    from cfkit.cases import load_cases
    from cfkit.specs import load_spec_file, spec_files

    cases = load_cases(ws.cases_path, ws.image_root)
    pairs: dict[str, PairGold] = {}
    for path in spec_files(ws):
        spec = load_spec_file(path).spec
        if spec.case not in cases:
            raise InputError(f"{path}: field 'case': '{spec.case}' is not in {cases.path}. Fix the id.")
        case = cases.get(spec.case)
        original, edit = case.option_for_label(spec.labels.original), case.option_for_label(spec.labels.edit)
        if original is None or edit is None:
            raise InputError(f"{path}: case {case.id} has no yes_option, so its labels cannot be mapped to options; "
                             "counterfactual pairs need a Yes/No case.")
        pairs[spec.id] = PairGold(spec.id, case.id, original, edit)
    subset_path = ws.probes_dir / ws.config.probe.modality_subset
    modality = None
    if subset_path.is_file():
        modality = [line.strip() for line in subset_path.read_text(encoding="utf-8").splitlines()
                    if line.strip() and not line.lstrip().startswith("#")]
        if not modality:
            raise InputError(f"{subset_path}: no case ids. List the modality subset there, one case id a line.")
        unknown = [c for c in modality if c not in cases]
        if unknown:
            raise InputError(f"{subset_path}: case '{unknown[0]}' is not in {cases.path}"
                             f"{f' ({len(unknown)} unknown in all)' if len(unknown) > 1 else ''}. Fix the subset file.")
    return Gold(cases=cases, pairs=pairs, modality_cases=modality)


# ── building ───────────────────────────────────────────────────────────────


def parse_compare(text: str) -> tuple[str, str]:
    """``"BASE=OTHER"`` → ``(BASE, OTHER)``."""
    base, sep, other = text.partition("=")
    if not sep or not base.strip() or not other.strip():
        raise InputError(f"--compare '{text}' is not BASE=OTHER; give two model names as they appear in the "
                         "predictions, e.g. --compare hf:mplug-owl2=hf:artquant.")
    return base.strip(), other.strip()


def make_report(
    ws: Workspace,
    prediction_paths: Sequence[Path | str] = (),
    *,
    compare: Sequence[tuple[str, str]] = (),
    n_resamples: int = stats.N_RESAMPLES,
    seed: int | None = stats.SEED,
) -> Report:
    """Load gold and predictions (files, or the latest stored run per model and suite) and build the report."""
    from cfkit.predictions import check_predictions, load_predictions, predictions_from_store

    gold = load_gold(ws)
    if prediction_paths:
        preds = load_predictions(prediction_paths, cases=gold.cases, pairs=gold.pair_cases)
    else:
        if not ws.db_path.is_file():
            raise InputError(f"no stored runs ({ws.db_path} does not exist). Run 'cfkit probe run' first, "
                             "or pass --predictions FILE.")
        from cfkit.store import Store

        with Store(ws.db_path) as store:
            preds = predictions_from_store(store)
            check_predictions(preds, f"store {ws.db_path}", cases=gold.cases, pairs=gold.pair_cases)
    if not preds:
        raise InputError("no predictions to report. Run 'cfkit probe run', or pass --predictions FILE.")
    return build_report(gold, preds, compare=compare, n_resamples=n_resamples, seed=seed)


def build_report(
    gold: Gold,
    preds: Sequence[Prediction],
    *,
    compare: Sequence[tuple[str, str]] = (),
    n_resamples: int = stats.N_RESAMPLES,
    seed: int | None = stats.SEED,
) -> Report:
    """Compute every section for every model found in ``preds``.

    Steps: 1. index answers by model and suite; 2. check the compare requests
    and the modality subset; 3. score each suite; 4. the paired comparisons.
    """
    # 1. index
    answers: dict[str, dict[str, dict[tuple[str, str, str], str | None]]] = {}
    for p in preds:
        answers.setdefault(p.suite, {}).setdefault(p.model, {})[(p.case, p.pair or "", p.condition)] = p.answer
    # 2. checks
    cc_models = answers.get("contextcanvas", {})
    for base, other in compare:
        for name in (base, other):
            if name not in cc_models:
                known = ", ".join(cc_models) or "none"
                raise InputError(f"--compare: model '{name}' has no contextcanvas predictions "
                                 f"(models with them: {known}). Use the names as they appear in the predictions.")
    if answers.get("modality"):
        if gold.modality_cases is None:
            raise InputError("modality predictions were given, but the workspace has no subset file "
                             "(probe.modality_subset in cfkit.toml, under probes/). Add it: one case id a line.")
        subset = set(gold.modality_cases)
        for model, got in answers["modality"].items():
            outside = sorted({case for case, _, _ in got if case not in subset})
            if outside:
                raise PredictionError(f"model '{model}' answered modality case {outside[0]}, which is not in the "
                                      "modality subset file; add it there or remove those lines.")
    missing: list[Missing] = []
    # 3. the suites
    all_cases = list(gold.cases)
    cc_rows = [
        ContextCanvasRow(model, _contextcanvas(model, got, all_cases, missing))
        for model, got in cc_models.items()
    ]
    pairs = list(gold.pairs.values())
    cf_rows = [
        CounterfactualRow(model, _counterfactual(model, got, pairs, missing, n_resamples, seed))
        for model, got in answers.get("counterfactual", {}).items()
    ]
    md_rows = [
        _modality(model, got, [gold.cases.get(c) for c in gold.modality_cases or []], missing, n_resamples, seed)
        for model, got in answers.get("modality", {}).items()
    ]
    # 4. comparisons, adjusted over the ones asked for together
    comparisons = []
    for base, other in compare:
        first = _correct(cc_models[base], all_cases, "image")
        second = _correct(cc_models[other], all_cases, "image")
        comparisons.append(stats.paired_comparison(first, second, n_resamples=n_resamples, seed=seed))
    adjusted = stats.bonferroni([c.mcnemar.p_value for c in comparisons])
    cmp_rows = [CompareRow(b, o, c, p) for (b, o), c, p in zip(compare, comparisons, adjusted)]
    return Report(cc_rows, cf_rows, md_rows, cmp_rows, missing)


def _answer(got: dict, case: str, pair: str, condition: str, model: str, suite: str,
            missing: list[Missing]) -> str | None:
    key = (case, pair, condition)
    if key not in got:
        missing.append(Missing(model, suite, case, pair or None, condition))
        return None
    return got[key]


def _correct(got: dict, cases: Sequence[Case], condition: str) -> np.ndarray:
    return np.array([got.get((c.id, "", condition)) == c.gold for c in cases], dtype=bool)


def _contextcanvas(model: str, got: dict, cases: list[Case], missing: list[Missing]) -> stats.ContextCanvasScores:
    predicted = [_answer(got, c.id, "", "image", model, "contextcanvas", missing) for c in cases]
    return stats.contextcanvas_scores(predicted, [c.gold for c in cases], [c.yes_option for c in cases],
                                      [c.no_option for c in cases])


def _counterfactual(model: str, got: dict, pairs: list[PairGold], missing: list[Missing],
                    n_resamples: int, seed: int | None) -> stats.CounterfactualScores:
    if not pairs:
        raise InputError("counterfactual predictions were given, but the workspace has no edit specs in interventions/.")
    original = [_answer(got, p.case, p.pair, "original", model, "counterfactual", missing) for p in pairs]
    edit = [_answer(got, p.case, p.pair, "edit", model, "counterfactual", missing) for p in pairs]
    return stats.counterfactual_scores(original, edit, [p.original for p in pairs], [p.edit for p in pairs],
                                       n_resamples=n_resamples, seed=seed)


def _modality(model: str, got: dict, cases: list[Case], missing: list[Missing],
              n_resamples: int, seed: int | None) -> ModalityRow:
    conditions = SUITE_CONDITIONS["modality"]
    correct = {}
    for condition in conditions:
        answered = [_answer(got, c.id, "", condition, model, "modality", missing) for c in cases]
        correct[condition] = stats.correct_mask(answered, [c.gold for c in cases])
    # One set of resampling indices for every statistic keeps all of them paired by case.
    indices = stats.bootstrap_indices(len(cases), n_resamples=n_resamples, seed=seed)
    matrix = 100.0 * np.stack([correct[c] for c in conditions]).astype(float)
    intervals = stats.bootstrap_mean_intervals(matrix, indices=indices, seed=seed)
    comparisons = [stats.paired_comparison(correct[a], correct[b], indices=indices, seed=seed)
                   for a, b in MODALITY_DELTAS]
    adjusted = stats.bonferroni([c.mcnemar.p_value for c in comparisons])
    return ModalityRow(
        model=model,
        n=len(cases),
        accuracy={c: float(matrix[i].mean()) for i, c in enumerate(conditions)},
        accuracy_ci=dict(zip(conditions, intervals)),
        deltas=[Delta(a, b, c, p) for (a, b), c, p in zip(MODALITY_DELTAS, comparisons, adjusted)],
    )


# ── reference figures ──────────────────────────────────────────────────────


@cache
def load_reference() -> dict[str, Any]:
    """The published figures of Tables 2, S7, S9 and S10 (arXiv 2608.26713), with their citation."""
    text = resources.files("cfkit").joinpath("data/reference.json").read_text(encoding="utf-8")
    return json.loads(text)


def reference_label(table: str) -> str:
    ref = load_reference()
    entry = ref["tables"][table]
    page = f", p. {entry['page']}" if entry.get("page") else ""
    return f"{entry['name']}, arXiv {ref['citation']['arxiv']}{page}"


# ── display ────────────────────────────────────────────────────────────────


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
        rows = [[r["model"], str(r["n"]), fmt(r["accuracy"]), fmt(r["macro_f1"]), fmt(r["yes_rate"]),
                 fmt(r["gold_yes_rate"]), str(r["invalid"])] for r in data["contextcanvas"]]
        published = [False] * len(rows)
        if ref:
            t = ref["table2"]
            for r in t["rows"]:
                rows.append([r["model"] + PAPER_MARK, str(t["n"]), fmt(r["accuracy"]), fmt(r["macro_f1"]), fmt(r["yes_rate"]),
                             fmt(t["gold_yes_rate"]), "—"])
                published.append(True)
        tables.append(DisplayTable(
            "contextcanvas", "ContextCanvas (as in Table 2)",
            ["Model", "n", "Acc.", "Macro-F1", "Yes (%)", "Gold Yes", "Inv."],
            rows, published, _caption("table2", reference)))
    if data["counterfactual"]:
        # The paper's columns plus invalid pairs; the stuck counts are in JSON and CSV.
        rows = [[r["model"], fmt(full.get(r["model"])), fmt(r["orig_acc"]), fmt(r["edit_acc"]), fmt(r["pair_acc"]),
                 f"{r['correct']}/{r['reverse']}", str(r["invalid"]), fmt(r["ncu"]), fmt_ci(r["ncu_ci"])]
                for r in data["counterfactual"]]
        published = [False] * len(rows)
        if ref:
            for r in ref["tableS7"]["rows"]:
                rows.append([r["model"] + PAPER_MARK, fmt(r["full"]), fmt(r["orig_acc"]), fmt(r["edit_acc"]), fmt(r["pair_acc"]),
                             f"{r['correct']}/{r['reverse']}", "—", fmt(r["ncu"]), fmt_ci(r["ncu_ci"])])
                published.append(True)
        n_pairs = {r["n_pairs"] for r in data["counterfactual"]}
        title = f"Counterfactual pairs (as in Table S7; {', '.join(map(str, sorted(n_pairs)))} pairs)"
        tables.append(DisplayTable(
            "counterfactual", title,
            ["Model", "Full", "Orig.", "Edit", "Pair", "C/R", "Inv.", "NCU", "95% CI"],
            rows, published, _caption("tableS7", reference)))
    if data["modality"]:
        conditions = SUITE_CONDITIONS["modality"]
        rows = [[r["model"], str(r["n"]), *(fmt(r["accuracy"][c]) for c in conditions)] for r in data["modality"]]
        published = [False] * len(rows)
        if ref:
            t = ref["tableS9"]
            for r in t["rows"]:
                rows.append([r["model"] + PAPER_MARK, str(t["n"]), *(fmt(r["accuracy"][c]) for c in conditions)])
                published.append(True)
        tables.append(DisplayTable("modality", "Modality conditions (as in Table S9)",
                                   ["Model", "n", "Text", "Neutral", "Evidence", "Image"], rows, published,
                                   _caption("tableS9", reference)))
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
    return tables


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
            view = Table(title=table.title, title_justify="left", caption=table.caption or None,
                         caption_justify="left")
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


# ── exports ────────────────────────────────────────────────────────────────


def to_json(report: Report, *, reference: bool = False) -> str:
    data = report.to_dict()
    if reference:
        data["reference"] = load_reference()
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def to_csv(report: Report) -> str:
    """Long form: ``section,model,metric,value``, one number a row at full precision.

    ``model`` is ``BASE=OTHER`` in the compare section; ``metric`` is a dotted
    path into the JSON record (``accuracy.text``, ``ncu_ci.0``,
    ``deltas.text>neutral.p``). Missing units are not in the CSV; the command
    reports them on stderr.
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["section", "model", "metric", "value"])
    data = report.to_dict()
    for section in ("contextcanvas", "counterfactual", "modality", "compare"):
        for record in data[section]:
            name = f"{record['base']}={record['other']}" if section == "compare" else record["model"]
            for metric, value in _flatten(record):
                if metric in ("model", "base", "other"):
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
                  "→": r"$\rightarrow$", "Δ": r"$\Delta$", "—": "--"}


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
