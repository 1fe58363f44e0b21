"""Evidence-grounded accuracy (issue 14 item 6) against the paper's Table S8 and a plain loop bootstrap.

Published figures: AesCanvas, arXiv 2608.26713, Table S8 (supplement p. 26; Table 6 in the main text):
100 audited cases per model; Unsupported printed with two decimals, so "exact" is equality after rounding.
The loop recomputes every resample's counts in plain Python; same integer counts, same operations, so
its intervals must be equal to the last bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from cfkit import stats

# model, accuracy, EGA, Unsupported (%)
TABLE_S8 = [
    ("Gemini 3.1 Pro", 83, 79, 4.82),
    ("GPT-5.2", 65, 55, 15.38),
    ("Qwen3.7-Plus", 42, 31, 26.19),
    ("ArtiMuse", 21, 3, 85.71),
    ("ArtQuant-APDD", 27, 0, 100.00),
]


def judgements(n: int, correct: int, grounded: int, *, cue_only: int = 0):
    """n responses: the first ``correct`` right, of which the first ``grounded`` identify and link the cue.

    ``cue_only`` further right answers name the cue without linking it (not grounded).
    """
    ok = [i < correct for i in range(n)]
    cue = [i < grounded + cue_only for i in range(n)]
    link = [i < grounded for i in range(n)]
    return ok, cue, link


@pytest.mark.parametrize("row", TABLE_S8, ids=[r[0] for r in TABLE_S8])
def test_table_s8_rows_reproduced(row):
    _, accuracy, ega, unsupported = row
    result = stats.ega_scores(*judgements(100, accuracy, ega, cue_only=min(2, accuracy - ega)), n_resamples=500)
    assert (result.n, result.correct, result.grounded) == (100, accuracy, ega)
    assert (result.accuracy, result.ega) == (float(accuracy), float(ega))
    assert round(result.unsupported, 2) == unsupported


def test_gemini_example_of_the_issue():
    # Accuracy 83, EGA 79 → Unsupported = 100 × 4 / 83 = 4.819…, printed 4.82.
    assert stats.unsupported_rate(83, 79) == pytest.approx(100 * 4 / 83, abs=1e-12)
    assert round(stats.unsupported_rate(83, 79), 2) == 4.82


def test_grounding_needs_all_three_criteria():
    # A wrong answer that names and links the cue is not grounded; neither is a right one that only names it.
    result = stats.ega_scores([False, True, True, True], [True, True, True, False], [True, False, True, True],
                              n_resamples=100)
    assert (result.correct, result.grounded) == (3, 1)
    assert result.unsupported == pytest.approx(100 * 2 / 3)


def test_nothing_correct_leaves_unsupported_undefined():
    result = stats.ega_scores([False] * 5, [True] * 5, [True] * 5, n_resamples=100)
    assert (result.accuracy, result.ega) == (0.0, 0.0)
    assert result.unsupported is None and result.unsupported_ci is None
    assert stats.unsupported_rate(0, 0) is None
    with pytest.raises(ValueError, match="between 0 and correct"):
        stats.unsupported_rate(3, 4)


def test_intervals_equal_a_plain_loop_over_the_same_resamples():
    ok, cue, link = judgements(20, 4, 2, cue_only=1)  # few correct answers: some resamples have none
    result = stats.ega_scores(ok, cue, link, n_resamples=4000, seed=3)
    figures = []
    for row in stats.bootstrap_indices(20, n_resamples=4000, seed=3):
        right = sum(ok[i] for i in row)
        grounded = sum(ok[i] and cue[i] and link[i] for i in row)
        unsupported = 100.0 * (right - grounded) / right if right else float("nan")
        figures.append((100.0 * right / 20, 100.0 * grounded / 20, unsupported))
    figures = np.array(figures).T
    tail = 100.0 * (1 - 0.95) / 2
    for ci, row in zip((result.accuracy_ci, result.ega_ci, result.unsupported_ci), figures):
        defined = row[~np.isnan(row)]
        assert (ci.low, ci.high) == tuple(np.percentile(defined, [tail, 100 - tail]))
        assert ci.undefined == int(np.isnan(row).sum())
    assert result.unsupported_ci.undefined > 0 and result.accuracy_ci.undefined == 0


def test_models_share_resamples_when_given_one():
    resamples = stats.Resamples(100, n_resamples=2000)
    gemini = stats.ega_scores(*judgements(100, 83, 79), resamples=resamples)
    again = stats.ega_scores(*judgements(100, 83, 79), n_resamples=2000)
    assert gemini == again
    assert gemini.ega_ci.low <= 79 <= gemini.ega_ci.high


def test_bad_judgements_raise_clear_errors():
    with pytest.raises(ValueError, match="one judgement per audited response"):
        stats.ega_scores([True], [True, False], [True])
    with pytest.raises(ValueError, match=r"cue\[0\] is 'yes'"):
        stats.ega_scores([True], ["yes"], [True])
    with pytest.raises(ValueError, match="at least one audited response"):
        stats.ega_scores([], [], [])
