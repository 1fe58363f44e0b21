"""The LaTeX tables cfkit writes fit an article's page: each table of the demo workspace's report (plain, with
the paper's rows, per unit) is compiled with pdflatex, no box may be overfull by more than a point, no float
may be taller than the page, and every row written must be in the PDF's text (read with pdftotext where
installed). A table longer than a page is a ``longtable``, the package named in the file's first line.
Skipped where pdflatex is not installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cfkit.report.exports import latex_escape
from support.workspace import run_cli

pytestmark = pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")

#: How far (pt) a box may stick out before the test calls it overfull: rounding, not a visible overhang.
TOLERANCE_PT = 1.0
ARTICLE = "\\documentclass{article}\n%s\\begin{document}\n\\input{%s}\n\\end{document}\n"
OVERFULL = re.compile(r"Overfull \\hbox \(([0-9.]+)pt too wide\)")
#: A box that sticks out of the page at its foot, or a float taller than the page: rows lost off the page.
TOO_TALL = re.compile(r"Float too large for page|Overfull \\vbox")
FORMS = {"plain": [], "reference": ["--reference"], "units": ["--units"]}


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("latex") / "demo"
    assert run_cli(["demo", "--output", str(root)]).exit_code == 0
    return root


def _compiled(folder: Path, tables: str) -> str:
    """The log of an article that loads booktabs and what the file's first line (a comment) says it needs."""
    first = tables.splitlines()[0] if tables.startswith("%") else ""
    packages = "".join(rf"\usepackage{{{name}}}" + "\n" for name in {"booktabs", *USEPACKAGE.findall(first)})
    (folder / "tables.tex").write_text(tables, encoding="utf-8")
    (folder / "article.tex").write_text(ARTICLE % (packages, "tables"), encoding="utf-8")
    for _ in range(2):  # longtable settles its columns' widths on a second run
        done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "article.tex"],
                              cwd=folder, capture_output=True, text=True, timeout=120)
    log = (folder / "article.log").read_text(encoding="utf-8", errors="replace")
    assert done.returncode == 0, log[-3000:]
    return log


USEPACKAGE = re.compile(r"\\usepackage\{(\w+)\}")
#: A cell whose text the PDF shows as written: a word, a number, a model name (no TeX markup, no dash).
PLAIN_CELL = re.compile(r"^-?[A-Za-z0-9.:+]+(?:-[A-Za-z0-9.:+]+)*$")


def _rows_written(tables: str) -> list[list[str]]:
    """Each row of the file's tables (not a header, caption or heading): its cells that the PDF shows as written."""
    rows, in_body = [], False
    for line in tables.splitlines():
        if line in (r"\midrule", r"\endhead", r"\endfoot"):
            in_body = True
        elif line.startswith((r"\bottomrule", r"\end{", r"\endfirsthead", r"\caption", r"\toprule")):
            in_body = False
        elif in_body and line.endswith(r" \\") and not line.startswith(r"\multicolumn"):
            cells = [re.sub(r"^\\textit\{(.*)\}$", r"\1", c.strip()) for c in line[:-3].split(" & ")]
            rows.append([c for c in cells if PLAIN_CELL.match(c)])
    return rows


def _missing_from_pdf(folder: Path, tables: str) -> list[list[str]]:
    """The rows written whose plain cells are on no line of the PDF's text, in order (as many lines as rows)."""
    text = subprocess.run(["pdftotext", "-layout", str(folder / "article.pdf"), "-"], capture_output=True,
                          text=True, timeout=60, check=True).stdout
    lines = [line.split() for line in text.splitlines()]

    def on(cells: list[str], words: list[str]) -> bool:
        rest = iter(words)
        return all(cell in rest for cell in cells)

    missing = []
    for cells in _rows_written(tables):
        found = next((k for k, words in enumerate(lines) if on(cells, words)), None)
        if found is None:
            missing.append(cells)
        else:
            del lines[found]  # a line stands for one row, so that a repeated row must be there twice
    return missing


@pytest.mark.parametrize("form", list(FORMS))
def test_each_table_fits_an_article_column(demo, tmp_path, form):
    result = run_cli(["-w", str(demo), "report", "--format", "latex", *FORMS[form]])
    assert result.exit_code == 0, result.stderr
    tables = result.stdout
    assert tables.count(r"\begin{tabular}") + tables.count(r"\begin{longtable}") >= 1
    log = _compiled(tmp_path, tables)
    overfull = [float(width) for width in OVERFULL.findall(log)]
    assert all(width <= TOLERANCE_PT for width in overfull), (form, overfull)
    assert not TOO_TALL.findall(log), (form, [line for line in log.splitlines() if TOO_TALL.search(line)])
    rows = _rows_written(tables)
    assert len(rows) >= (100 if form == "units" else 5) and sum(map(len, rows)) >= 2 * len(rows), rows[:3]
    if shutil.which("pdftotext"):
        assert _missing_from_pdf(tmp_path, tables) == [], form
    # Nothing is left out to make it fit: every row written is in the file, each in a size of LATEX_SIZES.
    sizes = {"", r"\small", r"\footnotesize", r"\scriptsize", r"\tiny"}
    for line in tables.splitlines():
        if r"\setlength{\tabcolsep}" in line:
            assert line.split(r"\setlength")[0] in sizes, line


def test_a_narrow_table_keeps_the_article_size(tmp_path):
    """A table that fits as it is is not made smaller."""
    from cfkit.report.exports import latex_tables
    from cfkit.report.tables import DisplayTable

    table = DisplayTable(key="t", title="Small", columns=["Model", "Acc."], rows=[["m", "1.00"]], published=[False])
    text = latex_tables([table])
    assert r"\tabcolsep" not in text and r"\small" not in text
    assert "Small" in text and latex_escape("1.00") in text
    assert not OVERFULL.findall(_compiled(tmp_path, text))
    assert "longtable" not in text and not text.startswith("%")


@pytest.mark.parametrize("width", [1, 9])  # columns: the article's size, and one of the smaller sizes
def test_the_longest_float_fits_a_page_and_one_row_more_breaks_across_pages(tmp_path, width):
    """A table stays a float as long as it fits a page with its caption and legend; a row more, it is a
    longtable whose rows all reach the PDF, each page headed by the caption and the header."""
    from cfkit.report.exports import _latex_size, _longer_than_a_page, latex_tables
    from cfkit.report.tables import DisplayTable

    def table(n: int) -> DisplayTable:
        columns = ["Model"] + [f"Metric {k}" for k in range(width)]
        rows = [[f"model-{r}"] + [f"{r}.{k:02d}" for k in range(width)] for r in range(n)]
        return DisplayTable(key="t", title="Long", columns=columns, rows=rows, published=[False] * n,
                            caption="Metric: what it counts, spelled out at some length. " * 6)

    n = 1
    while n < 200 and not _longer_than_a_page(table(n + 1), _latex_size(table(n + 1))[0]):
        n += 1
    assert 20 <= n < 200, n  # no article page holds 200 rows in these sizes
    longest = latex_tables([table(n)])
    assert r"\begin{table}" in longest and "longtable" not in longest
    log = _compiled(tmp_path, longest)
    assert not TOO_TALL.findall(log) and not OVERFULL.findall(log)

    more = latex_tables([table(3 * n)])
    assert more.splitlines()[0].startswith("% Needs") and r"\usepackage{longtable}" in more.splitlines()[0]
    assert r"\begin{table}" not in more and more.count(r"\begin{longtable}") == 1
    log = _compiled(tmp_path, more)
    assert not TOO_TALL.findall(log) and not OVERFULL.findall(log)
    pages = int(re.search(r"Output written on article\.pdf \((\d+) pages?", log).group(1))
    assert pages >= 3
    if shutil.which("pdftotext"):
        assert _missing_from_pdf(tmp_path, more) == []
        text = subprocess.run(["pdftotext", str(tmp_path / "article.pdf"), "-"], capture_output=True, text=True,
                              check=True).stdout
        assert text.count("Long (continued)") == pages - 1 and text.count("Metric 0") >= pages
