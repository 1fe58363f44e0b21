"""``cfkit audit prelabel``: a judge model labels each audit item's cue and link, blind, beside the people.

The judge sees what an annotator sees (:func:`cfkit.audit.items.blind`: the
case, its gold, the rationale, the masked response and the image), never the
model or run of an item. Its labels go to their own table
(:mod:`cfkit.store.prelabels`): they never count as an annotator's, so an
audit's progress, its agreement and its final labels are the people's alone.
:func:`judge_agreement` compares them with each person's, criterion by
criterion, with the same statistics as person against person.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cfkit import stats
from cfkit.audit.items import Audit, blind
from cfkit.audit.judge_labels import CRITERIA, LEFT_OUT, judge_labels, load_audit_questions
from cfkit.errors import UsageError
from cfkit.judge.costs import Spent, reply_cost, unread_cost
from cfkit.judge.questions import MAX_TOKENS, ask_in_turn
from cfkit.judge.screen import YES_NO
from cfkit.store import Store, audit_labels, prelabels
from cfkit.store.prelabels import Prelabel
from cfkit.workspace import Workspace


@dataclass
class PrelabelResult:
    audit: str
    judge: str
    prompt_version: str
    asked: int = 0
    stored: int = 0  # already there before this run
    invalid: int = 0  # replies with no valid Yes/No
    stored_invalid: int = 0  # of the stored ones, replies with no valid Yes/No (kept, not asked again)
    asked_again: int = 0  # stored replies with no valid Yes/No asked again (retry_unanswered)
    failed: list[str] = field(default_factory=list)
    spent: Spent = field(default_factory=Spent)  # what this run's replies cost, cut-off ones included

    def to_dict(self) -> dict[str, Any]:
        return {"audit": self.audit, "judge": self.judge, "prompt_version": self.prompt_version, "asked": self.asked,
                "already_stored": self.stored, "invalid": self.invalid,
                "already_stored_invalid": self.stored_invalid, "asked_again": self.asked_again,
                "failed": self.failed, **self.spent.to_dict()}

    def spending(self) -> str:
        """What this run's replies cost, as ``probe run`` says it; or that the judge is not priced."""
        return self.spent.said()

def _fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def prelabel_audit(ws: Workspace, store: Store, audit: Audit, backend, judge: str, *,
                   max_tokens: int = MAX_TOKENS, retry_unanswered: bool = False) -> PrelabelResult:
    """Ask ``backend`` the cue and link question of every item not yet labelled by this judge and prompt version
    (each reply at most ``max_tokens`` long; one cut off there is a failure, asked again by the next run).
    What stops the asking before its end (a key refused, Ctrl-C) is not raised but kept in ``result.spent.stop``
    with what was done before it, for the caller to say and then raise.

    A stored reply with no valid Yes/No is kept and not asked again, unless ``retry_unanswered``: then it is
    asked again, and replaced by the new reply once one comes (a failed request leaves it as it was)."""
    from cfkit.backends import Generation, ProbeRequest, RequestMeta, as_backend
    from cfkit.images import image_data
    from cfkit.parse import parse_answer

    questions = load_audit_questions(ws)
    backend = as_backend(backend)  # a backend built by hand gets the base class's defaults
    capabilities = backend.capabilities
    if capabilities is not None and not capabilities.images:
        raise UsageError(f"judge {judge} cannot see images; pre-label with a vision-language model.")
    result = PrelabelResult(audit.id, judge, questions.version, spent=Spent(priced=bool(backend.priced)))
    have = {(p.item_id, p.criterion): p.value for p in prelabels.prelabels(store, audit.id, judge=judge)
            if p.prompt_version == questions.version}
    todo = []
    for item in audit.items:
        shown = blind(item)
        values = {"question": shown.question, "gold": f"{shown.gold} ({shown.option_text(shown.gold)})",
                  "options": "; ".join(f"{o}. {t}" for o, t in shown.options),
                  "rationale": shown.rationale or "(none given)", "response": shown.response}
        intro = _fill(questions.intro, values)
        images = None  # read once for the item, and only when one of its criteria is asked
        for criterion in CRITERIA:
            if (item.id, criterion) in have and not (retry_unanswered and have[item.id, criterion] is None):
                result.stored += 1
                result.stored_invalid += have[item.id, criterion] is None
                continue
            result.asked_again += (item.id, criterion) in have
            if images is None:
                images = tuple(image_data(ws.image_root / path) for path, _ in shown.images)
            request = ProbeRequest(system=questions.system, user=f"{intro}\n\n{questions.criteria[criterion]}",
                                   images=images, option_ids=("A", "B"), schema=None,
                                   generation=Generation(temperature=0.0, max_tokens=max_tokens),
                                   meta=RequestMeta(suite="prelabel", case_id=shown.case_id, pair_id="",
                                                    condition=criterion))
            todo.append(((item.id, criterion), request))

    def keep(job: tuple[str, str], request, reply) -> None:
        parsed = parse_answer(reply.raw, YES_NO, reasoning=reply.reasoning)
        value = None if parsed.answer is None else parsed.answer == "A"
        result.invalid += value is None
        prelabels.save(store, Prelabel(audit.id, job[0], judge, questions.version, job[1], value,
                                       parsed.rule or parsed.error, request.user, reply.raw, reply.server_model, "",
                                       **reply_cost(reply, result.spent.priced)))
        result.asked += 1

    def unread(job: tuple[str, str], request, reply, abandoned: int) -> None:  # paid for, no label: its cost kept
        prelabels.save_unread(store, Prelabel(audit.id, job[0], judge, questions.version, job[1], None, None,
                                              request.user, reply and reply.raw, reply and reply.server_model, "",
                                              **unread_cost(reply, abandoned, result.spent.priced)))

    result.spent.stop = ask_in_turn(backend, todo, keep,
                                    lambda job, exc: result.failed.append(f"{job[0]} {job[1]}: {exc}"),
                                    result.spent.came, result.spent.gave_up, unread, result.spent.not_asked)
    return result


@dataclass(frozen=True)
class JudgeAgreement:
    """The judge against one annotator (``Annotator N``, never by name) on one criterion, over ``n`` of the audit's
    ``items``: the rest are ``left_out``, counted by reason (:data:`cfkit.audit.judge_labels.LEFT_OUT`)."""

    annotator: int
    criterion: str
    result: stats.Agreement | None  # None when no item has both labels
    items: int
    left_out: dict[str, int]
    mixed: str | None = None  # the judge's labels were answered by more than one model (JudgeLabels.mixed)

    @property
    def n(self) -> int:
        return self.items - sum(self.left_out.values())


def judge_agreement(ws: Workspace, store: Store, audit: Audit, judge: str, *, n_resamples: int = stats.N_RESAMPLES,
                    seed: int | None = stats.SEED) -> list[JudgeAgreement]:
    """κ, AC1 and raw agreement of the judge with each person, per criterion, over the items both labelled; every
    other item of the audit is counted in ``left_out`` under the first reason that holds."""
    mine = judge_labels(ws, store, audit.id, judge)
    rows = []
    for person in sorted(audit_labels.annotators(store, audit.id), key=lambda a: a.number):
        theirs = audit_labels.labels_by(store, audit.id, person.name)
        for criterion in CRITERIA:
            both, left_out = [], dict.fromkeys(LEFT_OUT, 0)
            for item in sorted(audit.items, key=lambda i: i.id):
                theirs_value = getattr(theirs[item.id].judgement, criterion) if item.id in theirs else None
                why = mine.missing(item.id, criterion) or (None if theirs_value is not None else "no_person_label")
                if why is not None:
                    left_out[why] += 1
                else:
                    both.append((theirs_value, mine.labels[item.id][criterion]))
            result = None
            if both:
                resamples = stats.Resamples(len(both), n_resamples=n_resamples, seed=seed)
                result = stats.agreement([p for p, _ in both], [j for _, j in both], resamples=resamples,
                                         raters=f"the judge and Annotator {person.number} both")
            rows.append(JudgeAgreement(person.number, criterion, result, len(audit.items), left_out,
                                       mine.mixed(judge)))
    return rows

