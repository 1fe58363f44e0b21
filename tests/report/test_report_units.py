"""Per-unit outcomes in ``cfkit report``: every case and pair of every model, adding up to the rows' figures."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections import Counter

import pytest

from cfkit.report import PAIR_CATEGORIES, pair_category
from support.report_workspace import PAIR_CASES, SUBSET, cli_args, paper  # noqa: F401  (paper is a fixture)
from support.workspace import run_cli


@pytest.fixture(scope="module")
def report_json(paper):
    ws, paths = paper
    result = run_cli(cli_args(ws, paths, "--resamples", "100", "--format", "json"))
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def _units(data, suite):
    return {g["model"]: g["units"] for g in data["units"] if g["suite"] == suite}


def test_units_add_up_to_every_models_counts(report_json):
    rows = {suite: {r["model"]: r for r in report_json[suite]} for suite in ("contextcanvas", "counterfactual", "modality")}
    assert {(g["model"], g["suite"]) for g in report_json["units"]} == {
        (m, s) for s, by_model in rows.items() for m in by_model}
    for model, units in _units(report_json, "counterfactual").items():
        row = rows["counterfactual"][model]
        assert [u["pair"] for u in units] == [f"CF{i:02d}" for i in range(1, 37)]
        assert [u["case"] for u in units] == PAIR_CASES
        counts = Counter(u["category"] for u in units)
        assert {c: counts[c] for c in PAIR_CATEGORIES} == {c: row[c] for c in PAIR_CATEGORIES}, model
        assert 100 * sum(u["correct"]["original"] for u in units) / 36 == pytest.approx(row["orig_acc"])
        assert 100 * sum(u["correct"]["edit"] for u in units) / 36 == pytest.approx(row["edit_acc"])
        assert 100 * (counts["correct"] - counts["reverse"]) / 36 == pytest.approx(row["ncu"])
    for model, units in _units(report_json, "contextcanvas").items():
        row = rows["contextcanvas"][model]
        assert len(units) == row["n"] == 301
        assert 100 * sum(u["correct"]["image"] for u in units) / 301 == pytest.approx(row["accuracy"], abs=1e-12)
        said_yes = sum(u["answers"]["image"] == "A" for u in units if not u["case"].startswith("T"))
        assert 100 * said_yes / row["n_binary"] == pytest.approx(row["yes_rate"], abs=1e-12)
        assert sum(u["answers"]["image"] is None for u in units) == row["invalid"]
    for model, units in _units(report_json, "modality").items():
        row = rows["modality"][model]
        assert [u["case"] for u in units] == SUBSET
        for condition, accuracy in row["accuracy"].items():
            assert sum(u["correct"][condition] for u in units) == pytest.approx(accuracy)  # 100 cases
        for d in row["deltas"]:
            b = sum(u["correct"][d["from"]] and not u["correct"][d["to"]] for u in units)
            c = sum(u["correct"][d["to"]] and not u["correct"][d["from"]] for u in units)
            assert (b, c) == (d["b"], d["c"])


def test_a_unit_says_its_answers_golds_and_category(report_json):
    first = _units(report_json, "counterfactual")["GPT-5.2"][0]
    assert first == {"case": PAIR_CASES[0], "pair": "CF01", "category": "correct",
                     "answers": {"original": "B", "edit": "A"}, "gold": {"original": "B", "edit": "A"},
                     "correct": {"original": True, "edit": True}, "missing": {}}
    case = _units(report_json, "contextcanvas")["Q-SiT"][0]
    assert set(case) == {"case", "answers", "gold", "correct", "missing"} and case["gold"] == {"image": "A"}


@pytest.mark.parametrize("o, e, category", [
    ("B", "A", "correct"), ("A", "B", "reverse"), ("B", "B", "stuck_original"), ("A", "A", "stuck_edit"),
    (None, "A", "invalid"), ("B", None, "invalid"), ("C", "A", "invalid"), (None, None, "invalid"),
])
def test_pair_categories_follow_the_definitions(o, e, category):
    assert pair_category(o, e, "B", "A") == category


def test_missing_units_carry_their_reason_and_count_wrong(paper, tmp_path):
    ws, paths = paper
    kept = [line for line in paths[1].read_text().splitlines() if '"GPT-5.2"' in line and '"CF01"' not in line]
    src = tmp_path / "partial.jsonl"
    src.write_text("\n".join(kept) + "\n")
    data = json.loads(run_cli(cli_args(ws, [src], "--resamples", "50", "--format", "json")).stdout)
    [group] = data["units"]
    unit = group["units"][0]
    assert unit["answers"] == {"original": None, "edit": None} and unit["category"] == "invalid"
    assert unit["missing"] == {"original": "absent", "edit": "absent"}
    assert Counter(u["category"] for u in group["units"])["invalid"] == data["counterfactual"][0]["invalid"] == 1


def test_units_csv_is_flat_and_holds_the_same_outcomes(paper, report_json):
    ws, paths = paper
    result = run_cli(cli_args(ws, paths, "--resamples", "100", "--units", "--format", "csv"))
    assert result.exit_code == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert list(rows[0]) == ["model", "suite", "case", "pair", "condition", "answer", "gold", "correct", "category",
                             "missing"]
    expected = [(g["model"], g["suite"], u["case"], u.get("pair") or "", c, u["answers"][c] or "", u["gold"][c],
                 "true" if u["correct"][c] else "false", u.get("category") or "", u["missing"].get(c, ""))
                for g in report_json["units"] for u in g["units"] for c in u["answers"]]
    assert [tuple(r.values()) for r in rows] == expected
    assert len(rows) == 17 * 301 + 5 * 36 * 2 + 5 * 100 * 4
    as_json = json.loads(run_cli(cli_args(ws, paths, "--resamples", "100", "--units", "--format", "json")).stdout)
    assert as_json == {"units": report_json["units"]}


def test_units_table_and_markdown(paper):
    ws, paths = paper
    table = run_cli(cli_args(ws, paths[1:2], "--resamples", "50", "--units"))
    assert table.exit_code == 0, table.stderr
    line = next(line for line in table.stdout.splitlines() if "CF01" in line and "ArtQuant-APDD" in line)
    assert line.split("│")[1:-1] and "counterfactual" in line and "correct" in line
    md = run_cli(cli_args(ws, paths[1:2], "--resamples", "50", "--units", "--format", "md")).stdout
    assert "| GPT-5.2 | counterfactual | N000 | CF01 | original | B | B | yes | correct | — |" in md
    refused = run_cli(cli_args(ws, paths[1:2], "--units", "--reference"))
    assert refused.exit_code == 2 and "Drop --reference" in refused.stderr


def test_a_unit_made_for_a_study_equals_one_built_field_by_field():
    from cfkit.report.units import UnitOutcome

    fields = ("B0001", "CF01", {"original": "A", "edit": None}, {"original": "A", "edit": "B"}, {"edit": "absent"})
    made, built = UnitOutcome.made(*fields), UnitOutcome(*fields)
    assert made == built and repr(made) == repr(built) and made.to_dict() == built.to_dict()
    assert made.category == "invalid" and made.correct == {"original": True, "edit": False}
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.case = "B0002"  # still frozen


def test_units_asked_as_a_grid_are_collected_as_the_general_way_collects_them(monkeypatch):
    """A suite asked condition by condition over the same units (the usual shape) is regrouped in C
    (units._grid_units); the units, their answers, golds and order are those of the general regrouping, and any
    other shape, or a unit with an unusable answer, goes the general way."""
    from cfkit.report import units as units_module
    from cfkit.report.units import collect_units

    cases = [f"C{i}" for i in range(7)]
    grid = {("m", "modality"): {(c, "", k): ("A" if (i + j) % 3 else None) for j, k in enumerate(("text", "image"))
                                for i, c in enumerate(cases)},
            ("n", "contextcanvas"): {(c, "", "image"): "B" for c in cases},
            ("m", "counterfactual"): {("C1", "CF01", k): "A" for k in ("original", "edit")},  # a pair: a row each
            ("r", "modality"): {(c, "", k): "A" for c in cases for k in ("text", "image")},  # unit by unit
            ("s", "modality"): {(c, "", k): "A" for k in ("text", "image") for c in cases[: 4 if k == "image" else 7]}}
    gold = {(c, "", k): "A" for c in cases[:5] for k in ("text", "image")} | {("C1", "CF01", "original"): "B"}
    reasons = {("m", "modality", "C2", "", "text"): "absent"}
    calls = []
    real = units_module._grid_units
    monkeypatch.setattr(units_module, "_grid_units", lambda *a: calls.append(r := real(*a)) or r)
    fast = collect_units(grid, gold, reasons)
    assert [r is not None for r in calls] == [False, True, True, False, False]  # m/modality has a reason
    assert [r is not None for r in [real(*a[:2], grid[a[:2]], gold, set(), {}) for a in [("m", "modality")]]] == [True]
    monkeypatch.setattr(units_module, "_grid_units", lambda *a: None)
    general = collect_units(grid, gold, reasons)
    assert fast == general
    assert [g.to_dict() for g in fast] == [g.to_dict() for g in general]
    assert units_module._FIELDS == tuple(f.name for f in dataclasses.fields(units_module.UnitOutcome))
    assert all(vars(u) == vars(v) for f, g in zip(fast, general) for u, v in zip(f.units, g.units))
    assert [list(u.answers) for u in fast[1].units] == [["image"]] * 7


def test_the_units_json_is_each_group_written_by_the_standard_encoder():
    """The report writes units from cached record tails, made in C for groups of cases; the text is what json.dumps
    writes for each group, whatever the answers, golds and reasons hold (quotes, unicode, nulls)."""
    from cfkit.report.exports import _units_json
    from cfkit.report.units import collect_units

    cases = [f"C{i}" for i in range(9)]
    asked = {("m", "modality"): {(c, "", k): [None, "A", 'B"é\u2028'][(i * 7 + j) % 3]
                                 for j, k in enumerate(("text", "image")) for i, c in enumerate(cases)},
             ("n", "contextcanvas"): {(c, "", "image"): "A" for c in cases},
             ("n", "counterfactual"): {("C1", "CF01", k): "A" for k in ("original", "edit")}}
    gold = {(c, "", k): "A" for c in cases[:6] for k in ("text", "image")} | {("C1", "CF01", "edit"): "B"}
    reasons = {("n", "contextcanvas", "C3", "", "image"): 'refused: "no" \u00e9'}
    groups = collect_units(asked, gold, reasons)
    expected = [json.dumps(g.to_dict(), ensure_ascii=False) for g in groups]
    assert list(_units_json(groups)) == expected
    assert list(_units_json(groups + groups)) == expected + expected  # tails reused across groups


def test_a_grid_writes_its_units_json_without_making_its_records_and_stays_frozen():
    """A suite asked as a grid keeps its answers as columns: the JSON report writes its units from them (never
    making a UnitOutcome), the same text as the records' own; reading ``units`` makes them, equal to the general
    regrouping's, and the group cannot be changed."""
    from cfkit.report.exports import _units_json
    from cfkit.report.units import ModelUnits, UnitOutcome, collect_units

    cases = [f"C{i}" for i in range(11)]
    asked = {(m, "modality"): {(c, "", k): [None, "A", "B", 'é"\\'][(i * 5 + j + s) % 4]
                               for j, k in enumerate(("text", "neutral", "image")) for i, c in enumerate(cases)}
             for s, m in enumerate(("m", "n", "o"))}
    gold = {(c, "", k): "AB"[i % 2] for i, c in enumerate(cases[:8]) for k in ("text", "neutral", "image")}
    groups = collect_units(asked, gold, {})
    assert all(g.grid is not None for g in groups)
    texts = list(_units_json(groups))
    assert all(g._units is None for g in groups)  # written from the columns alone
    general = [ModelUnits(g.model, g.suite, [
        UnitOutcome(c, None, {k: asked[(g.model, g.suite)][(c, "", k)] for k in ("text", "neutral", "image")},
                    {k: gold.get((c, "", k)) for k in ("text", "neutral", "image")}, {}) for c in cases])
               for g in groups]
    assert texts == [json.dumps(g.to_dict(), ensure_ascii=False) for g in general]
    assert groups == general and [g.units for g in groups] == [g.units for g in general]
    with pytest.raises(dataclasses.FrozenInstanceError):
        groups[0].model = "x"
    with pytest.raises(ValueError):
        ModelUnits("m", "modality")
    import copy
    import pickle

    fresh = collect_units(asked, gold, {})
    assert pickle.loads(pickle.dumps(fresh)) == general and copy.deepcopy(fresh) == general


def test_a_suite_kept_as_it_was_asked_is_collected_as_its_answers_indexed_by_key(monkeypatch):
    """A report keeps a suite asked a whole list of unit keys at a time (each under its own condition, every answer
    usable) as it was asked (units.AskedGrid); collected, it gives the units, answers, golds and order that the
    same answers indexed by key give, grid or not, and a list over other units, a condition asked twice or a unit
    with a reason goes back to the keys."""
    from cfkit.report import units as units_module
    from cfkit.report.units import AskedGrid, UnitKeys, collect_units

    cases = tuple((f"C{i}", "") for i in range(6))
    keys = {k: UnitKeys(cases, k) for k in ("text", "neutral", "image")}
    assert keys["text"] == [(c, "", "text") for c, _ in cases] and keys["image"].units is cases
    other = UnitKeys(tuple((f"D{i}", "") for i in range(6)), "neutral")

    def answers(k, salt):
        return [[None, "A", "B", 'B"é'][(i * 3 + salt + len(k)) % 4] for i in range(len(cases))]

    def asked_as(order, salt):
        grid = AskedGrid()
        for k in order:
            assert grid.takes(keys[k])
            grid.append((keys[k], answers(k, salt)))
        return grid

    asked = {("m", "modality"): asked_as(("text", "neutral", "image"), 0), ("n", "modality"): asked_as(("image",), 1),
             ("r", "modality"): asked_as(("text", "image"), 2), ("m", "contextcanvas"): asked_as(("image",), 3)}
    assert not asked[("m", "modality")].takes(keys["text"]) and not asked[("n", "modality")].takes(other)
    assert not asked[("n", "modality")].takes([("C0", "", "text")])
    gold = {(c, "", k): "AB"[i % 2] for i, (c, _) in enumerate(cases[:5]) for k in ("text", "neutral", "image")}
    reasons = {("r", "modality", "C2", "", "image"): "absent"}
    regrouped, real = [], units_module._grid_units
    monkeypatch.setattr(units_module, "_grid_units", lambda *a: regrouped.append(a[:2]) or real(*a))
    kept = collect_units(asked, gold, reasons)
    assert regrouped == [("r", "modality")]  # the others read as they were asked
    indexed = collect_units({key: grid.as_dict() for key, grid in asked.items()}, gold, reasons)
    assert [g.grid is not None for g in kept] == [True, True, False, True]  # r/modality has a reason
    assert kept == indexed and [g.to_dict() for g in kept] == [g.to_dict() for g in indexed]
    assert kept[1].grid.golds is kept[3].grid.golds is not kept[0].grid.golds  # made once per units and conditions
    assert [list(u.answers) for u in kept[0].units] == [["text", "neutral", "image"]] * 6
