"""The contact sheet as a PNG, in the layout of the paper's Figure S8.

Each pair is a tile: its title and question, the original and the edited
image under column labels that give each image's gold label, the
intervention, then one line per model with its answer on the original and on
the edit, each in a box coloured by agreement with that image's gold label
(blue agrees, orange disagrees, grey is stale or not asked — colours told
apart under the common colour-vision deficiencies, and named in a key at the
top). Tiles sit ``PNG_COLUMNS`` to a row; each row is as tall as its tallest
tile, so a row of landscape pictures leaves no gap below. Every piece of
text is drawn through :func:`cfkit.visible.visible`.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from cfkit.review.sheet_records import THUMB, ModelAnswer, SheetPair, answer_text
from cfkit.visible import visible

#: Pairs per row of the PNG.
PNG_COLUMNS = 2
MARGIN = 16
GAP = 8
BOX_W = 118
BOX_H = 20
ROW = 24
#: A tile holds the two pictures side by side.
TILE_W = 2 * THUMB + GAP
#: Height of the empty frame drawn where a pair has no pictures.
NO_PICTURE_H = 96
#: Box colours (fill, border) per answer state; text stays dark on each fill.
BOX_COLOURS = {"ok": ((207, 227, 242), (0, 114, 178)), "bad": ((251, 217, 191), (213, 94, 0)),
               "stale": ((235, 235, 235), (150, 150, 150)), "absent": ((235, 235, 235), (150, 150, 150))}
INK, GREY, WARN = (20, 20, 20), (90, 90, 90), (180, 60, 0)


@cache
def font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    """DejaVu Sans (the system's, else matplotlib's copy, found without importing it), else Pillow's own font.

    Pillow's built-in font covers ASCII only; DejaVu also draws accented
    letters, arrows and most scripts' names.
    """
    candidates = ["DejaVuSans.ttf"]
    spec = importlib.util.find_spec("matplotlib")
    if spec is not None and spec.origin:
        candidates.append(str(Path(spec.origin).parent / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"))
    for candidate in candidates:
        try:
            return ImageFont.truetype(candidate, size)
        except OSError:
            continue
    return ImageFont.load_default(size=size)


def _wrap(text: str, face, width: int, max_lines: int) -> list[str]:
    """``text`` broken at spaces into lines at most ``width`` pixels wide; the last kept line ends '...' if cut."""
    words, lines, line = visible(text).split(), [], ""
    for word in words:
        candidate = f"{line} {word}".strip()
        if face.getlength(candidate) <= width or not line:
            line = candidate
        else:
            lines.append(line)
            line = word
    if line:
        lines.append(line)
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = _fit(lines[-1] + " ...", face, width)
    return [_fit(one, face, width) for one in lines]


def _fit(text: str, face, width: int) -> str:
    """``text`` cut (ending '...') to ``width`` pixels."""
    text = visible(text)
    if face.getlength(text) <= width:
        return text
    while text and face.getlength(text + "...") > width:
        text = text[:-1]
    return text + "..."


@dataclass(frozen=True)
class TileLayout:
    """Where one pair's tile and its parts go on the sheet (pixels, top-left corners)."""

    pair: SheetPair
    x: int
    y: int
    height: int
    pictures: dict[str, tuple[int, int]]  # original / edit -> where the picture is pasted
    picture_h: int


@dataclass(frozen=True)
class SheetLayout:
    size: tuple[int, int]
    header_h: int
    tiles: list[TileLayout]
    key: list[tuple[int, int, str, str]]  # (x, y, state, label) of each entry of the colour key


def _text_blocks(p: SheetPair) -> tuple[list[str], list[str], list[str]]:
    """The title, question and intervention lines of a tile."""
    edit = f", {p.edit_label}" if p.edit_id is not None else ""
    title = _wrap(f"{p.spec_id} · {p.title} (case {p.case_id}{edit})", font(14), TILE_W, 2)
    question = _wrap(f"Q: {p.question}", font(12), TILE_W, 3) if p.question else []
    # The cue and its replacement are descriptions (often clauses), so they are shown as they are written.
    intervention = _wrap(f"Cue: {p.cue.rstrip('.')}. Replacement: {p.replacement.rstrip('.')}.", font(12), TILE_W, 3)
    return title, question, intervention


def _tile_height(p: SheetPair) -> tuple[int, int]:
    """(tile height, picture height) of a pair."""
    title, question, intervention = _text_blocks(p)
    shown = [p.pictures[n] for n in ("original", "edit") if n in p.pictures]
    picture_h = max((im.shape[0] for im in shown), default=NO_PICTURE_H)
    height = (18 * len(title) + 16 * len(question) + GAP + 16 + picture_h + GAP + 16 * len(intervention) + GAP
              + (16 + ROW * len(p.answers) if p.answers else 0) + (16 * 2 if p.problem else 0) + 16)
    return height, picture_h


#: The colour key under the title: each box state and what it means.
KEY = (("ok", "agrees with the image's gold label"), ("bad", "disagrees (or no valid answer)"),
       ("stale", "stale or not asked"))


def _key(width: int) -> tuple[list[tuple[int, int, str, str]], int]:
    """Where each key entry goes, on as many lines as a sheet ``width`` wide needs; and the lines' total height."""
    entries, x, y = [], MARGIN, GAP + 26
    for state, label in KEY:
        span = 20 + int(font(12).getlength(label))
        if x > MARGIN and x + span > width - MARGIN:
            x, y = MARGIN, y + 18
        entries.append((x, y, state, label))
        x += span + 18
    return entries, y - (GAP + 26) + 18


def plan(pairs: list[SheetPair]) -> SheetLayout:
    """The layout: a header with the key, then the tiles row by row, each row as tall as its tallest tile."""
    cols = max(1, min(PNG_COLUMNS, len(pairs)))
    width = max(MARGIN + cols * (TILE_W + 2 * MARGIN) - MARGIN, 480)
    key, key_h = _key(width)
    header_h = 2 * GAP + 22 + key_h
    heights = [_tile_height(p) for p in pairs]
    tiles, y = [], header_h
    for start in range(0, len(pairs), cols):
        row = range(start, min(start + cols, len(pairs)))
        for k, i in enumerate(row):
            x = MARGIN + k * (TILE_W + 2 * MARGIN)
            p = pairs[i]
            height, picture_h = heights[i]
            title, question, _ = _text_blocks(p)
            top = y + 18 * len(title) + 16 * len(question) + GAP + 16
            pictures = {}
            for slot, name in enumerate(("original", "edit")):
                if name in p.pictures:
                    w = p.pictures[name].shape[1]
                    pictures[name] = (x + slot * (THUMB + GAP) + (THUMB - w) // 2, top)
            tiles.append(TileLayout(p, x, y, height, pictures, picture_h))
        y += max(heights[i][0] for i in row) + 2 * GAP
    return SheetLayout((width, y + GAP), header_h, tiles, key)


def _box(draw: ImageDraw.ImageDraw, x: int, y: int, state: str, text: str) -> None:
    fill, border = BOX_COLOURS[state]
    draw.rectangle([x, y, x + BOX_W - 1, y + BOX_H - 1], fill=fill, outline=border, width=2)
    face = font(12)
    shown = _fit(text, face, BOX_W - 8)
    draw.text((x + (BOX_W - face.getlength(shown)) / 2, y + 3), shown, fill=INK if state in ("ok", "bad") else GREY,
              font=face)


def _after_label(a: ModelAnswer) -> str:
    return f"{a.after or 'none'} · stale #{a.after_edit_id}" if a.stale and a.after_given else answer_text(a, "after")


def render_png(pairs: list[SheetPair], *, title: str = "Counterfactual pairs") -> Image.Image:
    """The sheet as an image (see :func:`plan` for where everything goes)."""
    layout = plan(pairs)
    sheet = Image.new("RGB", layout.size, "white")
    draw = ImageDraw.Draw(sheet)
    # The header: title, then the key to the box colours.
    draw.text((MARGIN, GAP), _fit(title, font(16), layout.size[0] - 2 * MARGIN), fill=INK, font=font(16))
    for x, y, state, label in layout.key:
        fill, border = BOX_COLOURS[state]
        draw.rectangle([x, y, x + 14, y + 12], fill=fill, outline=border, width=2)
        draw.text((x + 20, y - 1), label, fill=GREY, font=font(12))
    for tile in layout.tiles:
        _draw_tile(sheet, draw, tile)
    return sheet


def _draw_tile(sheet: Image.Image, draw: ImageDraw.ImageDraw, tile: TileLayout) -> None:
    p, x0 = tile.pair, tile.x
    title, question, intervention = _text_blocks(p)
    y = tile.y
    for line in title:
        draw.text((x0, y), line, fill=INK, font=font(14))
        y += 18
    for line in question:
        draw.text((x0, y), line, fill=GREY, font=font(12))
        y += 16
    y += GAP
    for slot, (name, gold) in enumerate((("Original", p.gold_before), ("Edit", p.gold_after))):
        draw.text((x0 + slot * (THUMB + GAP), y), visible(f"{name} · gold {gold}"), fill=INK, font=font(12))
    y += 16
    for slot, name in enumerate(("original", "edit")):
        if name in tile.pictures:
            sheet.paste(Image.fromarray(p.pictures[name]), tile.pictures[name])
        else:
            left = x0 + slot * (THUMB + GAP)
            draw.rectangle([left, y, left + THUMB - 1, y + tile.picture_h - 1], outline=(200, 200, 200))
    y += tile.picture_h + GAP
    for line in intervention:
        draw.text((x0, y), line, fill=GREY, font=font(12))
        y += 16
    y += GAP
    name_w = TILE_W - 2 * BOX_W - 2 * GAP
    if p.answers:
        for text, x in (("model", x0), ("original", x0 + name_w + GAP), ("edit", x0 + name_w + BOX_W + 2 * GAP)):
            draw.text((x, y), text, fill=GREY, font=font(11))
        y += 16
    for a in p.answers:
        draw.text((x0, y + 3), _fit(a.model, font(12), name_w), fill=INK, font=font(12))
        _box(draw, x0 + name_w + GAP, y, a.before_state, answer_text(a, "before"))
        _box(draw, x0 + name_w + BOX_W + 2 * GAP, y, a.after_state, _after_label(a))
        y += ROW
    if p.problem:
        for line in _wrap(p.problem, font(12), TILE_W, 2):
            draw.text((x0, y), line, fill=WARN, font=font(12))
            y += 16
    verdict = p.verdict or "not checked"
    draw.text((x0, y), _fit(f"check: {verdict} · review: {p.decision or 'not reviewed'}", font(11), TILE_W),
              fill=(0, 114, 178) if verdict.startswith("pass") else WARN, font=font(11))
