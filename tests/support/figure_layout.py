"""What a drawn matplotlib figure shows badly: text cut by the canvas, text over text, markers cut by their axes.

Used by the figure tests: they draw each figure at its default size and ask
for :func:`layout_problems`, which measures every drawn text's box and every
marker's position in display pixels (the same renderer ``savefig`` uses).
"""

from __future__ import annotations

from matplotlib.lines import Line2D
from matplotlib.text import Text

#: Half a pixel at 100 dpi: boxes closer than this are not counted as touching.
SLACK = 0.5


def _drawn_tick_labels(fig) -> set[int]:
    drawn = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis._update_ticks():  # the ticks inside the view, which are the ones drawn
                drawn.update(id(label) for label in (tick.label1, tick.label2) if label.get_visible())
    return drawn


def _tick_labels(fig) -> set[int]:
    return {id(label) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks() for label in (tick.label1, tick.label2)}


def text_boxes(fig) -> list[tuple[str, object]]:
    """Every visible, non-empty text the figure draws, with its box in display pixels."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # as savefig draws it, layout included
    renderer = canvas.get_renderer()
    drawn, ticks = _drawn_tick_labels(fig), _tick_labels(fig)
    boxes = []
    for text in fig.findobj(Text):
        if not text.get_visible() or not text.get_text().strip():
            continue
        if id(text) in ticks and id(text) not in drawn:
            continue
        box = text.get_window_extent(renderer)
        if box.width > 0 and box.height > 0:
            boxes.append((text.get_text(), box))
    return boxes


def layout_problems(fig, dpi: float = 300) -> list[str]:
    """One line per text outside the canvas, pair of texts that overlap, or marker cut by its axes (at ``dpi``)."""
    fig.set_dpi(dpi)
    problems = []
    boxes = text_boxes(fig)
    canvas = fig.bbox
    for text, box in boxes:
        if (box.x0 < canvas.x0 - SLACK or box.y0 < canvas.y0 - SLACK or box.x1 > canvas.x1 + SLACK
                or box.y1 > canvas.y1 + SLACK):
            problems.append(f"text {text!r} is cut by the canvas: {tuple(round(v) for v in box.extents)} "
                            f"outside {tuple(round(v) for v in canvas.extents)}")
    for i, (text_a, a) in enumerate(boxes):
        for text_b, b in boxes[i + 1:]:
            if min(a.x1, b.x1) - max(a.x0, b.x0) > SLACK and min(a.y1, b.y1) - max(a.y0, b.y0) > SLACK:
                problems.append(f"text {text_a!r} overlaps text {text_b!r}")
    renderer = fig.canvas.get_renderer()
    for legend in fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]:
        box = legend.get_window_extent(renderer)
        if box.x0 < canvas.x0 - SLACK or box.y0 < canvas.y0 - SLACK or box.x1 > canvas.x1 + SLACK \
                or box.y1 > canvas.y1 + SLACK:
            problems.append(f"a legend is cut by the canvas: {tuple(round(v) for v in box.extents)} "
                            f"outside {tuple(round(v) for v in canvas.extents)}")
        own = {t.get_text() for t in legend.get_texts()}
        for text, other in boxes:
            if text not in own and min(box.x1, other.x1) - max(box.x0, other.x0) > SLACK \
                    and min(box.y1, other.y1) - max(box.y0, other.y0) > SLACK:
                problems.append(f"a legend overlaps text {text!r}")
    for ax in fig.axes:
        clip = ax.bbox
        for line in ax.get_lines():
            if not isinstance(line, Line2D) or line.get_marker() in (None, "", "None", " ") or not line.get_visible():
                continue
            radius = line.get_markersize() * fig.dpi / 72 / 2
            for x, y in line.get_transform().transform(line.get_xydata()):
                if x - radius < clip.x0 - SLACK or x + radius > clip.x1 + SLACK or y - radius < clip.y0 - SLACK \
                        or y + radius > clip.y1 + SLACK:
                    problems.append(f"a marker of {line.get_label()!r} at ({x:.0f}, {y:.0f}) is cut by its axes")
                    break
    return problems
