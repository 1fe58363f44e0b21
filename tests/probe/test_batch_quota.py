"""Batch results saying the account could not pay for their requests (an OpenAI output or error line with
``insufficient_quota``, as a 429 response or as the line's error; an Anthropic result ``errored`` with a
``billing_error`` or "credit balance is too low"; the same lines in a result file given to ``--from-file``).
Each was read as one more ordinary failed line, under the batch's first error. Now ``probe collect`` says once, in
cfkit.backends.billing's words, how many requests the account could not pay for, that they are stored as failed
and that the same ``probe run`` asks them again once the account has credit; exit status 1 (not complete); other
failed lines are not counted as refused for billing. Against the loopback Batches servers (tests/support)."""

from __future__ import annotations

import json

import pytest

from support.batch_api_server import BatchServer
from support.chat_api_server import Scripted, user_text
from support.probe_runs import FAST, many_cases, replies, scripted_answer
from support.workspace import run_cli

QUOTA = "You exceeded your current quota, please check your plan and billing details."
INSUFFICIENT = {"message": QUOTA, "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}
ADD_CREDIT = "Add credit to the account (or use a key of one that has it), then run the same 'cfkit probe run' again"


def picture(text: str) -> int:
    return int(text.split("Is picture ")[1].split()[0])


def probe_run(ws, url, *extra):
    return run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                    "--base-url", url, *FAST, *extra])


def test_openai_batch_lines_refused_for_quota_are_said_once_counted_and_asked_again_once_there_is_credit(tmp_path):
    ws = many_cases(tmp_path / "ws", 6)
    state = {"paid": False}

    def script(body, n):
        number = picture(user_text(body))
        if number in (2, 4) and not state["paid"]:
            return Scripted(429, {"error": INSUFFICIENT})
        if number == 5 and not state["paid"]:  # an ordinary failure: not the account's
            return Scripted(500, {"error": {"message": "The server had an error", "type": "server_error"}})
        return scripted_answer(body, n)

    with BatchServer(script, polls=1) as server:
        sent = probe_run(ws, server.url, "--batch", "--json")
        assert sent.exit_code == 0, sent.output
        run_id = json.loads(sent.stdout)["run_id"]
        collected = run_cli(["-w", str(ws), "probe", "collect", run_id])
        assert collected.exit_code == 1, collected.output  # not complete
        said = [line for line in collected.stderr.splitlines() if "for quota or billing" in line
                and line.startswith("warning:")]
        assert len(said) == 1, collected.stderr  # once, not once a request
        line = said[0]
        assert f"run {run_id}, batch " in line
        assert "the provider refused 2 requests for quota or billing (HTTP 429: You exceeded your current quota" in line
        assert "the account has no credit or quota left; they are stored as failed (not answered)" in line
        assert ADD_CREDIT in line
        last = collected.stderr.strip().splitlines()[-1]
        assert ("3 planned requests have no reply (2 of them refused for quota or billing: add credit to the account, "
                "then run the same 'cfkit probe run' again to send them)") in last
        as_json = json.loads(run_cli(["-w", str(ws), "probe", "collect", run_id, "--json"]).stdout)
        assert as_json["unpaid"] == 0  # nothing read again: said when the batch was read
        failed = [r for r in replies(ws, run_id) if r["error"] is not None]
        assert len(failed) == 3 and all(r["error"] == "transport" for r in failed)
        # Credit added: the same command asks only the three without a reply.
        state["paid"] = True
        again = probe_run(ws, server.url, "--batch", "--json")
        assert again.exit_code == 0, again.output
        assert json.loads(again.stdout)["submitted"] == 3
        done = run_cli(["-w", str(ws), "probe", "collect", run_id, "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["unpaid"] == 0
    assert all(r["error"] is None for r in replies(ws, run_id))


def test_one_request_refused_for_quota_is_said_in_the_singular(tmp_path):
    ws = many_cases(tmp_path / "ws", 3)

    def script(body, n):
        if picture(user_text(body)) == 2:
            return Scripted(429, {"error": INSUFFICIENT})
        return scripted_answer(body, n)

    with BatchServer(script, polls=1) as server:
        sent = probe_run(ws, server.url, "--batch", "--json")
        assert sent.exit_code == 0, sent.output
        collected = run_cli(["-w", str(ws), "probe", "collect", json.loads(sent.stdout)["run_id"]])
    assert collected.exit_code == 1, collected.output
    last = collected.stderr.strip().splitlines()[-1]
    assert ("1 planned request has no reply (it was refused for quota or billing: add credit to the account, then "
            "run the same 'cfkit probe run' again to send it)") in last, last


@pytest.mark.parametrize("kind, words", [
    ("invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & "
                              "Billing to upgrade or purchase credits."),
    ("billing_error", "This organization has been disabled for billing reasons."),
], ids=["credit balance too low", "billing_error"])
def test_anthropic_batch_results_errored_for_billing_are_said_once_with_how_many(tmp_path, kind, words):
    pytest.importorskip("anthropic", reason="the anthropic extra is not installed")
    from support.anthropic_api_server import AnthropicServer
    from support.anthropic_api_server import Scripted as Said
    from support.anthropic_api_server import user_text as anthropic_text

    ws = many_cases(tmp_path / "ws", 4)

    def script(params, n):
        if picture(anthropic_text(params)) % 2:
            return Said(400, words, error_type=kind)
        return Said(text=json.dumps({"answer": "B", "reason": "scripted", "confidence": "high"}))

    with AnthropicServer(script) as server:
        sent = run_cli(["-w", str(ws), "probe", "run", "-m", "anthropic:claude-test", "-s", "contextcanvas",
                        "-o", f"base_url={server.url}", *FAST, "--batch", "--json"])
        assert sent.exit_code == 0, sent.output
        run_id = json.loads(sent.stdout)["run_id"]
        collected = run_cli(["-w", str(ws), "probe", "collect", run_id, "--base-url", server.url])
    assert collected.exit_code == 1, collected.output
    said = [line for line in collected.stderr.splitlines() if "refused 2 requests for quota or billing" in line]
    assert len(said) == 1, collected.stderr
    assert f"(an error object: {words.rstrip('.')}): the account has no credit or quota left" in " ".join(
        said[0].split())
    assert ADD_CREDIT in said[0]


def test_a_result_file_with_quota_errors_given_to_from_file_says_so_once(tmp_path):
    ws = many_cases(tmp_path / "ws", 4)
    out = tmp_path / "requests.jsonl"
    written = run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                       "--base-url", "http://127.0.0.1:9/v1", "--batch-file", str(out)])
    assert written.exit_code == 0, written.output
    run_id = written.stdout.strip()
    lines = []
    for number, request in enumerate(json.loads(line) for line in out.read_text().splitlines()):
        custom_id = request["custom_id"]
        if number == 0:  # OpenAI's shape of a request the batch could not run: no response, the line's error
            lines.append({"id": "batch_req_1", "custom_id": custom_id, "response": None,
                          "error": {"code": "insufficient_quota", "message": QUOTA}})
        elif number == 1:  # a response that is an error
            lines.append({"id": "batch_req_2", "custom_id": custom_id, "error": None,
                          "response": {"status_code": 429, "request_id": "r2", "body": {"error": INSUFFICIENT}}})
        else:
            body = scripted_answer(request["body"], number).body
            lines.append({"id": f"batch_req_{number}", "custom_id": custom_id, "error": None,
                          "response": {"status_code": 200, "request_id": f"r{number}", "body": body}})
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(line) + "\n" for line in lines))
    collected = run_cli(["-w", str(ws), "probe", "collect", run_id, "--from-file", str(results)])
    assert collected.exit_code == 1, collected.output
    said = [line for line in collected.stderr.splitlines() if "for quota or billing" in line]
    assert len(said) == 1, collected.stderr
    assert f"run {run_id}, results.jsonl: the provider refused 2 requests for quota or billing (an error object: " \
           "You exceeded your current quota" in said[0]
    assert "they are stored as failed (not answered)" in said[0] and "Add credit to the account" in said[0]
    as_json = json.loads(run_cli(["-w", str(ws), "probe", "collect", run_id, "--from-file", str(results),
                                  "--json"]).stdout)
    assert as_json["failed"] == 2 and as_json["unpaid"] == 2


@pytest.mark.parametrize("other", [False, True], ids=["only-billing", "and-a-server-error"])
def test_collect_says_results_refused_for_billing_in_their_line_only_not_again_as_never_answered(tmp_path, other):
    """Before, the batch's own line said the same two requests again: "2 requests never answered (HTTP 429: You
    exceeded your current quota …)", beside the line that says they were refused for quota or billing. Now that
    line counts only the requests left unanswered for another reason, with that reason's words."""
    ws = many_cases(tmp_path / "ws", 6)

    def script(body, n):
        number = picture(user_text(body))
        if number in (2, 4):
            return Scripted(429, {"error": INSUFFICIENT})
        if number == 5 and other:
            return Scripted(500, {"error": {"message": "The server had an error", "type": "server_error"}})
        return scripted_answer(body, n)

    with BatchServer(script, polls=1) as server:
        sent = probe_run(ws, server.url, "--batch", "--json")
        assert sent.exit_code == 0, sent.output
        run_id = json.loads(sent.stdout)["run_id"]
        collected = run_cli(["-w", str(ws), "probe", "collect", run_id])
    assert collected.exit_code == 1, collected.output
    text = collected.stderr
    assert text.count("You exceeded your current quota") == 1, text  # the billing line alone says it
    assert "the provider refused 2 requests for quota or billing (HTTP 429" in text
    never = [line for line in text.splitlines() if "never answered" in line]
    if other:
        assert len(never) == 1 and "1 request never answered (HTTP 500: The server had an error)" in never[0], text
        assert "3 results stored" in never[0]  # those the batch answered
    else:
        assert never == [], text


def test_a_result_file_says_its_first_failure_that_was_not_refused_for_billing(tmp_path):
    """``--from-file`` listed the first failed line under the counts, the quota refusal the billing line says."""
    ws = many_cases(tmp_path / "ws", 4)
    out = tmp_path / "requests.jsonl"
    written = run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                       "--base-url", "http://127.0.0.1:9/v1", "--batch-file", str(out)])
    assert written.exit_code == 0, written.output
    lines = []
    for number, request in enumerate(json.loads(line) for line in out.read_text().splitlines()):
        error = {"code": "insufficient_quota", "message": QUOTA} if number == 0 else \
            {"code": "server_error", "message": "The model crashed"} if number == 2 else None
        body = None if error else scripted_answer(request["body"], number).body
        lines.append({"id": f"batch_req_{number}", "custom_id": request["custom_id"], "error": error,
                      "response": None if error else {"status_code": 200, "request_id": f"r{number}", "body": body}})
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(line) + "\n" for line in lines))
    collected = run_cli(["-w", str(ws), "probe", "collect", written.stdout.strip(), "--from-file", str(results)])
    assert collected.exit_code == 1, collected.output
    assert collected.stderr.count("You exceeded your current quota") == 1, collected.stderr
    assert "results.jsonl line 3: " in collected.stderr and "The model crashed" in collected.stderr
