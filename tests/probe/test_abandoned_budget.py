"""``--max-cost`` and the cost shown count attempts a provider may bill although no reply came of them.

The server here takes longer than ``-o timeout`` on the first attempt of every
request: each is retried, and the server received two requests for every reply.
Before, cfkit priced only the replies (8 × $0.12 = $0.96 against --max-cost 1)
while a provider billing abandoned generations could bill $1.92, and nothing
said so; now the budget counts each abandoned attempt at the largest reply cost
seen, and every place that shows the cost says what they may add.
"""

from __future__ import annotations

import json
import threading

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.chat_api_server import ChatServer, user_text
from support.probe_runs import many_cases, scripted_answer
from support.workspace import run_cli

#: 100 prompt and 20 completion tokens at $1,000 a million: $0.12 a reply.
PRICES = ["-o", "price_in=1000", "-o", "price_out=1000"]
REPLY_USD = 0.12


def slow_first_attempts(seconds: float, *, always: str | None = None):
    """The scripted model, answering the first attempt at each question only after ``seconds`` (every attempt at
    the question holding ``always``)."""
    asked: set[str] = set()
    lock = threading.Lock()

    def script(body, n):
        reply = scripted_answer(body, n)
        text = user_text(body)
        with lock:
            first = text not in asked
            asked.add(text)
        reply.delay = seconds if first or (always is not None and always in text) else 0.0
        return reply
    return script


def probe(ws, url, *extra):
    return run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                    "--base-url", url, "-o", "backoff=0.01", "-o", "timeout=1", *PRICES, *extra])


def test_max_cost_counts_abandoned_attempts_and_every_cost_shown_says_what_they_may_add(tmp_path):
    ws = many_cases(tmp_path / "ws", 8)
    with ChatServer(slow_first_attempts(2.0)) as server:
        stopped = probe(ws, server.url, "-j", "4", "--max-cost", "1", "--json")
        received = server.count
        assert stopped.exit_code == 1, stopped.stderr
        summary = json.loads(stopped.stdout)
        # Everything the server received, billed as a reply, stays within the budget (before: 16 × $0.12 = $1.92).
        assert received * REPLY_USD <= 1.0 + 1e-9
        n = summary["abandoned"]
        assert n == summary["sent"] == 4 and summary["cost_usd"] == pytest.approx(n * REPLY_USD)
        assert summary["abandoned_usd"] == pytest.approx(n * REPLY_USD)
        assert ("--max-cost 1 USD would be exceeded (spent $0.48 in this invocation; 4 abandoned attempts may be "
                "billed on top: up to ~$0.48)") in summary["stopped"]

        # The run's cost stays what the replies reported, with the note, wherever it is shown; the resumed run
        # adds its own abandoned attempts to those of before.
        resumed = probe(ws, server.url, "-j", "4", "--max-cost", "10")
    assert resumed.exit_code == 0, resumed.stderr
    assert "4 abandoned attempts may be billed on top" in resumed.stderr  # this invocation's, in its summary
    shown = run_cli(["-w", str(ws), "runs", "show", summary["run_id"]])
    assert "$0.96; 8 abandoned attempts may be billed on top: up to ~$0.96" in " ".join(shown.stdout.split())
    listed = run_cli(["-w", str(ws), "runs", "list"], env={"COLUMNS": "200"})
    assert "$0.96 + up to ~$0.96 abandoned" in listed.stdout


def test_a_request_that_fails_after_abandoned_attempts_is_counted_too(tmp_path):
    ws = many_cases(tmp_path / "ws", 3)
    with ChatServer(slow_first_attempts(2.0, always="picture 2 ")) as server:
        result = probe(ws, server.url, "-o", "max_retries=1")
    assert result.exit_code == 1, result.stderr
    # Two replies, each after one abandoned attempt; the failed request's two attempts, both abandoned.
    assert "(1 failed, $0.24; 4 abandoned attempts may be billed on top: up to ~$0.48)" in result.stderr
