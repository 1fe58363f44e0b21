"""A reply's cost from the token counts its server reported: known only when both counts are there and sane."""

from __future__ import annotations

import pytest

from cfkit.backends.anthropic_messages import reply_from_message
from cfkit.backends.openai_wire import reply_from_completion

PRICES = (2.0, 8.0, None)  # USD per million input and output tokens; cached input at the input price
CACHED_PRICES = (2.0, 8.0, 0.5)  # and cached input at its own price

#: What a server may put in place of a token count; none of them is a cost.
NOT_COUNTS = [None, "100", -5, True, float("nan"), float("inf"), 2.5, [100], {"n": 1}]


def openai(usage, prices=PRICES):
    body = {"choices": [{"message": {"content": "A"}, "finish_reason": "stop"}]}
    if usage is not None:
        body["usage"] = usage
    return reply_from_completion(body, 0.1, [], prices=prices, where="http://h/v1")


def anthropic(usage, prices=PRICES):
    body = {"content": [{"type": "text", "text": "A"}], "stop_reason": "end_turn"}
    if usage is not None:
        body["usage"] = usage
    return reply_from_message(body, 0.1, [], prices=prices, where="https://api.anthropic.com")


READERS = [(openai, "prompt_tokens", "completion_tokens"), (anthropic, "input_tokens", "output_tokens")]


@pytest.mark.parametrize("read, name_in, name_out", READERS)
def test_reported_token_counts_give_the_cost(read, name_in, name_out):
    # Reasoning tokens are inside the output total (both providers' usage records): not added again; a count
    # under a name neither provider gives cached input is not read as one.
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


def test_openai_cached_input_is_a_part_of_the_prompt_tokens():
    usage = {"prompt_tokens": 1200, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 1000}}
    assert openai(usage, CACHED_PRICES).cost_usd == pytest.approx((200 * 2.0 + 1000 * 0.5 + 300 * 8.0) / 1e6)
    reply = openai(usage)  # no cached price: every prompt token at the input price, and a note
    assert reply.cost_usd == pytest.approx((1200 * 2.0 + 300 * 8.0) / 1e6)
    assert any("priced at the full input rate" in n for n in reply.notes)


def test_anthropic_cache_reads_and_writes_are_beside_the_input_tokens_each_priced_once():
    usage = {"input_tokens": 200, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 50,
             "output_tokens": 300}
    # 200 fresh at the input price, 1000 read at the cached price, 50 written at Anthropic's 1.25 x the input price.
    assert anthropic(usage, CACHED_PRICES).cost_usd == pytest.approx((200 * 2.0 + 50 * 2.5 + 1000 * 0.5
                                                                      + 300 * 8.0) / 1e6)
    assert anthropic(usage).cost_usd == pytest.approx((1200 * 2.0 + 50 * 2.5 + 300 * 8.0) / 1e6)
    # Nothing read or written: the plain cost, and nothing to say of a cache.
    plain = anthropic({"input_tokens": 200, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
                       "output_tokens": 300}, CACHED_PRICES)
    assert plain.cost_usd == pytest.approx((200 * 2.0 + 300 * 8.0) / 1e6) and plain.notes == ()


#: Anthropic's usage today: the cache writes, and their split by the cache's lifetime.
SPLIT_USAGE = {"input_tokens": 200, "cache_creation_input_tokens": 300, "output_tokens": 100,
               "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200}}


def test_anthropic_cache_writes_cost_anthropics_rates_by_lifetime_and_say_the_rate_was_assumed():
    reply = anthropic(SPLIT_USAGE, CACHED_PRICES)
    # 100 written for 5 minutes at 1.25 x 2.0, 200 for an hour at 2 x 2.0.
    assert reply.cost_usd == pytest.approx((200 * 2.0 + 100 * 2.5 + 200 * 4.0 + 100 * 8.0) / 1e6)
    [note] = reply.notes
    assert "priced at a rate cfkit assumed" in note and "-o price_cache_write=" in note
    assert reply.usage["cache_creation"] == SPLIT_USAGE["cache_creation"]  # kept, so the cost can be worked again


def test_given_cache_write_prices_are_used_and_nothing_is_assumed():
    reply = reply_from_message({"content": [{"type": "text", "text": "A"}], "usage": SPLIT_USAGE}, 0.1, [],
                               prices=CACHED_PRICES, where="h", writes=(3.0, 5.0))
    assert reply.cost_usd == pytest.approx((200 * 2.0 + 100 * 3.0 + 200 * 5.0 + 100 * 8.0) / 1e6)
    assert reply.notes == ()
    # Only the price of the lifetime written to is needed.
    only_hour = {**SPLIT_USAGE, "cache_creation_input_tokens": 200,
                 "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 200}}
    reply = reply_from_message({"content": [], "usage": only_hour}, 0.1, [], prices=CACHED_PRICES, where="h",
                               writes=(None, 5.0))
    assert reply.cost_usd == pytest.approx((200 * 2.0 + 200 * 5.0 + 100 * 8.0) / 1e6) and reply.notes == ()


@pytest.mark.parametrize("split", [None, {"ephemeral_5m_input_tokens": -1, "ephemeral_1h_input_tokens": 301},
                                   {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 100}, "lots"],
                         ids=["absent", "negative", "not adding up", "text"])
def test_cache_writes_without_a_usable_split_are_priced_as_5_minute_writes_and_say_so(split):
    usage = {k: v for k, v in SPLIT_USAGE.items() if k != "cache_creation"}
    if split is not None:
        usage["cache_creation"] = split
    reply = anthropic(usage, CACHED_PRICES)
    assert reply.cost_usd == pytest.approx((200 * 2.0 + 300 * 2.5 + 100 * 8.0) / 1e6)
    assert any("without a usable split by cache lifetime" in n and "lower than what was billed" in n
               for n in reply.notes)


def test_a_split_alone_gives_the_cache_writes():
    usage = {k: v for k, v in SPLIT_USAGE.items() if k != "cache_creation_input_tokens"}
    assert anthropic(usage, CACHED_PRICES).cost_usd == pytest.approx(anthropic(SPLIT_USAGE, CACHED_PRICES).cost_usd)


@pytest.mark.parametrize("field", ["cache_read_input_tokens", "cache_creation_input_tokens"])
@pytest.mark.parametrize("bad", [-5, 2.5, float("nan"), float("inf")], ids=repr)
def test_an_absurd_anthropic_cache_count_leaves_the_cost_unknown(field, bad):
    # Anthropic's input_tokens leaves the cache's part out: without that part the input is not known.
    reply = anthropic({"input_tokens": 200, field: bad, "output_tokens": 300}, CACHED_PRICES)
    assert reply.cost_usd is None and any("no usable token counts" in n for n in reply.notes)


@pytest.mark.parametrize("bad", [1201, -5, "1000", True, float("nan"), 2.5, [1]], ids=repr)
def test_an_absurd_openai_cached_count_prices_the_whole_prompt_at_the_input_price(bad):
    reply = openai({"prompt_tokens": 1200, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": bad}},
                   CACHED_PRICES)
    assert reply.cost_usd == pytest.approx((1200 * 2.0 + 300 * 8.0) / 1e6)
    assert any("cached input token count that is not a whole number" in n for n in reply.notes)
