"""``cfkit report`` end to end: the paper's tables rebuilt from prediction files, formats, errors.

A synthetic workspace mirrors ContextCanvas's shape (301 cases: 111 gold Yes,
180 gold No, 10 three-option; 36 No→Yes pairs; a 100-case modality subset).
Prediction files are constructed to match the published counts (see
tests/stats/test_stats.py for how the counts were derived), then the report must give
back the published figures.
"""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from cfkit import report as lib
from cfkit.report.exports import _flatten as flatten_record
from cfkit.store import Store, now
from cfkit.workspace import load_workspace
from support.chat_api_server import ChatServer
from support.paper_tables import TABLE_2, TABLE_S7, TABLE_S9, TABLE_S10
from support.report_workspace import PAIR_CASES, cli_args, compare_args, paper, record, s10_rows
from support.store_sql import insert_rows
from support.workspace import run_cli

GRID_36 = 100 / 36
GRID_301 = 100 / 301
S4_NAMES = {"InternVL3": "InternVL3-8B"}  # Table S4 spells one name as Table S10 does
#: Table S4 (supplement p. 21): Yes F1, No F1 and predicted Yes rate, by Table 2's model names.
TABLE_S4 = {
    "Claude Opus 5": (87.44, 93.47, 30.24), "Gemini 3.1 Pro": (77.01, 89.11, 26.12), "GPT-5.5": (73.30, 86.96, 27.49),
    "Claude Opus 4.6": (56.84, 79.08, 27.15), "GPT-5.2": (50.00, 79.02, 20.96), "GLM-5V-Turbo": (47.06, 63.37, 43.64),
    "Qwen3.7-Plus": (37.93, 58.86, 41.58), "Grok 4.20": (24.43, 53.74, 37.80),
    "Qwen3-VL-Instruct": (28.22, 49.27, 44.67), "InternVL3": (21.92, 21.38, 62.20), "mPLUG-Owl2": (7.78, 27.08, 50.17),
    "LLaVA-OneVision": (25.79, 10.61, 71.13), "LLaVA-v1.5": (9.06, 11.53, 60.48), "ArtQuant-APDD": (27.56, 31.44, 59.11),
    "ArtiMuse": (18.43, 17.30, 62.54), "Q-SiT": (29.25, 4.05, 76.98), "AesExpert": (20.33, 12.27, 66.67),
}


@pytest.fixture(scope="module")
def paper_json(paper):
    ws, paths = paper
    result = run_cli(cli_args(ws, paths, *compare_args(), "--format", "json"))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# ── the paper's tables ─────────────────────────────────────────────────────


def test_json_follows_design_schema(paper_json):
    assert list(paper_json) == ["contextcanvas", "counterfactual", "modality", "compare", "swap", "missing",
                                "notes", "bootstrap", "units", "reply_problems", "set_aside", "runs_read"]
    assert list(paper_json["contextcanvas"][0]) == ["model", "group", "n", "n_binary", "accuracy", "macro_f1", "yes_f1",
                                                    "no_f1", "yes_rate", "gold_yes_rate", "invalid", "accuracy_ci",
                                                    "macro_f1_ci", "yes_f1_ci", "no_f1_ci", "yes_rate_ci",
                                                    "incomplete", "not_clean", "runs"]
    assert list(paper_json["counterfactual"][0]) == ["model", "group", "n_pairs", "orig_acc", "edit_acc", "pair_acc",
                                                     "correct", "reverse", "stuck_original", "stuck_edit", "invalid",
                                                     "ncu", "ncu_ci", "incomplete", "not_clean", "runs"]
    assert paper_json["bootstrap"] == {"resamples": 10_000, "seed": 0, "level": 0.95}
    modality = paper_json["modality"][0]
    assert list(modality) == ["model", "group", "n", "accuracy", "accuracy_ci", "invalid", "unreviewed", "deltas",
                              "incomplete", "not_clean", "runs"]
    assert list(modality["invalid"]) == ["text", "neutral", "evidence", "image"]
    assert list(modality["accuracy"]) == ["text", "neutral", "evidence", "image"]
    assert [(d["from"], d["to"]) for d in modality["deltas"]] == [
        ("text", "neutral"), ("neutral", "evidence"), ("evidence", "image"), ("neutral", "image")]
    assert list(modality["deltas"][0]) == ["from", "to", "delta", "ci", "b", "c", "p", "p_adj"]
    assert list(paper_json["compare"][0]) == ["base", "other", "n", "base_acc", "other_acc", "delta", "ci", "b", "c",
                                              "p", "p_adj", "base_invalid", "other_invalid"]
    assert paper_json["missing"] == [] and paper_json["notes"] == []
    assert not any(r["incomplete"] or r["not_clean"] for section in ("contextcanvas", "counterfactual", "modality")
                   for r in paper_json[section])
    # Full precision, percent units: not rounded to two decimals.
    gpt = next(r for r in paper_json["contextcanvas"] if r["model"] == "GPT-5.2")
    assert gpt["accuracy"] == pytest.approx(100 * 215 / 301, abs=1e-12)


def test_table_2_rebuilt(paper_json):
    rows = {r["model"]: r for r in paper_json["contextcanvas"]}
    assert len(rows) == len(TABLE_2)
    for model, acc, macro_f1, yes_rate, *_ in TABLE_2:
        row = rows[model]
        assert (row["n"], row["n_binary"], round(row["gold_yes_rate"], 2)) == (301, 291, 38.14)
        assert (round(row["accuracy"], 2), round(row["macro_f1"], 2), round(row["yes_rate"], 2)) == (acc, macro_f1, yes_rate), model


def test_table_s4_rebuilt(paper_json):
    # The per-class F1 of Table S4 (supplement p. 21), from the same predictions as Table 2.
    rows = {r["model"]: r for r in paper_json["contextcanvas"]}
    for model, (yes_f1, no_f1, yes_rate) in TABLE_S4.items():
        row = rows[model]
        assert (round(row["yes_f1"], 2), round(row["no_f1"], 2), round(row["yes_rate"], 2)) == (yes_f1, no_f1, yes_rate)


def test_table_s7_rebuilt(paper_json):
    rows = {r["model"]: r for r in paper_json["counterfactual"]}
    for model, orig, edit, pair, correct, reverse, ncu, (low, high) in TABLE_S7:
        row = rows[model]
        assert row["n_pairs"] == 36
        assert (round(row["orig_acc"], 2), round(row["edit_acc"], 2), round(row["pair_acc"], 2)) == (orig, edit, pair)
        assert (row["correct"], row["reverse"], round(row["ncu"], 2)) == (correct, reverse, ncu)
        assert abs(row["ncu_ci"][0] - low) <= GRID_36 and abs(row["ncu_ci"][1] - high) <= GRID_36


def test_table_s9_rebuilt(paper_json):
    rows = {r["model"]: r for r in paper_json["modality"]}
    for model, *counts in TABLE_S9:
        row = rows[model]
        assert row["n"] == 100
        assert [row["accuracy"][c] for c in ("text", "neutral", "evidence", "image")] == pytest.approx(counts)
        for delta in row["deltas"]:
            # Each delta is the accuracy difference, with b - c consistent with it.
            assert delta["delta"] == pytest.approx(row["accuracy"][delta["to"]] - row["accuracy"][delta["from"]])
            assert delta["c"] - delta["b"] == round(delta["delta"])
            assert delta["p_adj"] == pytest.approx(min(1.0, 4 * delta["p"]))
            assert delta["ci"][0] <= delta["delta"] <= delta["ci"][1]


def test_table_s10_rebuilt(paper_json):
    rows = {(r["base"], r["other"]): r for r in paper_json["compare"]}
    for base, other, base_acc, other_acc, delta, b, c, (low, high), p, p_adj in s10_rows():
        row = rows[(base, other)]
        assert row["n"] == 301
        assert (round(row["base_acc"], 2), round(row["other_acc"], 2), round(row["delta"], 2)) == (base_acc, other_acc, delta)
        assert (row["b"], row["c"]) == (b, c)
        assert (round(row["p"], 4), round(row["p_adj"], 4)) == (p, p_adj)
        assert abs(row["ci"][0] - low) <= GRID_301 + 0.005 and abs(row["ci"][1] - high) <= GRID_301 + 0.005


# ── formats ────────────────────────────────────────────────────────────────


@pytest.fixture(scope="module")
def outputs(paper):
    ws, paths = paper
    texts = {}
    for fmt in ("json", "csv", "md", "latex", "table"):
        result = run_cli(cli_args(ws, paths, *compare_args()[:4], "--resamples", "300", "--format", fmt),
                         env={"COLUMNS": "220"})
        assert result.exit_code == 0, result.output
        texts[fmt] = result.stdout
    return texts


def csv_value(text: str):
    """A CSV value read back as the JSON holds it."""
    if text in ("true", "false"):
        return text == "true"
    if text == "":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def test_csv_round_trips_every_field_exactly(outputs):
    data = json.loads(outputs["json"])
    rows = list(csv.DictReader(io.StringIO(outputs["csv"])))
    assert rows and list(rows[0]) == ["section", "model", "metric", "value", "source"]
    assert {r["source"] for r in rows} == {"measured"}  # no published rows without --reference
    rebuilt = {(r["section"], r["model"], r["metric"]): r["value"] for r in rows}
    expected = {}
    for section in ("contextcanvas", "counterfactual", "modality", "compare"):
        for rec in data[section]:
            name = f"{rec['base']}={rec['other']}" if section == "compare" else rec["model"]
            for metric, value in flatten_record(rec):
                if metric not in ("model", "base", "other"):
                    expected[(section, name, metric)] = value
    # How the intervals were drawn, so that the CSV alone states it.
    expected |= {("bootstrap", "", "resamples"): 300, ("bootstrap", "", "seed"): 0, ("bootstrap", "", "level"): 0.95}
    assert set(rebuilt) == set(expected)
    for key, value in expected.items():
        assert csv_value(rebuilt[key]) == value, key  # exact: repr round-trips a float
    assert rebuilt[("contextcanvas", "Q-SiT", "group")] == "aesthetic"


def test_csv_with_reference_holds_the_papers_rows(paper):
    ws, paths = paper
    result = run_cli(cli_args(ws, paths, *compare_args(), "--resamples", "100", "--reference", "--format", "csv"))
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    paper_rows = {(r["source"], r["section"], r["model"], r["metric"]): r["value"] for r in rows
                  if r["source"] != "measured"}
    assert {source for source, *_ in paper_rows} == {"paper:table2", "paper:tableS4", "paper:tableS7",
                                                     "paper:tableS9", "paper:tableS10"}
    for model, acc, macro_f1, yes_rate, *_ in TABLE_2:
        got = [float(paper_rows[("paper:table2", "contextcanvas", model, m)]) for m in ("accuracy", "macro_f1", "yes_rate")]
        assert got == [acc, macro_f1, yes_rate], model
        assert paper_rows[("paper:table2", "contextcanvas", model, "n")] == "301"
    assert paper_rows[("paper:tableS4", "contextcanvas", "Q-SiT", "no_f1")] == "4.05"
    for model, orig, edit, pair, correct, reverse, ncu, (low, high) in TABLE_S7:
        key = ("paper:tableS7", "counterfactual", model)
        assert [paper_rows[key + (m,)] for m in ("correct", "reverse", "ncu_ci.0", "ncu_ci.1")] == [
            str(correct), str(reverse), repr(low), repr(high)]
    for model, *counts in TABLE_S9:
        assert [float(paper_rows[("paper:tableS9", "modality", model, f"accuracy.{c}")])
                for c in ("text", "neutral", "evidence", "image")] == counts
    for base, other, *_, p, p_adj in TABLE_S10:
        assert float(paper_rows[("paper:tableS10", "compare", f"{base}={other}", "p_adj")]) == p_adj


def test_csv_and_markdown_keep_hostile_model_names_inert(tiny_ws, tmp_path):
    path = tmp_path / "evil.jsonl"
    names = ["=HYPERLINK(\"http://x\",\"y\")", "<img src=x onerror=alert(1)>\n| pwned |"]
    path.write_text("".join(record(name, "contextcanvas", case, "image", "A") + "\n"
                            for name in names for case in ("T001", "T002", "T003")))
    table = run_cli(["report", "-w", str(tiny_ws), "--predictions", str(path), "--resamples", "50", "--format", "csv"])
    assert table.exit_code == 0, table.stderr
    models = {r["model"] for r in csv.DictReader(io.StringIO(table.stdout)) if r["section"] != "bootstrap"}
    assert models == {"'" + names[0], names[1]}
    md = run_cli(["report", "-w", str(tiny_ws), "--predictions", str(path), "--resamples", "50", "--format", "md"])
    assert "<img" not in md.stdout and "&lt;img src=x onerror=alert(1)&gt;\\n\\| pwned \\|" in md.stdout
    # Every table row still has its columns: the name's newline and pipes did not split it.
    widths = {line.count(" | ") for line in md.stdout.splitlines() if line.startswith("| &lt;img")}
    assert widths == {7, 6}  # the Table 2 row (8 cells) and the Table S4 row (7 cells)


def display_cells(data: dict) -> dict[str, list[str]]:
    """What each display format must show per model row, formatted from the JSON numbers."""
    f = lib.fmt
    cells = {}
    for r in data["contextcanvas"]:
        cells[r["model"]] = [f(r["accuracy"]), lib.fmt_ci(r["accuracy_ci"]), f(r["macro_f1"]),
                             lib.fmt_ci(r["macro_f1_ci"]), f(r["yes_rate"]), str(r["invalid"])]
        cells[r["model"] + " s4"] = [f(r["yes_f1"]), f(r["no_f1"]), f(r["yes_rate"]), lib.fmt_ci(r["yes_rate_ci"]),
                                     f(r["gold_yes_rate"])]
    for r in data["counterfactual"]:
        cells[r["model"] + " cf"] = [f(r["orig_acc"]), f(r["edit_acc"]), f(r["pair_acc"]), f"{r['correct']}/{r['reverse']}",
                                    f(r["ncu"]), lib.fmt_ci(r["ncu_ci"])]
    for r in data["modality"]:
        cells[r["model"] + " md"] = [f(v) for v in r["accuracy"].values()]
        for d in r["deltas"]:
            cells[r["model"] + " " + d["from"] + d["to"]] = [lib.fmt_delta(d["delta"]), lib.fmt_ci(d["ci"]), lib.fmt_p(d["p"]),
                                                              lib.fmt_p(d["p_adj"]), f"{d['b']}/{d['c']}"]
    for r in data["compare"]:
        cells[r["base"] + r["other"]] = [f(r["base_acc"]), f(r["other_acc"]), lib.fmt_delta(r["delta"]),
                                         f"{r['b']}/{r['c']}", lib.fmt_ci(r["ci"]), lib.fmt_p(r["p"]), lib.fmt_p(r["p_adj"])]
    return cells


def row_cells(text: str, fmt: str) -> list[list[str]]:
    """Split a rendered table format into rows of cells."""
    rows = []
    for raw in text.splitlines():
        if fmt == "md" and raw.startswith("|") and not raw.startswith("|---"):
            rows.append([c.strip() for c in raw.strip("|").split(" | ")])
        elif fmt == "latex" and raw.endswith(r"\\"):
            cells = [c.strip() for c in raw[:-2].split(" & ")]
            cells = [c.replace(r"$\rightarrow$", "→").replace(r"$\Delta$", "Δ").replace(r"\_", "_") for c in cells]
            rows.append(cells)
        elif fmt == "table" and "│" in raw:
            rows.append([c.strip() for c in raw.strip().strip("│").split("│")])
    return rows


@pytest.mark.parametrize("fmt", ["md", "latex", "table"])
def test_display_formats_show_the_json_numbers(outputs, fmt):
    data = json.loads(outputs["json"])
    rows = row_cells(outputs[fmt], fmt)
    assert rows, outputs[fmt][:500]
    for key, expected in display_cells(data).items():
        # The row that names the model (and, for deltas and comparisons, the change) holds exactly these cells.
        candidates = [r for r in rows if all(e in r for e in expected)]
        assert candidates, (fmt, key, expected)


def test_table_view_is_laid_out_like_the_paper(outputs):
    text = outputs["table"]
    for title in ("as in Table 2", "as in Table S7", "as in Table S9", "as in Table S10"):
        assert title in text
    assert "Macro-F1" in text and "C/R" in text and "NCU" in text and "b/c" in text


def test_table_view_fits_a_100_column_terminal(paper):
    ws, paths = paper
    result = run_cli(cli_args(ws, paths, *compare_args()[:4], "--resamples", "200"), env={"COLUMNS": "100"})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert "…" not in result.stdout  # nothing truncated
    assert "│ Claude Opus 5      │ 301 │ 91.69 │ [88.37, 94.69] │    90.45 │ [86.57, 94.00] │   30.24 │    0 │" in lines
    assert "│ Aesthetic-specific │     │       │                │          │                │         │      │" in lines


def test_in_a_pipe_tables_keep_their_natural_width_and_names_never_break(paper):
    ws, paths = paper
    result = run_cli(cli_args(ws, paths[:1], "--resamples", "200", "--reference"))  # no COLUMNS, not a terminal
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) > 100  # wider than Rich's 80-column default
    assert any(line.startswith("│ Qwen3-VL-Instruct (paper) │") for line in lines)
    assert any(line.startswith("│ Claude Opus 5 ") and "│ 301 │ 91.69 │ [88.37, 94.69] │" in line for line in lines)
    narrow = run_cli(cli_args(ws, paths[:1], "--resamples", "200", "--reference"), env={"COLUMNS": "90"})
    # On a narrow terminal no cell breaks: neither a model name nor an interval.
    assert any(line.startswith("│ Qwen3-VL-Instruct (paper) │") for line in narrow.stdout.splitlines())
    assert "…" not in narrow.stdout


@pytest.mark.parametrize("columns", ["80", "60"])
def test_numbers_never_wrap_in_a_narrow_pipe(paper, columns):
    """Every row of every table is one line whose cells are whole: "[0.00," never ends a line with "57.14]" below."""
    ws, paths = paper
    result = run_cli(cli_args(ws, paths, *compare_args(), "--resamples", "200", "--reference"),
                     env={"COLUMNS": columns})
    assert result.exit_code == 0, result.stderr
    table_lines = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert table_lines and "…" not in result.stdout
    for line in table_lines:
        cells = [cell.strip() for cell in line.strip("│").split("│")]
        if not cells[0]:  # a row's continuation line: nothing may be carried over
            assert not any(cells), line
        for cell in cells:
            assert cell.count("[") == cell.count("]"), line  # an interval is whole on its line
            assert not re.fullmatch(r"-?\d+\.", cell), line  # no number cut after its point


def test_rich_view_dims_published_rows(paper):
    ws, paths = paper
    report = lib.make_report(load_workspace(ws), paths[1:2], n_resamples=200)
    console = Console(width=160, record=True, color_system="truecolor", force_terminal=True)
    console.print(lib.ReportView(report, reference=True))
    styled = console.export_text(styles=True)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", styled)
    assert "Gemini 3.1 Pro (paper)" in plain and "Table S7, arXiv 2608.26713, p. 25" in plain
    published_line = next(line for line in styled.splitlines() if "Gemini 3.1 Pro (paper)" in line)
    assert "\x1b[2;3m" in published_line or "\x1b[2m" in published_line  # dim (italic)
    own_line = next(line for line in styled.splitlines() if "Gemini 3.1 Pro " in line and "(paper)" not in line)
    assert "\x1b[2" not in own_line


# ── reference figures ──────────────────────────────────────────────────────


def test_reference_file_matches_the_transcribed_tables():
    ref = lib.load_reference()
    assert ref["citation"]["arxiv"] == "2608.26713"
    t2 = {r["model"]: r for r in ref["tables"]["table2"]["rows"]}
    assert [(m, t2[m]["accuracy"], t2[m]["macro_f1"], t2[m]["yes_rate"]) for m, *_ in TABLE_2] == [r[:4] for r in TABLE_2]
    s7 = [(r["model"], r["orig_acc"], r["edit_acc"], r["pair_acc"], r["correct"], r["reverse"], r["ncu"],
           tuple(r["ncu_ci"])) for r in ref["tables"]["tableS7"]["rows"]]
    assert s7 == TABLE_S7
    s9 = [(r["model"], *r["accuracy"].values()) for r in ref["tables"]["tableS9"]["rows"]]
    assert s9 == TABLE_S9
    s10 = [(r["base"], r["other"], r["base_acc"], r["other_acc"], r["delta"], r["b"], r["c"], tuple(r["ci"]), r["p"],
            r["p_adj"]) for r in ref["tables"]["tableS10"]["rows"]]
    assert s10 == TABLE_S10
    s4 = {r["model"]: (r["yes_f1"], r["no_f1"], r["yes_rate"]) for r in ref["tables"]["tableS4"]["rows"]}
    assert s4 == {S4_NAMES.get(m, m): v for m, v in TABLE_S4.items()}
    assert {t["page"] for t in ref["tables"].values()} == {None, 21, 25, 26, 27, 28}
    # Table 2's groups, and the short names of the other tables mapped to them.
    assert ref["groups"]["labels"] == {"closed": "Closed-source", "open": "Open-weight", "aesthetic": "Aesthetic-specific"}
    assert [t2[m]["group"] for m, *_ in TABLE_2] == ["closed"] * 8 + ["open"] * 5 + ["aesthetic"] * 4
    assert {m: lib.paper_groups()[m] for m in ("InternVL3-8B", "ArtQuant", "LLaVA-OV")} == {
        "InternVL3-8B": "open", "ArtQuant": "aesthetic", "LLaVA-OV": "open"}


def test_reference_rows_beside_a_new_model(paper):
    ws, paths = paper
    result = run_cli(cli_args(ws, paths[:1], "--reference", "--format", "md"))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "| Claude Opus 5 (paper) | 301 | 91.69 | — | 90.45 | — | 30.24 | — |" in lines
    assert "| Q-SiT (paper) | 29.25 | 4.05 | 76.98 | — | 38.14 | — |" in lines
    assert "| **Aesthetic-specific** | | | | | | | |" in lines
    assert "Table 2, arXiv 2608.26713" in result.stdout
    as_json = json.loads(run_cli(cli_args(ws, paths[:1], "--reference", "--format", "json")).stdout)
    assert as_json["reference"]["tables"]["tableS10"]["rows"][0]["p"] == 0.0034


# ── missing predictions, the store, errors ─────────────────────────────────


def test_missing_predictions_count_wrong_and_are_listed(paper, tmp_path):
    ws, paths = paper
    lines = paths[1].read_text().splitlines()
    gpt = [line for line in lines if '"GPT-5.2"' in line]
    # Drop GPT-5.2's first pair (a correct update) on both sides.
    kept = [line for line in gpt if '"CF01"' not in line]
    src = tmp_path / "partial.jsonl"
    src.write_text("\n".join(kept) + "\n")
    result = run_cli(cli_args(ws, [src], "--format", "json", "--resamples", "200"))
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    row = data["counterfactual"][0]
    assert (row["n_pairs"], row["correct"], row["invalid"]) == (36, 12, 1)
    assert row["pair_acc"] == pytest.approx(100 * 12 / 36)
    unit = {"model": "GPT-5.2", "suite": "counterfactual", "case": PAIR_CASES[0], "pair": "CF01",
            "reason": "absent", "detail": "no prediction for this unit", "run": None}
    assert data["missing"] == [unit | {"condition": "original"}, unit | {"condition": "edit"}]
    assert row["incomplete"] is True
    said = " ".join(result.stderr.split())
    assert ("GPT-5.2: 2 units without a usable answer, counted wrong (absent; counterfactual 2); e.g. case "
            f"{PAIR_CASES[0]} pair CF01: no prediction for this unit.") in said
    assert "condition original" not in said  # each unit only under -v
    table = run_cli(cli_args(ws, [src], "--resamples", "200", "-v"), env={"COLUMNS": "200"})
    assert f"GPT-5.2 counterfactual: case {PAIR_CASES[0]} pair CF01, condition original: absent" in table.stderr
    assert "GPT-5.2 (incomplete)" in table.stdout
    assert "CF01" not in table.stdout  # the listing goes to stderr only
    # The pair without answers is the row's one Inv.; the table's legend says Inv. counts such units.
    assert "Inv.: pairs with no valid option (unparsed, no usable answer, or a third option)" in " ".join(
        table.stdout.split())


def test_report_reads_latest_stored_runs(tiny_ws):
    ws = load_workspace(tiny_ws)
    with Store(ws.db_path) as store:
        for run_id, started, answers in (("old", "2026-01-01T00:00:00+00:00", ("A", "B", "A")),
                                         ("new", "2026-01-02T00:00:00+00:00", ("B", "A", "C"))):
            insert_rows(store.path, "runs", [{"id": run_id, "model": "baseline:x", "suite": "contextcanvas",
                                              "cfkit_version": "0.1.0", "started_at": started}])
            insert_rows(store.path, "replies", [{"run_id": run_id, "case_id": case, "condition": "image",
                                                 "answer": answer, "created_at": now()}
                                                for case, answer in zip(("T001", "T002", "T003"), answers)])
    result = run_cli(["report", "-w", str(tiny_ws), "--format", "json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)["contextcanvas"][0]
    assert (row["model"], row["accuracy"], row["n_binary"]) == ("baseline:x", 100.0, 2)


@pytest.mark.parametrize(
    "setup, args, message",
    [
        (lambda d: d / "nope.jsonl", [], r"predictions file .*nope\.jsonl not found"),
        (lambda d: _file(d, '{"model": "m", "suite": "contextcanvas", "case": "T001", "condition": "image"}\n{oops\n'),
         [], r"bad\.jsonl:2: not valid JSON"),
        (lambda d: _file(d, '{"model": "m", "suite": "contextcanvas", "case": "ZZZ", "condition": "image"}\n'),
         [], r"bad\.jsonl:1: unknown case 'ZZZ'"),
        (lambda d: _file(d, '{"model": "m", "suite": "counterfactual", "case": "T001", "pair": "CF77", '
                            '"condition": "edit"}\n'), [], r"bad\.jsonl:1: unknown pair 'CF77'"),
        (lambda d: _file(d, '{"model": "m", "suite": "contextcanvas", "case": "T001", "condition": "image"}\n'),
         ["--compare", "m"], r"--compare 'm' is not BASE=OTHER"),
        (lambda d: _file(d, '{"model": "m", "suite": "contextcanvas", "case": "T001", "condition": "image"}\n'),
         ["--compare", "m=x"], r"--compare: model 'x' has no contextcanvas predictions \(models with them: m\)"),
        (lambda d: _file(d, '{"model": "m", "suite": "modality", "case": "T001", "condition": "text"}\n'),
         [], r"modality predictions were given, but \[probe\] modality_subset = .modality-100.txt. is configured, but .* does not exist"),
    ],
)
def test_bad_input_exits_2_with_one_line(tiny_ws, tmp_path, setup, args, message):
    path = setup(tmp_path)
    result = run_cli(["report", "-w", str(tiny_ws), "--predictions", str(path), *args])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    error_lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(error_lines) == 1 and error_lines[0].startswith("error:")
    assert re.search(message, result.stderr.replace("\n", "")), result.stderr


def _file(folder: Path, text: str) -> Path:
    path = folder / "bad.jsonl"
    path.write_text(text)
    return path


def test_no_runs_and_no_files_is_a_clear_error(tiny_ws):
    result = run_cli(["report", "-w", str(tiny_ws)])
    assert result.exit_code == 2
    assert "Run 'cfkit probe run' first, or pass --predictions FILE" in result.stderr.replace("\n", "")


def test_report_command_module_stays_light():
    code = ("import sys, cfkit.cli.report; "
            "heavy = [m for m in ('torch', 'diffusers', 'transformers', 'openai', 'lpips', 'numpy', 'scipy') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ── stored runs: what is missing and why, which runs, how much they cover ──


def _report(ws: Path, *extra: str):
    return run_cli(["report", "-w", str(ws), "--format", "json", "--resamples", "100", *extra])


def test_units_of_a_dead_endpoint_a_budget_stop_and_a_replay_gap_are_listed_with_reasons_and_warned(tiny_ws, tmp_path):
    from support.probe_runs import _incomplete_runs

    runs = _incomplete_runs(tiny_ws, tmp_path)
    result = _report(tiny_ws)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    missing: dict[str, list[dict]] = {}
    for m in data["missing"]:
        missing.setdefault(m["model"], []).append(m)
    dead = missing["openai:dead-model"]
    assert [m["case"] for m in dead] == ["T001", "T002", "T003"] and {m["reason"] for m in dead} == {"transport"}
    assert all("ConnectionError" in m["detail"] and m["run"] == runs["dead"][1]["run_id"] for m in dead)
    budget = missing["openai:budget-model"]
    assert len(budget) == 2 and {m["reason"] for m in budget} == {"absent"}
    assert all("is incomplete (1 of 3 replies; --max-cost 0.15 USD would be exceeded" in m["detail"] for m in budget)
    replay = missing["m"]  # labelled by the model the replayed file names
    assert [m["case"] for m in replay] == ["T001", "T002"] and {m["reason"] for m in replay} == {"transport"}
    assert all("has no contextcanvas prediction" in m["detail"] for m in replay)
    rows = {r["model"]: r for r in data["contextcanvas"]}
    assert all(r["incomplete"] for r in rows.values()) and rows["openai:dead-model"]["accuracy"] == 0.0
    assert rows["openai:dead-model"]["runs"] == [runs["dead"][1]["run_id"]]
    # The table view names each model and how many of its units are counted wrong, on stderr.
    table = run_cli(["report", "-w", str(tiny_ws)], env={"COLUMNS": "200"})
    assert table.exit_code == 0
    warned = " ".join(table.stderr.split())
    assert "openai:dead-model: 3 units without a usable answer, counted wrong (transport; contextcanvas 3)" in warned
    assert "openai:budget-model: 2 units without a usable answer, counted wrong (absent; contextcanvas 2)" in warned
    # One line per model and reason, and no per-unit lines without -v.
    assert len([line for line in table.stderr.splitlines() if line.startswith("warning:")]) == 3
    assert "openai:dead-model (incomplete)" in table.stdout


def test_runs_of_one_model_that_differ_only_in_max_tokens_or_endpoint_are_not_merged(tiny_ws):
    from support.probe_runs import openai_run, scripted_answer

    with ChatServer(scripted_answer) as one, ChatServer(scripted_answer) as two:
        first = json.loads(openai_run(tiny_ws, one.url, "contextcanvas", "--json").stdout)["run_id"]
        shorter = json.loads(openai_run(tiny_ws, one.url, "contextcanvas", "--json", "--max-tokens", "64").stdout)
        moved = json.loads(openai_run(tiny_ws, two.url, "contextcanvas", "--json").stdout)["run_id"]
    assert len({first, shorter["run_id"], moved}) == 3
    refused = _report(tiny_ws)
    assert refused.exit_code == 2 and refused.stdout == ""
    text = " ".join(refused.stderr.split())
    assert "model openai:test-model has runs with different settings" in text
    assert f"{shorter['run_id']} (endpoint {one.url}, max_tokens 64" in text and "max_tokens 512" in text
    assert f"endpoint {two.url}" in text
    assert "Choose with --run RUN" in text and "cfkit runs rm RUN" in text
    chosen = _report(tiny_ws, "--run", shorter["run_id"])
    assert chosen.exit_code == 0, chosen.stderr
    assert json.loads(chosen.stdout)["contextcanvas"][0]["runs"] == [shorter["run_id"]]
    both = _report(tiny_ws, "--run", first, "--run", moved)
    assert both.exit_code == 2 and "a report shows one run per model and suite" in both.stderr
    # Removing the runs one does not want lets the default report read the rest.
    assert run_cli(["-w", str(tiny_ws), "runs", "rm", shorter["run_id"], moved]).exit_code == 0
    assert json.loads(_report(tiny_ws).stdout)["contextcanvas"][0]["runs"] == [first]


def test_reference_rows_say_when_the_rows_cover_fewer_pairs_or_cases_than_the_paper(tiny_ws):
    from support.probe_runs import _accepted_edit

    _accepted_edit(tiny_ws)
    for suite in ("contextcanvas", "counterfactual"):
        assert run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-yes", "-s", suite]).exit_code == 0
    table = run_cli(["report", "-w", str(tiny_ws), "--reference", "--resamples", "100"], env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.stderr
    text = " ".join(table.stdout.split())
    assert ("Not comparable as they stand: the rows measured here are over 1 pair (this workspace expects 3); "
            "the paper's are over 36.") in text
    assert "The workspace has 1 of the 3 pairs it expects ([workspace] pairs = 3)" in text
    assert "the rows measured here are over 3 cases; the paper's are over 301." in text
    assert "counterfactual: the workspace has 1 of the 3 pairs it expects" in " ".join(table.stderr.split())
    data = json.loads(_report(tiny_ws, "--reference").stdout)
    assert any("1 of the 3 pairs" in note for note in data["notes"])
