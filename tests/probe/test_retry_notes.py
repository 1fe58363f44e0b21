"""What a run says of its retries: how many of the requests sent needed them and how many retries there were in
all, once for the run (not one note per distinct count, which read as if the whole run had retried once); each
retried request counts once in sent and done."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from support.chat_api_server import ChatServer, Scripted, error_body, user_text
from support.probe_runs import many_cases, openai_run, scripted_answer

pytestmark = pytest.mark.timeout(120)


def _failing_first(times: dict[int, int]):
    """A script that fails picture N's first ``times[N]`` attempts with HTTP 500, then answers."""
    attempts: Counter = Counter()

    def script(body, n):
        picture = int(re.search(r"Is picture (\d+)", user_text(body)).group(1))
        attempts[picture] += 1
        if attempts[picture] <= times.get(picture, 0):
            return Scripted(500, error_body("boom", kind="server_error"))
        return scripted_answer(body, n)
    return script


def test_the_summary_says_how_many_requests_needed_retries_and_how_many_retries_in_all(tmp_path):
    ws = many_cases(tmp_path / "ws", 6)
    with ChatServer(_failing_first({2: 1, 5: 2, 6: 1})) as server:  # three requests, four retries
        result = openai_run(ws, server.url, "contextcanvas", "--json")
        assert server.count == 6 + 4
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["sent"] == 6 and summary["errors"] == 0 and summary["total"] == 6
    assert "3 of 6 requests sent succeeded only after retrying (4 retries in all)" in summary["notes"]
    assert not any("succeeded after" in note for note in summary["notes"])  # no per-reply counts
    said = [line for line in result.stderr.splitlines() if "retr" in line]
    assert said == ["warning: 3 of 6 requests sent succeeded only after retrying (4 retries in all)"], said


def test_one_retried_request_is_said_in_the_singular(tmp_path):
    ws = many_cases(tmp_path / "ws", 3)
    with ChatServer(_failing_first({1: 1})) as server:
        result = openai_run(ws, server.url, "contextcanvas", "--json")
    assert result.exit_code == 0, result.output
    assert "1 of 3 requests sent succeeded only after retrying (1 retry in all)" in json.loads(result.stdout)["notes"]
