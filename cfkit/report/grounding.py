"""The evidence-grounded accuracy section (``cfkit report --ega``), laid out like the paper's Table S8.

Per audited model, from the audit's final labels: accuracy (the answer is
correct), EGA (correct, decisive cue identified and linked to the use) and
Unsupported (the share of correct answers that are not grounded), each with a
paired bootstrap interval over the audited cases — one set of resamples for
every model, so the intervals are paired across models as well — and the
annotators' agreement on the composite judgement before adjudication.

An item without a final label yet is never dropped silently: it is listed in
``pending``, and the rows are computed over the cases whose items are final
for every model (so the models stay paired), with ``n`` saying how many.

While the annotators are still labelling, the section is withheld (no rows,
no pending list: either would tie items to models) unless ``unblind``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

from cfkit import stats
from cfkit.audit.agreement import agreement_dict, label_pairs, pair_agreement
from cfkit.audit.items import labels_in, load_audit
from cfkit.audit.plan import input_drift
from cfkit.errors import UsageError
from cfkit.plural import agree, plural
from cfkit.store import Store, audit_labels, prelabels
from cfkit.store.audit_labels import Judgement


@dataclass(frozen=True)
class EgaRow:
    """One model's row: its scores over the section's cases, and agreement before adjudication."""

    model: str
    planned: int  # the model's items in the audit
    pending: int  # of those, without a final label
    scores: stats.EgaScores
    agreement: stats.Agreement | None  # on the EGA judgement, over the model's items both annotators labelled

    def to_dict(self) -> dict[str, Any]:
        s = self.scores
        return {"model": self.model, "n": s.n, "accuracy": s.accuracy, "ega": s.ega, "unsupported": s.unsupported,
                "accuracy_ci": s.accuracy_ci.as_list(), "ega_ci": s.ega_ci.as_list(),
                "unsupported_ci": None if s.unsupported_ci is None else s.unsupported_ci.as_list(),
                "planned": self.planned, "pending": self.pending, "correct": s.correct, "grounded": s.grounded,
                "agreement": None if self.agreement is None else agreement_dict(self.agreement)}


#: Why an audited item is left out of the section (``PendingItem.why``).
NO_FINAL = "no final label yet"
JUDGE_INVALID = "the judge's reply gave no valid Yes/No"
JUDGE_MISSING = "the judge was not asked, or its request failed"
JUDGE_STALE = "the judge's label was asked with an older wording of the questions"
_JUDGE_WHY = {"no_valid_answer": JUDGE_INVALID, "stale": JUDGE_STALE, "not_asked": JUDGE_MISSING}


@dataclass(frozen=True)
class PendingItem:
    """An audited item without a label that counts (a final label, or the judge's): left out, and said why."""

    model: str
    case: str
    item: str
    why: str = NO_FINAL  # NO_FINAL, or JUDGE_INVALID, JUDGE_STALE or JUDGE_MISSING (after it with people+judge)


#: Said with an EGA section shown while annotators are still labelling (``report --ega --unblind``).
UNBLINDED = "un-blinded (--unblind): the EGA section is shown while annotators are still labelling."


@dataclass(frozen=True)
class EgaSection:
    audit: str
    cases: int  # cases every model's item of which has a final label: the rows' n
    planned_cases: int
    rows: list[EgaRow]
    pending: list[PendingItem]
    withheld: str | None = None  # why the rows and the pending list are left out (labelling under way)
    unblinded: bool = False  # shown while labelling is under way, as asked (--unblind)
    labels: str = "people"  # whose labels count (EGA_LABELS)
    judge: str | None = None  # the judge model whose labels count, when they do
    judge_labelled: int = 0  # items of the rows counted with the judge's labels
    inputs_changed: tuple[str, ...] = ()  # what changed in the audit's inputs since planning (audit status's lines)
    audited_runs: tuple[tuple[str, str], ...] = ()  # (model, run id) of each audited run, in plan order
    other_runs: tuple[str, ...] = ()  # how the report's other tables read another run of an audited model, or none
    judge_mixed: str | None = None  # the judge's labels that count were answered by more than one model

    def said(self) -> list[str]:
        """What goes with the section wherever it is shown (``cfkit report --ega`` says it on stderr): each change
        in the audit's inputs since planning, each audited model whose run the report's other tables do not
        read, a judge's labels answered by more than one model, and that the section is shown un-blinded."""
        return [f"audit {self.audit}: {change} since planning; the EGA section counts the items as they were "
                "audited, not as the other sections read them now." for change in self.inputs_changed] + [
                f"audit {self.audit}: {line}; its EGA row counts the audited replies, not the ones the other tables "
                "count." for line in self.other_runs] + ([self.judge_mixed] if self.judge_mixed else []) + (
                [UNBLINDED] if self.unblinded else [])

    def beside(self, reported: dict[str, str]) -> EgaSection:
        """The section with ``other_runs`` said against ``reported`` (model -> the ContextCanvas run the report's
        other tables read): an audited model whose replies were run again since (a newer run is read), or that
        the other tables leave out, has its EGA row counted over replies no other table counts."""
        lines = []
        for model, run in self.audited_runs:
            now = reported.get(model)
            if now is None:
                lines.append(f"{model} is not in the other tables (the audit labelled its run {run})")
            elif now != run:
                lines.append(f"the other tables read run {now} of {model}, the audit labelled its run {run}")
        return replace(self, other_runs=tuple(lines))

    def summary(self) -> dict[str, Any]:
        data = {"audit": self.audit, "cases": self.cases, "planned_cases": self.planned_cases,
                "pending": len(self.pending)}
        if self.labels != "people":
            data |= {"labels": self.labels, "judge": self.judge, "judge_labelled": self.judge_labelled}
        if self.withheld is not None:
            data["withheld"] = self.withheld
        if self.inputs_changed:
            data["inputs_changed"] = list(self.inputs_changed)
        if self.other_runs:
            data["other_runs"] = list(self.other_runs)
        if self.judge_mixed:
            data["judge_mixed_models"] = self.judge_mixed
        return data


#: Whose labels the EGA section counts: the people's final labels (the paper's), a judge model's pre-labels, or
#: the people's with the judge's where no person's final label is in (those items counted and marked).
EGA_LABELS = ("people", "judge", "people+judge")


def _judgements(store: Store, audit, labels: str, judge: str | None,
                ws) -> tuple[dict[str, Judgement], set[str], dict[str, str], str | None]:
    """Each item's judgement under ``labels``, which of them are the judge's, why each other item has none, and a
    line when the judge's labels were answered by more than one model."""
    people = {item_id: f.judgement for item_id, f in audit_labels.finals(store, audit.id).items()}
    mixed = None
    if labels == "people":
        return people, set(), {i.id: NO_FINAL for i in audit.items if i.id not in people}, None
    if judge is None:
        raise UsageError(f"--ega-labels {labels} counts a judge model's labels; name it with --judge KIND:NAME.")
    if ws is not None:
        from cfkit.audit.judge_labels import judge_labels

        state = judge_labels(ws, store, audit.id, judge)  # labels of an edited question file are stale, left out
        mine, missing, mixed = state.labels, state.missing, state.mixed(judge)
    else:
        mine = prelabels.latest(store, audit.id, judge)
        if not mine:
            raise UsageError(f"judge {judge} has no labels in audit {audit.id}; run 'cfkit audit prelabel --judge "
                             f"{judge}'.")

        def missing(item_id: str, criterion: str) -> str | None:
            value = mine.get(item_id, {})
            return None if value.get(criterion) is not None else "no_valid_answer" if criterion in value \
                else "not_asked"
    judged = {i.id: Judgement(i.parser_correct, mine[i.id].get("cue"), mine[i.id].get("link")) for i in audit.items
              if i.id in mine and mine[i.id].get("cue") is not None and mine[i.id].get("link") is not None}
    if labels == "judge":
        counted, from_judge = judged, set(judged)
    else:
        from_judge = set(judged) - set(people)
        counted = people | {i: judged[i] for i in from_judge}

    def lacking(ref: str) -> str:
        reasons = {missing(ref, c) for c in ("cue", "link")}
        judge_why = next(said for why, said in _JUDGE_WHY.items() if why in reasons)  # the first that holds
        return judge_why if labels == "judge" else f"{NO_FINAL}, and {judge_why}"

    return counted, from_judge, {i.id: lacking(i.id) for i in audit.items if i.id not in counted}, mixed


def ega_section(store: Store, audit_ref: str | None = None, *, n_resamples: int = stats.N_RESAMPLES,
                seed: int | None = stats.SEED, unblind: bool = False, labels: str = "people",
                judge: str | None = None, ws=None) -> EgaSection:
    """The section for audit ``audit_ref`` (default: the newest audit in the store).

    ``labels`` chooses whose labels count (:data:`EGA_LABELS`; a judge's need ``judge``).
    With the workspace ``ws``, what changed in the audit's inputs since
    planning (a run rerun, the cases file edited) is in ``inputs_changed``.

    Steps: 1. the audit, its models (plan order) and final labels; 2. the
    cases final for every model; 3. per model, scores over those cases (one
    shared set of resamples) and agreement before adjudication.
    """
    # 1. the audit
    audit = load_audit(store, audit_ref)
    done = labels_in(store, audit)
    if done < audit.planned_labels and not unblind:
        cases_n = len({i.case_id for i in audit.items})
        return EgaSection(audit.id, 0, cases_n, [], [], withheld=(
            f"audit {audit.id}: {done} of {plural(audit.planned_labels, 'planned label')} "
            f"{agree(done, 'are')} in, so the EGA section is "
            "withheld (it would tie items to models while annotators are still labelling); see 'cfkit audit "
            "status' for progress, or pass --unblind to show it now."))
    models = [r["model"] for r in audit.plan.inputs["runs"]]  # the order the runs were given
    final, from_judge, why, mixed = _judgements(store, audit, labels, judge, ws)
    by_key = {(i.model, i.case_id): i for i in audit.items}
    cases = sorted({i.case_id for i in audit.items})
    # 2. the cases final for every model
    complete = [c for c in cases if all((m, c) in by_key and by_key[m, c].id in final for m in models)]
    pending = [PendingItem(i.model, i.case_id, i.id, why[i.id])
               for i in sorted(audit.items, key=lambda i: (i.model, i.case_id)) if i.id not in final]
    # 3. the rows
    pairs = defaultdict(list)
    for pair in label_pairs(store, audit):
        pairs[pair.item.model].append(pair)
    rows: list[EgaRow] = []
    if complete:
        resamples = stats.Resamples(len(complete), n_resamples=n_resamples, seed=seed)
        for model in models:
            judgements = [final[by_key[model, c].id] for c in complete]
            scores = stats.ega_scores([j.answer_ok for j in judgements], [bool(j.cue) for j in judgements],
                                      [bool(j.link) for j in judgements], resamples=resamples)
            own = pairs.get(model, [])
            agreement = (pair_agreement(own, "ega", resamples=stats.Resamples(len(own), n_resamples=n_resamples,
                                                                              seed=seed)) if own else None)
            planned = sum(1 for i in audit.items if i.model == model)
            rows.append(EgaRow(model, planned, sum(1 for p in pending if p.model == model), scores, agreement))
    return EgaSection(audit.id, len(complete), len(cases), rows, pending, unblinded=done < audit.planned_labels,
                      labels=labels, judge=judge if labels != "people" else None,
                      judge_labelled=sum(1 for c in complete for m in models if by_key[m, c].id in from_judge),
                      inputs_changed=() if ws is None else tuple(input_drift(ws, store, audit.plan)),
                      audited_runs=tuple((r["model"], r["id"]) for r in audit.plan.inputs["runs"]),
                      judge_mixed=mixed if from_judge else None)
