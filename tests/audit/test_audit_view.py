"""The annotation view in colour at 80×24 and 160×50, and the scripted annotate and adjudicate sessions."""

from __future__ import annotations

import io
import re
import shutil

import numpy as np
import pytest
from rich.console import Console

from cfkit.audit.items import BlindItem, load_audit
from cfkit.audit.labelling import LabelState, update_label
from cfkit.audit.loop import adjudicate, annotate
from cfkit.audit.plan import plan_audit
from cfkit.audit.view import AuditView, Screen, visible
from cfkit.errors import UsageError
from cfkit.store import Store, audit_labels
from cfkit.store.audit_labels import Judgement
from cfkit.workspace import load_workspace
from support import audit_workspace as aw

ANSI = re.compile(r"\x1b\[[0-9;]*m")
RATIONALE = "The cup holds a brown espresso; a matcha latte is green, so the photo shows another drink."


def _item(response: str = "The photo shows a cup with latte art on a saucer; warm light suits a café menu.") -> BlindItem:
    return BlindItem("7f3a9c21", "MX01", "A café prints a menu card for its matcha-latte special. Is this photo "
                     "suitable for the card?", (("A", "Yes"), ("B", "No")), "B", "A", RATIONALE,
                     (("coffee.jpg", "0" * 64),), "A", response)


def _picture() -> np.ndarray:
    picture = np.zeros((64, 96, 3), np.uint8)
    picture[:, :48] = (200, 40, 40)
    picture[:, 48:] = (40, 40, 200)
    return picture


def _screen(**kw) -> Screen:
    base = dict(item=_item(), images=(_picture(),), position="3 of 40", person="you: alice",
                progress="12 of 40 labelled", state=LabelState(Judgement(False, True, None)), focus="link")
    return Screen(**{**base, **kw})


def _render(view: AuditView, width: int, height: int) -> str:
    console = Console(record=True, width=width, height=height, force_terminal=True, color_system="truecolor",
                      file=io.StringIO())
    console.print(view)
    return console.export_text(styles=True)


@pytest.mark.parametrize("width, height", [(80, 24), (160, 50)])
def test_the_view_fills_the_frame_in_colour_and_never_overflows(width, height):
    text = _render(AuditView(_screen(), height=height - 1), width, height)
    lines = text.splitlines()
    plain = [ANSI.sub("", line) for line in lines]
    assert len(lines) == height - 1  # one line is left for the cursor
    assert max(len(line) for line in plain) <= width
    assert "\x1b[38;2;200;40;40;48;2;200;40;40m▀" in text and "\x1b[38;2;40;40;200;48;2;40;40;200m▀" in text
    body = "\n".join(plain)
    for words in ("item 7f3a9c21", "case MX01", "3 of 40", "Scenario", "Expert rationale", "Response",
                  "answer read: A (Yes)", "B  No  ← gold", "answer correct: no (as parsed)", "▶ link: ?",
                  "y/n answer", "q quit"):
        assert words in body, words
    # The picture column grows with the frame.
    cells = max(line.count("▀") for line in plain)
    assert cells == (24 if width == 80 else 64)


def test_a_long_response_scrolls_and_says_where_the_reader_is():
    view = AuditView(_screen(item=_item("A sentence about the cup and the saucer. " * 40)), height=23)
    console = Console(width=80, height=24)
    limit = view.scroll_limit(console, 80)
    assert limit > 0
    first = ANSI.sub("", _render(view, 80, 24))
    assert re.search(r"lines 1-\d+ of \d+ · j/k", first)
    long_item = _item("A sentence about the cup and the saucer. " * 40)
    last = ANSI.sub("", _render(AuditView(_screen(item=long_item, scroll=limit), height=23), 80, 24))
    total = int(re.search(r"lines \d+-\d+ of (\d+)", last).group(1))
    assert f"lines {limit + 1}-{total} of {total}" in last


def test_control_characters_from_a_reply_are_shown_not_sent():
    evil = "Fine.\x1b[2J\x1b]0;pwned\x07 The end\x9b31m."
    text = _render(AuditView(_screen(item=_item(evil)), height=23), 80, 24)
    plain = ANSI.sub("", text)
    assert "␛[2J" in plain and "␇" in plain and "<U+009B>" in plain  # shown the way cfkit.visible shows them
    assert "\x1b[2J" not in text and "\x07" not in text and "\x1b]0" not in text
    assert visible("a\tb\r\nc") == "a    b\nc"


def test_a_narrow_frame_stacks_the_picture_above_the_text_and_adjudication_shows_both_labels():
    others = (("Annotator 1", LabelState(Judgement(True, True, False), note="the link is missing")),
              ("Annotator 2", LabelState(Judgement(True, True, True), unsure=True)))
    text = ANSI.sub("", _render(AuditView(_screen(others=others), height=23), 50, 24))
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 50 and len(lines) == 23
    assert lines[1].startswith("▀")  # the picture comes first
    flat = " ".join(text.split())
    assert "Annotator 1: answer yes cue yes link no — the link is missing" in flat
    assert "Annotator 2: answer yes cue yes link yes unsure" in flat


def test_the_guideline_replaces_the_body():
    text = ANSI.sub("", _render(AuditView(_screen(overlay="GUIDELINE TEXT\nline two"), height=23), 80, 24))
    assert "GUIDELINE TEXT" in text and "Scenario" not in text and "y/n answer" in text


# ── sessions ───────────────────────────────────────────────────────────────


class ScriptedKeys:
    """Keys from a list; a key that asks for a line takes the next item as the line."""

    def __init__(self, keys: list[str]):
        self.keys = list(keys)
        self.prompts: list[str] = []

    def key(self) -> str:
        return self.keys.pop(0) if self.keys else "q"

    def line(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.keys.pop(0) if self.keys else ""




def _console() -> Console:
    return Console(record=True, width=80, height=24, force_terminal=True, color_system="truecolor", file=io.StringIO())


def test_an_annotate_session_saves_each_key_and_resumes_where_it_stopped(audited):
    ws, _ = audited
    with Store(ws.db_path) as store:
        audit = load_audit(store)
        from cfkit.audit.items import annotator_order

        order = annotator_order(audit, "alice")
        first = annotate(ws, store, audit, "alice", ScriptedKeys(["y", "n", "a", "y", "q"]), _console(), height=24)
        own = audit_labels.labels_by(store, audit.id, "alice")
        assert (first.decisions, first.finished, first.quit_early) == (4, 1, True)
        assert own[order[0].id].judgement == Judgement(order[0].parser_correct, True, False)
        assert own[order[1].id].judgement == Judgement(not order[1].parser_correct, True, None)
        console = _console()
        again = annotate(ws, store, audit, "alice", ScriptedKeys(["n", "u", "m", "see the wreath", "q"]), console,
                         height=24)
        own = audit_labels.labels_by(store, audit.id, "alice")
    frames = ANSI.sub("", console.export_text(styles=True))
    assert f"item {order[1].id} · case {order[1].case_id} · 2 of 18" in frames  # resumed at the open item
    assert "▶ link: ?" in frames  # with the cue already decided, the link is asked
    assert own[order[1].id].judgement.link is False and own[order[1].id].complete
    assert own[order[2].id].unsure and own[order[2].id].note == "see the wreath"
    assert again.decisions == 3 and again.remaining == 16


def test_back_skip_help_guideline_and_unknown_keys(audited):
    ws, _ = audited
    console = _console()
    with Store(ws.db_path) as store:
        audit = load_audit(store)
        # b at the first item; s; the help, scrolled and closed; the guideline, scrolled and closed; an unknown key;
        # tab to the link and a yes; back; quit.
        keys = ScriptedKeys(["b", "s", "?", "j", "x", "g", "k", "z", "w", "\t", "y", "b", "q"])
        summary = annotate(ws, store, audit, "alice", keys, console, height=24)
        own = audit_labels.labels_by(store, audit.id, "alice")
    frames = ANSI.sub("", console.export_text(styles=True))
    assert "this is the first item." in frames
    assert "y / n     answer the question marked ▶" in frames and "Annotation guideline" in frames
    assert "unknown key 'w'; press ? for help." in frames and "unknown key 'z'" not in frames
    from cfkit.audit.items import annotator_order

    second = annotator_order(audit, "alice")[1]
    assert own[second.id].judgement.link is True and own[second.id].judgement.cue is None  # tab moved ▶ to link
    assert summary.decisions == 1


def test_no_frame_shows_a_model_a_run_or_another_annotators_label(audited):
    ws, run_ids = audited
    console = _console()
    with Store(ws.db_path) as store:
        audit = load_audit(store)
        for item in audit.items:
            update_label(store, audit, item, "bob", cue=False, link=True, note="BOB-WAS-HERE")
        annotate(ws, store, audit, "alice", ScriptedKeys(["y", "y"] * 18), console, height=24)
        assert len(audit_labels.labels_by(store, audit.id, "alice")) == 18
    frames = console.export_text(styles=False).lower()
    assert frames.count("scenario au") >= 18
    assert not any(word in frames for word in aw.FORBIDDEN)
    assert not any(run.lower() in frames for run in run_ids.values())
    assert "bob" not in frames


def test_an_adjudication_walks_the_disagreements_and_needs_a_note(audited):
    ws, _ = audited
    console = _console()
    with Store(ws.db_path) as store:
        audit = load_audit(store)
        for n, item in enumerate(audit.items):
            update_label(store, audit, item, "alice", cue=True, link=True, note="ALICE-NOTE" if n == 0 else None)
            update_label(store, audit, item, "bob", cue=n >= 2, link=True)
        keys = ScriptedKeys(["y", "n", "", "m", "the cue is named but not linked",  # first: a note after asking
                             "n", "y", "bob and alice differ"])  # second: cue no, link yes
        summary = adjudicate(ws, store, audit, "carol", keys, console, height=24)
        final = audit_labels.finals(store, audit.id)
    assert summary.finished == 2 and summary.remaining == 0
    first, second = audit.items[:2]
    assert (final[first.id].basis, final[first.id].judgement.cue, final[first.id].judgement.link) == (
        "resolved", True, False)
    assert final[first.id].note == "the cue is named but not linked" and final[first.id].decided_by == "carol"
    assert (final[second.id].judgement.cue, final[second.id].judgement.link) == (False, True)
    assert sum(f.basis == "agreed" for f in final.values()) == 16
    frames = ANSI.sub("", console.export_text(styles=True))
    assert "a resolution needs a note" in frames and "Annotator 1:" in frames and "ALICE-NOTE" in frames
    assert "alice" not in frames.lower().replace("alice-note", "")
    assert keys.prompts[0] == "note (why this final label): "


def test_a_third_annotator_is_refused_before_the_session_draws(audited):
    ws, _ = audited
    with Store(ws.db_path) as store:
        audit = load_audit(store)
        for name in ("alice", "bob"):
            update_label(store, audit, audit.items[0], name, cue=True)
        with pytest.raises(UsageError, match="already has its 2 annotators and 'carol' is not one of them"):
            annotate(ws, store, audit, "carol", ScriptedKeys([]), _console(), height=24)


def test_a_session_opens_at_a_chosen_item_to_change_its_label(audited):
    ws, _ = audited
    with Store(ws.db_path) as store:
        audit = load_audit(store)
        from cfkit.audit.items import annotator_order

        target = annotator_order(audit, "alice")[5]
        update_label(store, audit, target, "alice", cue=True, link=True)
        console = _console()
        annotate(ws, store, audit, "alice", ScriptedKeys(["n", "n"]), console, start=target, height=24)
        changed = audit_labels.labels_by(store, audit.id, "alice")[target.id]
    frames = console.export_text()
    assert f"item {target.id} · case {target.case_id} · 6 of 18" in frames
    assert (changed.judgement.cue, changed.judgement.link) == (False, False)


def test_a_resize_redraws_the_item_and_decides_nothing(audited):
    from cfkit.terminal.keys import RESIZE

    ws, _ = audited
    with Store(ws.db_path) as store:
        audit = load_audit(store)
        console = _console()
        summary = annotate(ws, store, audit, "alice", ScriptedKeys([RESIZE, RESIZE, "y", RESIZE, "q"]), console,
                           height=24)
    assert summary.decisions == 1 and summary.quit_early
    assert "unknown key" not in console.export_text()


@pytest.mark.parametrize("width", [40, 50, 60, 70, 80, 100, 160])
def test_the_keys_keep_each_label_beside_its_key_and_quit_always_shows(width):
    from cfkit.audit.view import ADJUDICATE_KEYS, ANNOTATE_KEYS

    for keys in (ANNOTATE_KEYS, ADJUDICATE_KEYS):
        lines = ANSI.sub("", _render(AuditView(_screen(keys=keys), height=23), width, 24)).splitlines()
        assert len(lines) == 23 and all(len(line) <= width for line in lines)
        foot = " ".join(" ".join(lines[-2:]).split())
        # Every key, in order, each with its whole label (or, in the narrowest frames, every key alone): the bar
        # breaks a line only between two keys, and never leaves one off its end.
        forms = [" ".join(f"{key.keys} {getattr(key, form)}" if form else key.keys for key in keys)
                 for form in ("long", "short", None)]
        assert foot in forms, foot
