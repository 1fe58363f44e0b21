"""Counterfactual-pair scores (Table S7 of the paper): accuracies, directional counts and NCU."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cfkit.stats.answers import as_answers, correct_mask, percent
from cfkit.stats.bootstrap import N_RESAMPLES, SEED, Interval, Resamples, bootstrap_mean_intervals


@dataclass(frozen=True)
class CounterfactualScores:
    """Counterfactual-pair figures of one model (Table S7), accuracies and NCU in percent."""

    n_pairs: int
    orig_acc: float
    edit_acc: float
    pair_acc: float
    correct: int
    reverse: int
    stuck_original: int
    stuck_edit: int
    invalid: int
    ncu: float
    ncu_ci: Interval


def counterfactual_scores(
    original: Sequence[str | None],
    edit: Sequence[str | None],
    original_gold: Sequence[str],
    edit_gold: Sequence[str],
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int | None = SEED,
    resamples: Resamples | None = None,
) -> CounterfactualScores:
    """Table S7's figures over P pairs: accuracies, directional counts and NCU with its interval.

    Per pair, with o / e the answers on the original / edit and go / ge their golds:
    ``correct`` o = go and e = ge; ``reverse`` o = ge and e = go; ``stuck_original``
    o = e = go; ``stuck_edit`` o = e = ge; ``invalid`` any other pattern (a null or a
    third option on either side). NCU = 100 × (correct − reverse) / P (supplement
    eq. S22); its interval is the percentile bootstrap of the per-pair score
    +1 / −1 / 0 (Efron & Tibshirani 1993, ch. 13), pairs resampled whole.
    """
    o, e = as_answers(original), as_answers(edit)
    go, ge = as_answers(original_gold), as_answers(edit_gold)
    if not (o.shape == e.shape == go.shape == ge.shape):
        raise ValueError("original, edit and both gold sequences need one entry per pair")
    n = int(o.size)
    if n == 0:
        raise ValueError("counterfactual scores need at least one pair")
    orig_ok = correct_mask(o, go)
    edit_ok = correct_mask(e, ge)
    said_go_on_edit = correct_mask(e, go)
    said_ge_on_orig = correct_mask(o, ge)
    correct = orig_ok & edit_ok
    reverse = said_ge_on_orig & said_go_on_edit
    stuck_original = orig_ok & said_go_on_edit
    stuck_edit = said_ge_on_orig & edit_ok
    invalid = ~(correct | reverse | stuck_original | stuck_edit)
    score = correct.astype(float) - reverse.astype(float)
    return CounterfactualScores(
        n_pairs=n,
        orig_acc=percent(orig_ok),
        edit_acc=percent(edit_ok),
        pair_acc=percent(correct),
        correct=int(correct.sum()),
        reverse=int(reverse.sum()),
        stuck_original=int(stuck_original.sum()),
        stuck_edit=int(stuck_edit.sum()),
        invalid=int(invalid.sum()),
        ncu=100.0 * float(score.mean()),
        ncu_ci=bootstrap_mean_intervals(100.0 * score[None, :], n_resamples=n_resamples, seed=seed,
                                        resamples=resamples)[0],
    )
