"""``cfkit report --plot``: the paper's figures from the paper fixtures, each with its data as CSV.

Every figure is checked to be a valid image of the size a paper column
needs, and its CSV to hold exactly the numbers of the report's JSON.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PIL import Image

from cfkit.report.plots import COLUMN_WIDTH, DPI, OKABE_ITO
from support.report_workspace import cli_args, compare_args, paper, record  # noqa: F401  (paper is a fixture)
from support.workspace import run_cli

FIGURES = ("compare", "ncu", "modality", "contextcanvas")


@pytest.fixture(scope="module")
def plotted(paper, tmp_path_factory):
    ws, paths = paper
    folder = tmp_path_factory.mktemp("figures")
    result = run_cli(cli_args(ws, paths, *compare_args(), "--resamples", "300", "--format", "json",
                              "--plot", str(folder)))
    assert result.exit_code == 0, result.stderr
    return folder, json.loads(result.stdout), result.stderr


def _csv(path):
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


def _number(text: str):
    if text in ("true", "false"):
        return text == "true"
    return None if text == "" else float(text)


def test_every_figure_is_a_png_one_column_wide(plotted):
    folder, _, stderr = plotted
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{n}.{e}" for n in FIGURES for e in ("png", "csv"))
    assert "Wrote 4 figures" in stderr
    colours = {tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in OKABE_ITO.values()}
    for name in FIGURES:
        with Image.open(folder / f"{name}.png") as image:
            image.verify()
        with Image.open(folder / f"{name}.png") as image:
            pixels = np.asarray(image.convert("RGB"))
            assert image.size[0] == round(COLUMN_WIDTH * DPI), name
            assert 0.12 < image.size[1] / image.size[0] < 1.6, (name, image.size)
        # Not blank, and drawn in the palette: each figure uses several Okabe–Ito colours.
        used = {tuple(p) for p in pixels.reshape(-1, 3)[::7]}
        assert len(used & colours) >= 2, name


def test_each_csv_holds_the_json_numbers(plotted):
    folder, data, _ = plotted
    compare = _csv(folder / "compare.csv")
    assert [(r["base"], r["other"]) for r in compare] == [(r["base"], r["other"]) for r in data["compare"]]
    for row, rec in zip(compare, data["compare"]):
        for key in ("base_acc", "other_acc", "delta", "b", "c", "p", "p_adj", "n"):
            assert _number(row[key]) == rec[key], key
        assert [_number(row["ci_low"]), _number(row["ci_high"])] == rec["ci"]
        assert _number(row["significant"]) is (rec["p_adj"] < 0.05)
    assert [r["significant"] for r in compare] == ["true", "false", "true", "false"]  # Fig. 4a's asterisks

    by_model = {r["model"]: r for r in data["counterfactual"]}
    ncu = _csv(folder / "ncu.csv")
    assert {r["model"] for r in ncu} == set(by_model)
    for row in ncu:
        rec = by_model[row["model"]]
        for key in ("ncu", "correct", "reverse", "stuck_original", "stuck_edit", "invalid", "n_pairs"):
            assert _number(row[key]) == rec[key], key
        assert [_number(row["ci_low"]), _number(row["ci_high"])] == rec["ncu_ci"]
        assert row["group"] == rec["group"]

    by_model = {r["model"]: r for r in data["modality"]}
    modality = _csv(folder / "modality.csv")
    assert len(modality) == 4 * len(by_model)
    for row in modality:
        rec = by_model[row["model"]]
        assert _number(row["accuracy"]) == rec["accuracy"][row["condition"]]
        assert [_number(row["ci_low"]), _number(row["ci_high"])] == rec["accuracy_ci"][row["condition"]]

    by_model = {r["model"]: r for r in data["contextcanvas"]}
    canvas = _csv(folder / "contextcanvas.csv")
    assert len(canvas) == 17
    for row in canvas:
        rec = by_model[row["model"]]
        for metric in ("accuracy", "macro_f1", "yes_rate"):
            assert _number(row[metric]) == rec[metric]
            assert [_number(row[f"{metric}_low"]), _number(row[f"{metric}_high"])] == rec[f"{metric}_ci"]
        assert _number(row["gold_yes_rate"]) == rec["gold_yes_rate"]
    # Rows in the tables' order: the paper's groups, closed-source first.
    assert [r["group"] for r in canvas] == ["closed"] * 8 + ["open"] * 5 + ["aesthetic"] * 4


@pytest.mark.parametrize("fmt", ["svg", "pdf"])
def test_vector_formats(paper, tmp_path, fmt):
    ws, paths = paper
    result = run_cli(cli_args(ws, paths[1:2], "--resamples", "100", "--plot", str(tmp_path), "--plot-format", fmt))
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ncu.csv", f"ncu.{fmt}"]
    body = (tmp_path / f"ncu.{fmt}").read_bytes()
    if fmt == "svg":
        root = ET.fromstring(body)
        assert root.tag.endswith("svg") and "GPT-5.2" in body.decode()  # text kept as text
        assert root.attrib["width"] == f"{COLUMN_WIDTH * 72:g}pt"
    else:
        assert body.startswith(b"%PDF-") and body.rstrip().endswith(b"%%EOF")


def test_existing_figures_are_kept_unless_forced(paper, tmp_path):
    ws, paths = paper
    (tmp_path / "ncu.csv").write_text("mine")
    args = cli_args(ws, paths[1:2], "--resamples", "50", "--plot", str(tmp_path))
    refused = run_cli(args)
    assert refused.exit_code == 2 and "ncu.csv already exists" in refused.stderr and "--force" in refused.stderr
    assert (tmp_path / "ncu.csv").read_text() == "mine" and not (tmp_path / "ncu.png").exists()
    assert run_cli(args + ["--force"]).exit_code == 0
    assert (tmp_path / "ncu.csv").read_text().startswith("model,group,")
    alone = run_cli(cli_args(ws, paths[1:2], "--plot-format", "svg"))
    assert alone.exit_code == 2 and "give --plot DIR too" in alone.stderr


def test_without_matplotlib_the_plot_is_one_line_naming_the_extra(paper, tmp_path, monkeypatch):
    ws, paths = paper
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails as if not installed
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    result = run_cli(cli_args(ws, paths[1:2], "--resamples", "50", "--plot", str(tmp_path / "f")))
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: --plot needs matplotlib, which is not installed here. Run: pip install 'cfkit-probes[plots]'"]
    assert not (tmp_path / "f").exists()


def test_hostile_model_names_are_drawn_as_text(tiny_ws, tmp_path):
    path = tmp_path / "p.jsonl"
    names = ["$\\alpha$ <b>x</b>", "=HYPERLINK(\"http://x\")", "bell\x07"]
    path.write_text("".join(record(name, "contextcanvas", case, "image", "A") + "\n"
                            for name in names for case in ("T001", "T002", "T003")))
    out = tmp_path / "figs"
    result = run_cli(["report", "-w", str(tiny_ws), "--predictions", str(path), "--resamples", "50",
                      "--plot", str(out), "--plot-format", "svg"])
    assert result.exit_code == 0, result.stderr
    svg = (out / "contextcanvas.svg").read_text()
    assert "$\\alpha$ &lt;b&gt;x&lt;/b&gt;" in svg and "bell\u2407" in svg and "\x07" not in svg
    rows = _csv(out / "contextcanvas.csv")
    assert [r["model"] for r in rows] == [names[0], "'" + names[1], names[2]]  # the CSV cell is formula-safe
    assert rows[0]["group"] == "" and rows[0]["group_label"] == "Other models"


def test_a_figure_names_a_marked_model_with_its_marks_and_its_csv_carries_them(tiny_ws, tmp_path):
    # B has no answer for T003 (its row is incomplete); C's replies were cut off at the token limit (not clean).
    lines = [record("A", "contextcanvas", case, "image", "A") for case in ("T001", "T002", "T003")]
    lines += [record("B", "contextcanvas", case, "image", "A") for case in ("T001", "T002")]
    lines += [json.dumps(json.loads(record("C", "contextcanvas", case, "image", "A")) | {"truncated": True})
              for case in ("T001", "T002", "T003")]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "figs"
    result = run_cli(["report", "-w", str(tiny_ws), "--predictions", str(path), "--resamples", "50", "--compare",
                      "A=B", "--format", "json", "--plot", str(out), "--plot-format", "svg"])
    assert result.exit_code == 0, result.stderr
    rows = {r["model"]: r for r in json.loads(result.stdout)["contextcanvas"]}
    assert [(rows[m]["incomplete"], rows[m]["not_clean"]) for m in "ABC"] == [(False, False), (True, False),
                                                                              (False, True)]
    canvas = {r["model"]: (r["incomplete"], r["not_clean"]) for r in _csv(out / "contextcanvas.csv")}
    assert canvas == {"A": ("false", "false"), "B": ("true", "false"), "C": ("false", "true")}
    svg = (out / "contextcanvas.svg").read_text()
    assert "B (incomplete)" in svg and "C (not clean)" in svg and "A (" not in svg
    compare = _csv(out / "compare.csv")
    assert [(r["base_incomplete"], r["other_incomplete"], r["other_not_clean"]) for r in compare] == [
        ("false", "true", "false")]
    assert "B (incomplete)" in (out / "compare.svg").read_text()


def test_plotting_code_imports_matplotlib_only_when_drawing():
    code = "import sys, cfkit.report.plots, cfkit.report.figures; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# ── layout: nothing cut, nothing over anything else ────────────────────────

#: The longest model names the paper prints (supplement, Tables S1 and S10), put in place of shorter ones.
PAPER_LONG_NAMES = {"LLaVA-OneVision": "LLaVA-OneVision-1.5-8B-Instruct", "mPLUG-Owl2": "mPLUG-Owl2-LLaMA2-7B",
                    "InternVL3": "InternVL3-8B-Instruct", "Qwen3-VL-Instruct": "Qwen3-VL-8B-Instruct"}


@pytest.mark.parametrize("names", ["table 2", "longest in the paper", "longest, every mark"])
def test_figures_lay_out_without_cut_or_overlapping_text(paper, tmp_path, names):
    from support.figure_layout import layout_problems

    from cfkit.report.build import make_report
    from cfkit.report.figures import figure_data
    from cfkit.report.plots import drawn_figures
    from cfkit.workspace import load_workspace

    ws, paths = paper
    renames = PAPER_LONG_NAMES if names != "table 2" else {}
    renamed = []
    for path in paths:
        text = path.read_text()
        for short, long in renames.items():
            text = text.replace(f'"model": "{short}"', f'"model": "{long}"')
        renamed.append(tmp_path / path.name)
        renamed[-1].write_text(text)
    pairs = [tuple(renames.get(m, m) for m in arg.split("=")) for arg in compare_args() if "=" in arg]
    report = make_report(load_workspace(ws), renamed, compare=pairs, n_resamples=200)
    figures = figure_data(report)
    if names == "longest, every mark":  # each name with every mark a row can carry: the longest labels drawn
        for figure in figures:
            for row in figure.rows:
                for key in ("incomplete", "not_clean", "base_incomplete", "base_not_clean", "other_incomplete",
                            "other_not_clean", "unreviewed"):
                    if key in row:
                        row[key] = True
    with drawn_figures(figures) as drawn:
        assert sorted(data.name for data, _ in drawn) == sorted(FIGURES)
        problems = {data.name: layout_problems(figure, dpi=DPI) for data, figure in drawn}
    assert problems == {name: [] for name in FIGURES}
