"""``cfkit edits screen``: a judge model answers the screening questions about each edit; doubts flag it.

Steps for each spec: 1. the edit a view shows (the selected one, else the
newest successful one) and its pictures; 2. the questions not yet answered by
this judge and prompt version; 3. ask each (the original or the edit, whole or
cropped to the mask region) and read the reply with cfkit's parser as a
Yes/No question; 4. store every answer as it comes. An edit is *doubted* when
any answer differs from the one a good edit gets; a question whose request
failed is asked again on the next run.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from cfkit.cases import Option
from cfkit.errors import CfkitError, UsageError
from cfkit.judge.costs import Spent, reply_cost, unread_cost
from cfkit.judge.questions import MAX_TOKENS, Question, QuestionSet, ask_in_turn, load_questions
from cfkit.store import Store, edits, screens
from cfkit.store.screens import ScreenAnswer
from cfkit.workspace import Workspace

#: The options a screening question is read against (a reply of "Yes" is option A).
YES_NO = (Option(id="A", text="Yes"), Option(id="B", text="No"))
_ANSWER = {"A": "Yes", "B": "No"}
#: Margin round the mask's bounding box in a region crop, as a share of the box's larger side; and the least side.
CROP_MARGIN = 0.15
CROP_MIN = 64


@dataclass
class EditScreen:
    """What one judge said about one edit (the answers stored so far) and what could not be asked."""

    spec_id: str
    edit_id: int | None
    judge: str
    prompt_version: str
    answers: list[ScreenAnswer] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # "question: why"
    problem: str | None = None  # why the edit could not be screened at all

    @property
    def doubts(self) -> list[ScreenAnswer]:
        return [a for a in self.answers if a.doubts]

    @property
    def state(self) -> str:
        """``doubted``, ``clear`` (every question answered as a good edit), ``incomplete`` or ``not screened``."""
        if self.problem is not None:
            return "not screened"
        if self.doubts:
            return "doubted"
        return "incomplete" if self.failed else "clear"

    def to_dict(self) -> dict:
        return {"spec": self.spec_id, "edit": self.edit_id, "judge": self.judge, "prompt_version": self.prompt_version,
                "state": self.state, "doubts": [a.question for a in self.doubts], "failed": self.failed,
                "problem": self.problem, "answers": [a.to_dict() for a in self.answers]}


def doubts_said(answers: Sequence[ScreenAnswer]) -> str | None:
    """``JUDGE doubts this edit: QUESTION (ANSWER), …`` for each judge whose stored answers doubt the edit; None
    when none does. Shown beside the edit (review, contact sheet) as a flag for a person, never a verdict."""
    doubts = [a for a in answers if a.doubts]
    return "; ".join(
        f"{judge} doubts this edit: " + ", ".join(f"{a.question} ({a.answer or 'no valid answer'})"
                                                  for a in doubts if a.judge == judge)
        for judge in sorted({a.judge for a in doubts})) or None


def _png(array: np.ndarray):
    from PIL import Image

    from cfkit.images import ImageData

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return ImageData(buffer.getvalue(), "image/png")


def mask_crop(image: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``image`` cropped to the bounding box of ``mask`` with a margin (the whole image when the mask is empty)."""
    ys, xs = np.nonzero(mask)
    if len(ys) == 0:
        return image
    height, width = mask.shape[:2]
    top, bottom, left, right = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    pad = int(CROP_MARGIN * max(bottom - top, right - left))
    grow_y = max(pad, (CROP_MIN - (bottom - top)) // 2)
    grow_x = max(pad, (CROP_MIN - (right - left)) // 2)
    return image[max(0, top - grow_y):min(height, bottom + grow_y), max(0, left - grow_x):min(width, right + grow_x)]


def screen_request(questions: QuestionSet, question: Question, spec, picture: np.ndarray, case_id: str,
                   max_tokens: int = MAX_TOKENS):
    """The request asking ``question`` about ``picture`` (already cropped where the question says so)."""
    from cfkit.backends import Generation, ProbeRequest, RequestMeta

    return ProbeRequest(system=questions.system, user=question.text(spec.cue, spec.replacement),
                        images=(_png(picture),), option_ids=("A", "B"), schema=None,
                        generation=Generation(temperature=0.0, max_tokens=max_tokens),
                        meta=RequestMeta(suite="screen", case_id=case_id, pair_id=spec.id, condition=question.id))


def screen_edits(ws: Workspace, store: Store, backend, judge: str, spec_ids: Sequence[str] = (), *,
                 max_tokens: int = MAX_TOKENS, spent: Spent | None = None) -> list[EditScreen]:
    """Screen the shown edit of each spec (every spec when none are given) with ``backend``; see the module. Each
    answer keeps what its reply cost; ``spent`` is told of every reply of this call, a cut-off one too. What stops
    the asking before its end (a key refused, Ctrl-C) is not raised but kept in ``spent.stop``, each question it left
    unasked a failure of its edit, for the caller to say what was done and spent and then raise it."""
    from cfkit.backends import as_backend
    from cfkit.parse import parse_answer
    from cfkit.edit_files import load_edit_images
    from cfkit.specs import load_spec, spec_files, try_load_cases

    questions = load_questions(ws)
    backend = as_backend(backend)  # a backend built by hand gets the base class's defaults
    capabilities = backend.capabilities
    if capabilities is not None and not capabilities.images:
        raise UsageError(f"judge {judge} cannot see images; screen with a vision-language model.")
    spent = spent if spent is not None else Spent()
    spent.priced = bool(backend.priced)
    for spec_id in spec_ids:
        load_spec(ws, spec_id)  # a spec id that names no spec (a typo) is one line before anything is asked
    ids = list(spec_ids) or [p.stem for p in spec_files(ws)]
    if not ids:
        raise UsageError(f"no spec files in {ws.interventions_dir}; nothing to screen.")

    try:
        cases = try_load_cases(ws)  # read once for every edit
    except CfkitError:
        cases = None  # each edit then says what is wrong with the cases file, as its own problem
    results: list[EditScreen] = []
    todo: list[tuple[tuple[EditScreen, Question], object]] = []
    for spec_id in ids:
        # 1. the edit and its pictures
        record = edits.shown(store, spec_id)
        result = EditScreen(spec_id, None if record is None else record.id, judge, questions.version)
        results.append(result)
        if record is None:
            result.problem = f"no edit yet; make one with 'cfkit edit {spec_id}'"
            continue
        try:
            images = load_edit_images(ws, store, record.id, cases=cases)
        except CfkitError as exc:
            result.problem = str(exc)
            continue
        edited = images.outputs["composite"] if "composite" in images.outputs else next(iter(images.outputs.values()))
        # 2. what this judge has not answered yet
        stored = {a.question: a for a in screens.answers(store, [record.id], judge=judge,
                                                         prompt_version=questions.version)}
        for question in questions.questions:
            if question.id in stored:
                result.answers.append(stored[question.id])
                continue
            picture = images.original if question.image == "original" else edited
            if question.region == "mask":
                picture = mask_crop(picture, images.mask)
            todo.append(((result, question), screen_request(questions, question, images.spec, picture,
                                                            images.spec.case, max_tokens)))

    # 3. and 4. ask, read, store
    def keep(job: tuple[EditScreen, Question], request, reply) -> None:
        result, question = job
        parsed = parse_answer(reply.raw, YES_NO, reasoning=reply.reasoning)
        answer = ScreenAnswer(result.edit_id, result.spec_id, judge, questions.version, question.id,
                              question.expected, _ANSWER.get(parsed.answer) if parsed.answer else None,
                              parsed.rule or parsed.error, request.user, reply.raw, reply.server_model, "",
                              **reply_cost(reply, spent.priced))
        result.answers.append(screens.save(store, answer))  # as stored: a pending row's cost added to it

    def unread(job: tuple[EditScreen, Question], request, reply, abandoned: int) -> None:  # paid for, no answer
        result, question = job
        screens.save_unread(store, ScreenAnswer(result.edit_id, result.spec_id, judge, questions.version, question.id,
                                                question.expected, None, None, request.user, reply and reply.raw,
                                                reply and reply.server_model, "",
                                                **unread_cost(reply, abandoned, spent.priced)))

    def untried(job: tuple[EditScreen, Question]) -> None:
        spent.not_asked()
        job[0].failed.append(f"{job[1].id}: not asked (the judge stopped)")

    spent.stop = ask_in_turn(backend, todo, keep, lambda job, exc: job[0].failed.append(f"{job[1].id}: {exc}"),
                             spent.came, spent.gave_up, unread, untried)
    order = {q.id: i for i, q in enumerate(questions.questions)}
    for result in results:
        result.answers.sort(key=lambda a: order.get(a.question, len(order)))
    return results


def doubted_edits(store: Store) -> dict[int, list[ScreenAnswer]]:
    """Every edit some judge doubts, with the doubting answers (any judge, any prompt version)."""
    found: dict[int, list[ScreenAnswer]] = {}
    for answer in screens.answers(store):
        if answer.doubts:
            found.setdefault(answer.edit_id, []).append(answer)
    return found
