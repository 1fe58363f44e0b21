"""``cfkit report --plot DIR``: the paper's figures drawn from a report, each with its data as CSV beside it.

Drawn with matplotlib (the ``plots`` extra, imported only here) on figures
one column of a two-column paper wide (3.4 in), 7-point text, in the
Okabe–Ito palette, which stays distinguishable under the common colour-vision
deficiencies; where colour tells groups or metrics apart, marker shape does
too. What each figure shows is in :mod:`cfkit.report.figures`; the numbers
plotted are the CSV's.
"""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cfkit.errors import MissingExtra, OutputError, UsageError
from cfkit.files import write_bytes_atomic
from cfkit.hints import install_hint
from cfkit.plural import plural, plural_list
from cfkit.report.figures import SIGNIFICANCE, FigureData, figure_data, shown
from cfkit.report.rows import Report
from cfkit.visible import visible

#: Okabe & Ito (2008), "Color Universal Design": colours told apart under the common colour-vision deficiencies.
OKABE_ITO = {"black": "#000000", "orange": "#E69F00", "sky_blue": "#56B4E9", "bluish_green": "#009E73",
             "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "reddish_purple": "#CC79A7"}
#: The paper's model groups, and the colours of other groups in the order met (yellow is too light for text).
GROUP_COLOURS = {"closed": OKABE_ITO["blue"], "open": OKABE_ITO["bluish_green"], "aesthetic": OKABE_ITO["vermillion"]}
OTHER_COLOURS = (OKABE_ITO["reddish_purple"], OKABE_ITO["sky_blue"], OKABE_ITO["orange"])
UNGROUPED_COLOUR = "#555555"
#: One colour and marker per model where models are told apart (the modality figure).
SERIES = (("blue", "o"), ("orange", "s"), ("bluish_green", "^"), ("vermillion", "D"), ("reddish_purple", "v"),
          ("sky_blue", "P"), ("black", "X"))
#: Width of a figure: one column of a two-column paper, in inches; and the PNG resolution.
COLUMN_WIDTH = 3.4
DPI = 300
PLOT_FORMATS: tuple[str, ...] = ("png", "svg", "pdf")
#: The axis of a percentage, a little past 0 and 100 so that a point at either end is drawn whole.
PERCENT_LIMITS = (-2.0, 102.0)

_STYLE = {"font.size": 7, "axes.titlesize": 7.5, "axes.labelsize": 7, "xtick.labelsize": 6.5,
          "ytick.labelsize": 6.5, "legend.fontsize": 6.5, "axes.linewidth": 0.6, "xtick.major.width": 0.6,
          "ytick.major.width": 0.6, "lines.linewidth": 1.0, "axes.spines.top": False, "axes.spines.right": False,
          "svg.hashsalt": "cfkit", "svg.fonttype": "none", "pdf.fonttype": 42}


@dataclass(frozen=True)
class WrittenFigure:
    """A figure written: its image and, beside it, its data."""

    name: str
    image: Path
    data: Path


def _label(text: str) -> str:
    """External text as matplotlib should draw it: controls visible, '$' literal (not the start of math)."""
    return visible(text).replace("$", r"\$")


#: A model name longer than this is broken onto lines at its hyphens or spaces, so that the axes keep their width.
NAME_WIDTH = 22


def _name(text: str) -> str:
    """A model name as a tick label: drawn as :func:`_label` does, on lines of about ``NAME_WIDTH`` characters."""
    lines, line = [], ""
    for piece in re.findall(r"[^\s-]+-?|\s+", visible(text)):
        if line and len(line) + len(piece.rstrip()) > NAME_WIDTH:
            lines.append(line.rstrip())
            line = piece.lstrip()
        else:
            line += piece
    lines.append(line.rstrip())
    return "\n".join(lines).replace("$", r"\$")


def _lines(labels: list[str]) -> int:
    """The most lines any of these tick labels takes (a row of the figure must be that tall)."""
    return max((label.count("\n") + 1 for label in labels), default=1)


def _group_colours(rows: list[dict[str, Any]]) -> dict[str | None, str]:
    colours: dict[str | None, str] = {None: UNGROUPED_COLOUR}
    others = iter(OTHER_COLOURS * (1 + len(rows)))
    for row in rows:
        group = row["group"]
        if group not in colours:
            colours[group] = GROUP_COLOURS.get(group) or next(others)
    return colours


def _group_handles(rows: list[dict[str, Any]], colours: dict[str | None, str]) -> list:
    """Legend entries of the model groups (the tick labels' colours); none when no model has a group."""
    from matplotlib.patches import Patch

    seen = dict.fromkeys((r["group"], r["group_label"]) for r in rows)
    if not any(group is not None for group, _ in seen):
        return []
    return [Patch(color=colours[g], label=_label(label)) for g, label in seen]


def _legend_on_top(fig, handles: list, ncol: int) -> None:
    if handles:
        fig.legend(handles=handles, loc="outside upper center", ncol=ncol, frameon=False, handletextpad=0.3,
                   columnspacing=1.0)


def _models_axis(ax, rows: list[dict[str, Any]], colours: dict[str | None, str]) -> list[float]:
    """Models top to bottom, a little space between groups; tick labels in their group's colour."""
    y, positions, previous = 0.0, [], None
    for row in rows:
        if positions and row["group"] != previous:
            y += 0.5
        positions.append(-y)
        previous = row["group"]
        y += 1
    ax.set_yticks(positions, [_name(shown(r)) for r in rows])
    for tick, row in zip(ax.get_yticklabels(), rows):
        tick.set_color(colours[row["group"]])
    ax.set_ylim(min(positions) - 0.7, 0.7)
    return positions


def _errors(value: float, low: float | None, high: float | None) -> list[list[float]] | None:
    return None if low is None or high is None else [[value - low], [high - value]]


def _draw_compare(fig_data: FigureData, Figure):
    rows = fig_data.rows
    labels = [f"{_name(shown(r, 'base'))}\n→ {_name(shown(r, 'other'))}" for r in rows]
    fig = Figure(figsize=(COLUMN_WIDTH, 0.85 + 0.17 * max(2, _lines(labels)) * len(rows)), layout="constrained")
    left, right = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [1.15, 1]})
    ys = [-i for i in range(len(rows))]
    for y, r in zip(ys, rows):
        left.plot([r["base_acc"], r["other_acc"]], [y, y], color="#AAAAAA", zorder=1)
        left.scatter([r["base_acc"]], [y], s=16, facecolor="white", edgecolor=OKABE_ITO["blue"], linewidth=1, zorder=2,
                     label="Base" if y == 0 else None)
        left.scatter([r["other_acc"]], [y], s=16, color=OKABE_ITO["vermillion"], marker="D", zorder=2,
                     label="Other" if y == 0 else None)
        colour = OKABE_ITO["vermillion"] if r["significant"] else OKABE_ITO["black"]
        right.errorbar([r["delta"]], [y], xerr=_errors(r["delta"], r["ci_low"], r["ci_high"]), fmt="o",
                       markersize=3.5, color=colour, capsize=2, elinewidth=0.9,
                       markerfacecolor=colour if r["significant"] else "white")
        right.annotate(f"{r['delta'] + 0.0:+.2f}{'*' if r['significant'] else ''}", (r["delta"], y),
                       xytext=(0, 4), textcoords="offset points", ha="center", va="bottom", fontsize=6.5,
                       color=colour)
    right.axvline(0, color="#888888", linewidth=0.6, linestyle="--", zorder=0)
    left.set_yticks(ys, labels)
    left.set_ylim(min(ys) - 0.6, 0.75)
    left.set_xlabel("Accuracy\n(%)")
    right.set_xlabel("Δ other − base\n(points)")
    fig.supxlabel(f"Paired 95% CI; * McNemar p < {SIGNIFICANCE:g} after Bonferroni over {len(rows)}", fontsize=6,
                  color="#444444")
    right.tick_params(axis="y", length=0)
    _legend_on_top(fig, left.get_legend_handles_labels()[0], 2)
    return fig


def _draw_ncu(fig_data: FigureData, Figure):
    rows = fig_data.rows
    colours = _group_colours(rows)
    tall = _lines([_name(shown(r)) for r in rows])
    fig = Figure(figsize=(COLUMN_WIDTH, 1.05 + 0.22 * tall * len(rows)), layout="constrained")
    ax = fig.subplots()
    ys = _models_axis(ax, rows, colours)
    for y, r in zip(ys, rows):
        colour = colours[r["group"]]
        ax.errorbar([r["ncu"]], [y], xerr=_errors(r["ncu"], r["ci_low"], r["ci_high"]), fmt="o", markersize=3.5,
                    color=colour, capsize=2, elinewidth=0.9)
        ax.annotate(f"{r['correct']}/{r['reverse']}", (1.0, y), xycoords=("axes fraction", "data"),
                    xytext=(4, 0), textcoords="offset points", va="center", fontsize=6.5)
    ax.annotate("C/R", (1.0, 0.7), xycoords=("axes fraction", "data"), xytext=(4, 0), textcoords="offset points",
                va="bottom", fontsize=6.5, fontweight="bold")
    ax.axvline(0, color="#888888", linewidth=0.6, linestyle="--", zorder=0)
    n_pairs = sorted({r["n_pairs"] for r in rows})
    ax.set_xlabel(f"NCU = 100 × (C − R) / pairs, over {plural_list(n_pairs, 'pair')}\npaired 95% CI")
    _legend_on_top(fig, _group_handles(rows, colours), 3)
    return fig


def _draw_modality(fig_data: FigureData, Figure):
    rows = fig_data.rows
    models = list(dict.fromkeys(r["model"] for r in rows))
    conditions = list(dict.fromkeys(r["condition"] for r in rows))
    # Each model's name with its marks, on lines of NAME_WIDTH so that two legend columns fit the figure's width.
    names = {r["model"]: _name(shown(r)) for r in rows}
    legend_rows = (len(models) + 1) // 2
    fig = Figure(figsize=(COLUMN_WIDTH, 2.3 + (0.14 + 0.12 * (_lines(list(names.values())) - 1)) * legend_rows),
                 layout="constrained")
    ax = fig.subplots()
    width = min(0.5, 0.09 * len(models))
    for i, model in enumerate(models):
        colour, marker = SERIES[i % len(SERIES)]
        mine = {r["condition"]: r for r in rows if r["model"] == model}
        offset = (i - (len(models) - 1) / 2) * (width / max(1, len(models) - 1)) if len(models) > 1 else 0.0
        xs = [k + offset for k in range(len(conditions))]
        values = [mine[c]["accuracy"] for c in conditions]
        errors = [[mine[c]["accuracy"] - mine[c]["ci_low"] for c in conditions],
                  [mine[c]["ci_high"] - mine[c]["accuracy"] for c in conditions]]
        ax.errorbar(xs, values, yerr=errors, color=OKABE_ITO[colour], marker=marker, markersize=3.5, capsize=1.5,
                    elinewidth=0.8, linewidth=0.9, label=names[model])
    ax.set_xticks(range(len(conditions)), [c.capitalize() for c in conditions])
    ax.set_ylim(*PERCENT_LIMITS)
    ax.set_ylabel("Accuracy (%), 95% CI")
    ax.set_xlabel(f"Condition ({plural(rows[0]['n'], 'subset case')})")
    # Below the axes, in the layout (names of several lines, with their marks, make it tall).
    fig.legend(handles=ax.get_legend_handles_labels()[0], loc="outside lower center", ncol=2, frameon=False,
               handletextpad=0.3, columnspacing=1.0)
    return fig


def _draw_contextcanvas(fig_data: FigureData, Figure):
    rows = fig_data.rows
    colours = _group_colours(rows)
    tall = _lines([_name(shown(r)) for r in rows])
    fig = Figure(figsize=(COLUMN_WIDTH, 1.3 + 0.2 * (1 + 0.6 * (tall - 1)) * len(rows)), layout="constrained")
    left, right = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [1.2, 1]})
    ys = _models_axis(left, rows, colours)
    for y, r in zip(ys, rows):
        left.errorbar([r["accuracy"]], [y + 0.17], xerr=_errors(r["accuracy"], r["accuracy_low"], r["accuracy_high"]),
                      fmt="o", markersize=3, color=OKABE_ITO["black"], capsize=1.5, elinewidth=0.8,
                      label="Accuracy" if y == ys[0] else None)
        left.errorbar([r["macro_f1"]], [y - 0.17], xerr=_errors(r["macro_f1"], r["macro_f1_low"], r["macro_f1_high"]),
                      fmt="s", markersize=3, color=OKABE_ITO["orange"], markerfacecolor="white", capsize=1.5,
                      elinewidth=0.8, label="Macro-F1" if y == ys[0] else None)
        right.errorbar([r["yes_rate"]], [y], xerr=_errors(r["yes_rate"], r["yes_rate_low"], r["yes_rate_high"]),
                       fmt="D", markersize=3, color=OKABE_ITO["reddish_purple"], capsize=1.5, elinewidth=0.8,
                       label="Yes rate" if y == ys[0] else None)
    gold = rows[0]["gold_yes_rate"]
    right.axvline(gold, color=OKABE_ITO["black"], linewidth=0.8, linestyle="--", zorder=0)
    side = ("right", -2) if gold > 50 else ("left", 2)  # on the side of the line with room for the words
    right.annotate(f"gold {gold:.2f}%", (gold, 1.0), xycoords=("data", "axes fraction"), xytext=(side[1], 0),
                   textcoords="offset points", ha=side[0], va="top", fontsize=6)
    for ax in (left, right):
        ax.set_xlim(*PERCENT_LIMITS)
    left.set_xlabel(f"% ({plural(rows[0]['n'], 'case')};\nF1 on {rows[0]['n_binary']})")
    right.set_xlabel(f"Yes rate (%)\non {rows[0]['n_binary']}")
    right.tick_params(axis="y", length=0)
    metrics = left.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    groups = _group_handles(rows, colours)
    # The metrics on the first row, the groups (the tick labels' colours) on the rows below, three to a row.
    _legend_on_top(fig, _by_rows([metrics] + [groups[i:i + 3] for i in range(0, len(groups), 3)], 3), 3)
    return fig


def _by_rows(rows: list[list], ncol: int) -> list:
    """Legend handles that a legend of ``ncol`` columns (filled column by column) shows as these rows."""
    padded = [row + [_blank()] * (ncol - len(row)) for row in rows]
    return [row[col] for col in range(ncol) for row in padded]


def _blank():
    from matplotlib.patches import Patch

    return Patch(color="none", label="")


_DRAW = {"compare": _draw_compare, "ncu": _draw_ncu, "modality": _draw_modality, "contextcanvas": _draw_contextcanvas}


def write_plots(report: Report, folder: Path | str, *, fmt: str = "png", overwrite: bool = False) -> list[WrittenFigure]:
    """Draw every figure the report has sections for into ``folder`` (``NAME.FMT``, and ``NAME.csv`` beside it).

    Steps: 1. check the format, the figures to draw and the files (kept unless
    ``overwrite``); 2. import matplotlib (a missing one is one line naming the
    install command); 3. draw each figure and write it, then its CSV.
    """
    # 1. checks
    if fmt not in PLOT_FORMATS:
        raise UsageError(f"--plot-format {fmt!r}: choose one of {', '.join(PLOT_FORMATS)}.")
    folder = Path(folder)
    figures = figure_data(report)
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"--plot {folder} is a file; give a folder (it is made if it does not exist).")
    targets = [(f, folder / f"{f.name}.{fmt}", folder / f"{f.name}.csv") for f in figures]
    if not overwrite:
        taken = [str(p) for _, image, data in targets for p in (image, data) if p.exists()]
        if taken:
            raise OutputError(f"--plot: {taken[0]} already exists{f' (and {len(taken) - 1} more)' if len(taken) > 1 else ''}; "
                              "choose another folder or pass --force to replace the figures.")
    # 2. and 3. draw and write
    written = []
    metadata = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}[fmt]
    with drawn_figures(figures) as drawn:
        for (data, figure), (_, image, table) in zip(drawn, targets):
            buffer = io.BytesIO()
            figure.savefig(buffer, format=fmt, dpi=DPI, metadata=metadata)
            try:
                write_bytes_atomic(image, buffer.getvalue(), overwrite=overwrite)
                write_bytes_atomic(table, data.to_csv().encode("utf-8"), overwrite=overwrite)
            except FileExistsError as exc:
                raise OutputError(f"{exc.filename or image} appeared while writing; choose another --plot folder.") from exc
            except OSError as exc:
                raise OutputError(f"cannot write figures to {folder} ({exc.strerror}); choose another --plot folder.") from exc
            written.append(WrittenFigure(data.name, image, table))
    return written


@contextmanager
def drawn_figures(figures: list[FigureData]) -> Iterator[list[tuple[FigureData, Any]]]:
    """Each figure's data with its matplotlib ``Figure``, drawn in cfkit's style (kept while the context is open).

    A missing matplotlib is one line naming the install command.
    """
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingExtra(f"--plot needs matplotlib, which is not installed here. Run: {install_hint('plots')}") from exc
    with matplotlib.rc_context(_STYLE), warnings.catch_warnings():
        # A model name's control picture (from visible()) may be missing from the font: drawn as a box, no warning.
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        yield [(data, _DRAW[data.name](data, Figure)) for data in figures]
