"""The interactive sessions: annotating in one's own order, and adjudicating the disagreements.

Every decision is written to the store the moment it is made (one short
transaction each), so a session can stop — or be killed — between any two
keys; annotating again resumes at the first item of one's order without a
complete label, with what was already decided of it filled in. A resolution
is saved once its cue, link and note are all given.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from collections.abc import Callable
from typing import Protocol

import numpy as np
from rich.console import Console
from rich.text import Text

from cfkit.audit.adjudication import agreed_answer, needs_resolution, resolve_item
from cfkit.audit.agreement import LabelPair
from cfkit.audit.guideline import GUIDELINE, HELP
from cfkit.audit.items import Audit, annotator_order, blind, check_annotator
from cfkit.plural import plural
from cfkit.terminal.keys import RESIZE, KeySource, follow_terminal_size, terminal_problem, too_small
from cfkit.audit.labelling import LabelState, state_of, update_label
from cfkit.audit.view import ADJUDICATE_KEYS, ANNOTATE_KEYS, AuditView, Screen
from cfkit.errors import CfkitError, ImageError, UsageError
from cfkit.images import decode_image
from cfkit.store import Store, audit_labels
from cfkit.store.audit_labels import Judgement
from cfkit.store.audits import AuditItem
from cfkit.workspace import Workspace

#: Longest side an image is kept at for drawing (a terminal cell shows far less).
THUMBNAIL = 320
_QUIT = ("q", "\x03", "\x04")


@dataclass
class SessionSummary:
    decisions: int = 0  # saves made
    finished: int = 0  # items completed (labelled, or resolved) in this session
    remaining: int = 0  # items still open when the session ended
    quit_early: bool = False


def load_images(ws: Workspace, item: AuditItem) -> tuple[np.ndarray | str, ...]:
    """The item's images as planned, shrunk for drawing; a missing or changed image becomes a message instead."""
    shown: list[np.ndarray | str] = []
    for image in item.images:
        path = ws.image_root / image.path
        try:
            data = path.read_bytes()
        except OSError:
            shown.append(f"image not found: {image.path} (expected under {ws.image_root})")
            continue
        if hashlib.sha256(data).hexdigest() != image.sha256:
            shown.append(f"image {image.path} changed since the audit was planned; restore the planned file to "
                         "judge this item")
            continue
        try:
            picture = decode_image(data, source=str(path))
        except ImageError as exc:
            shown.append(str(exc))
            continue
        picture.thumbnail((THUMBNAIL, THUMBNAIL))
        shown.append(np.asarray(picture))
    return tuple(shown)


class _Mode(Protocol):
    keys: str
    items: list[AuditItem]

    def state(self, item: AuditItem) -> LabelState: ...
    def change(self, item: AuditItem, **fields: object) -> None: ...
    def done(self, item: AuditItem) -> bool: ...
    def others(self, item: AuditItem) -> tuple[tuple[str, LabelState], ...]: ...
    def person(self) -> str: ...
    def progress(self) -> str: ...


class _Annotating:
    """One annotator's own labels, in their own order; nobody else's label is ever read."""

    keys = ANNOTATE_KEYS

    def __init__(self, store: Store, audit: Audit, name: str, summary: SessionSummary):
        self.store, self.audit, self.name, self.summary = store, audit, name, summary
        self.items = annotator_order(audit, name)
        self.own = audit_labels.labels_by(store, audit.id, name)

    def state(self, item: AuditItem) -> LabelState:
        return state_of(item, self.own.get(item.id))

    def change(self, item: AuditItem, **fields: object) -> None:
        was_done = self.done(item)
        self.own[item.id] = update_label(self.store, self.audit, item, self.name, **fields)  # type: ignore[arg-type]
        self.summary.decisions += 1
        self.summary.finished += int(self.done(item) and not was_done)

    def done(self, item: AuditItem) -> bool:
        return item.id in self.own and self.own[item.id].complete

    def others(self, item: AuditItem) -> tuple[tuple[str, LabelState], ...]:
        return ()

    def person(self) -> str:
        return f"you: {self.name}"

    def progress(self) -> str:
        return f"{sum(1 for i in self.items if self.done(i))} of {len(self.items)} labelled"


class _Adjudicating:
    """The disputed items; a draft resolution lives in memory until cue, link and note are given."""

    keys = ADJUDICATE_KEYS

    def __init__(self, store: Store, audit: Audit, name: str, summary: SessionSummary, pairs: list[LabelPair]):
        self.store, self.audit, self.name, self.summary = store, audit, name, summary
        self.pairs = {p.item.id: p for p in pairs}
        self.items = [p.item for p in pairs]
        self.drafts: dict[str, LabelState] = {}
        self.resolved: set[str] = set()

    def state(self, item: AuditItem) -> LabelState:
        pair = self.pairs[item.id]
        answer = agreed_answer(pair)
        return self.drafts.get(item.id, LabelState(Judgement(item.parser_correct if answer is None else answer,
                                                             None, None)))

    def change(self, item: AuditItem, **fields: object) -> None:
        old = self.state(item)
        judgement = Judgement(*(fields.get(k, getattr(old.judgement, k)) for k in ("answer_ok", "cue", "link")))
        note = fields.get("note", old.note)
        state = LabelState(judgement, False, note if isinstance(note, str) and note.strip() else old.note)
        self.drafts[item.id] = state
        if judgement.complete and state.note:
            resolve_item(self.store, self.audit, item, self.name, cue=bool(judgement.cue), link=bool(judgement.link),
                         answer_ok=judgement.answer_ok, note=state.note, force=item.id in self.resolved)
            self.summary.decisions += 1
            self.summary.finished += int(item.id not in self.resolved)
            self.resolved.add(item.id)

    def done(self, item: AuditItem) -> bool:
        return item.id in self.resolved

    def others(self, item: AuditItem) -> tuple[tuple[str, LabelState], ...]:
        pair = self.pairs[item.id]
        return (("Annotator 1", state_of(item, pair.first)), ("Annotator 2", state_of(item, pair.second)))

    def person(self) -> str:
        return f"adjudicator: {self.name}"

    def progress(self) -> str:
        return f"{len(self.resolved)} of {len(self.items)} resolved"


#: What a session shows when a save is refused: the CLI's line for the error (the session then goes on).
Refused = Callable[[CfkitError], Text]


def annotate(ws: Workspace, store: Store, audit: Audit, name: str, keys: KeySource, console: Console, *,
             start: AuditItem | None = None, height: int | None = None,
             refused: Refused | None = None) -> SessionSummary:
    """Label items in ``name``'s own order, from ``start`` or the first one without a complete label.

    ``refused(exc)`` is the line shown when a save is refused (the session goes on); without it the
    error is raised."""
    name = check_annotator(name)
    people = [a.name for a in audit_labels.annotators(store, audit.id)]
    if name not in people and len(people) >= audit.plan.annotators:
        raise UsageError(f"audit {audit.id} already has its {plural(audit.plan.annotators, 'annotator')} and '{name}' is not one "
                         "of them; annotate under your own name, or adjudicate with 'cfkit audit adjudicate'.")
    summary = SessionSummary()
    mode = _Annotating(store, audit, name, summary)
    return _session(ws, mode, keys, console, summary, start=start, height=height, refused=refused)


def adjudicate(ws: Workspace, store: Store, audit: Audit, name: str, keys: KeySource, console: Console, *,
               height: int | None = None, refused: Refused | None = None) -> SessionSummary:
    """Walk the items that need a resolution (disagreements and unsure marks), saving each with its note.

    ``refused`` as for :func:`annotate`."""
    summary = SessionSummary()
    mode = _Adjudicating(store, audit, check_annotator(name), summary, needs_resolution(store, audit))
    return _session(ws, mode, keys, console, summary, height=height, refused=refused)


def _first_open(mode: _Mode, after: int = -1) -> int | None:
    count = len(mode.items)
    for step in range(1, count + 1):
        index = (after + step) % count
        if not mode.done(mode.items[index]):
            return index
    return None


def _focus(state: LabelState) -> str:
    return "link" if state.judgement.cue is not None and state.judgement.link is None else "cue"


def _session(ws: Workspace, mode: _Mode, keys: KeySource, console: Console, summary: SessionSummary, *,
             start: AuditItem | None = None, height: int | None = None,
             refused: Refused | None = None) -> SessionSummary:
    """Draw, read a key, act, until every item is done or the person quits."""
    if not mode.items:
        return summary
    index = next((n for n, i in enumerate(mode.items) if i.id == start.id), None) if start else _first_open(mode)
    if index is None:
        summary.remaining = 0
        return summary
    images: dict[str, tuple[np.ndarray | str, ...]] = {}
    focus, scroll, message, overlay, overlay_scroll = _focus(mode.state(mode.items[index])), 0, None, None, 0
    while True:
        item = mode.items[index]
        if item.id not in images:
            images = {item.id: load_images(ws, item)}  # one item's pictures at a time
        if console.is_terminal:
            follow_terminal_size(console)  # before the frame is sized: after a resize, the new size
        frame_height = (height or console.size.height) - 1  # the last line holds the cursor
        screen = Screen(item=blind(item), images=images[item.id], position=f"{index + 1} of {len(mode.items)}",
                        person=mode.person(), progress=mode.progress(), state=mode.state(item), focus=focus,
                        others=mode.others(item), scroll=overlay_scroll if overlay else scroll, message=message,
                        overlay=overlay, keys=mode.keys)
        view = AuditView(screen, height=frame_height)
        if console.is_terminal:
            console.clear()
        small = too_small(console.width, frame_height + 1, "the audit")
        console.print(Text(small, style="yellow") if small else view, crop=True)
        key = keys.key()
        if key == RESIZE or (small and key.lower() not in _QUIT):
            continue  # drawn again at the new size; nothing is labelled on an item the person cannot see
        message = None
        key = key if key.startswith("\x1b") or key == "\t" else key.lower()
        if overlay is not None:  # the guideline or the help: scroll keys scroll it, any other key closes it
            move = _scroll_step(key)
            overlay_scroll = max(0, min(view.scroll_limit(console, console.width), overlay_scroll + move))
            overlay = overlay if move else None
            continue
        try:
            step = _act(mode, item, key, focus, keys)
        except CfkitError as exc:  # a refused save (e.g. the item was adjudicated meanwhile): say it, keep going
            if refused is None:
                raise
            message = refused(exc)
            continue
        if step.quit:
            summary.quit_early = True
            break
        message, overlay, overlay_scroll = step.message, step.overlay, 0
        if step.focus:
            focus = step.focus
        if step.scroll:
            scroll = max(0, min(view.scroll_limit(console, console.width), scroll + step.scroll))
        if step.move:
            target = _first_open(mode, index) if step.move == "next-open" else index + _step_offset(step.move)
            if target is None:
                break  # every item is done
            if not 0 <= target < len(mode.items):
                message = Text("this is the first item." if target < 0 else
                               "this is the last item; q quits (everything is saved).", style="yellow")
                continue
            index, scroll = target, 0
            focus = _focus(mode.state(mode.items[index]))
    summary.remaining = sum(1 for i in mode.items if not mode.done(i))
    return summary


def _step_offset(move: str) -> int:
    return {"back": -1, "skip": 1}[move]


@dataclass(frozen=True)
class _Step:
    quit: bool = False
    move: str | None = None  # back | skip | next-open
    focus: str | None = None
    scroll: int = 0
    message: Text | None = None
    overlay: str | None = None


def _act(mode: _Mode, item: AuditItem, key: str, focus: str, keys: KeySource) -> _Step:
    """What one key does to the item on screen."""
    state = mode.state(item)
    if key in ("y", "n"):
        revising = mode.done(item)
        mode.change(item, **{focus: key == "y"})
        after = mode.state(item)
        other = "link" if focus == "cue" else "cue"
        # The other criterion next while it is open, or, when changing a finished label, the link after the cue.
        if getattr(after.judgement, other) is None or (revising and focus == "cue"):
            return _Step(focus=other)
        if mode.done(item):
            return _Step(move="next-open", message=Text(f"item {item.id} saved.", style="green"))
        message = _ask_note(mode, item, keys)  # adjudication: everything but the note is given
        return _Step(move="next-open" if mode.done(item) else None, message=message)
    if key in ("\t", "c", "l"):
        return _Step(focus={"c": "cue", "l": "link"}.get(key, "link" if focus == "cue" else "cue"))
    if key == "a":
        mode.change(item, answer_ok=not state.judgement.answer_ok)
        return _Step(move="next-open" if mode.done(item) and isinstance(mode, _Adjudicating) else None)
    if key == "u":
        if isinstance(mode, _Adjudicating):
            return _Step(message=Text("unsure marks belong to annotators; an adjudicator decides.", style="yellow"))
        mode.change(item, unsure=not state.unsure)
        return _Step()
    if key == "m":
        message = _ask_note(mode, item, keys, required=False)
        return _Step(move="next-open" if mode.done(item) and isinstance(mode, _Adjudicating) else None,
                     message=message)
    if key in ("b", "s"):
        return _Step(move="back" if key == "b" else "skip")
    if _scroll_step(key):
        return _Step(scroll=_scroll_step(key))
    if key == "g":
        return _Step(overlay=GUIDELINE)
    if key == "?":
        return _Step(overlay=HELP)
    if key in _QUIT:
        return _Step(quit=True)
    return _Step(message=Text(f"unknown key {key!r}; press ? for help.", style="yellow"))


def _scroll_step(key: str) -> int:
    """Lines a key scrolls by (0: not a scroll key)."""
    return {"j": 1, "\x1b[B": 1, " ": 10, "\x1b[6~": 10, "k": -1, "\x1b[A": -1, "\x1b[5~": -10}.get(key, 0)


def _ask_note(mode: _Mode, item: AuditItem, keys: KeySource, *, required: bool = True) -> Text | None:
    prompt = "note (why this final label): " if isinstance(mode, _Adjudicating) else "note: "
    note = keys.line(prompt).strip()
    if note:
        mode.change(item, note=note)
        return Text(f"item {item.id} resolved." if mode.done(item) and isinstance(mode, _Adjudicating)
                    else "note saved.", style="green")
    if required:
        return Text("a resolution needs a note; press m to add one (nothing was saved yet).", style="yellow")
    return None


def require_terminal(command: str, annotator: str) -> None:
    """Refuse an interactive session without a terminal, pointing to the commands that need none."""
    problem = terminal_problem()
    if problem:
        other = ("'cfkit audit items --as {0} --json' lists your items and 'cfkit audit label ITEM --as {0} --cue "
                 "yes|no --link yes|no' labels one" if command == "annotate" else
                 "'cfkit audit agreement' lists the disagreements and 'cfkit audit resolve ITEM --as {0} --cue yes|no "
                 "--link yes|no --note …' resolves one").format(annotator)
        raise UsageError(f"'cfkit audit {command}' needs a terminal ({problem}); without one, {other}.")
