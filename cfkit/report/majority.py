"""A stored ``baseline:majority`` run checked against the gold labels now.

The majority baseline answers its suite's most frequent gold label
(:mod:`cfkit.majority`), so each of its answers rests on every gold label the
suite had when it ran, not only on its own case. A gold changed since (in the
cases file, or a spec's labels for the counterfactual suite) can change the
majority, and then the stored answers are another rule's: each answer the
rule would not give now is stale (``Sources.stale_cases``), counted and
marked as any stale answer is, with the command that asks again. The suite's
labels are counted as the run counted them: each case it asked once (a pair
twice, original and edit).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from cfkit import swap
from cfkit.majority import MAJORITY_MODEL, gold_label, majority_answer, majority_choice

if TYPE_CHECKING:
    from cfkit.report.gold import Gold
    from cfkit.report.sources import RunInfo, Sources


def note_majority(sources: Sources, gold: Gold) -> None:
    """Mark stale each answer of a majority run that the majority of the gold labels now would not give."""
    for run in (r for r in sources.runs.values() if r.model == MAJORITY_MODEL):
        preds = [p for p in sources.preds if p.model == run.model and p.suite == run.suite]
        now = majority_choice(_labels_now(run, preds, gold))
        for p in preds:
            if p.answer is None or p.case not in gold.cases:
                continue
            case = gold.cases.get(p.case)
            if run.suite == "swap":
                try:
                    case = swap.as_listed(case, p.condition)
                except ValueError:  # a case the swap suite no longer asks: said where its answers are read
                    continue
            expected = majority_answer(now, case.yes_option, case.option_ids)
            if expected != p.answer:
                sources.stale_cases[(run.id, p.case)] = (
                    f"{MAJORITY_MODEL} answered {p.answer}, the majority of the {run.suite} suite's gold labels when "
                    f"run {run.id} asked it; the gold labels now ({gold.cases.path}"
                    + (" and the specs' labels" if run.suite == "counterfactual" else "")
                    + f") make its answer {expected or 'none'}: run "
                    f"{sources.commands.rerun(MAJORITY_MODEL, run.suite)} again")


def _labels_now(run: RunInfo, preds: list, gold: Gold) -> Counter:
    """The gold labels of the units ``run`` asked, as they are now, counted as the run counted them."""
    labels: Counter = Counter()
    if run.suite == "counterfactual":
        pairs = run.asked_pairs if run.asked_pairs is not None else {p.pair for p in preds if p.pair}
        for pair in (gold.pairs[name] for name in sorted(pairs) if name in gold.pairs):
            case = gold.cases.get(pair.case)
            labels[gold_label(case, pair.original)] += 1
            labels[gold_label(case, pair.edit)] += 1
        return labels
    asked = run.asked.keys() if run.asked else {p.case for p in preds}
    for case in (gold.cases.get(c) for c in asked if c in gold.cases):
        labels[gold_label(case, case.gold)] += 1
    return labels
