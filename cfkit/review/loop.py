"""Review decisions and the interactive key loop.

Every decision is written to the store's ``reviews`` table the moment it is
made (:mod:`cfkit.store.reviews`), so a review can stop — or be killed — at
any point and resume with ``cfkit review --pending``. A decision belongs to the
edit it was made on, and a view always shows that edit's own check and
decision. A spec's candidates (its successful edits) are stepped through with
``[`` and ``]``.

A spec is *pending* while one of its candidates has no accept or reject of its
own — counting, once an edit of the spec is accepted, only candidates made
since that accept (the others were there to compare when the person chose).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from rich.console import Console
from rich.text import Text

from cfkit.cases import CaseSet
from cfkit.errors import CfkitError, NotFoundError, UsageError
from cfkit.masks import derived_mask_state
from cfkit.edit_files import EditFiles, load_edit_images, spec_thresholds
from cfkit.preserve import find_leaks, keep_region
from cfkit.review.panels import zoom_boxes
from cfkit.review.screen import HELP, ReviewScreen, ViewState
from cfkit.review.terminal import ALIASES, RESIZE, KeySource, TerminalKeys, require_terminal, terminal_problem
from cfkit.terminal.keys import follow_terminal_size, too_small
from cfkit.review.view import DIFF_MODES, ViewData, largest_change
from cfkit.specs import try_load_cases
from cfkit.judge.screen import doubts_said
from cfkit.store import Store, checks, edits, reviews, screens
from cfkit.store.edits import EditRecord
from cfkit.store.reviews import Decision
from cfkit.workspace import Workspace

__all__ = ["HELP", "KeySource", "ReviewSummary", "TerminalKeys", "decide", "edit_to_review", "load_view_data",
           "pending_specs", "read_cases", "record_decision", "require_terminal", "review_loop", "terminal_problem"]

#: ``regenerate(edit, engine)``: another candidate like ``edit``; ``engine`` None keeps its engine, model and
#: options, "" uses cfkit.toml's engine, a name that engine.
Regenerate = Callable[[EditRecord, "str | None"], None]
#: ``failed(exc)``: the line the view shows when a regeneration fails (the CLI's words for the error).
Failed = Callable[[CfkitError], Text]
#: ``unshown(spec_id, edit_id, exc)``: the line the view shows when an edit cannot be shown (its files changed);
#: ``edit_id`` None when nothing of the spec can be shown and it is left out (the CLI's words for the error).
Unshown = Callable[[str, "int | None", CfkitError], Text]

# ── decisions ──────────────────────────────────────────────────────────────


def record_decision(store: Store, spec_id: str, edit_id: int | None, decision: str, note: str | None = None) -> Decision:
    """Save a person's decision on an edit at once; a reject needs a note saying why (blank is none)."""
    note = (note or "").strip() or None
    if decision == "reject" and note is None:
        raise UsageError(f"a reject of {spec_id} needs a note saying why, e.g. --note \"the background changed\".")
    return reviews.record(store, spec_id, edit_id, decision, note)


def decide(ws: Workspace, store: Store, spec_id: str, edit_id: int | None, decision: str, note: str | None = None,
           *, pictures: dict[int, "EditPictures"] | None = None, cases: CaseSet | None = None) -> Decision:
    """A decision made without the view, on ``edit_id`` or else the edit a review of the spec opens on.

    An accept makes the edit the one probes, reports and sheets use, so its files must still be the ones it
    made: they are read (into ``pictures``, for a view drawn next) and an edit whose file changed or is gone
    is refused with why. A reject or a skip needs only the store, so such an edit can still be rejected.
    """
    record = edit_of(store, spec_id, edit_id)
    if decision == "accept":
        held = {} if pictures is None else pictures
        if record.id not in held:
            held[record.id] = EditPictures.read(ws, store, record.id, cases)
    return record_decision(store, spec_id, record.id, decision, note)


def undecided(store: Store, spec_id: str) -> list[EditRecord]:
    """The spec's candidates still waiting for an accept or reject, oldest first (see the module docstring)."""
    accepted = reviews.accepted_edit_id(store, spec_id)
    since = None if accepted is None else reviews.on_edit(store, accepted).created_at
    waiting = []
    for record in edits.ok_edits(store, spec_id):
        decision = reviews.on_edit(store, record.id)
        if decision is not None and decision.decision in ("accept", "reject"):
            continue
        if since is not None and record.started_at < since:
            continue  # there to compare when a person chose another
        waiting.append(record)
    return waiting


def pending_specs(store: Store) -> list[str]:
    """Specs with a candidate still waiting for an accept or reject (skipped ones come back)."""
    return [spec_id for spec_id in edits.specs_with_edits(store) if undecided(store, spec_id)]


def edit_to_review(store: Store, spec_id: str) -> EditRecord:
    """The edit a review of the spec opens on: its first waiting candidate, else the selected, else the newest."""
    waiting = undecided(store, spec_id)
    record = waiting[0] if waiting else edits.shown(store, spec_id)
    if record is None:
        raise NotFoundError(f"{spec_id} has no successful edit to review; make one with 'cfkit edit {spec_id}'.")
    return record


def _opening_edit(store: Store, spec_id: str, unshowable: dict[int, CfkitError]) -> int:
    """:func:`edit_to_review`, passing over the edits that could not be shown; when none is left, why not."""
    waiting = [r.id for r in undecided(store, spec_id) if r.id not in unshowable]
    if waiting:
        return waiting[0]
    shown = edits.shown(store, spec_id)
    if shown is not None and shown.id not in unshowable:
        return shown.id
    reasons = [unshowable[r.id] for r in edits.ok_edits(store, spec_id) if r.id in unshowable]
    if reasons:
        raise reasons[-1]
    return edit_to_review(store, spec_id).id  # none at all: its NotFoundError


# ── what the view shows ────────────────────────────────────────────────────


@dataclass
class EditPictures:
    """What a view draws of one edit, read from its files once: its images and mask, and per output the
    leaks and the largest change (computed when that output is first shown)."""

    files: EditFiles
    mask_note: str | None
    leaks: dict[str, np.ndarray] = field(default_factory=dict)
    differences: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def read(cls, ws: Workspace, store: Store, edit_id: int, cases: CaseSet | None = None) -> "EditPictures":
        files = load_edit_images(ws, store, edit_id, cases=cases)
        derived = derived_mask_state(ws, files.spec, (files.original.shape[1], files.original.shape[0]))
        return cls(files, None if derived is None else derived.label)

    def of(self, ws: Workspace, variant: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(edited image, leak pixels, largest change) of one output."""
        edited = self.files.outputs[variant]
        if variant not in self.leaks:
            thresholds = spec_thresholds(self.files.spec, ws.config.check.margin)
            keep = keep_region(self.files.mask, thresholds.margin, thresholds.border)
            self.leaks[variant] = find_leaks(self.files.original, edited, keep, thresholds.leak_delta).pixels
            self.differences[variant] = largest_change(self.files.original, edited)
        return edited, self.leaks[variant], self.differences[variant]


def load_view_data(ws: Workspace, store: Store, spec_id: str, variant: str = "composite", *,
                   position: str | None = None, edit_id: int | None = None,
                   pictures: dict[int, EditPictures] | None = None, cases: CaseSet | None = None) -> ViewData:
    """An edit of ``spec_id`` (default: :func:`edit_to_review`) with its own check and decision, ready to draw.

    ``pictures`` keeps each edit's images between calls (the review loop passes one per session), so an
    edit's files are read once however often it is shown; its check and decision are read afresh.
    ``cases``: the workspace's cases, read once by the caller (else each new edit reads them).
    """
    record = edit_of(store, spec_id, edit_id)
    edit_id = record.id
    held = {} if pictures is None else pictures
    if edit_id not in held:
        held[edit_id] = EditPictures.read(ws, store, edit_id, cases)
    shown = held[edit_id]
    images = shown.files
    if variant not in images.outputs:
        variant = next(iter(images.outputs))
    edited, leaks, difference = shown.of(ws, variant)
    check = checks.latest(store, edit_id, variant)
    decision = reviews.on_edit(store, edit_id)
    selected = edits.selected(store, spec_id)
    candidates = edits.ok_edits(store, spec_id)
    return ViewData(spec_id=spec_id, title=images.spec.title, cue=images.spec.cue,
                    replacement=images.spec.replacement, edit_id=edit_id, engine=record.engine, variant=variant,
                    original=images.original, edited=edited, mask=images.mask, leaks=leaks,
                    check=None if check is None else check.to_dict(),
                    decision=None if decision is None else decision.decision,
                    note=None if decision is None else decision.note, position=position,
                    difference=difference, model=record.model,
                    candidates=tuple(r.id for r in candidates),
                    candidate_states=tuple(_state(store, r.id) for r in candidates),
                    selected_id=None if selected is None else selected.id,
                    mask_note=shown.mask_note, judge=doubts_said(screens.answers(store, [edit_id])),
                    mask_changed=mask_changed_line(images))


def mask_changed_line(files: EditFiles) -> str | None:
    """What a view says of an edit whose spec's mask changed since it was made: the outline and the leaks it
    draws are the new mask's, and ``cfkit check`` refuses the edit; None when the mask is the edit's."""
    if files.mask_changed is None:
        return None
    return (f"{files.mask_changed}: the outline and leaks shown are the new mask's, and 'cfkit check' refuses this "
            f"edit. Make a new edit with 'cfkit edit {files.spec_id}', or put the earlier mask back.")


def edit_of(store: Store, spec_id: str, edit_id: int | None) -> EditRecord:
    """Edit ``edit_id``, which must be one of ``spec_id``'s; without it, the edit a review of the spec opens on
    (:func:`edit_to_review`)."""
    if edit_id is None:
        return edit_to_review(store, spec_id)
    record = edits.get(store, edit_id)
    if record.spec_id != spec_id:
        raise UsageError(f"edit #{edit_id} belongs to {record.spec_id}, not {spec_id}. See 'cfkit edits list {spec_id}'.")
    return record


def _state(store: Store, edit_id: int) -> str:
    """``pass, accept`` / ``not checked``: an edit's own check and decision, for the candidates line."""
    check = checks.latest(store, edit_id, variant=None)
    decision = reviews.on_edit(store, edit_id)
    text = "not checked" if check is None else check.verdict
    return text + (f", {decision.decision}" if decision is not None else "")


# ── the loop ───────────────────────────────────────────────────────────────

#: Keys that change only how the view is drawn (zoom, flip, difference mode, help) or say something;
#: after them the screen is rebuilt from the data in hand. (A resize, and the key closing the help, too.)
VIEW_KEYS = frozenset({"z", "f", "d", "?"})


@dataclass
class ReviewSummary:
    decisions: list[Decision] = field(default_factory=list)
    quit_early: bool = False
    #: Specs the session could not show, each with why (an edit's file changed, no edit): the others went on.
    left_out: list[tuple[str, CfkitError]] = field(default_factory=list)


def _draw(console: Console, screen: ReviewScreen) -> bool:
    """Draw the screen; False when the terminal is too small for it (then one line says so instead)."""
    if console.is_terminal:
        follow_terminal_size(console)
        console.clear()
    small = too_small(*console.size, "the review")
    if small:
        console.print(Text(small, style="yellow"), crop=True)
        return False
    console.print(screen, soft_wrap=False, crop=True)
    return True


def read_cases(ws: Workspace) -> CaseSet | None:
    """The cases, or None when they cannot be read (each edit shown then says why)."""
    try:
        return try_load_cases(ws)
    except CfkitError:
        return None


def review_loop(ws: Workspace, store: Store, spec_ids: list[str], keys: KeySource, console: Console, *,
                regenerate: Regenerate | None = None, start_edit: int | None = None,
                failed: Failed | None = None, unshown: Unshown | None = None) -> ReviewSummary:
    """Show each spec's edit to review and act on keys until every spec is decided or the reviewer quits.

    ``start_edit`` opens the first spec on that edit. ``regenerate`` makes a
    new candidate (and checks it); when it is None the key says that
    regeneration is not available. ``failed(exc)`` is the line shown when a
    regeneration fails (the review goes on); without it the error is raised.
    With ``unshown``, an edit that cannot be shown (its files changed since it
    was made) is said on screen and passed over for the spec's next candidate;
    a spec with none to show is left out (:attr:`ReviewSummary.left_out`) and
    the next follows. Without it the error is raised.
    """
    if start_edit is not None and spec_ids:
        edit_of(store, spec_ids[0], start_edit)  # a wrong --edit is the command's error, not an edit to pass over
    summary = ReviewSummary()
    state = ViewState()
    index = 0
    current: int | None = start_edit
    message: Text | None = None
    pictures: dict[int, EditPictures] = {}  # each edit's images, read once this session
    cases = read_cases(ws)  # and the cases, read once for every edit shown
    data: ViewData | None = None
    stale = True  # read the view again: another edit, output or decision
    unshowable: dict[int, CfkitError] = {}  # edits whose files cannot be shown, with why
    while index < len(spec_ids):
        spec_id = spec_ids[index]
        if stale or data is None:
            stale = False
            try:
                if current is None:
                    current = _opening_edit(store, spec_id, unshowable)
                data = load_view_data(ws, store, spec_id, state.variant, position=f"{index + 1} of {len(spec_ids)}",
                                      edit_id=current, pictures=pictures, cases=cases)
            except CfkitError as exc:
                if unshown is None:
                    raise
                # One edit that cannot be shown stops neither its spec's other candidates nor the other specs.
                message = unshown(spec_id, current, exc)
                if current is None:  # nothing of this spec can be shown
                    summary.left_out.append((spec_id, exc))
                    index = index + 1
                    continue
                unshowable.setdefault(current, exc)
                on_screen = data is not None and data.spec_id == spec_id and data.edit_id not in unshowable
                current = data.edit_id if on_screen else None
                stale = True
                continue
            current = data.edit_id
        shown = _draw(console, ReviewScreen(data, state, message))
        pressed = keys.key()
        key = ALIASES.get(pressed, pressed)
        if key == RESIZE or (not shown and key not in ("q", "Q", "\x03", "\x04")):
            continue  # nothing is decided on an edit the reviewer cannot see; the message waits for the view
        message = None
        if state.help:
            state.help = False  # the key that closes the help does nothing else: 'a' must not accept unseen
            continue
        if key not in ("G",):
            key = key.lower() if len(key) == 1 else key
        stale = key not in VIEW_KEYS
        if key in ("a", "s"):
            decision = "accept" if key == "a" else "skip"
            summary.decisions.append(record_decision(store, spec_id, data.edit_id, decision))
            index, current = index + 1, None
        elif key == "r":
            note = keys.line("note (why rejected): ").strip()
            if not note:  # like --reject without --note: nothing is recorded, and the view stays on the edit
                message = Text(f"a reject needs a note saying why; #{data.edit_id} is not rejected (press r "
                               "again to give one).", style="yellow")
                continue
            summary.decisions.append(record_decision(store, spec_id, data.edit_id, "reject", note))
            waiting = [r.id for r in undecided(store, spec_id)]
            if waiting:
                current = waiting[0]
                message = Text(f"#{data.edit_id} rejected; candidate #{current} of {spec_id} is next.", style="dim")
            else:
                index, current = index + 1, None
        elif key in ("[", "]"):
            position = data.candidates.index(data.edit_id)
            step = position + (1 if key == "]" else -1)
            if 0 <= step < len(data.candidates):
                current = data.candidates[step]
            else:
                message = Text(f"{spec_id} has {len(data.candidates)} candidate"
                               f"{'s' if len(data.candidates) != 1 else ''}; this is the "
                               f"{'last' if key == ']' else 'first'}.", style="yellow")
        elif key in ("g", "G"):
            current, message = _regenerate(store, console, keys, data, key == "G", regenerate, failed)
        elif key == "z":
            boxes = len(zoom_boxes(data.mask))
            state.zoom = (state.zoom + 1) % (boxes + 1) if boxes else 0
        elif key == "f":
            state.flip += 1
        elif key == "d":
            state.diff_mode = DIFF_MODES[(DIFF_MODES.index(state.diff_mode) + 1) % len(DIFF_MODES)]
        elif key == "v":
            state.variant = "raw" if data.variant == "composite" else "composite"
            if len(edits.get(store, data.edit_id).variants) < 2:
                message = Text(f"edit #{data.edit_id} has only its {data.variant} image.", style="yellow")
        elif key == "?":
            state.help = True
        elif key in ("q", "\x03", "\x04"):
            summary.quit_early = True
            break
        else:
            message = Text(f"unknown key {key!r}; press ? for help.", style="yellow")
    return summary


def _regenerate(store: Store, console: Console, keys: KeySource, data: ViewData, ask: bool,
                regenerate: Regenerate | None, failed: Failed | None) -> tuple[int, Text | None]:
    """Another candidate like the edit on screen (or with the engine asked for); the edit to show next."""
    if regenerate is None:
        return data.edit_id, Text("regenerate is not available here; run 'cfkit edit "
                                  f"{data.spec_id} --again' in another shell, then press any key.", style="yellow")
    engine = keys.line("engine (Enter: cfkit.toml's): ").strip() if ask else None
    how = f"with {engine}" if engine else ("with cfkit.toml's engine" if ask else
                                          f"like #{data.edit_id} ({data.engine}{' ' + data.model if data.model else ''})")
    console.print(Text(f"regenerating {data.spec_id} {how} …", style="dim"))
    try:
        regenerate(edits.get(store, data.edit_id), engine)
    except CfkitError as exc:
        if failed is None:
            raise
        return data.edit_id, failed(exc)
    newest = edits.newest_ok(store, data.spec_id)
    made = newest.id if newest is not None else data.edit_id
    return made, Text(f"made #{made} {how}.", style="dim")
