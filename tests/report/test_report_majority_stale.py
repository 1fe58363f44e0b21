"""A stored baseline:majority run whose suite's gold labels changed since is stale where the majority moved.

baseline:majority answers its suite's most frequent gold label, so its answers
rest on every case's gold, not only its own: a gold edited in the cases file
after the run can turn the majority, and the stored answers are then another
rule's. The report marks those answers stale (counted wrong, the row marked
in every format) with the command that asks again, and a rerun brings the
row back to what the rule gives now; a gold change that leaves the majority
where it was leaves the answers standing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.workspace import run_cli


def _probe(ws: Path, suite: str) -> str:
    result = run_cli(["probe", "run", "-m", "baseline:majority", "-s", suite, "-w", str(ws)])
    assert result.exit_code == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def _set_gold(ws: Path, case_id: str, gold: str) -> None:
    path = ws / "data" / "cases.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for record in records:
        if record["id"] == case_id:
            record["gold"] = gold
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _report(ws: Path, fmt: str = "json"):
    result = run_cli(["report", "-w", str(ws), "--format", fmt])
    assert result.exit_code == 0, result.stderr
    return (json.loads(result.stdout) if fmt == "json" else result.stdout), result.stderr


@pytest.mark.parametrize("suite", ["contextcanvas", "swap"])
def test_a_majority_run_is_stale_once_the_gold_labels_turn_its_majority(tiny_ws, suite):
    # The tiny workspace: T001 gold No, T002 gold Yes (a tie: the majority is No), T003 three options, gold C.
    run_id = _probe(tiny_ws, suite)
    before, _ = _report(tiny_ws)
    [row] = before[suite]
    assert not row["incomplete"] and not before["missing"]

    _set_gold(tiny_ws, "T001", "A")  # now Yes twice: the majority baseline would answer Yes to both
    after, said = _report(tiny_ws)

    stale = [m for m in after["missing"] if m["suite"] == suite]
    assert {m["case"] for m in stale} == {"T001", "T002"} and {m["reason"] for m in stale} == {"stale"}
    assert all(m["run"] == run_id for m in stale)
    assert f"'cfkit probe run -m baseline:majority -s {suite}'" in stale[0]["detail"]
    [row] = after[suite]
    assert row["incomplete"]
    assert "stale" in said and "baseline:majority" in said
    markdown, _ = _report(tiny_ws, "md")
    assert "baseline:majority (incomplete)" in markdown
    csv_text, _ = _report(tiny_ws, "csv")
    assert f"{suite},baseline:majority,incomplete,true" in csv_text

    _probe(tiny_ws, suite)  # asked again with the gold labels as they are now
    again, _ = _report(tiny_ws)
    [row] = again[suite]
    assert not row["incomplete"] and not [m for m in again["missing"] if m["suite"] == suite]
    if suite == "contextcanvas":
        assert row["accuracy"] == pytest.approx(100.0)  # Yes to T001 and T002, C to T003: all right now


def test_a_gold_change_that_keeps_the_majority_leaves_the_answers_standing(tiny_ws):
    _probe(tiny_ws, "contextcanvas")
    _set_gold(tiny_ws, "T002", "B")  # No twice: the majority stays No, the answers are what the rule gives now
    after, _ = _report(tiny_ws)
    [row] = after["contextcanvas"]
    assert not row["incomplete"] and not after["missing"]
    assert row["accuracy"] == pytest.approx(100.0)  # No to T001 and T002, C to T003, scored against the golds now


def test_the_three_option_majority_is_checked_on_its_own(tiny_ws):
    """T003 is the only case without Yes/No: its gold alone is the majority option the baseline answers it."""
    _probe(tiny_ws, "contextcanvas")
    _set_gold(tiny_ws, "T003", "A")
    after, _ = _report(tiny_ws)
    assert [(m["case"], m["reason"]) for m in after["missing"]] == [("T003", "stale")]
    assert "answered C" in after["missing"][0]["detail"] and "make its answer A" in after["missing"][0]["detail"]
