"""Building a report: every section for every model, from predictions files or the store.

A unit a model gave no usable answer for is counted wrong and listed in
``Report.missing`` with the reason (absent, transport, refused, stale: about an
edit no longer selected, or a caption since changed) and what is known about
it; nothing is dropped. A row built from an incomplete run, or
with units absent or failed, is marked ``incomplete``; ``Report.notes`` says
where the figures cover fewer pairs or cases than the workspace expects.
Stored runs are chosen by :mod:`~cfkit.report.sources`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from itertools import groupby, repeat
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING

from cfkit import stats
from cfkit.errors import CaseError, NotFoundError, PredictionError, UsageError
from cfkit.predictions import Prediction, check_predictions, load_predictions
from cfkit.report import sections, sources as sources_
from cfkit.report.commands import SINGLE, Commands
from cfkit.report.gold import Gold, load_gold
from cfkit.report.groups import resolve_groups
from cfkit.report.labels import check_labels, relabel_ega, relabel_sources
from cfkit.report.reviewed import reviewed_gold, reviewed_note
from cfkit.report.rows import CompareRow, ContextCanvasRow, CounterfactualRow, Report, coverage_notes
from cfkit.report.runs_read import runs_read
from cfkit.report.sources import Sources
from cfkit.report.standing import check_inputs, check_stored
from cfkit.swap import as_listed, swap_problem
from cfkit.report.shown import store_notes
from cfkit.report.swap import swap_notes, swap_rows
from cfkit.report.trouble import reply_troubles
from cfkit.report.units import collect_units
from cfkit.vocabulary import CONDITION_ORDER, SUITE_CONDITIONS, SWAP_CONDITIONS
from cfkit.workspace import Workspace

if TYPE_CHECKING:
    from cfkit.report.file_runs import FileRun



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
    run_refs: Sequence[str] = (),
    compare: Sequence[tuple[str, str]] = (),
    n_resamples: int = stats.N_RESAMPLES,
    seed: int | None = stats.SEED,
    ega: bool = False,
    audit: str | None = None,
    subset: str | Path | None = None,
    all_cases: bool = False,
    groups: Mapping[str, str] | None = None,
    unblind: bool = False,
    ega_labels: str = "people",
    judge: str | None = None,
    mixed_settings: bool = False,
    labels: Mapping[str, str] | None = None,
    only_named: bool = False,
    file_runs: Sequence[FileRun] = (),
    file_details: Mapping[sources_.UnitKey, str] | None = None,
    reviewed_only: bool = False,
    commands: Commands = SINGLE,
) -> Report:
    """Load gold and predictions (files, the runs named in ``run_refs``, or by default one stored run per model
    and suite, see :func:`cfkit.report.choice.choose`) and build the report.

    With ``ega``, the report also holds the evidence-grounded accuracy section of audit ``audit`` (default: the
    newest audit in the store). ``groups`` maps model labels to groups (a ``--groups`` file); the paper's models
    get Table 2's groups without it. ``labels`` shows models under other names (``--label MODEL=NAME``,
    :mod:`cfkit.report.labels`); ``compare`` and ``groups`` name the models by those. ``run_refs`` choose a model's run
    per suite, every other model is reported too, unless ``only_named``. ``file_runs``: the runs that ``cfkit
    runs export`` files among the predictions record (:func:`cfkit.interop.reporting.predictions_files`), whose
    answers are then checked as a stored run's are; ``file_details``: what the converted files say of each reply
    that gave no answer (:func:`cfkit.interop.reporting.reply_details`), as a stored run's replies do.
    ``reviewed_only``: the modality rows over the cases whose captions a person wrote or reviewed
    (:mod:`cfkit.report.reviewed`). ``commands``: its notes' (a study's own).
    """
    gold = load_gold(ws, subset=subset, all_cases=all_cases)
    gold = reviewed_gold(ws, gold) if reviewed_only else gold
    if prediction_paths and run_refs:
        raise UsageError("--predictions reads files and --run reads stored runs; give one or the other.")
    if prediction_paths:
        source = Sources(preds=load_predictions(prediction_paths, cases=gold.cases, pairs=gold.pair_cases,
                                                repeats=False))  # build_report counts the units
        from cfkit.report.file_runs import note_file_images, note_file_runs
        from cfkit.report.shown import file_older_readings
        note_file_runs(source, file_runs)  # the runs 'runs export' files record: stale answers, incomplete runs
        source.details.update(file_details or {})  # a peer's words for a failed or declined sample, and the like
        reread = file_older_readings(list(file_runs))  # a plain predictions file's readings carry no parser version
        if ws.db_path.is_file():  # answers about edits can still be checked against the pairs' selected edits
            from cfkit.store import Store, digests  # (the store's modules: only where there is one)
            with Store(ws.db_path) as store:
                source.note_selected_edits(store)
                if file_runs:
                    note_file_images(source, file_runs, gold.cases, lambda paths: digests.sha256_now(store, paths))
        elif file_runs:
            note_file_images(source, file_runs, gold.cases)
    else:
        if not ws.db_path.is_file():
            raise NotFoundError(f"no stored runs ({ws.db_path} does not exist). Run 'cfkit probe run' first, "
                                "or pass --predictions FILE.")
        from cfkit.report.shown import older_readings
        from cfkit.store import Store
        with Store(ws.db_path) as store:
            source = sources_.from_store(store, run_refs, mixed=mixed_settings, only_named=only_named,
                                         reviewed_only=reviewed_only)
            check_predictions(source.preds, f"store {ws.db_path}", cases=gold.cases, pairs=gold.pair_cases)
            check_stored(source, store, gold)  # the pairs' selected edits, the images now
            reread = older_readings(store, list(source.runs.values()))
    source.reviewed_view, source.commands, source.workspace = reviewed_only, commands, ws.root
    template_notes = check_inputs(source, ws, gold)  # captions, cases, golds, templates changed since a run
    if not source.preds:
        raise NotFoundError(" ".join(a.message for a in source.set_aside if a.empty) or "no predictions to report. "
                            "Run 'cfkit probe run', or pass --predictions FILE.")
    section = _ega(ws, audit, n_resamples, seed, unblind, ega_labels, judge) if ega else None
    if labels:
        check_labels(labels, [p.model for p in source.preds] + [r.model for r in (section.rows if section else [])])
        source, section = relabel_sources(source, labels), section and relabel_ega(section, labels)
    if section is not None and not prediction_paths:  # the audited runs beside those the other tables read
        section = section.beside({model: run.id for (model, suite), run in source.runs.items()
                                  if suite == "contextcanvas"})
    try:
        report = build_report(gold, source.preds, compare=compare, n_resamples=n_resamples, seed=seed,
                              sources=source, expected_pairs=ws.pairs, groups=groups)
    except RepeatedAnswer:
        if prediction_paths:  # the reading that looks for a repeat names its two lines
            load_predictions(prediction_paths, cases=gold.cases, pairs=gold.pair_cases)
        raise
    report.notes.extend(reviewed_note(gold) + source.caption_notes(gold.modality_cases) + template_notes
                        + source.server_notes() + reread)
    if section is not None:
        report = dataclasses.replace(report, ega=section)
    if ws.db_path.is_file():
        report.notes.extend(store_notes(ws, report, source))
    return report


def _ega(ws: Workspace, audit: str | None, n_resamples: int, seed: int | None, unblind: bool,
         labels: str = "people", judge: str | None = None):
    from cfkit.report.grounding import ega_section

    if not ws.db_path.is_file():
        raise NotFoundError(f"--ega: no store at {ws.db_path}, so no audit; plan one with 'cfkit audit plan --run RUN'.")
    from cfkit.store import Store

    with Store(ws.db_path) as store:
        return ega_section(store, audit, n_resamples=n_resamples, seed=seed, unblind=unblind, labels=labels,
                           judge=judge, ws=ws)


def build_report(
    gold: Gold,
    preds: Sequence[Prediction],
    *,
    compare: Sequence[tuple[str, str]] = (),
    n_resamples: int = stats.N_RESAMPLES,
    seed: int | None = stats.SEED,
    sources: Sources | None = None,
    expected_pairs: int | None = None,
    groups: Mapping[str, str] | None = None,
) -> Report:
    """Compute every section for every model found in ``preds``.

    Steps: 1. index predictions by suite and model; 2. check the compare
    requests and the modality subset; 3. score each suite, every unit without
    a usable answer counted wrong and listed; 4. the paired comparisons;
    5. marks and notes on what the rows cover.

    Every statistic over the ContextCanvas cases (each model's intervals and
    every comparison) uses one set of resamples, so they stay paired by case;
    so does every statistic over the pairs.
    """
    sources = sources or Sources(preds=list(preds))
    # 1. index
    answers: dict[str, dict[str, dict[tuple[str, str, str], Prediction]]] = {}
    for (suite, model), run in groupby(preds, _RUN):  # a run's lines come together: one look-up per run
        run = list(run)  # each by (case, pair or "", condition), the keys made in C: a study has a million
        # (Only the counterfactual suite has pairs: a checked prediction of another has none, None or "".)
        pair = map(_NO_PAIR.get, map(_PAIR, run), map(_PAIR, run)) if suite == "counterfactual" else repeat("")
        answers.setdefault(suite, {}).setdefault(model, {}).update(zip(zip(map(_CASE, run), pair, map(_CONDITION, run)), run))
    if sum(map(len, [got for by_model in answers.values() for got in by_model.values()])) != len(preds):
        raise _repeated(preds)  # fewer units than answers
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
            raise CaseError(f"modality predictions were given, but {gold.modality_problem}")
    outside_notes = gold.outside_modality(answers["modality"], sources.commands) if answers.get("modality") else []
    units = sections.Units(sources)
    group_of = resolve_groups({model: None for by_model in answers.values() for model in by_model}, groups)
    # 3. the suites
    all_cases = list(gold.cases)
    drawn: dict[int, stats.Resamples] = {}  # by number of units: the sections over as many share the one draw

    def resamples(n: int) -> stats.Resamples:  # the seed's resamples of n units, drawn once
        return drawn[n] if n in drawn else drawn.setdefault(n, stats.Resamples(n, n_resamples=n_resamples, seed=seed))

    by_case = resamples(len(all_cases)) if cc_models else None
    compared = {name for pair in compare for name in pair}  # only the compared models' usable answers are needed
    cc_usable = {model: units.usable(model, "contextcanvas", got) for model, got in cc_models.items()
                 if model in compared}
    cc_rows = []
    cc_case = sections.CaseColumns(all_cases, ("image",)) if cc_models else None  # made once, shared by every model
    for model, got in cc_models.items():
        intervals = sections.contextcanvas(units, model, got, cc_case, by_case)
        cc_rows.append(ContextCanvasRow(model, intervals.scores, *units.marks(model, "contextcanvas"),
                                        intervals=intervals, group=group_of[model]))
    pairs = list(gold.pairs.values())
    cf_models = answers.get("counterfactual", {})
    by_pair = resamples(len(pairs)) if cf_models and pairs else None
    cf_rows = [
        CounterfactualRow(model, sections.counterfactual(units, model, got, pairs, by_pair),
                          *units.marks(model, "counterfactual"), group=group_of[model])
        for model, got in cf_models.items()
    ]
    md_models = answers.get("modality", {})
    md_cases = [gold.cases.get(c) for c in gold.modality_cases or []]
    # One resample matrix for every model (and ContextCanvas's when it has as many cases: the seed's same draw).
    by_md_case = resamples(len(md_cases)) if md_models else None
    md_case = sections.CaseColumns(md_cases, SUITE_CONDITIONS["modality"]) if md_models else None
    md_rows = [dataclasses.replace(sections.modality(units, model, got, md_case, by_md_case, seed),
                                   group=group_of[model]) for model, got in md_models.items()]
    sw_rows = swap_rows(units, gold.cases, answers.get("swap", {}), n_resamples=n_resamples, seed=seed)
    # 4. comparisons, adjusted over the ones asked for together
    comparisons = [stats.paired_comparison(sections.correct(cc_usable[base], all_cases, "image"),
                                           sections.correct(cc_usable[other], all_cases, "image"),
                                           resamples=by_case, seed=seed) for base, other in compare]
    adjusted = stats.bonferroni([c.mcnemar.p_value for c in comparisons])
    invalid = {row.model: row.scores.invalid for row in cc_rows}
    cmp_rows = [CompareRow(b, o, c, p, invalid[b], invalid[o]) for (b, o), c, p in zip(compare, comparisons, adjusted)]
    # 5. what the figures cover
    expected = ({} if expected_pairs is None else {"counterfactual": expected_pairs}) | (
        {} if gold.modality_cases is None else {"modality": len(gold.modality_cases)})
    notes = (outside_notes + coverage_notes(units.missing, gold, cc_rows, cf_rows, md_rows, expected_pairs)
             + swap_notes(units.missing, sw_rows))
    # A case's gold under every condition a suite asks it in; a pair's two golds from its spec.
    golds = {(c.id, "", condition): c.gold for c in all_cases for condition in CONDITION_ORDER
             if condition not in SUITE_CONDITIONS["counterfactual"] + SWAP_CONDITIONS}
    # In the swapped order the gold is the id its text moved to (looked up only when there are swap answers).
    if answers.get("swap"):
        golds |= {(c.id, "", condition): as_listed(c, condition).gold for c in all_cases if swap_problem(c) is None
                  for condition in SWAP_CONDITIONS}
    golds |= {(p.case, p.pair, "original"): p.original for p in pairs} | {(p.case, p.pair, "edit"): p.edit for p in pairs}
    troubles = reply_troubles(answers, sources.runs, {key: run.max_tokens for key, run in sources.runs.items()},
                              sources.raise_limit)
    return Report(cc_rows, cf_rows, md_rows, cmp_rows, units.missing, notes=notes, expected=expected,
                  bootstrap={"resamples": n_resamples, "seed": seed, "level": stats.LEVEL},
                  units=collect_units(units.asked, golds, units.reasons), swap=sw_rows, troubles=troubles,
                  set_aside=list(sources.set_aside), read=runs_read(sources))


_RUN = attrgetter("suite", "model")
_CASE, _PAIR, _CONDITION = attrgetter("case"), attrgetter("pair"), attrgetter("condition")
_NO_PAIR = {None: ""}  # .get(pair, pair): a pair's id, "" for none (None, or "" as written)


class RepeatedAnswer(PredictionError):
    """A unit answered twice among the predictions of a report."""


def _repeated(preds: Sequence[Prediction]) -> RepeatedAnswer:
    seen = set()
    for p in preds:
        if (key := (p.model, p.suite, p.case, p.pair or "", p.condition)) in seen:
            return RepeatedAnswer(f"model '{p.model}' answered case {p.case}" + (f", pair {p.pair}," if p.pair else "")
                                  + f" condition {p.condition} ({p.suite}) twice; keep one of the answers.")
        seen.add(key)
    raise AssertionError("no unit is answered twice")
