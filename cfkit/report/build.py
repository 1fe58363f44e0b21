"""Building a report: every section for every model, from predictions files or the store.

A case or pair a model did not answer is counted wrong and listed in
``Report.missing``; nothing is dropped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from cfkit import stats
from cfkit.cases import Case
from cfkit.errors import ConfigError, NotFoundError, PredictionError, SpecError, UsageError
from cfkit.predictions import Prediction, check_predictions, load_predictions, predictions_from_store
from cfkit.report.gold import Gold, PairGold, load_gold
from cfkit.report.rows import CompareRow, ContextCanvasRow, CounterfactualRow, Delta, Missing, ModalityRow, Report
from cfkit.store import Store
from cfkit.vocabulary import SUITE_CONDITIONS
from cfkit.workspace import Workspace

#: The modality deltas of the paper (Table S9's text), in report order.
MODALITY_DELTAS: tuple[tuple[str, str], ...] = (
    ("text", "neutral"), ("neutral", "evidence"), ("evidence", "image"), ("neutral", "image"),
)


def parse_compare(text: str) -> tuple[str, str]:
    """``"BASE=OTHER"`` → ``(BASE, OTHER)``."""
    base, sep, other = text.partition("=")
    if not sep or not base.strip() or not other.strip():
        raise UsageError(f"--compare '{text}' is not BASE=OTHER; give two model names as they appear in the "
                         "predictions, e.g. --compare hf:mplug-owl2=hf:artquant.")
    return base.strip(), other.strip()


def make_report(
    ws: Workspace,
    prediction_paths: Sequence[Path | str] = (),
    *,
    compare: Sequence[tuple[str, str]] = (),
    n_resamples: int = stats.N_RESAMPLES,
    seed: int | None = stats.SEED,
    ega: bool = False,
    audit: str | None = None,
) -> Report:
    """Load gold and predictions (files, or the latest stored run per model and suite) and build the report.

    With ``ega``, the report also holds the evidence-grounded accuracy section
    of audit ``audit`` (default: the newest audit in the store).
    """
    gold = load_gold(ws)
    if prediction_paths:
        preds = load_predictions(prediction_paths, cases=gold.cases, pairs=gold.pair_cases)
    else:
        if not ws.db_path.is_file():
            raise NotFoundError(f"no stored runs ({ws.db_path} does not exist). Run 'cfkit probe run' first, "
                             "or pass --predictions FILE.")
        with Store(ws.db_path) as store:
            preds = predictions_from_store(store)
            check_predictions(preds, f"store {ws.db_path}", cases=gold.cases, pairs=gold.pair_cases)
    if not preds:
        raise NotFoundError("no predictions to report. Run 'cfkit probe run', or pass --predictions FILE.")
    report = build_report(gold, preds, compare=compare, n_resamples=n_resamples, seed=seed)
    if ega:
        report = dataclasses.replace(report, ega=_ega(ws, audit, n_resamples, seed))
    return report


def _ega(ws: Workspace, audit: str | None, n_resamples: int, seed: int | None):
    from cfkit.report.grounding import ega_section

    if not ws.db_path.is_file():
        raise NotFoundError(f"--ega: no store at {ws.db_path}, so no audit; plan one with 'cfkit audit plan --run RUN'.")
    with Store(ws.db_path) as store:
        return ega_section(store, audit, n_resamples=n_resamples, seed=seed)


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
                raise UsageError(f"--compare: model '{name}' has no contextcanvas predictions "
                                 f"(models with them: {known}). Use the names as they appear in the predictions.")
    if answers.get("modality"):
        if gold.modality_cases is None:
            raise ConfigError("modality predictions were given, but the workspace has no subset file "
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
        raise SpecError("counterfactual predictions were given, but the workspace has no edit specs in interventions/.")
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
    resamples = stats.Resamples(len(cases), n_resamples=n_resamples, seed=seed)
    matrix = 100.0 * np.stack([correct[c] for c in conditions]).astype(float)
    intervals = stats.bootstrap_mean_intervals(matrix, resamples=resamples, seed=seed)
    comparisons = [stats.paired_comparison(correct[a], correct[b], resamples=resamples, seed=seed)
                   for a, b in MODALITY_DELTAS]
    adjusted = stats.bonferroni([c.mcnemar.p_value for c in comparisons])
    return ModalityRow(
        model=model,
        n=len(cases),
        accuracy={c: float(matrix[i].mean()) for i, c in enumerate(conditions)},
        accuracy_ci=dict(zip(conditions, intervals)),
        deltas=[Delta(a, b, c, p) for (a, b), c, p in zip(MODALITY_DELTAS, comparisons, adjusted)],
    )
