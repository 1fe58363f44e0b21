"""The swap suite (issue 19): every two-option case asked with its options as given and with their texts exchanged.

Requests are checked by diffing the rendered prompts; runs go through the CLI against the loopback
Chat Completions server (tests/support/chat_api_server.py) and the baseline backends, into a real store.
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
from pathlib import Path

import pytest

from cfkit.backends import Capabilities
from cfkit.probe import plan_suite
from cfkit.swap import answer_text, swap_problem, swapped
from cfkit.workspace import load_workspace
from support.chat_api_server import ChatServer, Scripted, answer_json, completion, user_text
from support.workspace import run_cli

FAST = ["-o", "backoff=0.01", "-o", "max_retries=2"]
IMAGES = Capabilities(images=True, multi_image=True, json_schema=True, remote=True)


def cli(ws: Path, *args: str):
    return run_cli(["-w", str(ws), *args])


def swap_run(ws: Path, model: str, *extra: str):
    return cli(ws, "probe", "run", "-m", model, "-s", "swap", "--json", *extra)


def exported(ws: Path, run_id: str) -> list[dict]:
    result = cli(ws, "runs", "export", run_id)
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def add_cases(ws: Path, *cases: dict) -> None:
    with (ws / "data" / "cases.jsonl").open("a") as fh:
        for case in cases:
            fh.write(json.dumps(case) + "\n")


# ── planning ───────────────────────────────────────────────────────────────


def test_each_two_option_case_is_asked_in_both_orders_and_the_others_are_skipped_with_why(tiny_ws):
    yes_no = [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}]
    add_cases(tiny_ws,
              {"id": "T004", "images": ["T001.png", "T002.png"], "question": "Do the two fit?", "options": yes_no,
               "gold": "A", "yes_option": "A"},
              {"id": "T005", "images": ["T001.png"], "question": "Which?", "gold": "A",
               "options": [{"id": "A", "text": "Left"}, {"id": "B", "text": "Right"}]},
              {"id": "T006", "images": ["T001.png"], "question": "Same?", "gold": "A", "yes_option": "A",
               "options": [{"id": "A", "text": "Yes"}, {"id": "B", "text": "Yes"}]})
    plan = plan_suite(load_workspace(tiny_ws), "swap", IMAGES)
    assert [(i.case.id, i.condition) for i in plan.items] == [
        ("T001", "original-order"), ("T001", "swapped-order"), ("T002", "original-order"), ("T002", "swapped-order")]
    skipped = {s.pair_id: s.reason for s in plan.skipped}
    assert list(skipped) == ["T003", "T004", "T005", "T006"] and {s.unit for s in plan.skipped} == {"case"}
    assert skipped["T003"].startswith("3 options") and "paired-image" in skipped["T004"]
    assert "no yes_option" in skipped["T005"] and "both read 'Yes'" in skipped["T006"]
    assert plan.gold_labels == {"no": 1, "yes": 1}  # once per case: both orders have the same Yes/No gold


def test_the_swapped_prompt_differs_from_the_original_only_in_the_option_lines(tiny_ws):
    ws = load_workspace(tiny_ws)
    plan = plan_suite(ws, "swap", IMAGES)
    by_key = {(i.case.id, i.condition): i for i in plan.items}
    for case_id in ("T001", "T002"):
        original, swapped_ = by_key[case_id, "original-order"].request, by_key[case_id, "swapped-order"].request
        diff = [line for line in difflib.unified_diff(original.user.splitlines(), swapped_.user.splitlines(),
                                                      lineterm="", n=0)
                if not line.startswith(("---", "+++", "@@"))]
        assert diff == ["-A. Yes", "-B. No", "+A. No", "+B. Yes"]
        assert original.system == swapped_.system
        assert [i.data for i in original.images] == [i.data for i in swapped_.images]
        assert original.images[0].data == (tiny_ws / "data" / "images" / f"{case_id}.png").read_bytes()
        assert original.option_ids == swapped_.option_ids == ("A", "B") and original.schema == swapped_.schema
        assert (original.meta.yes_option, swapped_.meta.yes_option) == ("A", "B")
    # The original order is the very request the contextcanvas suite sends, so its cached replies serve both.
    contextcanvas = {i.case.id: i.request for i in plan_suite(ws, "contextcanvas", IMAGES).items}
    assert by_key["T001", "original-order"].request.fingerprint() == contextcanvas["T001"].fingerprint()


def test_a_swapped_case_keeps_its_ids_and_moves_gold_and_yes_with_their_texts(tiny_ws):
    case = plan_suite(load_workspace(tiny_ws), "swap", IMAGES).items[0].case  # T001 as listed: gold B "No"
    turned = swapped(case)
    assert [(o.id, o.text) for o in turned.options] == [("A", "No"), ("B", "Yes")]
    assert (turned.gold, turned.yes_option) == ("A", "B")
    assert swapped(turned) == case
    assert (answer_text(case, "swapped-order", "A"), answer_text(case, "original-order", "A")) == ("No", "Yes")
    assert answer_text(case, "swapped-order", None) is None
    with pytest.raises(ValueError, match="not an option"):
        answer_text(case, "swapped-order", "C")
    three = plan_suite(load_workspace(tiny_ws), "contextcanvas", IMAGES).items[2].case
    assert swap_problem(three) is not None
    with pytest.raises(ValueError, match="cannot be swapped"):
        swapped(three)


def test_limit_counts_asked_cases_and_cases_refuses_one_the_suite_does_not_ask(tiny_ws):
    ran = swap_run(tiny_ws, "baseline:always-no", "--limit", "1")
    assert ran.exit_code == 0, ran.stderr
    assert [(r["case"], r["condition"]) for r in exported(tiny_ws, json.loads(ran.stdout)["run_id"])] == [
        ("T001", "original-order"), ("T001", "swapped-order")]
    (tiny_ws / "three.txt").write_text("T003\n")
    refused = swap_run(tiny_ws, "baseline:always-no", "--cases", str(tiny_ws / "three.txt"))
    assert refused.exit_code == 2
    assert "case T003 is not part of the swap suite: it has 3 options" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_the_dry_run_and_the_summary_count_the_skipped_cases(tiny_ws):
    dry = swap_run(tiny_ws, "baseline:always-no", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["requests"] == 4 and [s["case"] for s in plan["skipped"]] == ["T003"]
    ran = cli(tiny_ws, "probe", "run", "-m", "baseline:always-no", "-s", "swap")
    assert ran.exit_code == 0, ran.stderr
    assert "1 case skipped" in ran.stderr and "T003: 3 options" in ran.stderr


# ── runs against a real HTTP server ──────────────────────────────────────


def first_listed(body, n) -> Scripted:
    """A model that always answers whichever option is listed first."""
    return Scripted(body=completion(answer_json(re.search(r"^([A-Z])\. ", user_text(body), re.MULTILINE).group(1))))


def says_yes_in_words(body, n) -> Scripted:
    """A model that answers 'Yes.' in free text, read by the parser against the options it was shown."""
    return Scripted(body=completion("Yes."))


def openai_swap(ws: Path, url: str, *extra: str):
    return swap_run(ws, "openai:test-model", "--base-url", url, *FAST, *extra)


def test_stored_runs_and_exports_mark_each_order_and_a_rerun_sends_nothing(tiny_ws):
    with ChatServer(first_listed) as server:
        first = openai_swap(tiny_ws, server.url)
        assert first.exit_code == 0, first.stderr
        again = openai_swap(tiny_ws, server.url)
        assert again.exit_code == 0, again.stderr
        assert server.count == 4
    summary, resumed = json.loads(first.stdout), json.loads(again.stdout)
    assert (summary["total"], summary["sent"]) == (4, 4) and summary["run_id"].startswith("swap-")
    assert resumed["run_id"] == summary["run_id"] and (resumed["kept"], resumed["sent"]) == (4, 0)
    lines = exported(tiny_ws, summary["run_id"])
    assert {(p["case"], p["condition"], p["answer"]) for p in lines} == {
        ("T001", "original-order", "A"), ("T001", "swapped-order", "A"),
        ("T002", "original-order", "A"), ("T002", "swapped-order", "A")}
    assert {p["suite"] for p in lines} == {"swap"} and all(p["pair"] is None for p in lines)
    shown = cli(tiny_ws, "runs", "show", summary["run_id"])
    assert "original-order" in shown.stdout and "swapped-order" in shown.stdout


def test_a_contextcanvas_run_answers_the_original_order_from_the_cache(tiny_ws):
    with ChatServer(first_listed) as server:
        ran = cli(tiny_ws, "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas", "--base-url",
                  server.url, *FAST)
        assert ran.exit_code == 0, ran.stderr
        swap = openai_swap(tiny_ws, server.url)
        assert swap.exit_code == 0, swap.stderr
        assert server.count == 3 + 2
    summary = json.loads(swap.stdout)
    assert (summary["from_cache"], summary["sent"]) == (2, 2)


def test_a_free_text_reply_is_read_against_the_options_as_listed_in_its_prompt(tiny_ws):
    with ChatServer(says_yes_in_words) as server:
        ran = openai_swap(tiny_ws, server.url)
        assert ran.exit_code == 0, ran.stderr
    lines = exported(tiny_ws, json.loads(ran.stdout)["run_id"])
    # "Yes." names option A as the cases file lists it, and option B once the texts are swapped.
    assert {(p["condition"], p["answer"], p["parse"]) for p in lines} == {
        ("original-order", "A", "yes-no"), ("swapped-order", "B", "yes-no")}


# ── baselines ──────────────────────────────────────────────────────────────


@pytest.mark.parametrize("rule, text", [("always-yes", "Yes"), ("always-no", "No")])
def test_always_yes_and_always_no_answer_the_option_with_their_text_in_either_order(tiny_ws, rule, text):
    ran = swap_run(tiny_ws, f"baseline:{rule}")
    assert ran.exit_code == 0, ran.stderr
    ws = load_workspace(tiny_ws)
    cases = {i.case.id: i.case for i in plan_suite(ws, "contextcanvas", IMAGES).items}
    for p in exported(tiny_ws, json.loads(ran.stdout)["run_id"]):
        assert answer_text(cases[p["case"]], p["condition"], p["answer"]) == text


def test_baseline_random_stays_seeded(tiny_ws, tmp_path):
    twin = tmp_path / "twin"
    shutil.copytree(tiny_ws, twin)

    def answers(ws: Path, seed: int) -> list[tuple]:
        ran = swap_run(ws, "baseline:random", "-o", f"seed={seed}")
        assert ran.exit_code == 0, ran.stderr
        return [(p["case"], p["condition"], p["answer"]) for p in exported(ws, json.loads(ran.stdout)["run_id"])]

    assert answers(tiny_ws, 0) == answers(twin, 0)  # another store, the same draws
    # Each order of each case is a draw of its own: over a few seeds both answers come up in each order.
    drawn = {(case, condition): set() for case in ("T001", "T002") for condition in ("original-order", "swapped-order")}
    for seed in range(1, 9):
        for case, condition, answer in answers(twin, seed):
            drawn[case, condition].add(answer)
    assert all(found == {"A", "B"} for found in drawn.values()), drawn
