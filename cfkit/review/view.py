"""The review view of one edit: original | edited | difference, with the spec and the check.

:class:`EditView` is a Rich renderable. The three pictures sit side by side
when the terminal is wide enough and are stacked otherwise. The original
carries the mask's outline; the difference is either a heat map of the
largest channel change per pixel or, toggled, the leaks (changes in the keep
region above the leak threshold) in red over a faded original.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from cfkit.review.halfblocks import HalfBlockImage, fit_cells, to_cells

#: Colour of the mask outline drawn on the original (bright magenta, rare in photographs and paintings).
OUTLINE_RGB = (255, 0, 255)
#: Colour of leak pixels in the leak view.
LEAK_RGB = (255, 32, 32)
#: Narrowest picture, in cells, before the three are stacked.
MIN_PANEL = 30
#: Tallest picture, in cells, so that a view fits a terminal screen with its text.
MAX_PANEL_ROWS = 28
DIFF_MODES = ("heat", "leaks")


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
    decision: str | None = None  # the spec's newest review decision
    note: str | None = None
    position: str | None = None  # "2 of 5" in a review session
    difference: np.ndarray | None = None  # largest channel change per pixel (uint8); computed when None


def largest_change(original: np.ndarray, edited: np.ndarray) -> np.ndarray:
    """Per pixel, the largest absolute channel difference (0..255, uint8)."""
    return np.abs(original.astype(np.int16) - edited.astype(np.int16)).max(axis=-1).astype(np.uint8)


def heat_colours(values: np.ndarray) -> np.ndarray:
    """Map 0..255 to black → red → yellow → white (a "hot" scale), uint8 RGB."""
    v = values.astype(np.float64) / 255.0
    r = np.clip(3 * v, 0, 1)
    g = np.clip(3 * v - 1, 0, 1)
    b = np.clip(3 * v - 2, 0, 1)
    return (np.stack([r, g, b], axis=-1) * 255 + 0.5).astype(np.uint8)


def block_max(values: np.ndarray, cols: int, rows: int) -> np.ndarray:
    """Shrink a 2-D map to ``(2·rows, cols)`` keeping each block's maximum, so small changes stay visible."""
    height, width = values.shape
    ys = np.linspace(0, height, 2 * rows + 1).astype(int)
    xs = np.linspace(0, width, cols + 1).astype(int)
    ys[1:] = np.maximum(ys[1:], ys[:-1] + 1)
    xs[1:] = np.maximum(xs[1:], xs[:-1] + 1)
    rowmax = np.maximum.reduceat(values, np.minimum(ys[:-1], height - 1), axis=0)
    return np.maximum.reduceat(rowmax, np.minimum(xs[:-1], width - 1), axis=1)


def outline(mask_cells: np.ndarray) -> np.ndarray:
    """Boolean outline of a boolean cell mask: mask pixels with a 4-neighbour outside it."""
    padded = np.pad(mask_cells, 1, constant_values=False)
    interior = padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:]
    return mask_cells & ~interior


def mask_cells(mask: np.ndarray, cols: int, rows: int) -> np.ndarray:
    return np.asarray(Image.fromarray(mask).resize((cols, 2 * rows), Image.Resampling.NEAREST)) > 127


def original_panel(data: ViewData, cols: int, rows: int) -> np.ndarray:
    pixels = to_cells(data.original, cols, rows).copy()
    pixels[outline(mask_cells(data.mask, cols, rows))] = OUTLINE_RGB
    return pixels


def difference_panel(data: ViewData, mode: str, cols: int, rows: int) -> np.ndarray:
    if mode == "heat":
        diff = data.difference if data.difference is not None else largest_change(data.original, data.edited)
        return heat_colours(block_max(diff, cols, rows))
    faded = (to_cells(data.original, cols, rows).astype(np.float64) * 0.35 + 255 * 0.65).astype(np.uint8)
    leaks = block_max(data.leaks.astype(np.uint8), cols, rows) > 0
    faded[leaks] = LEAK_RGB
    faded[outline(mask_cells(data.mask, cols, rows))] = OUTLINE_RGB
    return faded


def _fmt(value: float | None, fmt: str, none: str = "n/a") -> str:
    return none if value is None else format(value, fmt)


def metrics_table(check: dict[str, Any] | None) -> Table | Text:
    if check is None:
        return Text("not checked yet: run 'cfkit check' (or press g to regenerate)", style="yellow")
    m = check["metrics"]
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_column(style="bold")
    table.add_column(justify="right")
    psnr = "∞" if m.get("psnr_out") is None and m.get("mse_out") == 0 else _fmt(m.get("psnr_out"), ".1f")
    table.add_row("SSIM out", _fmt(m.get("ssim_out"), ".4f"), "LPIPS out", _fmt(m.get("lpips_out"), ".3f"))
    table.add_row("PSNR out", f"{psnr} dB", "LPIPS in", _fmt(m.get("lpips_in"), ".3f"))
    table.add_row("leaks", f"{100 * m.get('leak_share', 0):.2f}% ({m.get('leak_count', 0)})",
                  "Δ in", _fmt(m.get("mad_in"), ".3f"))
    return table


def verdict_text(check: dict[str, Any] | None) -> Text:
    if check is None:
        return Text("")
    colour = "bold green" if check["verdict"] == "pass" else "bold red"
    text = Text.assemble(("verdict: ", "bold"), (check["verdict"], colour))
    if not check["lpips_measured"]:
        text.append(" (without LPIPS)", style="yellow")
    for reason in check["reasons"]:
        text.append(f"\n  • {reason}", style="red")
    return text


class EditView:
    """One edit for review, fitted to the console's width (stacked when narrower than three panels)."""

    def __init__(self, data: ViewData, *, diff_mode: str = "heat", max_rows: int = MAX_PANEL_ROWS):
        if diff_mode not in DIFF_MODES:
            raise ValueError(f"diff_mode must be one of {DIFF_MODES}, not {diff_mode!r}")
        self.data = data
        self.diff_mode = diff_mode
        self.max_rows = max_rows

    def layout(self, width: int) -> tuple[bool, int, int]:
        """(side by side?, columns, rows) of each picture at a console ``width``."""
        height, img_width = self.data.original.shape[:2]
        side = width >= 3 * MIN_PANEL + 2
        limit = (width - 2) // 3 if side else width
        cols, rows = fit_cells(img_width, height, limit, self.max_rows)
        return side, cols, rows

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(options.max_width, MIN_PANEL), options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        d = self.data
        side, cols, rows = self.layout(options.max_width)
        head = Text.assemble((d.spec_id, "bold cyan"), " · ", d.title,
                             (f"   edit #{d.edit_id} {d.variant} · {d.engine}", "dim"))
        if d.position:
            head.append(f"   [{d.position}]", style="dim")
        yield head
        panels = [
            (original_panel(d, cols, rows), "original (mask outlined)"),
            (to_cells(d.edited, cols, rows), f"edited ({d.variant})"),
            (difference_panel(d, self.diff_mode, cols, rows),
             "difference (heat)" if self.diff_mode == "heat" else "leaks over faded original"),
        ]
        pictures = [Group(HalfBlockImage(p, max_cols=cols), Text(label, style="dim", overflow="ellipsis",
                                                                 no_wrap=True))
                    for p, label in panels]
        if side:
            grid = Table.grid(padding=(0, 1))
            for _ in pictures:
                grid.add_column(width=cols, no_wrap=True)
            grid.add_row(*pictures)
            yield grid
        else:
            yield from pictures
        yield Text.assemble(("cue: ", "bold"), d.cue)
        yield Text.assemble(("replacement: ", "bold"), d.replacement)
        yield metrics_table(d.check)
        yield verdict_text(d.check)
        if d.decision:
            review = Text.assemble(("review: ", "bold"), d.decision)
            if d.note:
                review.append(f" — {d.note}")
            yield review


def keys_help() -> Text:
    return Text.from_markup(
        "[bold]a[/] accept  [bold]r[/] reject (asks a note)  [bold]g[/] regenerate  [bold]s[/] skip  "
        "[bold]d[/] diff/leaks  [bold]v[/] raw/composite  [bold]?[/] help  [bold]q[/] quit"
    )

