"""An RGB image drawn in the terminal with Unicode upper half blocks.

Each character cell shows two pixels: the upper one as the foreground colour
of ``▀`` and the lower one as its background. Colours are 24-bit; on a
256-colour terminal Rich downgrades them to the nearest palette entry, so the
same renderable works over any SSH session. Where the console draws no
colour (``NO_COLOR`` set, ``--color never``, a pipe), a cell is one of the
shades :data:`SHADES` instead, from the brightness of its two pixels, so the
picture still shows its shapes rather than a wall of identical blocks.
"""

from __future__ import annotations

import numpy as np
from PIL import Image
from rich.color import Color
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style

UPPER_HALF = "▀"
#: A cell drawn without colour, darkest to brightest (a bright pixel is drawn in the text's colour).
SHADES = " ░▒▓█"


def fit_cells(width: int, height: int, max_cols: int, max_rows: int | None = None) -> tuple[int, int]:
    """Columns and rows of cells that show a ``width × height`` image within the limits, keeping its aspect."""
    cols = max(1, max_cols)
    rows = max(1, round(cols * height / width / 2))
    if max_rows is not None and rows > max_rows:
        rows = max(1, max_rows)
        cols = max(1, min(max_cols, round(rows * 2 * width / height)))
    return cols, rows


def to_cells(image: np.ndarray, cols: int, rows: int) -> np.ndarray:
    """The image resampled to ``(2·rows, cols)`` pixels (area averaging), uint8 RGB."""
    if image.shape[1] == cols and image.shape[0] == 2 * rows:
        return image
    return np.asarray(Image.fromarray(image).resize((cols, 2 * rows), Image.Resampling.BOX))


class HalfBlockImage:
    """A uint8 ``(H, W, 3)`` image at most ``max_cols`` cells wide (and ``max_rows`` high).

    The image is already at cell resolution when ``H == 2·rows`` and
    ``W == cols``; otherwise it is resampled when rendered.
    """

    def __init__(self, image: np.ndarray, *, max_cols: int | None = None, max_rows: int | None = None):
        self.image = image
        self.max_cols = max_cols
        self.max_rows = max_rows

    def _size(self, available: int) -> tuple[int, int]:
        height, width = self.image.shape[:2]
        limit = min(available, self.max_cols or width)
        return fit_cells(width, height, limit, self.max_rows)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        cols, _ = self._size(options.max_width)
        return Measurement(cols, cols)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        cols, rows = self._size(options.max_width)
        pixels = to_cells(self.image, cols, rows)
        if console.no_color or console.color_system is None:
            yield from _shaded(pixels, rows)
            return
        colours: dict[tuple[int, int, int], Color] = {}
        styles: dict[tuple, Style] = {}

        def colour(rgb: tuple[int, int, int]) -> Color:
            found = colours.get(rgb)
            if found is None:
                found = colours[rgb] = Color.from_rgb(*rgb)
            return found

        newline = Segment.line()
        for r in range(rows):
            # Plain Python ints: far faster to hash and compare than numpy scalars.
            pairs = np.concatenate([pixels[2 * r], pixels[2 * r + 1]], axis=1).tolist()  # cols × 6
            for pair in pairs:
                key = tuple(pair)
                style = styles.get(key)
                if style is None:
                    style = styles[key] = Style.from_color(colour(key[:3]), colour(key[3:]))
                yield Segment(UPPER_HALF, style)
            yield newline


def _shaded(pixels: np.ndarray, rows: int) -> RenderResult:
    """The cells as :data:`SHADES` from the mean luminance (ITU-R BT.601) of each cell's two pixels."""
    luma = pixels[..., :3].astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32)
    cells = (luma[0:2 * rows:2] + luma[1:2 * rows:2]) / 2
    levels = np.minimum((cells * len(SHADES) / 256).astype(int), len(SHADES) - 1)
    newline = Segment.line()
    for row in levels.tolist():
        yield Segment("".join(SHADES[level] for level in row))
        yield newline
