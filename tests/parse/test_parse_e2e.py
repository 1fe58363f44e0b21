"""Parser version 3 end to end: a loopback model (a real HTTP server on 127.0.0.1 speaking the OpenAI chat
API) whose every reply is a self-correction or a label with another option beside it, through
``cfkit probe run``, ``cfkit report`` and ``cfkit runs reparse`` (issue 26).

The tiny workspace has two Yes/No cases (T001 gold B, T002 gold A) and one three-option case (T003 gold C).
"""

from __future__ import annotations

import json

import pytest

from cfkit.parse import PARSER_VERSION
from support.chat_api_server import ChatServer, Scripted, completion
from support.probe_runs import openai_run, replies, report
from support.store_sql import update_rows
from support.workspace import run_cli


def always(content: str):
    def script(body, n) -> Scripted:
        return Scripted(body=completion(content))
    return script


@pytest.mark.parametrize("content,error", [
    ('A "B"', "ambiguous"),  # what a tiny model behind `transformers serve` said to all 31 requests
    ('A "B", A "B", A "B", A "B"', "ambiguous"),
    ("A (B)", "ambiguous"),
])
def test_a_label_with_another_option_beside_it_is_invalid_not_the_label(tiny_ws, content, error):
    with ChatServer(always(content)) as server:
        result = openai_run(tiny_ws, server.url, "contextcanvas", "--json")
        assert server.count == 3
    assert result.exit_code == 0, result.stderr
    stored = replies(tiny_ws)
    assert [(r["answer"], r["error"], r["parser"]) for r in stored] == [(None, error, PARSER_VERSION)] * 3
    row = report(tiny_ws)["contextcanvas"][0]
    assert row["invalid"] == 3 and row["n"] == 3
    assert row["yes_rate"] != pytest.approx(100.0)  # v2 stored A everywhere: Yes 100 %, accuracy 33.3
    assert row["accuracy"] == pytest.approx(0.0)


def test_a_label_with_another_options_text_beside_it_is_conflicting(tiny_ws):
    with ChatServer(always('A "No"')) as server:
        assert openai_run(tiny_ws, server.url).exit_code == 0
    # On Yes/No, "No" is option B's text; on T003 (a wedding, a funeral, a race) it names no option.
    assert [(r["case_id"], r["answer"], r["error"]) for r in replies(tiny_ws)] == [
        ("T001", None, "conflicting"), ("T002", None, "conflicting"), ("T003", "A", None)]
    row = report(tiny_ws)["contextcanvas"][0]
    assert row["invalid"] == 2 and row["yes_rate"] != pytest.approx(100.0)


@pytest.mark.parametrize("content", ["Yes, but actually No", "Yes, but no", "Yes, it is not suitable."])
def test_a_model_that_corrects_itself_is_not_100_percent_yes(tiny_ws, content):
    with ChatServer(always(content)) as server:
        assert openai_run(tiny_ws, server.url).exit_code == 0
    binary = [r for r in replies(tiny_ws) if r["case_id"] in ("T001", "T002")]
    assert [(r["answer"], r["error"]) for r in binary] == [(None, "conflicting")] * 2
    row = report(tiny_ws)["contextcanvas"][0]
    assert row["yes_rate"] != pytest.approx(100.0)
    assert row["invalid"] == 3  # T003's options are not Yes/No: "Yes" there is not an answer either


def test_reparse_shows_what_version_3_changes_on_a_version_2_run(tiny_ws):
    """Replies stored by version 2 (as it read them) are found as older, re-read, and the change is shown."""
    script = {"spring fair": 'A "B"', "winter card": "Not suitable.", "Which event": "C"}

    def answer(body, n) -> Scripted:
        text = json.dumps(body)
        return Scripted(body=completion(next(v for k, v in script.items() if k in text)))

    with ChatServer(answer) as server:
        run_id = json.loads(openai_run(tiny_ws, server.url, "contextcanvas", "--json").stdout)["run_id"]
        sent = server.count
        # What version 2 stored for these replies (its readings, checked by hand against that parser).
        update_rows(tiny_ws, "replies", {"answer": "A", "parse": "leading-id", "error": None, "parser": "2"},
                    {"case_id": "T001"})
        update_rows(tiny_ws, "replies", {"answer": None, "parse": None, "error": "unparseable", "parser": "2"},
                    {"case_id": "T002"})
        update_rows(tiny_ws, "replies", {"parser": "2"}, {"case_id": "T003"})
        before = report(tiny_ws)["contextcanvas"][0]
        shown = run_cli(["-w", str(tiny_ws), "runs", "reparse", run_id])
        assert server.count == sent  # no model was asked
    assert shown.exit_code == 0, shown.stderr
    assert f"re-read 3 replies with parser version {PARSER_VERSION}: 2 answers changed" in shown.stderr
    assert "A (leading-id) → no answer (ambiguous)" in shown.stdout
    assert "T002 image: no answer (unparseable) → B (polarity)" in shown.stdout
    after = report(tiny_ws)["contextcanvas"][0]
    # T001 (gold B) is no longer credited as A; T002 (gold A) now reads B, wrong but an answer.
    assert (before["invalid"], after["invalid"]) == (1, 1)
    assert before["yes_rate"] == pytest.approx(50.0) and after["yes_rate"] == pytest.approx(0.0)  # of 2 binary
    assert [(r["case_id"], r["answer"], r["parser"]) for r in replies(tiny_ws)] == [
        ("T001", None, PARSER_VERSION), ("T002", "B", PARSER_VERSION), ("T003", "C", PARSER_VERSION)]
