"""The LaTeX tables cfkit writes fit an article's text column: each table of the demo workspace's report
(plain, with the paper's rows, per unit) is compiled with pdflatex, and no box may be overfull by more than
a point. Skipped where pdflatex is not installed."""

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
ARTICLE = "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n\\input{%s}\n\\end{document}\n"
OVERFULL = re.compile(r"Overfull \\hbox \(([0-9.]+)pt too wide\)")
FORMS = {"plain": [], "reference": ["--reference"], "units": ["--units"]}


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("latex") / "demo"
    assert run_cli(["demo", "--output", str(root)]).exit_code == 0
    return root


def _compiled(folder: Path, tables: str) -> str:
    (folder / "tables.tex").write_text(tables, encoding="utf-8")
    (folder / "article.tex").write_text(ARTICLE % "tables", encoding="utf-8")
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "article.tex"], cwd=folder,
                          capture_output=True, text=True, timeout=120)
    log = (folder / "article.log").read_text(encoding="utf-8", errors="replace")
    assert done.returncode == 0, log[-3000:]
    return log


@pytest.mark.parametrize("form", list(FORMS))
def test_each_table_fits_an_article_column(demo, tmp_path, form):
    result = run_cli(["-w", str(demo), "report", "--format", "latex", *FORMS[form]])
    assert result.exit_code == 0, result.stderr
    tables = result.stdout
    assert tables.count(r"\begin{tabular}") >= 1
    log = _compiled(tmp_path, tables)
    overfull = [float(width) for width in OVERFULL.findall(log)]
    assert all(width <= TOLERANCE_PT for width in overfull), (form, overfull)
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
