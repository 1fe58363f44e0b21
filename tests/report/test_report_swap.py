"""The report's ``swap`` section (issue 19): position bias from the swap suite, in every format.

The acceptance figures come from real runs (the loopback Chat Completions server, the baselines);
McNemar and the intervals are checked against scipy.stats.binomtest and a plain bootstrap loop over
numpy's generator, with the option texts worked out here from the ids, independently of cfkit.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from support.chat_api_server import ChatServer, Scripted, answer_json, completion, error_body, user_text
from support.workspace import run_cli

FAST = ["-o", "backoff=0.01", "-o", "max_retries=1"]
SWAP_KEYS = ["model", "n", "accuracy_original", "accuracy_swapped", "accuracy_delta", "consistency",
             "first_position_rate", "yes_rate_original", "yes_rate_swapped", "b", "c", "p", "invalid_original",
             "invalid_swapped", "accuracy_original_ci", "accuracy_swapped_ci", "accuracy_delta_ci", "consistency_ci",
             "first_position_rate_ci", "yes_rate_original_ci", "yes_rate_swapped_ci", "incomplete", "not_clean", "runs"]


def cli(ws: Path, *args: str, env: dict | None = None):
    return run_cli(["-w", str(ws), *args], env=env)


def report_json(ws: Path, *extra: str) -> dict:
    result = cli(ws, "report", "--format", "json", "--resamples", "300", *extra)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def swap_row(ws: Path, model: str, *extra: str) -> dict:
    return next(r for r in report_json(ws, *extra)["swap"] if r["model"] == model)


def first_listed(body, n) -> Scripted:
    """A model that always answers whichever option is listed first."""
    return Scripted(body=completion(answer_json(re.search(r"^([A-Z])\. ", user_text(body), re.MULTILINE).group(1))))


# ── acceptance: what the figures say about known answerers ────────────────


def test_a_server_that_answers_the_first_listed_option_has_consistency_0_and_first_position_100(mini_ws):
    with ChatServer(first_listed) as server:
        ran = cli(mini_ws, "probe", "run", "-m", "openai:test-model", "--base-url", server.url, "-s", "swap", *FAST)
        assert ran.exit_code == 0, ran.stderr
        assert server.count == 10  # five cases, two orders; the paired-image and three-option cases are skipped
    row = swap_row(mini_ws, "openai:test-model")
    assert list(row) == SWAP_KEYS
    assert row["n"] == 5 and row["consistency"] == 0.0 and row["first_position_rate"] == 100.0
    assert (row["yes_rate_original"], row["yes_rate_swapped"]) == (100.0, 0.0)
    # Gold of the five: MX01-03 No, MX06-07 Yes. Always "Yes" first, then always "No" first.
    assert (row["accuracy_original"], row["accuracy_swapped"]) == (40.0, 60.0)
    assert (row["b"], row["c"]) == (2, 3) and row["p"] == pytest.approx(1.0)
    assert row["consistency_ci"] == [0.0, 0.0] and row["first_position_rate_ci"] == [100.0, 100.0]
    assert row["incomplete"] is False and row["not_clean"] is False
    assert row["runs"][0].startswith("swap-openai-test-model-")


@pytest.mark.parametrize("rule, yes_rate, accuracy", [("always-yes", 100.0, 40.0), ("always-no", 0.0, 60.0)])
def test_always_yes_and_always_no_are_consistent_and_position_blind(mini_ws, rule, yes_rate, accuracy):
    ran = cli(mini_ws, "probe", "run", "-m", f"baseline:{rule}", "-s", "swap")
    assert ran.exit_code == 0, ran.stderr
    row = swap_row(mini_ws, f"baseline:{rule}")
    assert row["consistency"] == 100.0 and row["first_position_rate"] == 50.0
    assert (row["yes_rate_original"], row["yes_rate_swapped"]) == (yes_rate, yes_rate)
    assert (row["accuracy_original"], row["accuracy_swapped"], row["accuracy_delta"]) == (accuracy, accuracy, 0.0)
    assert (row["b"], row["c"], row["p"]) == (0, 0, 1.0)


def test_as_a_user_on_the_mini_example_every_format_shows_the_section(mini_ws):
    ran = cli(mini_ws, "probe", "run", "-m", "baseline:always-yes", "-s", "swap")
    assert ran.exit_code == 0, ran.stderr
    table = cli(mini_ws, "report", "--resamples", "200", env={"COLUMNS": "100"})
    assert table.exit_code == 0, table.stderr
    assert "Option order: accuracy as listed and with the two options swapped" in table.stdout
    assert "content or position?" in table.stdout and "…" not in table.stdout
    assert max(len(line) for line in table.stdout.splitlines()) <= 100
    bias_row = next(line for line in table.stdout.splitlines() if "[100.0, 100.0]" in line)
    assert re.search(r"100\.00 │ \[100\.0, 100\.0\] │ +50\.00 │ \[50\.0, 50\.0\] │ +100\.00 │ +100\.00 │", bias_row)
    md = cli(mini_ws, "report", "--format", "md", "--resamples", "200").stdout
    assert "| baseline:always-yes | 5 | 40.00 | 40.00 | +0.00 | [0.00, 0.00] | 0/0 | 1.0000 | 0/0 |" in md
    assert "| baseline:always-yes | 100.00 | [100.0, 100.0] | 50.00 | [50.0, 50.0] | 100.00 | 100.00 |" in md
    latex = cli(mini_ws, "report", "--format", "latex", "--resamples", "200").stdout
    assert r"baseline:always-yes & 100.00 & [100.0, 100.0] & 50.00 & [50.0, 50.0] & 100.00 & 100.00 \\" in latex
    assert r"Model & n & Original & Swapped & $\Delta$ & 95\% CI & b/c & p & Inv. \\" in latex
    rows = list(csv.DictReader(io.StringIO(cli(mini_ws, "report", "--format", "csv", "--resamples", "200").stdout)))
    figures = {r["metric"]: r["value"] for r in rows if r["section"] == "swap"}
    assert figures["consistency"] == "100.0" and figures["first_position_rate"] == "50.0"
    assert figures["consistency_ci.0"] == "100.0" and figures["n"] == "5" and figures["runs.0"].startswith("swap-")


# ── independent checks of McNemar and the intervals ─────────────────────


def many_cases(root: Path, n: int) -> Path:
    """A workspace of n Yes/No cases (gold Yes for every third) plus the cases the swap suite skips."""
    root.mkdir()
    (root / "images").mkdir()
    (root / "images" / "p.png").write_bytes((Path(__file__).resolve().parents[2] / "examples" / "mini" / "images"
                                             / "coffee.jpg").read_bytes())
    yes_no = [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}]
    cases = [{"id": f"C{i:03d}", "images": ["p.png"], "question": f"Suitable {i}?", "options": yes_no,
              "gold": "A" if i % 3 == 0 else "B", "yes_option": "A"} for i in range(n)]
    cases.append({"id": "PAIR", "images": ["p.png", "p.png"], "question": "Both?", "options": yes_no, "gold": "A",
                  "yes_option": "A"})
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    (root / "cfkit.toml").write_text('[dataset]\ncases = "cases.jsonl"\nimages = "images"\n')
    return root


def test_mcnemar_and_intervals_match_binomtest_and_a_plain_bootstrap_loop(tmp_path):
    n, resamples, seed = 48, 2000, 5
    ws = many_cases(tmp_path / "ws", n)
    rng = np.random.default_rng(11)
    lines, texts = [], {"original-order": [], "swapped-order": []}
    for i in range(n):
        for condition in ("original-order", "swapped-order"):
            u = rng.random()
            answer = None if u < 0.1 else ("A" if u < 0.6 else "B")
            if not (i == 7 and condition == "swapped-order"):  # one unit has no prediction at all
                lines.append(json.dumps({"model": "m", "suite": "swap", "case": f"C{i:03d}", "condition": condition,
                                         "answer": answer, "parse": "json" if answer else None,
                                         "error": None if answer else "unparseable", "raw": ""}))
            else:
                answer = None
            # Swapped order lists "No" as A and "Yes" as B.
            listed = {"A": "Yes", "B": "No"} if condition == "original-order" else {"A": "No", "B": "Yes"}
            texts[condition].append(listed.get(answer))
    (tmp_path / "preds.jsonl").write_text("\n".join(lines) + "\n")
    result = cli(ws, "report", "--predictions", str(tmp_path / "preds.jsonl"), "--format", "json",
                 "--resamples", str(resamples), "--seed", str(seed))
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    row = data["swap"][0]
    gold = ["Yes" if i % 3 == 0 else "No" for i in range(n)]
    original, swapped = np.array(texts["original-order"], dtype=object), np.array(texts["swapped-order"], dtype=object)
    right_o, right_s = original == np.array(gold, dtype=object), swapped == np.array(gold, dtype=object)
    b, c = int((right_o & ~right_s).sum()), int((right_s & ~right_o).sum())
    assert (row["b"], row["c"]) == (b, c)
    assert row["p"] == pytest.approx(scipy.stats.binomtest(min(b, c), b + c, 0.5).pvalue, rel=1e-12)
    per_case = {
        "accuracy_original": 100.0 * right_o,
        "accuracy_swapped": 100.0 * right_s,
        "consistency": 100.0 * np.array([o is not None and o == s for o, s in zip(original, swapped)]),
        "first_position_rate": 50.0 * ((original == "Yes").astype(float) + (swapped == "No").astype(float)),
        "yes_rate_original": 100.0 * (original == "Yes"),
        "yes_rate_swapped": 100.0 * (swapped == "Yes"),
    }
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    for name, values in per_case.items():
        assert row[name] == pytest.approx(values.mean(), abs=1e-12), name
        loop = [values[rows].mean() for rows in draws]
        low, high = np.percentile(loop, [2.5, 97.5])
        # Sums of multiples of 50 are exact in float64, so the loop and cfkit agree to rounding of the division.
        assert row[f"{name}_ci"] == pytest.approx([low, high], abs=1e-9), name
    # Null answers, the absent one included (as every section counts them).
    assert (row["invalid_original"], row["invalid_swapped"]) == (sum(t is None for t in original),
                                                                  sum(t is None for t in swapped))
    # The unit without a prediction is counted wrong and listed; the paired-image case is not a unit.
    assert row["n"] == n and row["incomplete"] is True
    assert [(m["case"], m["condition"], m["reason"]) for m in data["missing"]] == [
        ("C007", "swapped-order", "absent")]
    assert any(note.startswith(f"swap: m has usable answers in both orders for {n - 1} of the {n} cases")
               for note in data["notes"])


def test_a_failed_request_is_listed_under_missing_and_marks_the_row(mini_ws):
    questions = {json.loads(line)["id"]: json.loads(line)["question"]
                 for line in (mini_ws / "cases.jsonl").read_text().splitlines()}

    def script(body, n):
        text = user_text(body)
        if questions["MX02"] in text and "A. No" in text:
            return Scripted(503, error_body("overloaded", kind="server_error"))
        return first_listed(body, n)

    with ChatServer(script) as server:
        ran = cli(mini_ws, "probe", "run", "-m", "openai:test-model", "--base-url", server.url, "-s", "swap", *FAST)
    assert ran.exit_code == 1
    result = cli(mini_ws, "report", "--format", "json", "--resamples", "200")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    row = data["swap"][0]
    assert row["incomplete"] is True and row["n"] == 5
    assert [(m["suite"], m["case"], m["condition"], m["reason"]) for m in data["missing"]] == [
        ("swap", "MX02", "swapped-order", "transport")]
    assert "overloaded" in data["missing"][0]["detail"]
    assert row["consistency"] == 0.0 and row["first_position_rate"] == 90.0  # 9 of 10 answers, all first-listed
    assert "openai:test-model: 1 unit without a usable answer, counted wrong" in " ".join(result.stderr.split())


def test_the_bias_table_says_when_null_answers_are_in_its_shares(mini_ws):
    """A first-position rate is over all 2n answers: a model that always picks the first option but gives no valid
    answer to some prompts reads as less position-bound. The table that shows the rate has no Inv. column, so its
    legend says so whenever a row has null answers (and only then)."""
    sentence = "Null answers (Inv. above) count in every share, as neither first-listed nor Yes."
    assert cli(mini_ws, "probe", "run", "-m", "baseline:always-yes", "-s", "swap").exit_code == 0
    clean = cli(mini_ws, "report", "--resamples", "200", env={"COLUMNS": "200"})
    assert "content or position?" in clean.stdout and sentence not in clean.stdout

    questions = [json.loads(line)["question"] for line in (mini_ws / "cases.jsonl").read_text().splitlines()]

    def script(body, n):
        text = user_text(body)
        if "A. No" in text and any(q in text for q in questions[:2]):  # two swapped-order prompts: no option said
            return Scripted(body=completion("I would rather not say."))
        return first_listed(body, n)

    with ChatServer(script) as server:
        cli(mini_ws, "probe", "run", "-m", "openai:test-model", "--base-url", server.url, "-s", "swap", *FAST)
    row = swap_row(mini_ws, "openai:test-model")
    assert (row["invalid_original"], row["invalid_swapped"], row["first_position_rate"]) == (0, 2, 80.0)
    for fmt in ("table", "md", "latex"):
        shown = cli(mini_ws, "report", "--format", fmt, "--resamples", "200", env={"COLUMNS": "200"}).stdout
        assert sentence in " ".join(shown.split()).replace("\\", ""), fmt


def test_predictions_about_a_case_the_suite_does_not_ask_are_refused(mini_ws, tmp_path):
    line = {"model": "m", "suite": "swap", "case": "MX04", "condition": "original-order", "answer": "A",
            "parse": "json", "error": None, "raw": ""}
    (tmp_path / "p.jsonl").write_text(json.dumps(line) + "\n")
    result = cli(mini_ws, "report", "--predictions", str(tmp_path / "p.jsonl"))
    assert result.exit_code == 2
    assert "answered swap case MX04, which the swap suite does not ask (it has 2 images" in result.stderr
    line["condition"] = "edit"
    (tmp_path / "p.jsonl").write_text(json.dumps(line) + "\n")
    wrong = cli(mini_ws, "report", "--predictions", str(tmp_path / "p.jsonl"))
    assert wrong.exit_code == 2 and "original-order, swapped-order" in wrong.stderr
