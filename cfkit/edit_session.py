"""What the edits of one ``cfkit edit`` share, and what they came to when it is stopped part-way.

:class:`EditSession` holds the cases, the LPIPS scorer and one store
connection, each taken from the workspace once, and asks a remote engine's
server whether it answers before the engine's call (:meth:`EditSession.unanswered`).
:class:`EditSpend` counts the calls this invocation made to an engine a service
bills (``Editor.paid``: the openai engine), the images they brought, and what a
stop cut off: a call in flight and the attempts it (or a call stopped between
its attempts) had given up once sent, all of which the service may bill.
:func:`held_stop` keeps Ctrl-C and SIGTERM from cutting off the saving of images already
received and paid for: the stop is raised once they are written and recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from cfkit.cases import CaseSet
from cfkit.edit_files import lpips_scorer
from cfkit.editors import EngineServer
from cfkit.errors import CaseError, CfkitError
from cfkit.plural import agree, plural
from cfkit.preserve import LpipsScorer
from cfkit.specs import try_load_cases
from cfkit.store import Store, reviews
from cfkit.workspace import Workspace

#: The LPIPS scorer (None: unavailable) with the note stored with each check, or why the check cannot run.
Scorer = tuple[LpipsScorer | None, str] | CfkitError


@dataclass
class EditSpend:
    """The calls of one invocation to engines a service bills, and the edits it saved (paid engines or not)."""

    engines: list[str] = field(default_factory=list)  # the paid engines called, in order
    answered: int = 0  # calls that brought images
    images: int = 0
    tokens: int = 0  # what the answered calls' usage reported
    untold: int = 0  # answered calls that reported no usage
    largest: int = 0  # the most tokens one answered call reported: what a call in flight may cost at most
    unanswered: int = 0  # calls that ended with an error after they were sent (refused, failed, server gone)
    in_flight: int = 0  # calls Ctrl-C or SIGTERM found sent and unanswered: a service may bill them
    between: int = 0  # calls Ctrl-C or SIGTERM stopped between their attempts (nothing out; see ``abandoned``)
    abandoned: int = 0  # attempts of calls given up after they were sent (a timeout once sent): may be billed too
    saved: list[tuple[str, int]] = field(default_factory=list)  # (spec id, edit id) of every edit written
    checked: set[int] = field(default_factory=set)  # the saved edits whose checks are stored

    def sent(self, engine: str) -> None:
        if engine not in self.engines:
            self.engines.append(engine)

    def stopped(self, engine: str, sent: tuple[int, bool] | None) -> None:
        """A call to paid ``engine`` that Ctrl-C or SIGTERM cut off: ``sent`` is what it had sent, as the engine
        said (:func:`cfkit.errors.sent_before_stop`: attempts given up once sent, whether one was out), None
        when it did not say: one call in flight, the side a bill is safe on."""
        abandoned, out = (0, True) if sent is None else sent
        if not (abandoned or out):
            return  # nothing had gone out yet
        self.sent(engine)
        self.abandoned += abandoned
        if out:
            self.in_flight += 1
        else:
            self.between += 1

    def came(self, images: int, usage: dict[str, Any] | None) -> None:
        self.answered += 1
        self.images += images
        total = (usage or {}).get("total_tokens")
        if isinstance(total, int) and not isinstance(total, bool) and total >= 0:
            self.tokens += total
            self.largest = max(self.largest, total)
        else:
            self.untold += 1

    @property
    def calls(self) -> int:
        return self.answered + self.unanswered + self.in_flight + self.between

    def line(self) -> str | None:
        """``spent: 2 calls to openai (1 answered: 2 images, 4,050 tokens; 1 in flight at the stop may be billed
        on top: up to ~4,050 tokens)``; None when no paid engine was called."""
        if not self.calls:
            return None
        parts = [f"{self.answered} answered" + (f": {plural(self.images, 'image')}" if self.answered else "")]
        if self.answered:
            told = f"{plural(self.tokens, 'token', spec=',')} reported"
            parts[0] += f", {told}" + (f" ({plural(self.untold, 'answer')} without usage)" if self.untold else "")
        if self.unanswered:
            parts.append(f"{self.unanswered} ended with an error")
        if self.between:
            parts.append(f"{self.between} stopped between its attempts")
        if self.abandoned:
            bound = (f"up to ~{plural(self.abandoned * self.largest, 'token', spec=',')}" if self.largest
                     else "no answered call to estimate them by")
            parts.append(f"{plural(self.abandoned, 'abandoned attempt')} (given up once sent) may be billed on top: "
                         f"{bound}")
        if self.in_flight:
            bound = f"up to ~{plural(self.largest, 'token', spec=',')}" if self.largest else "no answered call to estimate it by"
            parts.append(f"{self.in_flight} in flight at the stop may be billed on top: {bound}")
        return (f"spent: {plural(self.calls, 'call')} to {', '.join(self.engines)} ({'; '.join(parts)}); "
                f"no price in dollars is known for {agree(self.calls, 'them')}")

    def as_dict(self) -> dict[str, Any]:
        """What :meth:`line` says, for ``--json``: ``abandoned_tokens_up_to`` is None when no answered call
        reported its tokens to estimate the abandoned attempts (and a call in flight) by."""
        may = self.abandoned + self.in_flight
        return {"engines": list(self.engines), "calls": self.calls, "answered": self.answered, "images": self.images,
                "tokens": self.tokens, "answers_without_usage": self.untold, "ended_with_error": self.unanswered,
                "abandoned_attempts": self.abandoned, "in_flight": self.in_flight,
                "stopped_between_attempts": self.between,
                "may_be_billed_tokens_up_to": (may * self.largest if self.largest else None) if may else 0}

    def unchecked(self) -> list[tuple[str, int]]:
        return [(spec, edit_id) for spec, edit_id in self.saved if edit_id not in self.checked]


class EditSession:
    """What the edits of one command share, each taken from the workspace once: the cases, the LPIPS scorer
    and one store connection (opened when first needed: a dry run, or an edit refused before anything is
    recorded, creates no store); and :attr:`spend`, what its calls came to. ``cfkit edit CF01 … CF36`` makes
    all its edits in one session."""
    # The workspace is kept only to take these three from it when first needed.

    def __init__(self, ws: Workspace, spend: EditSpend | None = None):
        self._ws = ws
        self._path = ws.db_path
        self._store: Store | None = None
        self._cases: CaseSet | None = None
        self._scorer: Scorer | None = None
        self._unanswered: dict[str, str] = {}  # server url -> why it gave no answer
        self.spend = spend if spend is not None else EditSpend()

    def accepted(self, spec_id: str) -> int | None:
        """The edit of ``spec_id`` a person accepted, if any (None without a store)."""
        store = self.existing()
        return None if store is None else reviews.accepted_edit_id(store, spec_id)

    def cases(self) -> CaseSet:
        if self._cases is None:
            cases = try_load_cases(self._ws)
            if cases is None:
                raise CaseError(f"cases file {self._ws.cases_path} is missing; set [dataset] cases in "
                                f"{self._ws.config_path}.")
            self._cases = cases
        return self._cases

    def scorer(self) -> Scorer:
        """The LPIPS scorer and the note stored with each check, or the error that keeps the check from
        running (the edit is made and saved all the same)."""
        if self._scorer is None:
            try:
                self._scorer = lpips_scorer(self._ws)
            except CfkitError as exc:
                self._scorer = exc
        return self._scorer

    def unanswered(self, server: EngineServer | None) -> str | None:
        """Why an engine's ``server`` gives no answer at all (:func:`cfkit.backends.no_answer.connect_problem`),
        asked before each call to it, or None. One that gave none is not asked again in this session: the
        next specs of an ``auto`` batch fall back at once."""
        if server is None:
            return None
        if server.url not in self._unanswered:
            from cfkit.backends.no_answer import connect_problem

            problem = connect_problem(server.url, server.shown, timeout=server.timeout, url=server.fix,
                                      start=server.start)
            if problem is None:
                return None
            self._unanswered[server.url] = problem
        return self._unanswered[server.url]

    def existing(self) -> Store | None:
        """The store when it is already there, else None."""
        return self.store if self._store is not None or self._path.is_file() else None

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store(self._path)
        return self._store

    def __enter__(self) -> "EditSession":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


@contextmanager
def held_stop() -> Iterator[None]:
    """While inside, Ctrl-C and SIGTERM wait: what is inside (writing images already paid for) ends first, then
    the stop is raised (:class:`KeyboardInterrupt`; SIGTERM's with exit status 143). Outside the main thread,
    where no signal handler can be set, nothing waits."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from cfkit.probe.runner import Terminated

    held: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        held.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if held:
        raise Terminated() if held[0] == signal.SIGTERM else KeyboardInterrupt()
