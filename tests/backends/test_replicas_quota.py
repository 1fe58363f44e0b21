"""A replica whose account cannot pay (HTTP 402, 429 ``insufficient_quota``, a proxy's 200 error object) is left
out of the run, not the run stopped: two providers or keys behind one model, one account empty, the other answers
everything. The left-out replica is named once, in cfkit.backends.billing's words, in the summary, its notes and
`runs show`; its refused request goes to the other replica (a failover, not a failure). Only when no replica is left
does the run stop with QuotaRefused (exit 2) and the billing line."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")

from support.chat_api_server import ChatServer, Scripted
from support.probe_runs import many_cases, replicated, replies, scripted_answer
from support.workspace import run_cli

N = 16
QUOTA = "You exceeded your current quota, please check your plan and billing details."

#: How an account that cannot pay answers: (HTTP status, body).
UNPAID = {
    "429 insufficient_quota": (429, {"error": {"message": QUOTA, "type": "insufficient_quota", "param": None,
                                               "code": "insufficient_quota"}}),
    "402": (402, {"error": {"message": "Insufficient credits. Add more using https://openrouter.ai/settings/credits",
                            "code": 402}}),
    "a proxy's 200": (200, {"error": {"message": QUOTA, "type": "insufficient_quota", "code": "insufficient_quota"}}),
}


def refusing(refusal):
    def script(body, n):
        return Scripted(*refusal)
    return script


@pytest.mark.parametrize("refusal", UNPAID.values(), ids=UNPAID.keys())
def test_a_replica_whose_account_cannot_pay_is_left_out_and_the_other_answers_everything(tmp_path, refusal):
    ws = many_cases(tmp_path / "ws", N)
    with ChatServer(scripted_answer) as good, ChatServer(refusing(refusal)) as empty:
        result = replicated(ws, [empty.url, good.url], "-j", "2")
        assert 1 <= empty.count <= 2  # what it held when it first refused; nothing after
        assert good.count == N  # every request answered there, the refused ones too
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["status"], summary["missing"], summary["errors"]) == ("done", 0, 0)
    stored = replies(ws)
    assert len(stored) == N and {r["endpoint"] for r in stored} == {good.url} and all(r["error"] is None for r in stored)
    said = [line for line in result.stderr.splitlines() if f"replica {empty.url}" in line]
    assert len(said) == 1, result.stderr
    line = said[0]
    status = "an error object" if refusal[0] == 200 else f"HTTP {refusal[0]}"
    assert f"was left out during the run (it refused a request for quota or billing ({status}: " in line
    assert "the account has no credit or quota left" in line
    assert "after answering 0 requests" in line and "not asked again" in line
    assert any(f"replica {empty.url} was left out during the run" in n for n in summary["notes"])
    [over] = [n for n in summary["notes"] if "from another replica after a failed attempt" in n]
    assert over.startswith(f"{empty.count} of {N} requests sent got {'its' if empty.count == 1 else 'their'} answer "
                           "from another replica"), over
    text = " ".join(run_cli(["-w", str(ws), "runs", "show", summary["run_id"]]).stdout.split())
    assert f"replicas replica {empty.url} was left out during the run (it refused a request for quota or billing" \
        in text


def test_every_replica_refusing_for_quota_stops_the_run_with_the_billing_line_and_a_rerun_asks_the_rest(tmp_path):
    ws = many_cases(tmp_path / "ws", 6)
    state = {"paid": 2}
    quota = UNPAID["429 insufficient_quota"]

    def account(body, n):  # one account behind both replicas: two answers, then nothing
        if state["paid"] <= 0:
            return Scripted(*quota)
        state["paid"] -= 1
        return scripted_answer(body, n)

    with ChatServer(account) as a, ChatServer(account) as b:
        stopped = replicated(ws, [a.url, b.url], "-j", "1")
        assert a.count + b.count <= 2 + 2 + 2  # two answered; each replica refused at most the requests it held
        assert stopped.exit_code == 2, stopped.output
        (line,) = [x for x in stopped.stderr.splitlines() if x.startswith("error:")]
        line = " ".join(line.split())
        assert "openai backend: every replica was left out" in line
        assert f"{a.url}: it refused a request for quota or billing (HTTP 429: {QUOTA.rstrip('.')})" in line
        assert f"{b.url}: it refused a request for quota or billing" in line
        assert "Add credit to the account (or use a key of one that has it), then run the same command again" in line
        assert "keeps its 2 stored replies of 6; 4 missing." in line
        # Credit added: the same command asks only what is missing.
        state["paid"] = 100
        again = replicated(ws, [a.url, b.url], "-j", "1")
    assert again.exit_code == 0, again.output
    summary = json.loads(again.stdout)
    assert (summary["kept"], summary["sent"], summary["status"]) == (2, 4, "done")


def test_a_study_model_with_an_endpoint_whose_account_cannot_pay_runs_on_the_other_and_says_which(tmp_path):
    ws = many_cases(tmp_path / "ws", 6)
    with ChatServer(scripted_answer) as good, ChatServer(refusing(UNPAID["402"])) as empty:
        good.models = empty.models = [{"id": "model-a", "object": "model"}]
        path = ws / "s.toml"
        path.write_text(f"[endpoints.empty]\nurl='{empty.url}'\n[endpoints.good]\nurl='{good.url}'\n"
                        "[models.a]\nmodel='openai:model-a'\nendpoints=['empty', 'good']\n[suites.contextcanvas]\n")
        result = run_cli(["-w", str(ws), "study", "run", str(path)])
        assert good.count == 6 and 1 <= empty.count
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"replica {empty.url} was left out during the run (it refused a request for quota or billing (HTTP 402:" \
        in text


def test_one_request_answered_by_the_other_replica_is_said_in_the_singular(tmp_path):
    ws = many_cases(tmp_path / "ws", N)
    with ChatServer(scripted_answer) as good, ChatServer(refusing(UNPAID["402"])) as empty:
        result = replicated(ws, [empty.url, good.url], "-j", "1")
        assert empty.count == 1  # one request in flight at a time: the replica refuses one, then is left out
    assert result.exit_code == 0, result.output
    [over] = [n for n in json.loads(result.stdout)["notes"] if "from another replica" in n]
    assert over == (f"1 of {N} requests sent got its answer from another replica after a failed attempt "
                    "(1 failed attempt in all)")
