"""Offline batch files: `probe run --batch-file` writes what an offline runner (vllm run-batch) reads, and
`probe collect RUN --from-file` stores its results as live replies are stored, line by line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.chat_api_server import ChatServer
from support.probe_runs import many_cases, replies, scripted_answer
from support.workspace import REPO, run_cli

N = 12
RUNNER = REPO / "tests" / "support" / "fake_run_batch.py"


@pytest.fixture
def many_ws(tmp_path):
    return many_cases(tmp_path / "ws", N)


def write(ws: Path, url: str, out: Path, *extra: str):
    return run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                    "--base-url", url, "--batch-file", str(out), *extra])


def offline(inp: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, str(RUNNER), "-i", str(inp), "-o", str(out), "--model", "test-model",
                           *extra], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr  # the runner accepted every line cfkit wrote
    return done


def collect(ws: Path, run_id: str, *files: Path, json_out: bool = True):
    flags = [a for f in files for a in ("--from-file", str(f))]
    return run_cli(["-w", str(ws), "probe", "collect", run_id, *flags, *(["--json"] if json_out else [])])


def test_a_batch_file_runs_offline_and_its_results_are_stored_like_live_replies(many_ws, tmp_path):
    out = tmp_path / "requests.jsonl"
    with ChatServer(scripted_answer) as server:
        written = write(many_ws, server.url, out)
        assert written.exit_code == 0, written.stderr
        assert server.count == 0  # nothing was sent
        run_id = written.stdout.strip()
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(lines) == N and len({line["custom_id"] for line in lines}) == N
        shown = json.loads(run_cli(["-w", str(many_ws), "runs", "show", run_id, "--json"]).stdout)["run"]
        assert shown["status"] == "waiting"
        # Plain 'collect' cannot ask a provider about a file: it says what to give instead.
        plain = run_cli(["-w", str(many_ws), "probe", "collect", run_id])
        assert plain.exit_code == 2 and "--from-file" in plain.stderr

        results = tmp_path / "results.jsonl"
        offline(out, results, "--fail-every", "5", "--garbage")
        collected = collect(many_ws, run_id, results)
        assert collected.exit_code == 1  # two requests failed: the run is not complete
        summary = json.loads(collected.stdout)
        assert (summary["lines"], summary["stored"], summary["failed"], summary["malformed"], summary["missing"]) == (
            N + 1, N, 2, 1, 0)
        stored = replies(many_ws, run_id)
        assert len(stored) == N
        answered = [r for r in stored if r["error"] is None]
        assert len(answered) == N - 2
        for r in answered:  # parsed exactly as a live reply: the runner answers A for odd pictures
            number = int(r["case_id"][1:])
            assert r["answer"] == ("A" if number % 2 else "B") and r["endpoint"] == "file:results.jsonl"
            assert r["server_model"] == "test-model" and r["parse"] == "json"
        failures = [r for r in stored if r["error"] == "transport"]
        assert all("the engine ran out of memory" in r["detail"] for r in failures)

        # The same command run live sends only the two failures; the rest is kept.
        live = run_cli(["-w", str(many_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                        "--base-url", server.url, "--json"])
        assert live.exit_code == 0, live.stderr
        assert json.loads(live.stdout)["run_id"] == run_id and server.count == 2


def test_a_file_split_in_parts_is_collected_part_by_part(many_ws, tmp_path):
    out = tmp_path / "requests.jsonl"
    with ChatServer(scripted_answer) as server:
        run_id = write(many_ws, server.url, out).stdout.strip()
    lines = out.read_text().splitlines(keepends=True)
    parts = []
    for i in range(3):  # what `split -n l/3` does: whole lines, three files
        part = tmp_path / f"part-{i}.jsonl"
        part.write_text("".join(lines[i * N // 3:(i + 1) * N // 3]))
        results = tmp_path / f"results-{i}.jsonl"
        offline(part, results)
        parts.append(results)
    first = collect(many_ws, run_id, parts[0])
    assert first.exit_code == 1
    summary = json.loads(first.stdout)
    assert (summary["stored"], summary["missing"], summary["status"]) == (N // 3, N - N // 3, "waiting")
    rest = collect(many_ws, run_id, parts[1], parts[2], parts[0])  # the first part again: already stored
    assert rest.exit_code == 0, rest.stderr
    summary = json.loads(rest.stdout)
    assert (summary["stored"], summary["already"], summary["missing"], summary["status"]) == (
        N - N // 3, N // 3, 0, "done")
    assert all(r["error"] is None for r in replies(many_ws, run_id))
    report = run_cli(["-w", str(many_ws), "runs", "show", run_id, "--json"])
    assert json.loads(report.stdout)["run"]["status"] == "done"


def test_lines_of_another_run_and_missing_files_are_told_apart(many_ws, tmp_path):
    out = tmp_path / "requests.jsonl"
    with ChatServer(scripted_answer) as server:
        run_id = write(many_ws, server.url, out).stdout.strip()
    results = tmp_path / "results.jsonl"
    offline(out, results)
    stranger = json.dumps({"custom_id": "0" * 64, "response": {"status_code": 200, "body": {}}, "error": None})
    results.write_text(results.read_text() + stranger + "\n")
    text = collect(many_ws, run_id, results, json_out=False)
    assert text.exit_code == 0, text.stderr
    assert "1 line of another run skipped" in text.stderr and f"is no request of run {run_id}" in text.stderr
    gone = collect(many_ws, run_id, tmp_path / "nowhere.jsonl")
    assert gone.exit_code == 2 and "nowhere.jsonl" in gone.stderr and "cannot be read" in gone.stderr


def test_batch_file_needs_an_openai_model(many_ws, tmp_path):
    result = run_cli(["-w", str(many_ws), "probe", "run", "-m", "baseline:always-no", "-s", "contextcanvas",
                      "--batch-file", str(tmp_path / "x.jsonl")])
    assert result.exit_code == 2 and "--batch-file" in result.stderr
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize("reply, said", [("cut-off", "were cut off at the token limit (512 tokens)"),
                                         ("empty", "empty: no text came back")])
def test_results_cut_off_or_empty_are_said_and_exit_1_as_a_live_run_would(many_ws, tmp_path, reply, said):
    out = tmp_path / "requests.jsonl"
    with ChatServer(scripted_answer) as server:
        run_id = write(many_ws, server.url, out).stdout.strip()
    results = tmp_path / "results.jsonl"
    offline(out, results, "--reply", reply)
    collected = collect(many_ws, run_id, results, json_out=False)
    assert collected.exit_code == 1, collected.stderr
    assert f"openai:test-model contextcanvas: {N} of {N} replies" in collected.stderr and said in collected.stderr
    again = collect(many_ws, run_id, results)  # collected again, as JSON: the same exit, and the counts
    assert again.exit_code == 1
    as_json = json.loads(again.stdout)
    assert (as_json["truncated"], as_json["empty"], as_json["max_tokens"]) == (
        (N, 0, 512) if reply == "cut-off" else (0, N, 512))


def test_a_result_file_cut_short_is_closed_with_final_and_what_it_lacks_is_sent_again(many_ws, tmp_path):
    out = tmp_path / "requests.jsonl"
    with ChatServer(scripted_answer) as server:
        run_id = write(many_ws, server.url, out).stdout.strip()
        results = tmp_path / "results.jsonl"
        offline(out, results)
        lines = results.read_text().splitlines(keepends=True)
        results.write_text("".join(lines[:-2]) + lines[-2][:40])  # the job died: one line cut, the last never written
        partial = collect(many_ws, run_id, results, json_out=False)
        assert partial.exit_code == 1 and "add --final" in partial.stderr
        live = run_cli(["-w", str(many_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                        "--base-url", server.url])
        assert live.exit_code == 1 and f"--from-file RESULTS.jsonl' (add --final" in live.stderr and server.count == 0
        closed = run_cli(["-w", str(many_ws), "probe", "collect", run_id, "--from-file", str(results), "--final",
                          "--json"])
        assert closed.exit_code == 1, closed.stderr  # two requests have no answer: the run is incomplete
        summary = json.loads(closed.stdout)
        assert (summary["closed"], summary["missing"], summary["status"]) == (2, 0, "incomplete")
        failed = [r for r in replies(many_ws, run_id) if r["error"] == "transport"]
        assert len(failed) == 2 and all("no result file answered it" in r["detail"] for r in failed)
        live = run_cli(["-w", str(many_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                        "--base-url", server.url, "--json"])
        assert live.exit_code == 0, live.stderr
        assert json.loads(live.stdout)["run_id"] == run_id and server.count == 2  # only the two, live
    assert all(r["error"] is None for r in replies(many_ws, run_id)) and len(replies(many_ws, run_id)) == N


def test_an_error_line_as_current_vllm_writes_it_keeps_its_words_and_is_shown(many_ws, tmp_path):
    out = tmp_path / "requests.jsonl"
    with ChatServer(scripted_answer) as server:
        run_id = write(many_ws, server.url, out).stdout.strip()
    results = tmp_path / "results.jsonl"
    offline(out, results, "--fail-every", "4", "--error-as", "object")  # {"error": {"message", "type", "code"}}
    collected = collect(many_ws, run_id, results, json_out=False)
    assert collected.exit_code == 1
    said = "results.jsonl line 4: InternalServerError 500: the engine ran out of memory"
    assert said in collected.stderr  # what went wrong, without 'cfkit runs show'
    failures = [r for r in replies(many_ws, run_id) if r["error"] == "transport"]
    assert len(failures) == N // 4 and all("InternalServerError 500: the engine ran out of memory" in r["detail"]
                                          for r in failures)


def test_the_batch_input_file_given_as_results_is_refused_and_nothing_is_stored(many_ws, tmp_path):
    out = tmp_path / "requests.jsonl"
    with ChatServer(scripted_answer) as server:
        run_id = write(many_ws, server.url, out).stdout.strip()
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(out.read_bytes())
    for given, said in ((out, f"the batch file run {run_id} was written to"), (copy, "a batch input file")):
        wrong = collect(many_ws, run_id, given, json_out=False)
        assert wrong.exit_code == 2 and "its lines are requests, not results" in wrong.stderr and said in wrong.stderr
    assert replies(many_ws, run_id) == []  # not one request stored as failed: the run still waits for its results
    results = tmp_path / "results.jsonl"
    offline(out, results)
    right = collect(many_ws, run_id, results)
    assert right.exit_code == 0, right.stderr
    assert (json.loads(right.stdout)["stored"], json.loads(right.stdout)["status"]) == (N, "done")


def test_a_case_dropped_from_the_cases_file_is_not_waited_for(many_ws, tmp_path):
    out = tmp_path / "requests.jsonl"
    with ChatServer(scripted_answer) as server:
        run_id = write(many_ws, server.url, out).stdout.strip()
    results = tmp_path / "results.jsonl"
    offline(out, results)
    cases = many_ws / "data" / "cases.jsonl"
    cases.write_text("".join(cases.read_text().splitlines(keepends=True)[:-1]))  # the last case removed
    collected = collect(many_ws, run_id, results, json_out=False)
    assert collected.exit_code == 0, collected.stderr
    assert f"done: {N} lines read, {N - 1} results stored, 1 line for cases no longer in the cases file skipped." \
        in collected.stderr
    shown = json.loads(run_cli(["-w", str(many_ws), "runs", "show", run_id, "--json"]).stdout)["run"]
    assert shown["status"] == "done"


def test_a_request_failed_in_one_part_and_answered_in_another_is_counted_once(many_ws, tmp_path):
    out = tmp_path / "requests.jsonl"
    with ChatServer(scripted_answer) as server:
        run_id = write(many_ws, server.url, out).stdout.strip()
        failed, answered = tmp_path / "failed.jsonl", tmp_path / "answered.jsonl"
        offline(out, failed, "--fail-every", "1")
        offline(out, answered)
        half = tmp_path / "half.jsonl"
        half.write_text("".join(answered.read_text().splitlines(keepends=True)[:N // 2]))
        first = json.loads(collect(many_ws, run_id, failed, half).stdout)
        assert (first["stored"], first["failed"]) == (N, N // 2)  # each request once, as it stands now
        again = write(many_ws, server.url, tmp_path / "again.jsonl")  # the failures written to a new file
        assert again.exit_code == 0 and len((tmp_path / "again.jsonl").read_text().splitlines()) == N // 2
        rest = json.loads(collect(many_ws, run_id, answered).stdout)  # in both files now, each counted once
        assert (rest["stored"], rest["already"], rest["status"]) == (N // 2, N // 2, "done")


def test_a_case_changed_after_the_file_was_written_is_said_and_asked_again(many_ws, tmp_path):
    out = tmp_path / "requests.jsonl"
    with ChatServer(scripted_answer) as server:
        run_id = write(many_ws, server.url, out).stdout.strip()
        results = tmp_path / "results.jsonl"
        offline(out, results)
        cases = many_ws / "data" / "cases.jsonl"
        cases.write_text(cases.read_text().replace("Is picture 3 suitable for event 3?",
                                                   "Is picture 3 suitable for event 99?"))
        collected = collect(many_ws, run_id, results, json_out=False)
        assert ("1 result answers an earlier version of its case: its question, options or images changed in the "
                "cases file after the batch file was written. The report counts it stale; run the suite again to ask "
                "that case as it is now (the rest comes from the cache).") in " ".join(collected.stderr.split())
        again = write(many_ws, server.url, tmp_path / "again.jsonl")  # the suite again: only the changed case
        assert again.exit_code == 0, again.stderr
        [line] = (tmp_path / "again.jsonl").read_text().splitlines()
        assert "event 99" in line


def test_two_results_of_changed_cases_are_said_in_the_plural(many_ws, tmp_path):
    out = tmp_path / "requests.jsonl"
    with ChatServer(scripted_answer) as server:
        run_id = write(many_ws, server.url, out).stdout.strip()
        results = tmp_path / "results.jsonl"
        offline(out, results)
        cases = many_ws / "data" / "cases.jsonl"
        cases.write_text(cases.read_text().replace("for event 3?", "for event 99?").replace("for event 4?",
                                                                                         "for event 98?"))
        collected = collect(many_ws, run_id, results, json_out=False)
    assert ("2 results answer an earlier version of their case: its question, options or images changed in the "
            "cases file after the batch file was written. The report counts them stale; run the suite again to ask "
            "those cases as they are now") in " ".join(collected.stderr.split())


def test_an_existing_batch_file_is_not_replaced_without_force(many_ws, tmp_path):
    """Two runs written to one file name: the second would replace the requests the first waits for."""
    out = tmp_path / "requests.jsonl"
    with ChatServer(scripted_answer) as server:
        first = write(many_ws, server.url, out)
        assert first.exit_code == 0, first.stderr
        held = out.read_bytes()
        second = write(many_ws, server.url, out, "--max-tokens", "64")  # other settings: another run
        assert second.exit_code == 2
        assert f"--batch-file {out} already exists" in second.stderr and "--force" in second.stderr
        assert out.read_bytes() == held  # the first run's requests are still there to run
        listed = json.loads(run_cli(["-w", str(many_ws), "runs", "list", "--json"]).stdout)
        assert [r["id"] for r in listed] == [first.stdout.strip()]  # nothing of the second was recorded
        stray = run_cli(["-w", str(many_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                         "--base-url", server.url, "--force"])
        assert stray.exit_code == 2 and "--batch-file" in stray.stderr and server.count == 0
        forced = write(many_ws, server.url, out, "--max-tokens", "64", "--force")
        assert forced.exit_code == 0, forced.stderr
        assert forced.stdout.strip() != first.stdout.strip()
        assert {json.loads(line)["body"]["max_tokens"] for line in out.read_text().splitlines()} == {64}
        assert server.count == 0
