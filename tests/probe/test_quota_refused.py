"""A provider that says the account cannot pay (no credit, no quota, billing off) stops the run at once.

OpenAI answers HTTP 429 ``insufficient_quota`` (sometimes 400/403, or ``billing_hard_limit_reached``), gateways
HTTP 402 "Insufficient credits", Anthropic HTTP 400 "Your credit balance is too low". Each request was retried
``max_retries`` times as an overload, then counted failed, until the stop rule ended the run, and its line read as a
server busy. Now the first such answer stops the run (one attempt), with one line that says so, what the run kept and
that the same command asks the rest once the account has credit; exit status 2, as a refused key. A plain rate limit
(429 ``rate_limit_exceeded``, or no code) is retried as before.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.chat_api_server import ChatServer, Scripted, error_body
from support.probe_runs import FAST, many_cases, scripted_answer
from support.workspace import run_cli

QUOTA = "You exceeded your current quota, please check your plan and billing details."


def openai_error(message: str, kind: str, code: str | None) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


#: How providers say the account cannot pay: (HTTP status, body).
REFUSALS = {
    "openai insufficient_quota": (429, openai_error(QUOTA, "insufficient_quota", "insufficient_quota")),
    "openai billing_hard_limit_reached": (400, openai_error("Billing hard limit has been reached",
                                                             "invalid_request_error", "billing_hard_limit_reached")),
    "openai billing_not_active": (403, openai_error("Your account is not active, please check your billing details "
                                                    "on our website.", "billing_not_active", "billing_not_active")),
    "openrouter 402": (402, {"error": {"message": "Insufficient credits. Add more using https://openrouter.ai/"
                                                  "settings/credits", "code": 402}}),
    "a proxy's 200": (200, openai_error(QUOTA, "insufficient_quota", "insufficient_quota")),
}


class Account:
    """A chat server's account: it answers ``paid`` requests, then refuses each for quota until topped up."""

    def __init__(self, paid: int, refusal: tuple[int, dict]):
        self.paid, self.refusal, self.answered = paid, refusal, 0

    def __call__(self, body, n) -> Scripted:
        if self.answered >= self.paid:
            return Scripted(*self.refusal)
        self.answered += 1
        return scripted_answer(body, n)


def run(ws, url, *extra):
    return run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                    "--base-url", url, *FAST, *extra])


@pytest.mark.parametrize("refusal", REFUSALS.values(), ids=REFUSALS.keys())
def test_a_quota_refusal_stops_the_run_at_its_first_attempt_keeps_the_replies_and_a_rerun_asks_the_rest(
        tmp_path, refusal):
    ws = many_cases(tmp_path / "ws", 6)
    account = Account(2, refusal)
    with ChatServer(account) as server:
        stopped = run(ws, server.url, "-j", "1")
        assert server.count == 3  # two answered, then the refused request once: not retried
        assert stopped.exit_code == 2, stopped.output
        (line,) = [x for x in stopped.stderr.splitlines() if x.startswith("error:")]
        assert "refused the request for quota or billing" in line and "not retried" in line
        assert "Add credit to the account (or use a key of one that has it), then run the same command again: " \
               "what was answered is kept, and only the rest is asked." in line
        [listed] = json.loads(run_cli(["-w", str(ws), "runs", "list", "--json"]).stdout)
        assert f"Run {listed['id']} keeps its 2 stored replies of 6; 4 missing." in line
        assert listed["status"] == "failed"
        # Credit added: the same command asks only what is missing.
        account.paid = 100
        again = run(ws, server.url, "-j", "1", "--json")
        assert again.exit_code == 0, again.output
        assert server.count == 3 + 4
    summary = json.loads(again.stdout)
    assert (summary["kept"], summary["sent"], summary["status"]) == (2, 4, "done")


def test_a_quota_refusal_with_requests_in_flight_stops_the_run_after_one_attempt_each(tmp_path):
    ws = many_cases(tmp_path / "ws", 40)
    with ChatServer(Account(0, REFUSALS["openai insufficient_quota"])) as server:
        stopped = run(ws, server.url, "-j", "4")
        assert 1 <= server.count <= 4  # at most the requests already in flight, each asked once
    assert stopped.exit_code == 2 and "refused the request for quota or billing" in stopped.stderr
    assert "keeps its 0 stored replies of 40" in " ".join(stopped.stderr.split())


@pytest.mark.parametrize("code", ["rate_limit_exceeded", None])
def test_a_plain_rate_limit_is_still_retried(tmp_path, code):
    ws = many_cases(tmp_path / "ws", 4)
    limited = openai_error("Rate limit reached for requests per min. Please try again in 20ms.", "requests", code)

    def script(body, n):
        return Scripted(429, limited, headers={"retry-after": "0"}) if n in (2, 3) else scripted_answer(body, n)

    with ChatServer(script) as server:
        result = run(ws, server.url, "-j", "1", "--json")
        assert server.count == 4 + 2  # the limited request asked three times
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "done"


def test_a_rate_limit_that_a_message_alone_calls_a_quota_is_retried(tmp_path):
    # Per-minute "quota" (Google's RESOURCE_EXHAUSTED wording) passes: only the account's credit or billing stops.
    ws = many_cases(tmp_path / "ws", 2)
    busy = error_body("Quota exceeded for quota metric 'Generate requests' per minute.", kind="rate_limit_error")

    def script(body, n):
        return Scripted(429, busy, headers={"retry-after": "0"}) if n == 1 else scripted_answer(body, n)

    with ChatServer(script) as server:
        result = run(ws, server.url, "-j", "1", "--json")
        assert server.count == 3
    assert result.exit_code == 0, result.output


def test_an_anthropic_credit_balance_too_low_stops_the_run_at_its_first_attempt_and_a_rerun_asks_the_rest(
        tmp_path):
    pytest.importorskip("anthropic", reason="the anthropic extra is not installed")
    from support.anthropic_api_server import AnthropicServer
    from support.anthropic_api_server import Scripted as Said

    ws = many_cases(tmp_path / "ws", 5)
    low = Said(400, "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to "
                    "upgrade or purchase credits.", error_type="invalid_request_error")
    state = {"paid": 1}

    def account(params, n):
        if n > state["paid"]:
            return low
        return Said(text=json.dumps({"answer": "A", "reason": "scripted", "confidence": "high"}))

    def claude(url, *extra):
        return run_cli(["-w", str(ws), "probe", "run", "-m", "anthropic:claude-test", "-s", "contextcanvas", "-o",
                        f"base_url={url}", *FAST, "-j", "1", *extra])

    with AnthropicServer(account) as server:
        stopped = claude(server.url)
        assert len(server.messages) == 2  # one answered, then the refused request once
        assert stopped.exit_code == 2, stopped.output
        line = " ".join(stopped.stderr.split())
        assert "anthropic backend: " in line and "refused the request for quota or billing (HTTP 400: Your credit " \
               "balance is too low" in line
        assert "keeps its 1 stored reply of 5" in line
        state["paid"] = 100
        again = claude(server.url, "--json")
        assert again.exit_code == 0, again.output
        assert len(server.messages) == 2 + 4


def test_a_quota_refusal_at_batch_create_stops_the_submission_at_once_and_a_rerun_submits(tmp_path):
    from support.batch_api_server import BatchServer

    ws = many_cases(tmp_path / "ws", 3)
    with BatchServer(polls=1) as server:
        server.refuse_create = REFUSALS["openai insufficient_quota"]
        refused = run(ws, server.url, "--batch")
        assert server.calls("POST", "/batches") == 1  # not retried
        assert refused.exit_code == 2, refused.output
        line = " ".join(refused.stderr.split())
        assert "openai batch: " in line and "refused the request for quota or billing (HTTP 429: while creating" in line
        assert "run the same command again" in line
        server.refuse_create = None
        submitted = run(ws, server.url, "--batch", "--json")
        assert submitted.exit_code == 0, submitted.output
        assert server.calls("POST", "/batches") == 2


def test_a_completion_is_not_read_as_a_billing_refusal_by_its_own_fields():
    """A 200 says the account cannot pay only in an error object: a completion whose fields or reply happen to use
    the words ("type", "message", a model explaining quotas) is a reply, kept as one."""
    from cfkit.backends.billing import billing_refusal

    completion = {"id": "c1", "object": "chat.completion", "type": "billing_error", "message": QUOTA,
                  "choices": [{"index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "content": f"B. ({QUOTA})"}}]}
    assert not billing_refusal(200, completion)
    assert billing_refusal(200, {**completion, "error": {"message": QUOTA, "code": "insufficient_quota"}})
    assert billing_refusal(429, {"type": "error", "error": {"type": "billing_error", "message": "no"}})
