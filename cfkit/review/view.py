"""The review view of one edit: its header, its pictures side by side, and a compact account of its check.

:class:`EditView` is a Rich renderable fitted to the console: as many panels
side by side as the width allows (three from :data:`MIN_PANEL_COLS`\\[3] columns a
panel, else two — original and one other, flipped with a key — else one), as
tall as ``max_height`` lets them be beside the text lines. The cue and the
replacement, which the edit is judged against, wrap at words and are shown
whole: the pictures give up rows for them down to :data:`MIN_PANEL_ROWS`;
below that they are cut, saying where the whole text is. The metrics break
between two figures and the check, its reasons and the other notes at words,
onto as many lines as they take; the pictures give up rows for them too, and
where a view has no room left for some of them its last line says how many
more lines a taller terminal shows. The header is one line (the title
shortened first), so a view of ``max_height`` lines never scrolls. Pixels come
from :mod:`cfkit.review.panels`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from cfkit.plural import plural
from cfkit.terminal.halfblocks import HalfBlockImage, fit_cells
from cfkit.terminal.paragraph import labelled_lines, packed_lines, wrapped_lines
from cfkit.review.panels import DIFF_MODES, OUTLINE_RGB, PANELS, Pictures, largest_change, panel

__all__ = ["DIFF_MODES", "OUTLINE_RGB", "EditView", "Layout", "ViewData", "largest_change"]

#: The narrowest panel, in columns, for three (or two) panels side by side.
MIN_PANEL_COLS = {3: 30, 2: 16}
#: Tallest picture, in cells, when the view has no height limit (``--show`` in a pipe).
MAX_PANEL_ROWS = 28
#: Lines of text around the pictures at their fewest: header, labels, cue, replacement, metrics, check.
TEXT_LINES = 6
#: The lines of those that are always one line: the header and the panels' labels.
FRAME_LINES = 2
#: The fewest rows the pictures keep for the text under them (fewer only when the view has no room for them).
MIN_PANEL_ROWS = 6


@dataclass(frozen=True)
class ViewData:
    """What the view shows; arrays are uint8 at the original's size."""

    spec_id: str
    title: str
    cue: str
    replacement: str
    edit_id: int
    engine: str
    variant: str  # raw | composite
    original: np.ndarray
    edited: np.ndarray
    mask: np.ndarray  # 255 = edit
    leaks: np.ndarray  # bool, changed pixels of the keep region
    check: dict[str, Any] | None  # CheckResult.to_dict() of this variant, or None when not checked
    decision: str | None = None  # the decision on this edit
    note: str | None = None
    position: str | None = None  # "2 of 5" in a review session
    difference: np.ndarray | None = None  # largest channel change per pixel (uint8); computed when None
    model: str | None = None
    candidates: tuple[int, ...] = ()  # the spec's successful edits, oldest first
    selected_id: int | None = None  # the edit that stands for the spec (store.edits.selected)
    mask_note: str | None = None  # "derived from edit #12, not reviewed" for a derived mask
    mask_changed: str | None = None  # why the mask outlined is not the one the edit was made with (check refuses it)
    candidate_states: tuple[str, ...] = ()  # per candidate, its check and decision: "pass, accept"
    judge: str | None = None  # which judge models doubt this edit, on which questions ('cfkit edits screen')

    @property
    def selected(self) -> bool:
        return self.selected_id == self.edit_id

    @property
    def candidate(self) -> str | None:
        """``2/3`` when the spec has several candidates."""
        if len(self.candidates) < 2 or self.edit_id not in self.candidates:
            return None
        return f"{self.candidates.index(self.edit_id) + 1}/{len(self.candidates)}"


@dataclass(frozen=True)
class Layout:
    """Which panels, and how many cells each picture takes."""

    panels: tuple[str, ...]
    cols: int
    rows: int


def _fmt(value: float | None, fmt: str, none: str = "n/a") -> str:
    return none if value is None else format(value, fmt)


def metrics_pieces(check: dict[str, Any] | None) -> list[Text]:
    """The check's figures, each with its label (``LPIPS out 0.031 in 0.412`` is one): a line breaks between them."""
    if check is None:
        return [Text("not checked: run 'cfkit check' (or press g to regenerate)", style="yellow")]
    m = check["metrics"]
    psnr = "∞" if m.get("psnr_out") is None and m.get("mse_out") == 0 else _fmt(m.get("psnr_out"), ".1f")
    pieces = []
    for labels in ((("SSIM", _fmt(m.get("ssim_out"), ".4f")),), (("PSNR", f"{psnr} dB"),),
                   (("LPIPS out", _fmt(m.get("lpips_out"), ".3f")), ("in", _fmt(m.get("lpips_in"), ".3f"))),
                   (("leaks", f"{100 * m.get('leak_share', 0):.2f}% ({m.get('leak_count', 0)})"),),
                   (("Δ in", _fmt(m.get("mad_in"), ".3f")),)):
        piece = Text()
        for label, value in labels:
            if piece:
                piece.append(" ")
            piece.append(f"{label} ", style="bold")
            piece.append(value)
        pieces.append(piece)
    return pieces


def metrics_line(check: dict[str, Any] | None) -> Text:
    """``SSIM 0.9871  PSNR 38.2 dB  LPIPS out 0.031 in 0.412  leaks 0.12% (40)  Δ in 0.183`` as one line."""
    return Text("  ").join(metrics_pieces(check))


def metrics_lines(check: dict[str, Any] | None, width: int) -> list[Text]:
    """The metrics line in ``width`` cells: broken between two figures onto as many lines as it takes."""
    return packed_lines(metrics_pieces(check), width)


def check_line(data: ViewData, *, reasons: bool = True) -> Text:
    """``check: pass (without LPIPS) · review: accept — note``; a failed check's reasons follow (``reasons``)."""
    check = data.check
    text = Text.assemble(("check: ", "bold"))
    if check is None:
        text.append("—", style="yellow")
    else:
        text.append(check["verdict"], style="bold green" if check["verdict"] == "pass" else "bold red")
        if not check["lpips_measured"]:
            text.append(" (without LPIPS)", style="yellow")
    text.append("  review: ", style="bold")
    text.append(data.decision or "not decided", style=None if data.decision else "dim")
    if data.note:
        text.append(f" — {data.note}")
    if reasons and check is not None and check["reasons"]:
        text.append("  " + "; ".join(check["reasons"]), style="red")
    return text


def candidates_line(data: ViewData) -> Text:
    """``candidates: #1 pass · #4 fail, reject · ▸#6 pass`` — each with its own check and decision."""
    text = Text.assemble(("candidates: ", "bold"))
    for k, (edit_id, state) in enumerate(zip(data.candidates, data.candidate_states)):
        if k:
            text.append(" · ", style="dim")
        current = edit_id == data.edit_id
        text.append(("▸" if current else "") + f"#{edit_id}", style="bold" if current else "")
        text.append(f" {state}" + (" (selected)" if edit_id == data.selected_id else ""),
                    style="bold" if current else "dim")
    return text


def _header_status(data: ViewData, short: bool) -> Text:
    """``  cand 2/3  not selected (#12 is)  [1 of 3]``; ``short``: the same in fewer letters
    (``  2/3  #12 is selected  [1/3]``)."""
    status = Text()
    if data.candidate:
        status.append(f"  {data.candidate}" if short else f"  cand {data.candidate}", style="bold")
    if data.selected:
        status.append("  selected", style="green")
    elif data.selected_id is not None:
        status.append(f"  #{data.selected_id} is selected" if short else f"  not selected (#{data.selected_id} is)",
                      style="yellow")
    else:
        status.append("  none selected", style="yellow")
    if data.position:
        position = data.position.replace(" of ", "/") if short else data.position
        status.append(f"  [{position}]", style="dim")
    return status


def header_line(data: ViewData, width: int) -> Text:
    """``EX03 · Foreground stars removed  #3 composite · classical  cand 1/2  selected  [1 of 3]``, fitted to ``width``.

    The spec id, the edit, its candidate number, whether it is selected and the
    position always show, in fewer letters where the frame is narrow (never cut
    mid-phrase); the title comes next (shortened when it must be), the engine
    only where there is room for both.
    """
    line = Text(data.spec_id, style="bold cyan")
    for edit, status in ((Text(f"  #{data.edit_id} {data.variant}", style="bold"), _header_status(data, False)),
                         (Text(f"  #{data.edit_id} {data.variant}", style="bold"), _header_status(data, True)),
                         (Text(f"  #{data.edit_id}", style="bold"), _header_status(data, True))):
        if line.cell_len + edit.cell_len + status.cell_len <= width:
            break
    engine = Text(f" · {data.engine}" + (f" {data.model}" if data.model else ""), style="dim")
    title = Text(f" · {data.title}")
    room = width - line.cell_len - edit.cell_len - status.cell_len
    show_engine = room >= title.cell_len + engine.cell_len
    if room >= 6:
        title.truncate(room, overflow="ellipsis")
        line.append_text(title)
    line.append_text(edit)
    if show_engine:
        line.append_text(engine)
    line.append_text(status)
    line.truncate(width, overflow="ellipsis")
    return line


def _line(text: Text | str, width: int, style: str | None = None) -> Text:
    line = text if isinstance(text, Text) else Text(text, style=style or "")
    line = line.copy()
    line.no_wrap = True
    line.overflow = "ellipsis"
    line.truncate(width, overflow="ellipsis")
    return line


class EditView:
    """One edit for review, fitted to the console's width and, when ``max_height`` is given, to that many lines.

    ``panels`` forces a count (1-3; default: what the width allows); with
    fewer than three, ``flip`` chooses the other panel shown (see
    :meth:`layout`). ``zoom`` (1, 2 …) crops every panel to one of the mask's
    boxes (:func:`cfkit.review.panels.zoom_boxes`); 0 shows the whole image.
    """

    def __init__(self, data: ViewData, *, diff_mode: str = "heat", zoom: int = 0, flip: int = 0,
                 panels: int | None = None, max_height: int | None = None):
        if diff_mode not in DIFF_MODES:
            raise ValueError(f"diff_mode must be one of {DIFF_MODES}, not {diff_mode!r}")
        self.data = data
        self.diff_mode = diff_mode
        self.zoom = zoom
        self.flip = flip
        self.panels = panels
        self.max_height = max_height

    def panel_count(self, width: int) -> int:
        if self.panels is not None:
            return max(1, min(3, self.panels))
        for count in (3, 2):
            if (width - (count - 1)) // count >= MIN_PANEL_COLS[count]:
                return count
        return 1

    def layout(self, width: int) -> Layout:
        """The panels and their size at a console ``width`` (and this view's ``max_height``).

        Three panels: original, edited, difference. Two: the original and
        ``(edited, difference)[flip % 2]``. One: ``PANELS[flip % 3]``.
        """
        count = self.panel_count(width)
        if count == 3:
            names = PANELS
        elif count == 2:
            names = ("original", ("edited", "difference")[self.flip % 2])
        else:
            names = (PANELS[self.flip % 3],)
        if self.max_height is None:
            max_rows = MAX_PANEL_ROWS
        else:  # all the text where the pictures keep MIN_PANEL_ROWS, else those rows beside the lines always shown
            room = self.max_height - FRAME_LINES
            always, extra = self._tail(width)
            wanted = sum(len(lines) for lines in self._spec_lines(width)) + len(always) + len(extra)
            max_rows = (room - wanted if room - wanted >= MIN_PANEL_ROWS
                        else max(2, min(MIN_PANEL_ROWS, room - 2 - len(always))))
        height, img_width = self.data.original.shape[:2]
        cols, rows = fit_cells(img_width, height, (width - (count - 1)) // count, max_rows)
        return Layout(names, cols, rows)

    def _spec_lines(self, width: int, most: int | None = None) -> tuple[list[Text], list[Text]]:
        """The cue's lines and the replacement's, wrapped at ``width``; with ``most``, at most that many together
        (at least one each), the replacement keeping up to half."""
        d = self.data
        cue = labelled_lines("cue: ", d.cue, width)
        replacement = labelled_lines("replacement: ", d.replacement, width)
        if most is None or len(cue) + len(replacement) <= most:
            return cue, replacement
        most = max(2, most)
        to_replacement = min(len(replacement), max(1, most // 2))
        to_cue = min(len(cue), most - to_replacement)
        to_replacement = min(len(replacement), most - to_cue)
        where = f"cfkit specs show {d.spec_id}"
        return (labelled_lines("cue: ", d.cue, width, most=to_cue, cut_notes=(f"(full cue: {where})", f"({where})")),
                labelled_lines("replacement: ", d.replacement, width, most=to_replacement,
                               cut_notes=(f"(full replacement: {where})", f"(in full: {where})", f"({where})")))

    def _tail(self, width: int) -> tuple[list[Text], list[Text]]:
        """The lines under the cue and the replacement, wrapped at ``width``: those always shown (the metrics, the
        check) and those shown where there is room (a changed mask, the check's reasons, the judge's flag, the
        mask's note, the candidates), most useful first."""
        d = self.data
        always = metrics_lines(d.check, width) + wrapped_lines(check_line(d, reasons=False), width)
        extra = [Text(f"  • {reason}", style="red") for reason in (d.check or {}).get("reasons", [])]
        if d.mask_changed:  # first: the outline and the leaks drawn are not the edit's
            extra.insert(0, Text.assemble(("mask changed: ", "bold red"), (d.mask_changed, "red")))
        if d.judge:
            extra.append(Text.assemble(("judge: ", "bold"), (d.judge, "yellow"), (" (a flag, not a verdict)", "dim")))
        if d.mask_note:
            extra.append(Text.assemble(("mask: ", "bold"), (d.mask_note, "yellow")))
        if len(d.candidate_states) > 1 and len(d.candidate_states) == len(d.candidates):
            extra.append(candidates_line(d))
        return always, [line for text in extra for line in wrapped_lines(text, width)]

    def _label(self, name: str, pictures: Pictures, last: bool) -> str:
        """A panel's caption; the last one also says how far the view is zoomed."""
        if name == "original":
            text = f"original · {'derived mask' if self.data.mask_note else 'mask'} outlined"
        elif name == "edited":
            text = f"edited ({self.data.variant})"
        else:
            text = "difference (heat)" if self.diff_mode == "heat" else "leaks over faded original"
        if last and pictures.zoom:
            text += f" · zoom ×{pictures.zoom:.1f}" + (f" ({pictures.region})" if pictures.region else "")
        return text

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(options.max_width, MIN_PANEL_COLS[2]), options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        d = self.data
        width = options.max_width
        fitted = self.max_height is not None
        layout = self.layout(width)
        pictures = Pictures.of(d.original, d.edited, d.mask, d.leaks, d.difference, zoom=self.zoom)
        yield header_line(d, width)
        cells = [HalfBlockImage(panel(pictures, name, layout.cols, 2 * layout.rows, diff_mode=self.diff_mode),
                                max_cols=layout.cols) for name in layout.panels]
        # A panel's column is as wide as its share of the line, so that its label is whole beside a picture that
        # the height keeps narrower.
        column = max(layout.cols, (width - (len(layout.panels) - 1)) // len(layout.panels))
        labels = [_line(self._label(name, pictures, k == len(layout.panels) - 1), column, "dim")
                  for k, name in enumerate(layout.panels)]
        grid = Table.grid(padding=(0, 1))
        for _ in layout.panels:
            grid.add_column(width=column, no_wrap=True)
        grid.add_row(*cells)
        grid.add_row(*labels)
        yield grid
        always, extra = self._tail(width)
        if not fitted:
            cue, replacement = self._spec_lines(width)
            yield Group(*cue, *replacement, *always, *extra)
            return
        left = self.max_height - FRAME_LINES - layout.rows
        cue, replacement = self._spec_lines(width, left - len(always))
        yield from cue + replacement
        tail, spare = always + extra, max(0, left - len(cue) - len(replacement))
        if len(tail) > spare and spare:  # the last line says what a taller terminal would show
            hidden = plural(len(tail) - (spare - 1), "more line")
            note = next((note for note in (f"… {hidden}: a taller terminal shows them", f"… {hidden} (taller term)")
                         if cell_len(note) <= width), f"… {hidden}")
            tail = tail[:spare - 1] + [Text(note, style="yellow")]
        for line in tail[:spare]:
            yield _line(line, width)
