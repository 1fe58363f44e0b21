"""ContextCanvas intervals and model groups in ``cfkit report``.

The intervals are checked against a bootstrap written out here independently:
the resampled case indices drawn as docs/metrics.md says (numpy's
``default_rng(seed).integers(0, n, (B, n))``), each figure recomputed on the
drawn cases with scikit-learn's F1, and numpy's percentiles. With integer
counts both sides are exact, so the tolerance is floating-point rounding (1e-9).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import f1_score

from support.report_workspace import cli_args, compare_args, paper, record  # noqa: F401  (paper is a fixture)
from support.workspace import run_cli

B = 400


def _arrays(ws, path, model):
    cases = [json.loads(line) for line in (ws / "cases.jsonl").read_text().splitlines()]
    answers = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec["model"] == model:
            answers[rec["case"]] = rec["answer"]
    gold = np.array([c["gold"] for c in cases])
    pred = np.array([answers.get(c["id"]) or "NULL" for c in cases])
    binary = np.array([c.get("yes_option") is not None for c in cases])
    return gold, pred, binary


def _independent(gold, pred, binary, seed):
    """Accuracy, Macro-F1 and Yes rate per bootstrap resample, by gathering the drawn cases."""
    n = gold.size
    drawn = np.random.default_rng(seed).integers(0, n, size=(B, n))
    acc, macro, yes = [], [], []
    for rows in drawn:
        g, p, b = gold[rows], pred[rows], binary[rows]
        acc.append(100 * np.mean(g == p))
        # A null or third-option answer is in neither class: a false negative of its gold class only.
        macro.append(100 * f1_score(g[b], p[b], labels=["A", "B"], average="macro", zero_division=0))
        yes.append(100 * np.mean(p[b] == "A"))
    return {name: list(np.percentile(values, [2.5, 97.5]))
            for name, values in (("accuracy_ci", acc), ("macro_f1_ci", macro), ("yes_rate_ci", yes))}


@pytest.mark.parametrize("seed", [0, 7])
def test_contextcanvas_intervals_match_an_independent_bootstrap(paper, seed):
    ws, paths = paper
    result = run_cli(cli_args(ws, paths[:1], "--resamples", str(B), "--seed", str(seed), "--format", "json"))
    assert result.exit_code == 0, result.stderr
    rows = {r["model"]: r for r in json.loads(result.stdout)["contextcanvas"]}
    for model in ("GPT-5.2", "Q-SiT", "LLaVA-v1.5"):
        expected = _independent(*_arrays(ws, paths[0], model), seed)
        for name, (low, high) in expected.items():
            assert rows[model][name] == pytest.approx([low, high], abs=1e-9), (model, name)
            assert low <= rows[model][name.removesuffix("_ci")] <= high


def test_null_answers_count_in_the_intervals_as_the_rules_say(paper, tmp_path):
    ws, paths = paper
    lines = [json.loads(line) for line in paths[0].read_text().splitlines()]
    mine = [r | {"model": "nully"} for r in lines if r["model"] == "GPT-5.2"]
    for r in mine[::7]:  # every seventh case without a valid answer
        r.update(answer=None, parse=None, error="unparseable")
    path = tmp_path / "nully.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in mine))
    result = run_cli(cli_args(ws, [path], "--resamples", str(B), "--format", "json"))
    row = json.loads(result.stdout)["contextcanvas"][0]
    assert row["invalid"] == len(mine[::7])
    for name, bounds in _independent(*_arrays(ws, path, "nully"), 0).items():
        assert row[name] == pytest.approx(bounds, abs=1e-9), name


def test_intervals_follow_the_seed_and_are_shared_by_the_comparisons(paper):
    ws, paths = paper

    def run(*extra):
        return json.loads(run_cli(cli_args(ws, paths[:1], *compare_args()[:2], "--resamples", "300", "--format",
                                           "json", *extra)).stdout)

    first, again, other = run(), run(), run("--seed", "3")
    assert first["contextcanvas"] == again["contextcanvas"] and first["compare"] == again["compare"]
    assert first["contextcanvas"] != other["contextcanvas"]
    assert first["bootstrap"] == {"resamples": 300, "seed": 0, "level": 0.95}
    # One set of resamples over the cases: a comparison's interval is that of the two models' paired difference.
    rows = {r["model"]: r for r in first["contextcanvas"]}
    gold, base, _ = _arrays(ws, paths[0], "mPLUG-Owl2")
    _, other_pred, _ = _arrays(ws, paths[0], "ArtQuant-APDD")
    drawn = np.random.default_rng(0).integers(0, gold.size, size=(300, gold.size))
    diff = 100 * ((other_pred == gold).astype(float) - (base == gold))
    assert first["compare"][0]["ci"] == pytest.approx(list(np.percentile(diff[drawn].mean(axis=1), [2.5, 97.5])),
                                                      abs=1e-9)
    assert rows["mPLUG-Owl2"]["yes_f1_ci"][0] <= rows["mPLUG-Owl2"]["yes_f1"] <= rows["mPLUG-Owl2"]["yes_f1_ci"][1]


def test_a_workspace_without_two_option_cases_has_no_class_intervals(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    options = [{"id": "A", "text": "A wedding"}, {"id": "B", "text": "A funeral"}, {"id": "C", "text": "A race"}]
    (root / "cases.jsonl").write_text("".join(json.dumps({"id": f"T{i}", "images": [f"T{i}.png"], "question": "?",
                                                          "options": options, "gold": "C"}) + "\n" for i in range(4)))
    (root / "cfkit.toml").write_text('[dataset]\ncases = "cases.jsonl"\nimages = "images"\n')
    path = tmp_path / "p.jsonl"
    path.write_text("".join(record("m", "contextcanvas", f"T{i}", "image", "C" if i else "A") + "\n" for i in range(4)))
    result = run_cli(["report", "-w", str(root), "--predictions", str(path), "--resamples", "50", "--format", "json"])
    row = json.loads(result.stdout)["contextcanvas"][0]
    assert row["n_binary"] == 0 and row["accuracy"] == 75.0 and row["accuracy_ci"] is not None
    assert row["macro_f1_ci"] is None and row["yes_rate_ci"] is None
    table = run_cli(["report", "-w", str(root), "--predictions", str(path), "--resamples", "50"])
    assert "│ m     │ 4 │ 75.00 │ [25.00, 100.00] │     0.00 │      — │    0.00 │    0 │" in table.stdout
    assert "Table S4" not in table.stdout  # no class to show


# ── groups ─────────────────────────────────────────────────────────────────


def test_groups_file_puts_rows_under_headings_in_the_papers_order(paper, tmp_path):
    ws, paths = paper
    lines = [json.loads(line) for line in paths[0].read_text().splitlines()]
    renamed = {"Q-SiT": "hf:q-sit", "GPT-5.2": "openai:gpt-5.2", "LLaVA-v1.5": "hf:llava-1.5", "Grok 4.20": "xai:grok"}
    mine = [r | {"model": renamed[r["model"]]} for r in lines if r["model"] in renamed]
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in mine))
    groups = tmp_path / "groups.yaml"
    groups.write_text('"hf:q-sit": aesthetic\n"openai:gpt-5.2": closed\n"hf:llava-1.5": Baselines\n')
    result = run_cli(cli_args(ws, [path], "--groups", str(groups), "--resamples", "50", "--format", "json"))
    assert result.exit_code == 0, result.stderr
    got = {r["model"]: r["group"] for r in json.loads(result.stdout)["contextcanvas"]}
    assert got == {"openai:gpt-5.2": "closed", "hf:llava-1.5": "Baselines", "xai:grok": None, "hf:q-sit": "aesthetic"}
    md = run_cli(cli_args(ws, [path], "--groups", str(groups), "--resamples", "50", "--format", "md")).stdout
    table2 = md.split("### ")[1].splitlines()
    firsts = [line.split(" | ")[0].removeprefix("| ") for line in table2 if line.startswith("| ")][1:]
    assert firsts == ["**Closed-source**", "openai:gpt-5.2", "**Aesthetic-specific**", "hf:q-sit",
                      "**Baselines**", "hf:llava-1.5", "**Other models**", "xai:grok"]
    latex = run_cli(cli_args(ws, [path], "--groups", str(groups), "--resamples", "50", "--format", "latex")).stdout
    assert r"\multicolumn{8}{l}{\textbf{Aesthetic-specific}} \\" in latex


def test_without_groups_for_measured_rows_the_tables_are_not_grouped(paper, tmp_path):
    ws, paths = paper
    lines = [json.loads(line) for line in paths[0].read_text().splitlines() if '"Q-SiT"' in line]
    path = tmp_path / "one.jsonl"
    path.write_text("".join(json.dumps(r | {"model": "hf:q-sit"}) + "\n" for r in lines))
    md = run_cli(cli_args(ws, [path], "--resamples", "50", "--reference", "--format", "md")).stdout
    assert "**" not in md  # the user's row first, then the paper's, as before
    body = [line for line in md.split("### ")[1].splitlines() if line.startswith("| ")]
    assert body[1].startswith("| hf:q-sit |") and body[2].startswith("| Claude Opus 5 (paper) |")


@pytest.mark.parametrize("text, message", [
    ("[a, b]\n", "holds a list, not a mapping"),
    ("m: [closed]\n", "is not 'model: group'"),
    ("m: closed\n  x: : :\n", "g.yaml:2: not valid YAML"),
    ("m: closed\nm: open\n", "key 'm' is given twice (lines 1 and 2)"),
])
def test_a_bad_groups_file_is_one_line_and_exit_2(paper, tmp_path, text, message):
    ws, paths = paper
    groups = tmp_path / "g.yaml"
    groups.write_text(text)
    result = run_cli(cli_args(ws, paths[:1], "--groups", str(groups)))
    assert result.exit_code == 2 and message in " ".join(result.stderr.split())
    assert len(result.stderr.strip().splitlines()) == 1 or "error:" in result.stderr.splitlines()[0]
    missing = run_cli(cli_args(ws, paths[:1], "--groups", str(tmp_path / "none.yaml")))
    assert missing.exit_code == 2 and "--groups file" in missing.stderr and "not found" in missing.stderr
