"""Review decisions and the interactive key loop.

Every decision is written to the store's ``reviews`` table the moment it is
made (:mod:`cfkit.store.reviews`), so a review can stop — or be killed — at
any point and resume with ``cfkit review --pending``. A decision belongs to the
edit it was made on.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Callable, Protocol

from rich.console import Console
from rich.text import Text

from cfkit.errors import CfkitError, NotFoundError, UsageError
from cfkit.preserve import Thresholds, find_leaks, keep_region, load_edit_images
from cfkit.review.view import DIFF_MODES, EditView, ViewData, keys_help, largest_change
from cfkit.store import Store, checks, edits, reviews
from cfkit.store.reviews import Decision
from cfkit.workspace import Workspace

# ── decisions ──────────────────────────────────────────────────────────────


def record_decision(store: Store, spec_id: str, edit_id: int | None, decision: str, note: str | None = None) -> Decision:
    """Save a person's decision on an edit at once."""
    return reviews.record(store, spec_id, edit_id, decision, note)


def pending_specs(store: Store) -> list[str]:
    """Specs whose newest successful edit has no accept or reject of its own yet (skipped ones come back)."""
    pending = []
    for spec_id in edits.specs_with_edits(store):
        newest = edits.newest_ok(store, spec_id)
        decision = reviews.on_edit(store, newest.id) if newest is not None else None
        if decision is None or decision.decision not in ("accept", "reject"):
            pending.append(spec_id)
    return pending


# ── what the view shows ────────────────────────────────────────────────────


def load_view_data(ws: Workspace, store: Store, spec_id: str, variant: str = "composite", *,
                   position: str | None = None, edit_id: int | None = None) -> ViewData:
    """An edit of ``spec_id`` (default: its newest successful one) with its own check and decision, ready to draw."""
    if edit_id is None:
        newest = edits.newest_ok(store, spec_id)
        if newest is None:
            raise NotFoundError(f"{spec_id} has no successful edit to review; make one with 'cfkit edit {spec_id}'.")
        edit_id = newest.id
    record = edits.get(store, edit_id)
    if record.spec_id != spec_id:
        raise UsageError(f"edit #{edit_id} belongs to {record.spec_id}, not {spec_id}. See 'cfkit edits list {spec_id}'.")
    images = load_edit_images(ws, store, edit_id)
    if variant not in images.outputs:
        variant = next(iter(images.outputs))
    edited = images.outputs[variant]
    thresholds = Thresholds.for_spec(images.spec.checks, margin=ws.config.check.margin)
    keep = keep_region(images.mask, thresholds.margin, thresholds.border)
    leaks = find_leaks(images.original, edited, keep, thresholds.leak_delta).pixels
    check = checks.latest(store, edit_id, variant)
    decision = reviews.on_edit(store, edit_id)
    return ViewData(spec_id=spec_id, title=images.spec.title, cue=images.spec.cue,
                    replacement=images.spec.replacement, edit_id=edit_id, engine=record.engine, variant=variant,
                    original=images.original, edited=edited, mask=images.mask, leaks=leaks,
                    check=None if check is None else check.to_dict(),
                    decision=None if decision is None else decision.decision,
                    note=None if decision is None else decision.note, position=position,
                    difference=largest_change(images.original, edited))


# ── keys ───────────────────────────────────────────────────────────────────


class KeySource(Protocol):
    """Where the loop's keys come from: a terminal, or a script in tests."""

    def key(self) -> str: ...

    def line(self, prompt: str) -> str: ...


class TerminalKeys:
    """Single key presses from the terminal (no Enter needed); a note is typed as a line."""

    def __init__(self, console: Console):
        self.console = console

    def key(self) -> str:
        import click

        try:
            return click.getchar()
        except EOFError:  # Ctrl-D
            return "q"

    def line(self, prompt: str) -> str:
        return self.console.input(prompt)


def terminal_problem(env: dict[str, str] | None = None) -> str | None:
    """Why the interactive loop cannot run here, or None when it can."""
    env = os.environ if env is None else env
    if env.get("TERM", "") == "dumb":
        return "TERM is 'dumb'"
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return "stdin or stdout is not a terminal"
    return None


def require_terminal(spec_hint: str) -> None:
    problem = terminal_problem()
    if problem:
        raise UsageError(
            f"the interactive review needs a terminal ({problem}). Decide without one: "
            f"'cfkit review {spec_hint} --accept' or '--reject --note \"why\"'; see the edit and its check "
            f"with 'cfkit review {spec_hint} --json'."
        )


# ── the loop ───────────────────────────────────────────────────────────────


@dataclass
class ReviewSummary:
    decisions: list[Decision] = field(default_factory=list)
    quit_early: bool = False


HELP = """\
a  accept this edit          r  reject it (you are asked for a note)
g  regenerate (runs the edit again for this spec, then checks it)
s  skip for now (it stays pending)
d  toggle the difference view: heat map / leaks over a faded original
v  toggle the edited image: composite / raw
?  this help                 q  quit (decisions so far are saved)"""


def review_loop(ws: Workspace, store: Store, spec_ids: list[str], keys: KeySource, console: Console, *,
                regenerate: Callable[[str], None] | None = None) -> ReviewSummary:
    """Show each spec's newest edit and act on keys until every spec is decided or the reviewer quits.

    ``regenerate(spec_id)`` makes a new edit of the spec (and checks it); when
    it is None the key says that regeneration is not available.
    """
    summary = ReviewSummary()
    diff_mode, variant = DIFF_MODES[0], "composite"
    index = 0
    message: Text | None = None
    while index < len(spec_ids):
        spec_id = spec_ids[index]
        data = load_view_data(ws, store, spec_id, variant, position=f"{index + 1} of {len(spec_ids)}")
        if console.is_terminal:
            console.clear()
        console.print(EditView(data, diff_mode=diff_mode))
        console.print(keys_help())
        if message is not None:
            console.print(message)
            message = None
        key = keys.key().lower()
        if key in ("a", "s"):
            decision = "accept" if key == "a" else "skip"
            summary.decisions.append(record_decision(store, spec_id, data.edit_id, decision))
            index += 1
        elif key == "r":
            note = keys.line("note (why rejected): ").strip()
            summary.decisions.append(record_decision(store, spec_id, data.edit_id, "reject", note))
            index += 1
        elif key == "g":
            if regenerate is None:
                message = Text("regenerate is not available here; run 'cfkit edit "
                               f"{spec_id} --again' in another shell, then press any key.", style="yellow")
                continue
            console.print(Text(f"regenerating {spec_id} …", style="dim"))
            try:
                regenerate(spec_id)
            except CfkitError as exc:
                message = Text(f"regenerate failed: {exc}", style="red")
        elif key == "d":
            diff_mode = DIFF_MODES[(DIFF_MODES.index(diff_mode) + 1) % len(DIFF_MODES)]
        elif key == "v":
            variant = "raw" if data.variant == "composite" else "composite"
            if len(edits.get(store, data.edit_id).variants) < 2:
                message = Text(f"edit #{data.edit_id} has only its {data.variant} image.", style="yellow")
        elif key == "?":
            message = Text(HELP)
        elif key in ("q", "\x03", "\x04"):
            summary.quit_early = True
            break
        else:
            message = Text(f"unknown key {key!r}; press ? for help.", style="yellow")
    return summary
