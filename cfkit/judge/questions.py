"""The screening questions: what is asked about which picture, and the answer a good edit gets."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from cfkit.errors import BackendError, TemplateError
from cfkit.plural import plural
from cfkit.prompts import JudgeTemplates, load_judge_templates  # noqa: F401  (re-exported for the judges)
from cfkit.workspace import Workspace

QUESTION_FILE = "judge-screen.yaml"
SYSTEM_FILE = "judge-system.txt"
IMAGES = ("original", "edit")
REGIONS = ("whole", "mask")
ANSWERS = ("Yes", "No")
#: The token limit of a judge's reply by default: room for "Yes" or "No" and a little more.
MAX_TOKENS = 16


@dataclass(frozen=True)
class Question:
    id: str
    image: str  # original | edit
    region: str  # whole | mask
    ask: str  # with {cue} and {replacement}
    expected: str  # Yes | No

    def text(self, cue: str, replacement: str) -> str:
        return self.ask.replace("{cue}", cue.strip().rstrip(".")).replace("{replacement}", replacement.strip().rstrip("."))


@dataclass(frozen=True)
class QuestionSet:
    system: str
    questions: tuple[Question, ...]
    version: str  # the digest of the system text and the question file: part of every stored answer's identity


Job = TypeVar("Job")


def ask_in_turn(backend, todo: Sequence[tuple[Job, Any]], keep: Callable[[Job, Any, Any], None],
                failed: Callable[[Job, Exception], None], came: Callable[[Any], None] | None = None,
                gave_up: Callable[[int], None] | None = None,
                unread: Callable[[Job, Any, Any, int], None] | None = None) -> None:
    """Ask ``backend`` each ``(job, request)`` of ``todo`` in turn (awaiting an async backend, closed at the end):
    ``keep(job, request, reply)`` for each whole reply, ``failed(job, error)`` for each request the transport lost
    and each reply cut off at the token limit; ``came(reply)`` for every reply, a cut-off one too (it was paid for);
    ``gave_up(attempts)`` for the attempts of a request the transport lost that were given up after they were sent
    (:attr:`cfkit.errors.TransportError.abandoned`: a provider may bill them; a reply's own are in the reply);
    ``unread(job, request, reply, attempts)`` for each reply cut off at the token limit (``attempts`` 0: its own are
    in it) and each lost request with such attempts (``reply`` None), for the caller to keep what they cost.

    A cut-off reply is no answer: "Yes, the response names the" may have gone on "… but not the cue, so No", and
    a reasoning model can spend the whole limit before it writes a word. It is never read, so never stored; the
    next run asks it again (with a larger ``--max-tokens`` if the limit was the cause)."""
    from cfkit.backends import TransportError, is_async

    def take(job: Job, request, reply) -> None:
        if came is not None:
            came(reply)
        if reply.truncated:
            if unread is not None:
                unread(job, request, reply, 0)
            limit = request.generation.max_tokens
            failed(job, BackendError(f"the reply was cut off at the token limit ({plural(limit, 'token')}), so it was not "
                                     f"read; raise --max-tokens (now {limit}) and run again"))
        else:
            keep(job, request, reply)

    def lost(job: Job, request, exc: TransportError) -> None:
        if exc.abandoned and gave_up is not None:
            gave_up(exc.abandoned)
        if exc.abandoned and unread is not None:
            unread(job, request, None, exc.abandoned)
        failed(job, exc)

    if not is_async(backend):
        for job, request in todo:
            try:
                take(job, request, backend.answer(request))
            except TransportError as exc:
                lost(job, request, exc)
        return
    import asyncio

    async def ask_all() -> None:
        try:
            for job, request in todo:
                try:
                    take(job, request, await backend.answer(request))
                except TransportError as exc:
                    lost(job, request, exc)
        finally:
            await backend.aclose()

    asyncio.run(ask_all())


def load_questions(ws: Workspace) -> QuestionSet:
    """The workspace's questions (``probes/templates/judge-screen.yaml``) or the packaged ones, checked."""
    read = load_judge_templates(ws, SYSTEM_FILE, QUESTION_FILE)
    source, document = read.source, read.document
    items = document.get("questions") if isinstance(document, dict) else None
    if not isinstance(items, list) or not items:
        raise TemplateError(f"{source}: no 'questions' list; see the packaged {QUESTION_FILE} for the layout.")
    questions, seen = [], set()
    for number, item in enumerate(items, 1):
        where = f"{source}: question {number}"
        if not isinstance(item, dict):
            raise TemplateError(f"{where} is not a mapping of id, image, region, ask and expected.")
        missing = [k for k in ("id", "image", "region", "ask", "expected") if not isinstance(item.get(k), str)]
        if missing:
            raise TemplateError(f"{where} lacks {', '.join(missing)} (each a string).")
        for key, allowed in (("image", IMAGES), ("region", REGIONS), ("expected", ANSWERS)):
            if item[key] not in allowed:
                raise TemplateError(f"{where}: {key} {item[key]!r} is not one of {', '.join(allowed)}.")
        if item["id"] in seen:
            raise TemplateError(f"{where}: id {item['id']!r} is used twice; give each question its own id.")
        if "{cue}" not in item["ask"] and "{replacement}" not in item["ask"] and item["region"] == "mask":
            raise TemplateError(f"{where} asks about the mask region without naming {{cue}} or {{replacement}}.")
        seen.add(item["id"])
        questions.append(Question(item["id"], item["image"], item["region"], item["ask"], item["expected"]))
    return QuestionSet(read.system, tuple(questions), read.version)
