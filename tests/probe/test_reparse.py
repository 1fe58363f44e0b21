"""`cfkit runs reparse` and `cfkit runs unparsed`: stored replies read again with the current parser, no model call.

The run is made against a real Chat Completions server on 127.0.0.1; then the
readings an older parser (version 1) gave are written into the store, as a
store from before the parser rewrite holds them.
"""

from __future__ import annotations

import json

import pytest

from cfkit.parse import PARSER_VERSION
from cfkit.store import Store
from support.chat_api_server import ChatServer, Scripted, answer_json, completion, user_text
from support.probe_runs import openai_run, replies, report
from support.store_sql import table_rows, update_rows
from support.workspace import run_cli

#: What the model says to each case, and how version 1 of the parser read it.
REPLIES = {
    "spring fair poster": ("T001", "A. Yes\nB. No", ("A", "leading-id", None)),  # an echo, read as A by v1
    "winter card": ("T002", "Answer: Yes", (None, None, "unparseable")),  # a declared answer v1 missed
    "Which event": ("T003", answer_json("C"), ("C", "json", None)),  # read alike by both
}


def scripted(body, n) -> Scripted:
    text = user_text(body)
    for needle, (_, content, _) in REPLIES.items():
        if needle in text:
            return Scripted(body=completion(content))
    return Scripted(body=completion("no idea"))


def _as_version_1(ws) -> str:
    """Overwrite the stored readings with version 1's, as an older store holds them; returns the run id."""
    with Store(ws / ".cfkit" / "cfkit.db") as store:
        [run_id] = [r["id"] for r in table_rows(store.path, "runs", "id")]
        for case_id, _, (answer, rule, error) in REPLIES.values():
            update_rows(store.path, "replies", {"answer": answer, "parse": rule, "error": error, "parser": "1"},
                        {"case_id": case_id})
    return run_id


def test_reparse_changes_exactly_what_the_new_rules_read_differently_and_the_report_follows(tiny_ws):
    with ChatServer(scripted) as server:
        first = openai_run(tiny_ws, server.url, "contextcanvas", "--json")
        assert first.exit_code == 0, first.stderr
        sent = server.count
        run_id = _as_version_1(tiny_ws)
        old = report(tiny_ws)["contextcanvas"][0]
        result = run_cli(["-w", str(tiny_ws), "runs", "reparse", run_id[:20], "--json"])
        assert server.count == sent  # no model was asked
    assert result.exit_code == 0, result.stderr
    done = json.loads(result.stdout)
    assert done["reread"] == 3 and done["parser"] == PARSER_VERSION
    changed = {c["key"][0]: (c["old"]["answer"], c["new"]["answer"], c["new"]["error"]) for c in done["changed"]}
    assert changed == {"T001": ("A", None, "ambiguous"), "T002": (None, "A", None)}  # T003 is read alike
    stored = {r["case_id"]: (r["answer"], r["parse"], r["parser"]) for r in replies(tiny_ws)}
    assert stored == {"T001": (None, None, PARSER_VERSION), "T002": ("A", "field", PARSER_VERSION),
                      "T003": ("C", "json", PARSER_VERSION)}
    # The report reads the new readings: T001 (gold B) is no longer credited A, T002 (gold A) now is.
    new = report(tiny_ws)["contextcanvas"][0]
    assert (old["accuracy"], new["accuracy"]) == pytest.approx((100 / 3, 200 / 3))
    assert (old["invalid"], new["invalid"]) == (1, 1)
    # Read again: nothing is left for an older version, and --all re-reads every reply to the same effect.
    again = json.loads(run_cli(["-w", str(tiny_ws), "runs", "reparse", run_id, "--json"]).stdout)
    assert (again["reread"], again["current"], again["changed"]) == (0, 3, [])
    everything = json.loads(run_cli(["-w", str(tiny_ws), "runs", "reparse", run_id, "--all", "--json"]).stdout)
    assert (everything["reread"], everything["changed"]) == (3, [])


def test_reparse_says_how_answers_changed_in_words(tiny_ws):
    with ChatServer(scripted) as server:
        assert openai_run(tiny_ws, server.url).exit_code == 0
    run_id = _as_version_1(tiny_ws)
    result = run_cli(["-w", str(tiny_ws), "runs", "reparse", run_id])
    assert result.exit_code == 0, result.stderr
    assert f"re-read 3 replies with parser version {PARSER_VERSION}: 2 answers changed" in result.stderr
    assert "1 × A (leading-id) → no answer (ambiguous)" in result.stdout
    assert "T002 image: no answer (unparseable) → A (field): the reply declares 'Answer: Yes'" in result.stdout


def test_known_answers_and_transport_failures_are_not_the_parsers(tiny_ws):
    assert run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-no", "-s", "contextcanvas"]).exit_code == 0
    with Store(tiny_ws / ".cfkit" / "cfkit.db") as store:
        [run_id] = [r["id"] for r in table_rows(store.path, "runs", "id")]
        # as a store from before parser versions were recorded holds them
        update_rows(store.path, "replies", {"parser": None})
    result = json.loads(run_cli(["-w", str(tiny_ws), "runs", "reparse", run_id, "--all", "--json"]).stdout)
    assert (result["reread"], result["not_parsed"], result["changed"]) == (0, 3, [])


def test_unparsed_lists_replies_without_an_answer_with_their_text_shown_safely(tiny_ws):
    def hostile(body, n):
        if "spring fair" in user_text(body):
            return Scripted(body=completion("A. Yes\nB. No \x1b]0;owned\x07"))
        return Scripted(body=completion(answer_json("A")))

    with ChatServer(hostile) as server:
        first = openai_run(tiny_ws, server.url, "contextcanvas", "--json")
    run_id = json.loads(first.stdout)["run_id"]
    listed = run_cli(["-w", str(tiny_ws), "runs", "unparsed", run_id])
    assert listed.exit_code == 0, listed.stderr
    assert "T001 image  ambiguous: the reply lists the options (A, B)" in listed.stdout
    assert "A. Yes\n  B. No ␛]0;owned" in listed.stdout  # the reply, indented, its escape shown not obeyed
    assert "\x1b" not in listed.stdout and "\x07" not in listed.stdout
    assert "T002" not in listed.stdout  # answered
    as_json = json.loads(run_cli(["-w", str(tiny_ws), "runs", "unparsed", run_id, "--json"]).stdout)
    # T003 has three options; "A" is a valid answer there too, so only T001 is listed.
    assert [(r["case_id"], r["raw"]) for r in as_json] == [("T001", "A. Yes\nB. No \x1b]0;owned\x07")]


def test_a_report_over_readings_of_an_older_parser_says_so_until_they_are_read_again(tiny_ws):
    with ChatServer(scripted) as server:
        assert openai_run(tiny_ws, server.url).exit_code == 0
    run_id = _as_version_1(tiny_ws)
    older = [n for n in report(tiny_ws)["notes"] if "older parser" in n]
    assert older == [f"contextcanvas: openai:test-model's answers include 3 replies of run {run_id} read by an older "
                     f"parser (version 1; now {PARSER_VERSION}), which the parser now may read otherwise; 'cfkit runs "
                     f"reparse {run_id}' reads them again and says what changed."]
    assert run_cli(["-w", str(tiny_ws), "runs", "reparse", run_id]).exit_code == 0
    assert not [n for n in report(tiny_ws)["notes"] if "older parser" in n]


def test_one_reply_of_an_older_parser_is_said_in_the_singular(tiny_ws):
    with ChatServer(scripted) as server:
        assert openai_run(tiny_ws, server.url).exit_code == 0
    [run_id] = [r["id"] for r in table_rows(tiny_ws / ".cfkit" / "cfkit.db", "runs", "id")]
    update_rows(tiny_ws / ".cfkit" / "cfkit.db", "replies", {"parser": "1"}, {"case_id": "T001"})
    older = [n for n in report(tiny_ws)["notes"] if "older parser" in n]
    assert older == [f"contextcanvas: openai:test-model's answers include 1 reply of run {run_id} read by an older "
                     f"parser (version 1; now {PARSER_VERSION}), which the parser now may read otherwise; 'cfkit runs "
                     f"reparse {run_id}' reads it again and says what changed."]


def test_a_case_gone_from_the_cases_file_is_said_in_the_number_of_its_count(tiny_ws):
    with ChatServer(scripted) as server:
        assert openai_run(tiny_ws, server.url).exit_code == 0
    run_id = _as_version_1(tiny_ws)
    cases = tiny_ws / "data" / "cases.jsonl"
    cases.write_text("".join(line + "\n" for line in cases.read_text().splitlines() if '"T003"' not in line))
    result = run_cli(["-w", str(tiny_ws), "runs", "reparse", run_id])
    said = " ".join(result.stderr.split())
    assert "1 case is no longer in" in said and "and kept its readings: T003" in said, said
