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
                unread: Callable[[Job, Any, Any, int], None] | None = None,
                untried: Callable[[Job], None] | None = None) -> BaseException | None:
    """Ask ``backend`` each ``(job, request)`` of ``todo`` in turn (awaiting an async backend, closed at the end):
    ``keep(job, request, reply)`` for each whole reply, ``failed(job, error)`` for each request the transport lost
    and each reply cut off at the token limit; ``came(reply)`` for every reply, a cut-off one too (it was paid for);
    ``gave_up(attempts)`` for the attempts of a request the transport lost that were given up after they were sent
    (:attr:`cfkit.errors.TransportError.abandoned`: a provider may bill them; a reply's own are in the reply);
    ``unread(job, request, reply, attempts)`` for each reply cut off at the token limit (``attempts`` 0: its own are
    in it) and each lost request with such attempts (``reply`` None), for the caller to keep what they cost.

    A cut-off reply is no answer: "Yes, the response names the" may have gone on "… but not the cue, so No", and
    a reasoning model can spend the whole limit before it writes a word. It is never read, so never stored; the
    next run asks it again (with a larger ``--max-tokens`` if the limit was the cause).

    What stops the asking is returned, not raised, once what was done is told: a server that gives no answer to the
    connection tried before the first request (the backend's ``check_endpoint``, as ``probe run`` tries it), a backend error that is no
    transport failure (a key refused, no such model), a server that keeps failing
    (:class:`cfkit.probe.stopping.StopPolicy`, as it stops a probe run: a :class:`~cfkit.errors.BackendError`),
    or Ctrl-C (SIGTERM too: a :class:`KeyboardInterrupt`). The attempts of the request it ended that were given up
    once sent go to ``gave_up`` and ``unread`` as a lost request's; so do those of the request Ctrl-C or SIGTERM
    stopped, with the attempt it found out (sent: a provider may bill it; none while it waited to retry). ``untried(job)`` is told of each job not asked.
    The caller says what was done and spent, then raises it."""
    from cfkit.backends import TransportError, is_async
    from cfkit.backends.attempts import billable
    from cfkit.errors import sent_before_stop
    from cfkit.option_words import JUDGE
    from cfkit.probe.runner import stopped_by_sigterm_as_by_ctrl_c
    from cfkit.probe.stopping import StopPolicy

    # The judges and captions draft set the server with -o base_url=URL and ask one request at a time (no -j).
    policy = StopPolicy(backend.endpoint or backend.model, url_flag=JUDGE.of("base_url"), lower=None)
    asked = 0  # the jobs of todo done with, in order
    sending = False  # todo[asked] is sent and its reply not come: what Ctrl-C cancels then may be billed
    cut_off = (0, True)  # what the request Ctrl-C or SIGTERM stopped had sent (cfkit.backends.attempts)

    def take(job: Job, request, reply) -> None:
        policy.answered()
        if came is not None:
            came(reply)
        if reply.truncated:
            if unread is not None:
                unread(job, request, reply, 0)
            limit = request.generation.max_tokens
            failed(job, BackendError(f"the reply was cut off at the token limit ({plural(limit, 'token')}), so it was not "
                                     f"read; raise {JUDGE.of('max_tokens')} (now {limit}) and run again"))
        else:
            keep(job, request, reply)

    def lost(job: Job, request, exc: BackendError) -> None:
        if exc.abandoned and gave_up is not None:
            gave_up(exc.abandoned)
        if exc.abandoned and unread is not None:
            unread(job, request, None, exc.abandoned)
        if isinstance(exc, TransportError):
            failed(job, exc)
            policy.failed(str(exc))

    def stopped(exc: BaseException) -> BaseException:
        if isinstance(exc, BackendError) and not isinstance(exc, TransportError) and asked < len(todo):
            lost(*todo[asked], exc)  # the request it ended: its attempts sent before are kept, it is not asked
        elif isinstance(exc, KeyboardInterrupt) and sending and asked < len(todo) and billable(cut_off):
            cancelled = BackendError("cancelled in flight")
            # its attempts given up once sent, and the one out (none while it waited to retry): abandoned attempts,
            cancelled.abandoned = billable(cut_off)  # as a timeout's are
            lost(*todo[asked], cancelled)
        if untried is not None:
            for job, _ in todo[asked:]:
                untried(job)
        return exc

    def settle(job: Job, request, reply) -> BackendError | None:
        """The reply (or the transport failure) of the request in flight told; what stops the asking now, if any."""
        nonlocal asked, sending
        sending = False
        if isinstance(reply, TransportError):
            lost(job, request, reply)
        else:
            take(job, request, reply)
        asked += 1
        if policy.reason is None:
            return None
        return BackendError(f"the judge stopped asking: {policy.reason}; run the command again to ask the rest.")

    with stopped_by_sigterm_as_by_ctrl_c():
        if not is_async(backend):
            try:
                for job, request in todo:
                    sending = True
                    try:
                        reply = backend.answer(request)
                    except TransportError as exc:
                        reply = exc
                    except KeyboardInterrupt as interrupt:
                        cut_off = sent_before_stop(interrupt)
                        raise
                    if (stop := settle(job, request, reply)) is not None:
                        return stopped(stop)
            except (BackendError, KeyboardInterrupt) as exc:
                return stopped(exc)
            return None
        import asyncio

        async def ask_all() -> BaseException | None:
            nonlocal sending, cut_off
            try:
                # The server is tried once before the first request, as probe run tries it: nothing listening, or
                # a host not known, stops the asking before anything is sent (every job not asked).
                problem = await backend.check_endpoint() if todo else None
                if problem is not None:
                    return BackendError(f"{problem}; nothing was sent.")
                for job, request in todo:
                    sending = True
                    try:
                        reply = await backend.answer(request)
                    except TransportError as exc:
                        reply = exc
                    except (asyncio.CancelledError, KeyboardInterrupt) as interrupt:  # asyncio.run raises Ctrl-C
                        cut_off = sent_before_stop(interrupt)  # once it cancelled it: what it had sent is known only here
                        raise
                    if (stop := settle(job, request, reply)) is not None:
                        return stop
            except BackendError as exc:
                return exc
            finally:
                await backend.aclose()
            return None

        try:
            stop = asyncio.run(ask_all())
        except KeyboardInterrupt as exc:  # Ctrl-C cancels the request in flight; asyncio.run raises it then
            return stopped(exc)
        return None if stop is None else stopped(stop)


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
