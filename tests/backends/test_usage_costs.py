"""A reply's cost from the token counts its server reported: known only when both counts are there and sane."""

from __future__ import annotations

import pytest

from cfkit.backends.anthropic_messages import reply_from_message
from cfkit.backends.openai_wire import reply_from_completion

PRICES = (2.0, 8.0)  # USD per million input and output tokens

#: What a server may put in place of a token count; none of them is a cost.
NOT_COUNTS = [None, "100", -5, True, float("nan"), float("inf"), 2.5, [100], {"n": 1}]


def openai(usage):
    body = {"choices": [{"message": {"content": "A"}, "finish_reason": "stop"}]}
    if usage is not None:
        body["usage"] = usage
    return reply_from_completion(body, 0.1, [], prices=PRICES, where="http://h/v1")


def anthropic(usage):
    body = {"content": [{"type": "text", "text": "A"}], "stop_reason": "end_turn"}
    if usage is not None:
        body["usage"] = usage
    return reply_from_message(body, 0.1, [], prices=PRICES, where="https://api.anthropic.com")


READERS = [(openai, "prompt_tokens", "completion_tokens"), (anthropic, "input_tokens", "output_tokens")]


@pytest.mark.parametrize("read, name_in, name_out", READERS)
def test_reported_token_counts_give_the_cost(read, name_in, name_out):
    # Reasoning and cached tokens are inside the two totals (both providers' usage records): not added again.
    reply = read({name_in: 1200, name_out: 300, "reasoning_tokens": 200, "cached_tokens": 1000})
    assert reply.cost_usd == pytest.approx((1200 * 2.0 + 300 * 8.0) / 1_000_000)
    assert not any("no usable token counts" in n for n in reply.notes)
    assert read({name_in: 0, name_out: 0}).cost_usd == 0.0  # zero tokens is a cost: nothing


@pytest.mark.parametrize("read, name_in, name_out", READERS)
@pytest.mark.parametrize("bad", NOT_COUNTS, ids=repr)
def test_a_missing_or_absurd_count_leaves_the_cost_unknown_and_says_so(read, name_in, name_out, bad):
    for usage in ({name_in: bad, name_out: 20}, {name_in: 100, name_out: bad}):
        usage = {k: v for k, v in usage.items() if v is not None}
        reply = read(usage)
        assert reply.cost_usd is None, usage  # never 0 or a negative amount that totals would add in silence
        assert any("no usable token counts" in n and "costs shown are at least" in n for n in reply.notes)


@pytest.mark.parametrize("read", [r[0] for r in READERS])
def test_no_usage_record_at_all_leaves_the_cost_unknown(read):
    for usage in (None, {}, {"total_tokens": 120}, "lots"):
        reply = read(usage)
        assert reply.cost_usd is None and reply.notes, usage


def test_without_prices_there_is_no_cost_and_nothing_to_say():
    body = {"choices": [{"message": {"content": "A"}}]}
    reply = reply_from_completion(body, 0.1, [], prices=None, where="http://h/v1")
    assert reply.cost_usd is None and reply.notes == ()
