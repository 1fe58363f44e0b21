"""Replies cut off at the token limit where another harness made them: replaying (or importing) its file keeps
them cut off, and every line that says so (probe run's summary and error line, the report's reply problems,
``runs show``) tells to raise the limit in that harness, not ``--max-tokens``, which a replay does not use. A
live run's replies still get the ``--max-tokens`` advice."""

from __future__ import annotations

import json
from pathlib import Path

from cfkit.parse.trouble import reply_trouble
from support.chat_api_server import ChatServer, Scripted, completion
from support.probe_runs import openai_run
from support.workspace import run_cli

ELSEWHERE = "Raise the token limit in the harness that produced them, then replay or import its new file"


def _flat(text: str) -> str:
    return " ".join(text.split())


def _cut_file(path: Path, answered: bool = False) -> Path:
    """A peer harness's predictions for the tiny workspace's ContextCanvas cases, each reply cut off."""
    lines = []
    for case in ("T001", "T002", "T003"):
        reply = {"model": "peer:vlm-7b", "suite": "contextcanvas", "case": case, "condition": "image",
                 "raw": '{"answer": "A", "reason": "the sn', "truncated": True}
        reply |= {"answer": "A", "parse": "json"} if answered else {"answer": None, "error": "missing"}
        lines.append(json.dumps(reply) + "\n")
    path.write_text("".join(lines))
    return path


def _report_problems(ws: Path, *extra: str) -> list[dict]:
    result = run_cli(["-w", str(ws), "report", "--format", "json", "--resamples", "50", *extra])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["reply_problems"]


def _live_advice_absent(text: str) -> None:
    assert "Raise --max-tokens" not in text and "512 tokens" not in text, text


def test_a_replay_of_cut_off_replies_says_to_raise_the_limit_where_they_were_made(tiny_ws, tmp_path):
    replayed = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", f"replay:{_cut_file(tmp_path / 'cut.jsonl')}",
                        "-s", "contextcanvas"])
    said = _flat(replayed.stderr)
    assert replayed.exit_code == 1, said  # every reply stored, but not clean
    assert "3 without a valid answer, 3 cut off at the token limit when they were made." in said
    assert ("error: peer:vlm-7b contextcanvas: 3 of 3 replies were cut off at the token limit when they were made, "
            "and a replay keeps them as recorded; 3 of 3 have no valid answer. " + ELSEWHERE) in said
    assert "(--max-tokens changes nothing here)" in said
    _live_advice_absent(said)
    run_id = replayed.stdout.strip().splitlines()[0]
    # The same command again finds the run complete: its summary says the same of the replies.
    again = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", f"replay:{tmp_path / 'cut.jsonl'}", "-s",
                     "contextcanvas"])
    assert again.stdout.strip().splitlines()[0] == run_id
    assert "3 cut off at the token limit when they were made." in _flat(again.stderr), again.stderr
    assert "read from" in _flat(again.stderr) and " sent " not in _flat(again.stderr)
    # The report says the same, in its JSON record and on stderr beside the table.
    [problem] = _report_problems(tiny_ws)
    assert problem["run"] == run_id and ELSEWHERE in _flat(problem["message"])
    _live_advice_absent(problem["message"])
    table = run_cli(["-w", str(tiny_ws), "report", "--resamples", "50"])
    assert ELSEWHERE in _flat(table.stderr)
    _live_advice_absent(table.stderr)
    # runs show: the same line under the counts, and the replay's own generation settings marked as not applied.
    shown = _flat(run_cli(["-w", str(tiny_ws), "runs", "show", run_id], env={"COLUMNS": "300"}).stdout)
    assert ELSEWHERE in shown and "(not applied: the replies were replayed as recorded)" in shown
    _live_advice_absent(shown)


def test_an_imported_file_and_a_predictions_file_with_cut_off_replies_get_the_same_advice(tiny_ws, tmp_path):
    cut = _cut_file(tmp_path / "cut.jsonl", answered=True)
    imported = run_cli(["-w", str(tiny_ws), "runs", "import", str(cut), "--label", "peer-import"])
    assert imported.exit_code == 0, imported.stderr
    [problem] = _report_problems(tiny_ws)
    assert problem["model"] == "peer-import" and ELSEWHERE in _flat(problem["message"])
    assert "each still gave a valid answer" in problem["message"]
    _live_advice_absent(problem["message"])
    run_id = problem["run"]
    shown = _flat(run_cli(["-w", str(tiny_ws), "runs", "show", run_id], env={"COLUMNS": "300"}).stdout)
    assert ELSEWHERE in shown
    _live_advice_absent(shown)
    # A report read straight from the file (no run at all).
    [from_file] = _report_problems(tiny_ws, "--predictions", str(cut))
    assert from_file["run"] is None and ELSEWHERE in _flat(from_file["message"])


def test_a_live_run_cut_off_at_its_own_limit_is_still_told_to_raise_max_tokens(tiny_ws):
    def cut(body, n):
        return Scripted(body=completion("Looking at the picture, the", finish_reason="length", completion_tokens=8))

    with ChatServer(cut) as server:
        result = openai_run(tiny_ws, server.url, "contextcanvas", "--max-tokens", "8")
    said = _flat(result.stderr)
    assert result.exit_code == 1
    assert "3 cut off at the token limit." in said and "when they were made" not in said
    assert "3 of 3 replies were cut off at the token limit (8 tokens)" in said and "Raise --max-tokens" in said
    run_id = result.stdout.strip().splitlines()[0]
    shown = _flat(run_cli(["-w", str(tiny_ws), "runs", "show", run_id], env={"COLUMNS": "300"}).stdout)
    assert "(8 tokens)" in shown and "Raise --max-tokens and run again" in shown and "not applied" not in shown
    [problem] = _report_problems(tiny_ws)
    assert "Raise --max-tokens and run again" in problem["message"] and ELSEWHERE not in problem["message"]


def test_the_advice_on_cut_off_replies_follows_where_they_were_made():
    for invalid in (0, 10):  # with or without a valid answer each
        live = reply_trouble("m s", 10, invalid, 0, 10, 64, "cmd")
        again = reply_trouble("m s", 10, invalid, 0, 10, 64, "cmd", replayed=True)
        assert "(64 tokens)" in live and "Raise --max-tokens and run again" in live
        assert "64 tokens" not in again and "Raise --max-tokens" not in again and ELSEWHERE in again
        assert "'cmd' shows them" in again
    # Other causes are worded alike either way: the token limit is not theirs.
    assert reply_trouble("m s", 10, 9, 8, 0, 64, "cmd", replayed=True) == reply_trouble("m s", 10, 9, 8, 0, 64, "cmd")
