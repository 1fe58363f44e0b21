"""Input a server read from its prompt cache costs the cached price, in what a run shows and in what --max-cost counts.

A real ``probe run`` against a loopback Chat Completions server whose every
reply says 80 of its 100 prompt tokens were cached
(``usage.prompt_tokens_details.cached_tokens``, as OpenAI reports them).
"""

from __future__ import annotations

import json

import pytest

from support.chat_api_server import ChatServer
from support.probe_runs import FAST, openai_run, scripted_answer
from support.store_sql import table_rows
from support.workspace import run_cli

PRICES = ["-o", "price_in=1000", "-o", "price_out=0"]
#: 20 uncached prompt tokens at 1000 USD a million and 80 cached at 100: what one reply costs with a cached price.
WITH_CACHED_PRICE = (20 * 1000 + 80 * 100) / 1e6  # 0.028
#: All 100 prompt tokens at 1000 USD a million: one reply without a cached price.
AT_INPUT_PRICE = 100 * 1000 / 1e6  # 0.10
NOTE = "cached input tokens (usage.prompt_tokens_details.cached_tokens) and no price for cached input was given"


def cached_80(body, n):
    """The scripted answers, each saying 80 of its 100 prompt tokens came from the server's prompt cache."""
    reply = scripted_answer(body, n)
    reply.body["usage"]["prompt_tokens_details"] = {"cached_tokens": 80}
    return reply


def test_cached_input_costs_the_cached_price_and_max_cost_stops_at_the_right_reply(tiny_ws):
    with ChatServer(cached_80) as server:
        # 0.028 a reply: two fit in 0.06, a third would make 0.084.
        first = openai_run(tiny_ws, server.url, "contextcanvas", "--json", "--max-cost", "0.06", *PRICES,
                           "-o", "price_cached_in=100")
        assert first.exit_code == 1, first.stderr
        assert server.count == 2
        stopped = json.loads(first.stdout)
        assert stopped["cost_usd"] == pytest.approx(2 * WITH_CACHED_PRICE)
        assert stopped["status"] == "incomplete" and "--max-cost 0.06" in stopped["stopped"]
        assert NOTE not in first.stderr
        # A price is not a setting that changes answers: another cached price goes on with the same run.
        rest = openai_run(tiny_ws, server.url, "contextcanvas", "--json", *PRICES, "-o", "price_cached_in=50")
        assert rest.exit_code == 0, rest.stderr
    finished = json.loads(rest.stdout)
    assert finished["run_id"] == stopped["run_id"] and server.count == 3
    assert finished["cost_usd"] == pytest.approx((20 * 1000 + 80 * 50) / 1e6)
    shown = json.loads(run_cli(["-w", str(tiny_ws), "runs", "show", finished["run_id"], "--json"]).stdout)
    assert shown["run"]["cost_usd"] == pytest.approx(2 * WITH_CACHED_PRICE + (20 * 1000 + 80 * 50) / 1e6)
    assert shown["run"]["notes"]["prices"]["price_cached_in"] == 50


def test_the_same_budget_without_a_cached_price_stops_sooner_and_says_why(tiny_ws):
    with ChatServer(cached_80) as server:
        result = openai_run(tiny_ws, server.url, "contextcanvas", "--json", "--max-cost", "0.25", *PRICES)
    assert result.exit_code == 1, result.stderr
    summary = json.loads(result.stdout)
    assert server.count == 2 and summary["cost_usd"] == pytest.approx(2 * AT_INPUT_PRICE)
    assert result.stderr.count(NOTE) == 1  # said once for the run, not once a reply
    assert any(NOTE in note for note in summary["notes"])


def test_a_run_says_where_its_cost_priced_cached_input_at_the_input_price(tiny_ws):
    with ChatServer(cached_80) as server:
        result = openai_run(tiny_ws, server.url, "contextcanvas", *PRICES)
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count(NOTE) == 1 and "$0.30" in result.stderr  # 3 replies at 0.10
    run_id = result.stdout.strip()
    shown = run_cli(["-w", str(tiny_ws), "runs", "show", run_id], env={"COLUMNS": "400"})
    assert shown.exit_code == 0 and "$0.30" in shown.stdout
    assert "cost note" in shown.stdout and NOTE in " ".join(shown.stdout.split())
    # The cached count is kept with each reply's usage, so the cost can be worked out again at another price.
    usage = [json.loads(r["usage"]) for r in table_rows(tiny_ws, "responses")]
    assert len(usage) == 3 and all(u["prompt_tokens_details"]["cached_tokens"] == 80 for u in usage)
    exported = run_cli(["-w", str(tiny_ws), "runs", "export", run_id, "--format", "jsonl"])
    assert all(json.loads(line)["usage"]["prompt_tokens_details"]["cached_tokens"] == 80
               for line in exported.stdout.splitlines())


def test_the_cached_price_can_come_from_cfkit_toml(tiny_ws):
    config = tiny_ws / "cfkit.toml"
    config.write_text(config.read_text() + '\n[probe.prices."openai:test-model"]\ninput = 1000.0\noutput = 0.0\n'
                                           'cached_input = 100.0\n')
    with ChatServer(cached_80) as server:
        preview = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                           "--base-url", server.url, *FAST, "--dry-run"])
        result = openai_run(tiny_ws, server.url, "contextcanvas", "--json")
    assert preview.exit_code == 0 and "$100 cached in" in preview.stdout + preview.stderr
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["cost_usd"] == pytest.approx(3 * WITH_CACHED_PRICE)
    assert NOTE not in result.stderr


@pytest.mark.parametrize("options, said", [
    (["-o", "price_cached_in=100"], "-o price_cached_in was given without -o price_in and -o price_out"),
    ([*PRICES, "-o", "price_cached_in=-1"], "price_cached_in"),
])
def test_a_cached_price_that_cannot_be_used_is_refused_before_anything_is_sent(tiny_ws, options, said):
    with ChatServer(cached_80) as server:
        result = openai_run(tiny_ws, server.url, "contextcanvas", *options)
    assert result.exit_code == 2 and said in result.stderr and server.count == 0
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_negative_cached_price_in_cfkit_toml_is_refused(tiny_ws):
    config = tiny_ws / "cfkit.toml"
    config.write_text(config.read_text() + '\n[probe.prices."openai:test-model"]\ninput = 1.0\noutput = 1.0\n'
                                           'cached_input = -1\n')
    with ChatServer(cached_80) as server:
        result = openai_run(tiny_ws, server.url, "contextcanvas")
    assert result.exit_code == 2 and "cached_input" in result.stderr and server.count == 0


def test_a_cache_write_price_for_a_model_that_reports_no_cache_writes_is_refused(tiny_ws):
    config = tiny_ws / "cfkit.toml"
    config.write_text(config.read_text() + '\n[probe.prices."openai:test-model"]\ninput = 1.0\noutput = 1.0\n'
                                           'cache_write = 1.25\n')
    with ChatServer(cached_80) as server:
        result = openai_run(tiny_ws, server.url, "contextcanvas")
    assert result.exit_code == 2 and server.count == 0
    assert 'cfkit.toml [probe.prices."openai:test-model"] has cache_write' in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_resumed_run_keeps_saying_how_its_earlier_replies_were_priced(tiny_ws):
    def cached_first(body, n):
        return cached_80(body, n) if n == 1 else scripted_answer(body, n)

    with ChatServer(cached_first) as server:
        first = openai_run(tiny_ws, server.url, "contextcanvas", "--json", "--max-cost", "0.1", *PRICES)
        assert first.exit_code == 1 and server.count == 1, first.stderr
        rest = openai_run(tiny_ws, server.url, "contextcanvas", "--json", *PRICES)
    assert rest.exit_code == 0, rest.stderr
    run_id = json.loads(rest.stdout)["run_id"]
    # The second invocation read no cached input, and says nothing of it; the run's cost still holds the first
    # reply's cached input at the input price, and runs show says so.
    assert NOTE not in rest.stderr
    shown = run_cli(["-w", str(tiny_ws), "runs", "show", run_id], env={"COLUMNS": "400"})
    assert shown.stdout.count("cost note") == 1 and NOTE in " ".join(shown.stdout.split())
    assert json.loads(run_cli(["-w", str(tiny_ws), "runs", "show", run_id, "--json"]).stdout)["run"]["cost_usd"] \
        == pytest.approx(3 * AT_INPUT_PRICE)
