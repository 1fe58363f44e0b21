"""What each table's columns mean, said under the table as the paper's captions say it.

Every abbreviation a table header uses is spelt out here once; the terminal,
Markdown and LaTeX views print the same sentence under the same table.
"""

from __future__ import annotations

from typing import Any

from cfkit.plural import plural


def _bootstrap(boot: dict[str, Any], unit: str) -> str:
    if not boot:
        return f"95% CI: paired percentile bootstrap over {unit}."
    seed = "fresh entropy" if boot["seed"] is None else f"seed {boot['seed']}"
    return (f"95% CI: paired percentile bootstrap over {unit} ({plural(boot['resamples'], 'resample', spec=',')}, {seed}; "
            f"the same resamples for every model).")


def contextcanvas(row: dict[str, Any], boot: dict[str, Any]) -> str:
    """Table 2's columns."""
    return (f"Acc. is exact-match accuracy on all {plural(row['n'], 'case')}; Macro-F1 (the mean of the Yes and No F1) and "
            f"Yes (%) (the share answered Yes) are on the {plural(row['n_binary'], 'two-option case')}; the gold Yes rate is "
            f"{row['gold_yes_rate']:.2f}%. {_bootstrap(boot, 'cases')} Inv.: cases with no valid option, "
            "unparsed or with no usable answer at all (see 'missing'), counted wrong.")


def classes(row: dict[str, Any], boot: dict[str, Any]) -> str:
    """Table S4's columns."""
    return (f"On the {plural(row['n_binary'], 'two-option case')}: Yes F1 and No F1 are each class's F1 (an answer with no "
            "valid option is a false negative of its gold class); Pred. Yes is the share answered Yes and Gold Yes "
            f"the share whose gold answer is Yes. {_bootstrap(boot, 'cases')} Inv.: cases with no valid option, "
            "unparsed or with no usable answer at all (see 'missing'), counted wrong (over all cases).")


def counterfactual(boot: dict[str, Any]) -> str:
    """Table S7's columns."""
    return ("Full: accuracy on the complete benchmark (the model's ContextCanvas row); Orig.: accuracy on the "
            "incompatible originals; Edit: on the compatible edits; Pair: both labels correct. C/R: correct (No→Yes) "
            "and reverse (Yes→No) directional updates. Inv.: pairs with no valid option (unparsed, no usable answer, "
            f"or a third option) on either side. NCU = 100 × (C − R) / pairs. {_bootstrap(boot, 'pairs')}")


def modality(n: int) -> str:
    """Table S9's columns."""
    return (f"Accuracy (%) on the {plural(n, 'subset case')} when the model is given the question and options only (Text), "
            "a description of the visible content (Neutral), the same description with the decisive cue stated "
            "(Evidence), or the image (Image). Inv.: cases with no valid option (unparsed or with no usable answer) "
            "under Text/Neutral/Evidence/Image, counted wrong.")


def modality_deltas(boot: dict[str, Any]) -> str:
    return ("Δ: accuracy under the second condition minus the first, in points (sign always shown). "
            f"{_bootstrap(boot, 'cases')} b/c: cases right only under the first / only under the second condition; "
            "p: exact two-sided McNemar test; p adj: Bonferroni over the four changes of the model.")


def compare(n: int, m: int, boot: dict[str, Any]) -> str:
    """Table S10's columns."""
    return (f"Base and Other: accuracy (%) of each model on the {plural(n, 'case')}; Δ = Other − Base in points (sign always "
            f"shown); b/c: cases right only for the base / only for the other model. {_bootstrap(boot, 'cases')} "
            f"p: exact two-sided McNemar test; p adj: Bonferroni over the {m} comparison{'s' if m != 1 else ''} "
            "asked for together.")


def ega() -> str:
    """Table S8's columns."""
    return ("Acc.: the answer is judged correct; EGA: correct, with the decisive cue identified and linked to the "
            "stated use; Unsup. (unsupported): the share of correct answers that fail the grounding criterion. "
            "95% CI: paired percentile bootstrap over the audited cases.")
