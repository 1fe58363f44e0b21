"""The annotation view of one audited item: image, scenario, options, gold, expert rationale, the masked response.

:class:`AuditView` is a Rich renderable drawn to an exact frame (``width`` ×
``height`` cells): a header line, a body with the image(s) and the options on
the left and the scenario, the expert rationale and the response on the right
(scrolled when longer than the body), and a footer with the label being given,
a message line and the keys. At 80×24 everything fits; wider and taller
frames give the image and the text more room. It shows a
:class:`~cfkit.audit.items.BlindItem` only: no run, no model, and no label
but the viewer's own (adjudication shows the two labels as "Annotator 1/2").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.segment import Segment
from rich.text import Text

from cfkit.audit.items import BlindItem
from cfkit.audit.labelling import LabelState
from cfkit.terminal.halfblocks import HalfBlockImage, fit_cells
from cfkit.terminal.keybar import Key, KeyBar
from cfkit.visible import visible as visible_controls

#: Narrowest frame that puts the pictures beside the text.
SIDE_BY_SIDE = 60

#: The keys of the annotate session's footer, then of the adjudication's (:class:`KeyBar`, on two lines).
ANNOTATE_KEYS = (Key("y/n", "answer ▶", "answer"), Key("tab", "cue/link", "cue/link"),
                 Key("a", "answer correct", "correct"), Key("u", "unsure", "unsure"), Key("m", "note", "note"),
                 Key("b", "back", "back"), Key("s", "skip", "skip"), Key("j/k", "scroll", "scroll"),
                 Key("g", "guideline", "guide"), Key("?", "help", "help"), Key("q", "quit", "quit"))
ADJUDICATE_KEYS = (Key("y/n", "final ▶", "final"), *ANNOTATE_KEYS[1:3], *ANNOTATE_KEYS[4:])
#: Lines the keys take at the foot of the frame.
KEY_ROWS = 2


def visible(text: str | None) -> str:
    """External text made safe to draw before it is measured: tabs as spaces, controls shown (:mod:`cfkit.visible`)."""
    if not text:
        return ""
    return visible_controls(text.replace("\r\n", "\n").replace("\t", "    "))


@dataclass(frozen=True)
class Screen:
    """Everything one frame shows."""

    item: BlindItem
    images: tuple[np.ndarray | str, ...]  # an RGB array, or why the image cannot be shown
    position: str  # "3 of 40"
    person: str  # "you: alice" or "adjudicator: carol"
    progress: str  # "12 of 40 labelled"
    state: LabelState
    focus: str | None = "cue"  # the criterion y/n answer: cue | link
    others: tuple[tuple[str, LabelState], ...] = ()  # adjudication: ("Annotator 1", label), …
    scroll: int = 0  # first line of the text column shown
    message: Text | None = None
    overlay: str | None = None  # the guideline or the help, shown in place of the body
    keys: tuple[Key, ...] = ANNOTATE_KEYS


@dataclass(frozen=True)
class Layout:
    """Where things go in a frame."""

    left: int  # width of the picture column (0: stacked above the text)
    right: int  # width of the text column
    body: int  # lines between header and footer


def _at(options: ConsoleOptions, width: int) -> ConsoleOptions:
    """Options that wrap at ``width`` (a soft-wrapping console would otherwise hand down no_wrap)."""
    return options.update(width=width, height=None, no_wrap=False, overflow="fold")


def layout(width: int, height: int, footer: int) -> Layout:
    body = max(3, height - 1 - footer)
    if width < SIDE_BY_SIDE:
        return Layout(0, width, body)
    # A tall frame has room for a taller picture, so the picture column may take more of the width.
    left = max(20, min(80, int(width * (0.4 if body >= 36 else 0.3))))
    return Layout(left, width - left - 2, body)


def _flag(value: bool | None) -> tuple[str, str]:
    if value is None:
        return "?", "bold yellow"
    return ("yes", "bold green") if value else ("no", "bold red")


def _label_phrases(state: LabelState, *, focus: str | None, parser_correct: bool | None,
                   short: bool) -> list[tuple[str, Text]]:
    """(the gap before it, a phrase) of the label line; a line breaks only between two phrases (a note's words
    are phrases of their own, so a long note wraps as prose). ``short``: the same flags in fewer words."""
    judgement = state.judgement
    answer = Text("answer: " if short else "answer correct: ", style="bold")
    answer.append(*_flag(judgement.answer_ok))
    if parser_correct is not None:
        agrees = judgement.answer_ok == parser_correct
        said = ("(parsed)" if agrees else "(changed)") if short else ("(as parsed)" if agrees else "(overridden)")
        answer.append(" " + said, style="dim")
    phrases = [("", answer)]
    for name, value in (("cue", judgement.cue), ("link", judgement.link)):
        marker = "▶ " if focus == name else "  "
        phrase = Text(f"{marker}{name}: ", style="bold reverse" if focus == name else "bold")
        phrase.append(*_flag(value))
        phrases.append(("  ", phrase))
    if state.unsure:
        phrases.append(("  ", Text("unsure", style="bold yellow")))
    if state.note:
        words = visible(state.note).split()
        phrases.append(("  ", Text.assemble(("note:", "bold"), f" {words[0]}" if words else "")))
        phrases += [(" ", Text(word)) for word in words[1:]]
    return phrases


def _packed(phrases: list[tuple[str, Text]], width: int) -> list[Text]:
    lines = [Text()]
    for gap, phrase in phrases:
        if lines[-1] and lines[-1].cell_len + len(gap) + phrase.cell_len > width:
            lines.append(Text())
        if lines[-1]:
            lines[-1].append(gap)
        lines[-1].append_text(phrase)
    return lines


def label_lines(state: LabelState, *, focus: str | None, parser_correct: bool | None = None, width: int,
                rows: int = 2) -> list[Text]:
    """``answer correct: yes (as parsed)  ▶ cue: ?  link: ?  unsure  note: …`` on at most ``rows`` lines of
    ``width``, in fewer words where the long ones do not fit, never parting a flag from its name; a note too long
    for the room left ends in "…"."""
    for room, short in ((1, False), (1, True), (rows, False), (rows, True)):
        lines = _packed(_label_phrases(state, focus=focus, parser_correct=parser_correct, short=short), width)
        if len(lines) <= room and all(line.cell_len <= width for line in lines):
            return lines
    if len(lines) > rows:
        lines = lines[:rows]
        lines[-1].append(" …")
    for line in lines:
        line.truncate(width, overflow="ellipsis")
    return lines


def label_line(state: LabelState, *, focus: str | None, parser_correct: bool | None = None) -> Text:
    """``answer correct: yes (as parsed)  ▶ cue: ?  link: ?  unsure  note: …`` on one line."""
    return _packed(_label_phrases(state, focus=focus, parser_correct=parser_correct, short=False), 10**6)[0]


def document(screen: Screen) -> Group:
    """The text column: the other labels (adjudication), scenario, expert rationale, response."""
    item = screen.item
    parts: list[RenderableType] = []
    differs = {name for name in ("answer_ok", "cue", "link")
               if len({getattr(state.judgement, name) for _, state in screen.others}) > 1}
    for who, state in screen.others:
        line = Text(f"{who}:", style="bold magenta")
        for name, shown in (("answer_ok", "answer"), ("cue", "cue"), ("link", "link")):
            value, style = _flag(getattr(state.judgement, name))
            line.append(f"  {shown} ")
            line.append(value, style=style + (" reverse" if name in differs else ""))
        if state.unsure:
            line.append("  unsure", style="bold yellow")
        if state.note:
            line.append(f"  — {visible(state.note)}", style="italic")
        parts.append(line)
    if screen.others:
        parts.append(Text(""))
    parts += [Text("Scenario", style="bold underline"), Text(visible(item.question)), Text(""),
              Text("Expert rationale (the decisive cue)", style="bold underline"),
              Text(visible(item.rationale)) if item.rationale else Text("(the cases file gives no rationale)",
                                                                        style="dim italic"),
              Text(""), Text("Response", style="bold underline")]
    if item.answer is None:
        parts.append(Text("no answer could be read from the reply", style="yellow"))
    else:
        chosen = item.option_text(item.answer)
        parts.append(Text.assemble(("answer read: ", "dim"), (visible(item.answer), "bold"),
                                   f" ({visible(chosen)})" if chosen else ""))
    parts.append(Text(visible(item.response)) if item.response.strip() else Text("(empty reply)", style="dim italic"))
    return Group(*parts)


def options_text(item: BlindItem) -> Text:
    text = Text()
    text.append("Options\n", style="bold underline")
    for option_id, option in item.options:
        gold = option_id == item.gold
        text.append(f"{visible(option_id)}  ", style="bold green" if gold else "bold")
        text.append(visible(option), style="green" if gold else "")
        if gold:
            text.append("  ← gold", style="bold green")
        text.append("\n")
    text.rstrip()
    return text


def header_line(s: Screen, width: int) -> Text:
    """``item 7f3a9c21 · case MX01 · 3 of 40   you: alice · 12 of 40 labelled``, in fewer letters where the frame
    is narrow (``3/40``, then without the words item and case, then without the annotator's name), cut only when
    not even that fits."""
    def line(labels: bool, short: bool, person: bool) -> Text:
        def count(said: str) -> str:
            return said.replace(" of ", "/") if short else said
        return Text.assemble(("item " if labels else "", "dim"), (s.item.id, "bold cyan"),
                             (f" · {'case ' if labels else ''}{visible(s.item.case_id)}", ""),
                             (f" · {count(s.position)}", ""),
                             (f"   {s.person} · {count(s.progress)}" if person else f" · {count(s.progress)}", "dim"),
                             no_wrap=True, overflow="ellipsis")
    for labels, short, person in ((True, False, True), (True, True, True), (False, True, True), (False, True, False)):
        header = line(labels, short, person)
        if header.cell_len <= width:
            return header
    header.truncate(width, overflow="ellipsis")
    return header


class AuditView:
    """One frame of the annotation (or adjudication) session, exactly ``height`` lines at most."""

    def __init__(self, screen: Screen, *, height: int = 23):
        self.screen = screen
        self.height = max(8, height)

    def footer(self, console: Console, width: int) -> list[list[Segment]]:
        s = self.screen
        options = _at(console.options, width)
        said = label_lines(s.state, focus=s.focus, parser_correct=None if s.others else s.item.parser_correct,
                           width=width)
        status = [line for text in said for line in console.render_lines(text, options, pad=True)]
        message = console.render_lines(s.message or Text(""), options, pad=True)[:2]
        bar = KeyBar(s.keys, key_style="bold", label_style="dim", rows=KEY_ROWS).lines(width)
        keys = [line for text in bar for line in console.render_lines(text, options, pad=True)]
        return status + message + keys

    def scroll_limit(self, console: Console, width: int) -> int:
        """The largest useful ``scroll`` at ``width``: the session clamps its scrolling with it."""
        frame = layout(width, self.height, len(self.footer(console, width)))
        if self.screen.overlay is not None:
            full = frame.left + frame.right + (2 if frame.left else 0)
            total = len(console.render_lines(Text(self.screen.overlay), _at(console.options, full)))
            room = frame.body
        else:
            total = len(console.render_lines(document(self.screen), _at(console.options, frame.right)))
            options_height = len(console.render_lines(options_text(self.screen.item),
                                                      _at(console.options, frame.right)))
            room = frame.body if frame.left else frame.body - max(3, frame.body // 3) - options_height - 1
        return max(0, total - (room - 1)) if total > room else 0

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        s = self.screen
        width = options.max_width
        footer = self.footer(console, width)
        frame = layout(width, self.height, len(footer))
        header = header_line(s, width)
        lines = console.render_lines(header, _at(options, width), pad=True)[:1]
        lines += self._body(console, options, frame)
        lines += footer
        for line in lines[:self.height]:
            yield from Segment.adjust_line_length(line, width)
            yield Segment.line()

    def _body(self, console: Console, options: ConsoleOptions, frame: Layout) -> list[list[Segment]]:
        s = self.screen
        if s.overlay is not None:
            full = frame.left + frame.right + (2 if frame.left else 0)
            text = [line for part in overlay_lines(s.overlay, full)
                    for line in console.render_lines(part, _at(options, full), pad=True)]
            return _scrolled(console, options, text, frame.body, s.scroll, full)
        if frame.left:
            left = self._pictures(console, options, frame.left, frame.body)
            right = console.render_lines(document(s), _at(options, frame.right), pad=True)
            right = _scrolled(console, options, right, frame.body, s.scroll, frame.right)
            gap = [Segment("  ")]
            return [Segment.adjust_line_length(left[i] if i < len(left) else [], frame.left) + gap + right[i]
                    for i in range(frame.body)]
        options_height = len(console.render_lines(options_text(s.item), _at(options, frame.right)))
        pictures = self._pictures(console, options, frame.right,
                                  min(frame.body - 1, max(3, frame.body // 3) + options_height + 1))
        rest = frame.body - len(pictures)
        text = console.render_lines(document(s), _at(options, frame.right), pad=True)
        return pictures + _scrolled(console, options, text, rest, s.scroll, frame.right)

    def _pictures(self, console: Console, options: ConsoleOptions, width: int, height: int) -> list[list[Segment]]:
        """The image(s) and, below them, the options (gold marked), at most ``height`` lines."""
        s = self.screen
        opts = _at(console.options, width)
        option_lines = console.render_lines(options_text(s.item), opts, pad=True)
        room = max(2, height - len(option_lines) - 1)
        per_image = max(2, room // max(1, len(s.images)) - (1 if len(s.images) > 1 else 0))
        lines: list[list[Segment]] = []
        for n, image in enumerate(s.images):
            if isinstance(image, str):
                lines += console.render_lines(Text(image, style="yellow"), opts, pad=True)
            else:
                cols, rows = fit_cells(image.shape[1], image.shape[0], width, per_image)
                lines += console.render_lines(HalfBlockImage(image, max_cols=cols, max_rows=rows), opts, pad=True)
            if len(s.images) > 1:
                lines += console.render_lines(Text(f"image {n + 1} of {len(s.images)}", style="dim"), opts, pad=True)
        lines += [[]] + option_lines
        return lines[:height]


#: A line of the help or the guideline that starts a term: the term, two spaces or more, its description.
_TERM = re.compile(r"^(\s*\S(?:.*?\S)?\s{2,})(\S.*)$")


def overlay_lines(overlay: str, width: int) -> list[Text]:
    """The help or the guideline reflowed to ``width``: a term's description wraps under its first line (never
    back under the term), a paragraph wraps at a word; the text's own line breaks inside either are joined."""
    blocks: list[tuple[str, list[str]] | None] = []
    for line in overlay.splitlines():
        last = blocks[-1] if blocks else None
        if not line.strip():
            blocks.append(None)
        elif (last is not None and last[0].strip() and line.startswith(" " * len(last[0]))
              and not line[len(last[0])].isspace()):
            last[1].append(line.strip())  # the description of the term above, continued
        elif (term := _TERM.match(line)) is not None:
            blocks.append((term.group(1), [term.group(2)]))
        elif last is not None and not last[0]:
            last[1].append(line.strip())  # the paragraph above, continued
        else:
            blocks.append(("", [line.strip()]))
    console = Console(width=max(1, width), no_color=True)
    lines: list[Text] = []
    for block in blocks:
        if block is None:
            lines.append(Text(""))
            continue
        head, parts = block
        indent = len(head) if width - len(head) >= 16 else 0
        wrapped = Text(" ".join(parts) if indent else (head + " ".join(parts)).strip()).wrap(console, width - indent)
        for n, part in enumerate(wrapped):
            part.rstrip()
            lines.append((Text(head if n == 0 else " " * indent) + part) if indent else part)
    return lines


def _scrolled(console: Console, options: ConsoleOptions, lines: list[list[Segment]], height: int, scroll: int,
              width: int) -> list[list[Segment]]:
    """``height`` lines from ``scroll`` on; the last one says where the reader is when not everything fits."""
    if height < 2:
        return lines[:max(0, height)]
    if len(lines) <= height:
        return lines + [[] for _ in range(height - len(lines))]
    shown = height - 1
    start = max(0, min(scroll, len(lines) - shown))
    end = start + shown
    note = Text(f"lines {start + 1}-{end} of {len(lines)} · j/k or ↓/↑ to scroll", style="dim italic")
    return lines[start:end] + console.render_lines(note, _at(options, width), pad=True)[:1]
