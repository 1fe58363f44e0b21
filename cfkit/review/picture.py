"""The review view as a PNG (``cfkit review CF18 --show --output view.png``): the three panels side by side.

The same panels as the terminal view (:mod:`cfkit.review.panels`), at
:data:`PANEL_PX` pixels on their longer side instead of terminal cells, with
the header above and the cue, the replacement, the metrics and the check
below. Text is drawn with Pillow's default font, so it is written in ASCII
(its glyphs do not cover Δ or ∞). A line wider than the picture is wrapped at
its words (a line after the first indented), and the picture is as tall as its
lines take: a long cue is drawn whole, never cut.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from cfkit.errors import OutputError
from cfkit.files import write_bytes_atomic
from cfkit.review.panels import PANELS, Pictures, panel
from cfkit.review.view import ViewData, check_line, metrics_line

#: Longer side of each panel, in pixels.
PANEL_PX = 480
_GAP = 10
_LINE = 18
_ASCII = str.maketrans({"Δ": "d", "∞": "inf", "·": "-", "—": "-", "…": "...", "×": "x", "→": "->", "✓": "v"})


def _ascii(text: str) -> str:
    return text.translate(_ASCII)


def render_view_png(data: ViewData, *, diff_mode: str = "heat", zoom: int = 0,
                    panel_px: int = PANEL_PX) -> Image.Image:
    """The side-by-side view of one edit as an RGB image."""
    pictures = Pictures.of(data.original, data.edited, data.mask, data.leaks, data.difference, zoom=zoom)
    height, width = data.original.shape[:2]
    scale = panel_px / max(height, width)
    pw, ph = max(1, round(width * scale)), max(1, round(height * scale))
    thickness = max(2, round(panel_px / 240))
    font = ImageFont.load_default(size=14)
    header = (f"{data.spec_id} - {data.title}   edit #{data.edit_id} {data.variant} - {data.engine}"
              + (f" {data.model}" if data.model else "")
              + (f"   candidate {data.candidate}" if data.candidate else "")
              + ("   selected" if data.selected else "   not selected"))
    zoomed = f" - zoom x{pictures.zoom:.1f}" if pictures.zoom else ""
    if pictures.region:
        zoomed += f" (region {pictures.region})"
    labels = [f"original - {'derived ' if data.mask_note else ''}mask outlined{zoomed}",
              f"edited ({data.variant}){zoomed}",
              ("difference (heat)" if diff_mode == "heat" else "leaks over faded original") + zoomed]
    below = [f"cue: {data.cue}", f"replacement: {data.replacement}"]
    if data.mask_note:
        below.insert(0, f"mask: {data.mask_note}")
    if data.mask_changed:  # the digests left out: the line fits the picture's width
        below.insert(0, "mask changed: " + re.sub(r" \(sha256 [^)]*\)", "", data.mask_changed))
    below += [metrics_line(data.check).plain, check_line(data).plain]
    canvas_w = 3 * pw + 4 * _GAP
    measure = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    heading = _wrap(_ascii(header), measure, font, canvas_w - 2 * _GAP)
    text = [(line, colour) for entry in below
            for colour in [(170, 20, 20) if entry.startswith("check: fail") else (20, 20, 20)]
            for line in _wrap(_ascii(entry), measure, font, canvas_w - 2 * _GAP)]
    captions = [_wrap(_ascii(label), measure, font, pw) for label in labels]
    caption_h = max(len(lines) for lines in captions) * _LINE
    top = _GAP + len(heading) * _LINE + _GAP
    canvas_h = top + ph + caption_h + _GAP + len(text) * _LINE + _GAP
    canvas = Image.new("RGB", (canvas_w, canvas_h), "white")
    draw = ImageDraw.Draw(canvas)
    for k, line in enumerate(heading):
        draw.text((_GAP, _GAP + k * _LINE), line, fill=(20, 20, 20), font=font)
    for k, name in enumerate(PANELS):
        x = _GAP + k * (pw + _GAP)
        pixels = panel(pictures, name, pw, ph, diff_mode=diff_mode, thickness=thickness)
        canvas.paste(Image.fromarray(pixels), (x, top))
        for n, line in enumerate(captions[k]):
            draw.text((x, top + ph + 2 + n * _LINE), line, fill=(100, 100, 100), font=font)
    y = top + ph + caption_h + _GAP
    for line, colour in text:
        draw.text((_GAP, y), line, fill=colour, font=font)
        y += _LINE
    return canvas


def _wrap(text: str, draw: ImageDraw.ImageDraw, font: ImageFont.ImageFont, width: int) -> list[str]:
    """``text`` on as many lines of ``width`` pixels as it takes, broken between words (a word wider than a line
    folded), each line after the first indented by two spaces; every word is kept."""
    lines = [""]
    for word in text.split(" "):
        line = lines[-1]
        joined = f"{line} {word}" if line.strip() else line + word
        if draw.textlength(joined, font=font) <= width:
            lines[-1] = joined
            continue
        if line.strip():
            lines.append("  ")
        while draw.textlength(lines[-1] + word, font=font) > width and len(word) > 1:
            cut = next((k for k in range(len(word) - 1, 0, -1)
                        if draw.textlength(lines[-1] + word[:k], font=font) <= width), 1)
            lines[-1] += word[:cut]
            lines.append("  ")
            word = word[cut:]
        lines[-1] += word
    return [line for line in lines if line.strip()] or [""]


def write_view_png(data: ViewData, path: Path, *, diff_mode: str = "heat", zoom: int = 0,
                   overwrite: bool = False) -> Path:
    """Write the view to ``path`` (a .png); an existing file is refused unless ``overwrite``."""
    if path.suffix.lower() != ".png":
        raise OutputError(f"--output {path}: the view is written as a PNG; give a file name ending in .png.")
    if path.exists() and not overwrite:
        raise OutputError(f"{path} already exists; choose another --output or pass --force to replace it.")
    buffer = io.BytesIO()
    render_view_png(data, diff_mode=diff_mode, zoom=zoom).save(buffer, format="PNG", optimize=True)
    try:
        write_bytes_atomic(path, buffer.getvalue(), overwrite=overwrite)
    except FileExistsError as exc:
        raise OutputError(f"{path} appeared while writing; choose another --output.") from exc
    except OSError as exc:
        raise OutputError(f"cannot write {path} ({exc.strerror}); choose another --output.") from exc
    return path
