"""The report's records: one row type per section, and the JSON object they make together."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cfkit import stats
from cfkit.plural import plural
from cfkit.report.swap import COVERAGE_END, SwapRow
from cfkit.report.trouble import ReplyTrouble
from cfkit.report.units import ModelUnits

if TYPE_CHECKING:  # the EGA section's module (and the audit's) is loaded only for report --ega
    from cfkit.report.gold import Gold
    from cfkit.report.grounding import EgaSection


#: Why a unit is listed in ``missing``: no prediction at all, a request that failed, the model declined, an
#: answer given about an edit that is no longer the pair's selected one, or a unit the run did not ask for a
#: reason it recorded (a pair with no usable edit: rejected, failed check, none made; a case the swap suite
#: cannot ask).
MISSING_REASONS = ("absent", "transport", "refused", "stale", "skipped")


@dataclass(frozen=True)
class Missing:
    """A unit a model gave no usable answer for; it is counted wrong."""

    model: str
    suite: str
    case: str
    pair: str | None
    condition: str
    reason: str = "absent"  # one of MISSING_REASONS
    detail: str | None = None  # what the server said, the run's state, the edit it was about
    run: str | None = None  # the stored run the model's answers came from


@dataclass(frozen=True)
class ContextCanvasRow:
    model: str
    scores: stats.ContextCanvasScores
    incomplete: bool = False  # built from an incomplete run, or with units absent or failed
    runs: tuple[str, ...] = ()
    intervals: stats.ContextCanvasIntervals | None = None  # paired bootstrap over cases, shared by every model
    group: str | None = None  # closed / open / aesthetic (Table 2), a --groups name, or None


@dataclass(frozen=True)
class CounterfactualRow:
    model: str
    scores: stats.CounterfactualScores
    incomplete: bool = False
    runs: tuple[str, ...] = ()
    group: str | None = None


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
    invalid: dict[str, int] = field(default_factory=dict)  # condition -> cases with no valid option, counted wrong
    unreviewed: int = 0  # cases whose Neutral and Evidence answers were to a caption still a model's unreviewed draft
    incomplete: bool = False
    runs: tuple[str, ...] = ()
    group: str | None = None


@dataclass(frozen=True)
class CompareRow:
    base: str
    other: str
    comparison: stats.PairedComparison
    p_adj: float
    base_invalid: int = 0  # cases with no valid option from the base model, counted wrong
    other_invalid: int = 0


@dataclass(frozen=True)
class Report:
    contextcanvas: list[ContextCanvasRow] = field(default_factory=list)
    counterfactual: list[CounterfactualRow] = field(default_factory=list)
    modality: list[ModalityRow] = field(default_factory=list)
    compare: list[CompareRow] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)
    ega: EgaSection | None = None  # only when asked for (report --ega)
    notes: list[str] = field(default_factory=list)  # what the numbers cover, where it is less than asked for
    expected: dict[str, int] = field(default_factory=dict)  # suite -> units the workspace expects (pairs, subset)
    swap: list[SwapRow] = field(default_factory=list)  # the position-bias section (cfkit.report.swap)
    bootstrap: dict[str, Any] = field(default_factory=dict)  # resamples, seed, level of every interval
    units: list[ModelUnits] = field(default_factory=list)  # per model and suite, every unit the rows count
    troubles: list[ReplyTrouble] = field(default_factory=list)  # replies cut off, or mostly not answers
    set_aside: list[Any] = field(default_factory=list)  # cfkit.report.choice.SetAside: runs left out, models refused
    read: list[Any] = field(default_factory=list)  # cfkit.report.runs_read.RunRead: the run of each model and suite

    def said(self, *, every_note: bool = False) -> list[str]:
        """What goes with the tables wherever they are shown, as ``cfkit report`` says it on stderr: the runs left
        out and why, the units counted wrong for want of an answer (a line per model and reason), replies that
        are not answers, what the rows cover beyond those lines (``every_note``: also where they say it), and
        what qualifies the EGA section's rows. The one list the Notes of the Markdown and LaTeX reports, the
        CSV's ``notes`` rows and the browser view's report page show."""
        return ([a.message for a in self.set_aside] + missing_lines(self.missing) + [t.message for t in self.troubles]
                + [n for n in self.notes if every_note or not n.endswith(COVERAGE_END)]
                + ([] if self.ega is None else self.ega.said()))

    def counted_runs(self) -> set[str]:
        """The stored runs the rows are built from: an answer of any other run is in none of the numbers (its run
        is left out, its model refused, or it is not the run the report takes for its model and suite)."""
        return {run for rows in (self.contextcanvas, self.counterfactual, self.modality, self.swap) for row in rows
                for run in row.runs}

    def to_dict(self) -> dict[str, Any]:
        """The report object of docs/report-schema.md, ``missing`` included (the units counted wrong for want of an answer)."""
        from cfkit.parse.trouble import not_clean

        # Rows resting on replies that are not clean (cut off, or mostly empty), as a run's exit status judges them.
        troubled = {(t.model, t.suite) for t in self.troubles if not_clean(t.truncated, t.empty, t.replies)}
        data = {
            "contextcanvas": [{"model": r.model, "group": r.group, **_fields(r.scores), **_intervals(r.intervals),
                               **_marks(r, (r.model, "contextcanvas") in troubled)} for r in self.contextcanvas],
            "counterfactual": [
                {"model": r.model, "group": r.group, **_fields(r.scores, skip=("ncu_ci",)),
                 "ncu_ci": r.scores.ncu_ci.as_list(),
                 **_marks(r, (r.model, "counterfactual") in troubled)}
                for r in self.counterfactual
            ],
            "modality": [
                {
                    "model": r.model,
                    "group": r.group,
                    "n": r.n,
                    "accuracy": dict(r.accuracy),
                    "accuracy_ci": {c: ci.as_list() for c, ci in r.accuracy_ci.items()},
                    "invalid": dict(r.invalid),
                    "unreviewed": r.unreviewed,
                    "deltas": [
                        {"from": d.first, "to": d.second, "delta": d.comparison.delta, "ci": d.comparison.ci.as_list(),
                         "b": d.comparison.mcnemar.b, "c": d.comparison.mcnemar.c,
                         "p": d.comparison.mcnemar.p_value, "p_adj": d.p_adj}
                        for d in r.deltas
                    ],
                    **_marks(r, (r.model, "modality") in troubled),
                }
                for r in self.modality
            ],
            "compare": [
                {"base": r.base, "other": r.other, "n": r.comparison.n, "base_acc": r.comparison.first_acc,
                 "other_acc": r.comparison.second_acc, "delta": r.comparison.delta, "ci": r.comparison.ci.as_list(),
                 "b": r.comparison.mcnemar.b, "c": r.comparison.mcnemar.c, "p": r.comparison.mcnemar.p_value,
                 "p_adj": r.p_adj, "base_invalid": r.base_invalid, "other_invalid": r.other_invalid}
                for r in self.compare
            ],
            "swap": [r.to_dict((r.model, "swap") in troubled) for r in self.swap],
            "missing": [m.__dict__.copy() for m in self.missing],
            "notes": list(self.notes),
            "bootstrap": dict(self.bootstrap),
            "units": [u.to_dict() for u in self.units],
            "reply_problems": [t.to_dict() for t in self.troubles],
            "set_aside": [a.to_dict() for a in self.set_aside],
            "runs_read": [r.to_dict() for r in self.read],
        }
        if self.ega is not None:
            data["ega"] = [row.to_dict() for row in self.ega.rows]
            data["ega_audit"] = self.ega.summary()
            data["ega_pending"] = [p.__dict__.copy() for p in self.ega.pending]
        return data


def _intervals(found: stats.ContextCanvasIntervals | None) -> dict[str, list[float] | None]:
    """The ContextCanvas intervals as ``[low, high]`` (None where a figure has none: no two-option case)."""
    names = ("accuracy_ci", "macro_f1_ci", "yes_f1_ci", "no_f1_ci", "yes_rate_ci")
    if found is None:
        return dict.fromkeys(names)
    return {name: None if (ci := getattr(found, name)) is None else ci.as_list() for name in names}


def _marks(row: Any, not_clean: bool) -> dict[str, Any]:
    return {"incomplete": row.incomplete, "not_clean": not_clean, "runs": list(row.runs)}


def _fields(obj: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    return {k: v for k, v in obj.__dict__.items() if k not in skip}


def coverage_notes(missing: list[Missing], gold: Gold, cc_rows: list, cf_rows: list, md_rows: list,
                   expected_pairs: int | None) -> list[str]:
    """Sentences saying where the figures cover fewer pairs or cases than asked for."""
    notes = []
    n_pairs = len(gold.pairs)
    if cf_rows and expected_pairs is not None and n_pairs < expected_pairs:
        notes.append(f"counterfactual: the workspace has {n_pairs} of the {plural(expected_pairs, 'pair')} it expects "
                     f"([workspace] pairs = {expected_pairs}); every counterfactual figure is over "
                     f"{n_pairs} pair{'s' if n_pairs != 1 else ''}.")
    gaps: dict[tuple[str, str], set] = {}
    for m in missing:
        gaps.setdefault((m.model, m.suite), set()).add(m.pair if m.suite == "counterfactual" else m.case)
    sizes = {"contextcanvas": (len(gold.cases), "cases"), "counterfactual": (n_pairs, "pairs"),
             "modality": (len(gold.modality_cases or []), "subset cases (all four conditions)")}
    for suite, rows in (("contextcanvas", cc_rows), ("counterfactual", cf_rows), ("modality", md_rows)):
        total, what = sizes[suite]
        for row in rows:
            lacking = len(gaps.get((row.model, suite), ()))
            if lacking:
                notes.append(f"{suite}: {row.model} has usable answers for {total - lacking} of the {total} {what}; "
                             + COVERAGE_END)
    return notes


def missing_lines(missing: list[Missing]) -> list[str]:
    """One line per model and reason: how many units are counted wrong, in which suites, and one example."""
    groups: dict[tuple[str, str], list[Missing]] = {}
    for m in missing:
        groups.setdefault((m.model, m.reason), []).append(m)
    lines = []
    for (model, reason), units in groups.items():
        suites: dict[str, int] = {}
        for m in units:
            suites[m.suite] = suites.get(m.suite, 0) + 1
        where = ", ".join(f"{suite} {n}" for suite, n in suites.items())
        first = units[0]
        example = f"; e.g. {unit_name(first)}: {first.detail}" if first.detail else ""
        lines.append(f"{model}: {plural(len(units), 'unit')} without a usable answer, counted wrong ({reason}; {where})"
                     f"{example}.")
    return lines


def unit_name(m: Missing) -> str:
    return f"case {m.case}" + (f" pair {m.pair}" if m.pair else "")
