"""Drafting Neutral captions with a vision-language model.

Only the images go to the model: no question, options, title or creator, so
the draft cannot borrow a name or a verdict from them. A draft is saved
unreviewed and linted; the evidence text is left for the reviewer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Literal

from cfkit.captions import Caption, caption_path, dump_caption, parse_caption
from cfkit.cases import Case
from cfkit.errors import CaptionError, UsageError
from cfkit.files import read_text
from cfkit.plural import plural
from cfkit.judge.costs import Spent
from cfkit.lint import Finding, lint_caption, verdict_terms
from cfkit.option_words import JUDGE
from cfkit.prompts import Templates, fill_slots, load_templates
from cfkit.subsets import select_cases, workspace_cases
from cfkit.workspace import Workspace

DRAFT_TEMPLATES: tuple[str, ...] = ("draft-system.txt", "draft-user.txt")
#: The token limit of a draft's reply.
DRAFT_MAX_TOKENS = 400
_IMAGES_PHRASE = {1: "the attached image", 2: "the two attached images, the first image and then the second image,"}


@dataclass(frozen=True)
class DraftResult:
    """What happened to one case: ``written``, ``kept`` (a caption is already there) or ``failed``."""

    case: str
    path: Path
    status: Literal["written", "kept", "failed"]
    message: str = ""
    findings: tuple[Finding, ...] = ()


def draft_request(ws: Workspace, case: Case, templates: Templates | None = None, max_tokens: int = DRAFT_MAX_TOKENS):
    """The :class:`~cfkit.backends.ProbeRequest` asking for a neutral description of ``case``'s image(s).

    Only the images go to the model: no question, options, title or creator,
    so the draft cannot borrow a name or a verdict from them.
    """
    from cfkit.backends import Generation, ProbeRequest, RequestMeta
    from cfkit.images import image_data

    templates = templates or load_templates(ws, DRAFT_TEMPLATES)
    images = tuple(image_data(ws.image_root / name) for name in case.images)
    user = fill_slots(templates["draft-user.txt"], {"images": _IMAGES_PHRASE[len(images)]})
    return ProbeRequest(
        system=templates["draft-system.txt"].strip(), user=user.strip(), images=images, option_ids=(),
        schema=None, generation=Generation(temperature=0.0, max_tokens=max_tokens),
        meta=RequestMeta(suite="captions", case_id=case.id, pair_id="", condition="draft"),
    )


def clean_draft(raw: str) -> str:
    """The description in a reply: code fences, a leading label and wrapping quotes removed, spaces tidied."""
    text = re.sub(r"^```[a-zA-Z]*\s*|\s*```$", "", raw.strip()).strip()
    for _ in range(2):  # a label inside quotes, or quotes after a label
        text = re.sub(r"^(description|caption)\s*:\s*", "", text, flags=re.IGNORECASE)
        if len(text) >= 2 and (text[0], text[-1]) in (('"', '"'), ("'", "'"), ("“", "”")):
            text = text[1:-1].strip()
    return " ".join(text.split())


def _kept_message(existing: Caption | None) -> str:
    if existing is None:
        return "kept the existing file (it does not parse; fix or delete it to draft anew)."
    if not existing.drafted:
        return "kept the human caption."
    if existing.reviewed:
        return f"kept the reviewed draft by {existing.author}."
    return f"kept the unreviewed draft by {existing.author}; pass --redraft to replace it."


def draft_captions(ws: Workspace, backend, case_ids: Iterable[str] = (), *, subset: str | Path | None = None,
                   redraft: bool = False, all_cases: bool = False, spent: Spent | None = None,
                   max_tokens: int = DRAFT_MAX_TOKENS) -> list[DraftResult]:
    """Ask ``backend`` for a neutral description of each selected case and save it as an unreviewed draft.

    A caption already on disk is kept, except an unreviewed model draft when
    ``redraft`` is set; a human caption is never replaced. Each draft is linted
    and its findings returned; the evidence text is left for the reviewer, who
    knows the decisive cue. A request that fails is reported and the others go on.

    ``spent`` sums what this invocation's replies cost, and the attempts sent and given up (a timeout, a request
    in flight at Ctrl-C) that a provider may bill. What stops the drafting before its end (a key refused, a quota
    spent, a server that keeps failing, Ctrl-C or SIGTERM) is set as ``spent.stop`` rather than raised, each
    draft written before it kept on disk and each case not asked reported as such: the caller says what was
    written and spent, then raises it.
    """
    from cfkit.backends import as_backend

    backend = as_backend(backend)
    from cfkit.backends import TransportError
    from cfkit.files import write_text_atomic
    from cfkit.judge.questions import ask_in_turn

    # 1. Check the inputs.
    spent = spent if spent is not None else Spent()
    spent.priced = bool(backend.priced)
    capabilities = backend.capabilities
    if capabilities is not None and not capabilities.images:
        raise UsageError(f"backend {backend.model} cannot see images; draft with a vision-language model "
                         "(e.g. --model openai:gpt-5.5 or hf:Qwen/Qwen3-VL-8B-Instruct).")
    cases = workspace_cases(ws)
    ids = select_cases(ws, cases, case_ids, subset, all_cases=all_cases)
    templates = load_templates(ws, DRAFT_TEMPLATES)
    terms = verdict_terms(ws)

    # 2. Decide which cases to ask about.
    results: dict[str, DraftResult] = {}
    todo: list[Case] = []
    for case_id in ids:
        path = caption_path(ws, case_id)
        if path.exists():
            existing = None
            try:
                existing = parse_caption(read_text(path, "caption file", CaptionError), path)
            except CaptionError:
                pass
            if not (redraft and existing is not None and existing.drafted and not existing.reviewed):
                results[case_id] = DraftResult(case_id, path, "kept", _kept_message(existing))
                continue
        case = cases.get(case_id)
        if len(case.images) > 1 and capabilities is not None and not capabilities.multi_image:
            results[case_id] = DraftResult(case_id, path, "failed",
                                           f"not drafted: {backend.model} takes one image per request; case {case_id} has two.")
            continue
        todo.append(case)

    # 3. Ask, clean, lint, save.
    def save(case: Case, reply) -> DraftResult:
        path = caption_path(ws, case.id)
        text = clean_draft(reply.raw or "")
        if reply.refused or not text:
            why = "refused" if reply.refused else "returned an empty reply"
            return DraftResult(case.id, path, "failed", f"not drafted: {backend.model} {why}.")
        caption = Caption(neutral=text, author=backend.model, reviewed=False)
        write_text_atomic(path, dump_caption(caption), overwrite=redraft)
        findings = tuple(f for f in lint_caption(caption, case, path, verdict=terms)
                         if f.rule not in ("evidence-missing", "unreviewed-draft"))
        message = "drafted; review it, add the evidence text, then set 'reviewed: true'."
        return DraftResult(case.id, path, "written", message, findings)

    def failed(case: Case, exc: Exception) -> DraftResult:
        if not isinstance(exc, TransportError):  # a reply cut off at the token limit: never saved as a caption
            why = (f"the reply was cut off at the token limit ({plural(max_tokens, 'token')}), so it was not saved; "
                   f"raise {JUDGE.of('max_tokens')} (now {max_tokens}) and run again, or write this caption by hand.")
        else:
            why = f"the request failed: {exc}"
        return DraftResult(case.id, caption_path(ws, case.id), "failed", f"not drafted: {why}")

    def keep(case: Case, request, reply) -> None:
        results[case.id] = save(case, reply)

    def not_asked(case: Case) -> None:
        spent.not_asked(case)
        results[case.id] = DraftResult(case.id, caption_path(ws, case.id), "failed",
                                       "not drafted: not asked (the drafting stopped).")

    spent.stop = ask_in_turn(backend, [(case, draft_request(ws, case, templates, max_tokens)) for case in todo], keep,
                             lambda case, exc: results.__setitem__(case.id, failed(case, exc)), spent.came,
                             spent.gave_up, untried=not_asked)
    return [results[i] for i in ids]
