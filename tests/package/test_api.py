"""The Python API: docs/api.md's example runs as written, and the names it documents are the ones exported."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import cfkit
from cfkit import api
from support.paper_tables import TABLE_2
from support.report_workspace import build_workspace, write_predictions

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def code_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.fixture(scope="module")
def doc_run(tmp_path_factory):
    """Every python block of docs/api.md run in order, in one namespace, beside the paper fixtures."""
    root = tmp_path_factory.mktemp("api")
    build_workspace(root / "paper")
    (root / "paper" / "predictions").mkdir()
    write_predictions(root / "paper" / "predictions")
    blocks = code_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 4
    namespace: dict = {}
    cwd = Path.cwd()
    try:
        import os

        os.chdir(root)
        for number, block in enumerate(blocks, start=1):
            exec(compile(block, f"docs/api.md, block {number}", "exec"), namespace)
    finally:
        os.chdir(cwd)
    return namespace


def test_the_example_gives_table_2_as_a_dataframe(doc_run):
    table2 = doc_run["table2"]
    assert list(table2.columns[:4]) == ["model", "group", "n", "accuracy"]
    rows = table2.set_index("model")
    assert len(rows) == len(TABLE_2)
    for model, acc, macro_f1, yes_rate, *_ in TABLE_2:
        row = rows.loc[model]
        assert (round(row["accuracy"], 2), round(row["macro_f1"], 2), round(row["yes_rate"], 2)) == \
            (acc, macro_f1, yes_rate), model
        assert row["n"] == 301 and row["accuracy_lo"] < row["accuracy"] < row["accuracy_hi"]


def test_the_long_frame_has_a_row_per_model_unit_and_condition(doc_run):
    units = doc_run["units"]
    assert len(units) == len(TABLE_2) * 301 and not units.duplicated(["model", "case", "condition"]).any()
    pairs = doc_run["pairs"]
    assert len(pairs) == pairs["model"].nunique() * 36 * 2
    # Accuracy from the long rows, computed apart from the report's own figure.
    gpt = units[units["model"] == "GPT-5.5"]
    table2 = doc_run["table2"].set_index("model")
    assert 100 * gpt["correct"].mean() == pytest.approx(table2.loc["GPT-5.5", "accuracy"])


def test_the_example_stores_and_lists_runs(doc_run):
    runs = doc_run["runs"]
    assert len(runs) == doc_run["pairs"]["model"].nunique() and set(runs["suite"]) == {"counterfactual"}
    assert len(doc_run["replies"]) == 72


def documented_names(text: str) -> set[str]:
    reference = text.split("## Reference", 1)[1]
    return set(re.findall(r"^\s*- `([A-Za-z_][\w.]*)", reference, flags=re.M))


def test_the_documented_names_are_the_exported_ones():
    documented = documented_names(DOC.read_text(encoding="utf-8"))
    exported = set(api.__all__)
    for name in ("Workspace", "Report"):
        cls = getattr(api, name)
        members = {m for m, _ in inspect.getmembers(cls) if not m.startswith("_")}
        if name == "Report":
            members.add("result")  # an instance attribute
        exported |= {f"{name}.{m}" for m in members}
    assert documented == exported
    assert cfkit.Workspace is api.Workspace and cfkit.Report is api.Report


def test_importing_cfkit_and_its_help_import_no_pandas():
    code = ("import sys, cfkit, cfkit.api; from click.testing import CliRunner; from cfkit.cli import cli; "
            "r = CliRunner().invoke(cli, ['--help']); assert r.exit_code == 0; "
            "print(sorted(m for m in ('pandas', 'pyarrow', 'openpyxl') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_bad_names_are_refused_in_one_line(doc_run):
    from cfkit.errors import UsageError

    with pytest.raises(UsageError, match="unknown section 'cc'; one of contextcanvas"):
        doc_run["report"].frame("cc")
    with pytest.raises(UsageError, match="Table S8 is the EGA section"):
        doc_run["report"].table("S8")


def test_tables_s7_and_s9_as_dataframes(doc_run):
    from support.paper_tables import TABLE_S7, TABLE_S9

    report = doc_run["report"]
    for name in ("2", "S4", "S7", "S9"):  # the row marks close every table of measured rows, false here
        table = report.table(name)
        assert list(table.columns[-2:]) == ["incomplete", "not_clean"]
        assert not table[["incomplete", "not_clean"]].any().any()
    s7 = report.table("S7").set_index("model")
    for model, orig, edit, pair, correct, reverse, ncu, _ in TABLE_S7:
        row = s7.loc[model]
        assert (round(row["orig_acc"], 2), round(row["edit_acc"], 2), round(row["pair_acc"], 2)) == (orig, edit, pair)
        assert (row["correct"], row["reverse"], round(row["ncu"], 2)) == (correct, reverse, ncu)
        assert row["ncu_lo"] <= row["ncu"] <= row["ncu_hi"]
    s9 = report.table("S9")
    assert len(s9) == 4 * len(TABLE_S9)
    for model, *counts in TABLE_S9:
        got = s9[s9["model"] == model].set_index("condition")["accuracy"]
        assert [round(got[c], 2) for c in ("text", "neutral", "evidence", "image")] == [float(c) for c in counts]


def test_a_peers_file_through_the_api_says_how_its_readings_differ(tmp_path):
    from support.interop_files import MODEL, write_peer_files

    ws, files = write_peer_files(tmp_path)
    report = cfkit.Workspace(ws).report(predictions=[files["lmms"]], resamples=200)
    assert report.models == [MODEL]
    assert any("10 of 100 answers differ from the lmms file's own extraction" in n for n in report.notes)
    # What 'cfkit report' says with its tables is in the notes too: the 201 cases the file leaves out.
    assert f"{MODEL}: 201 units without a usable answer, counted wrong (absent; contextcanvas 201)" in " ".join(
        report.notes)
