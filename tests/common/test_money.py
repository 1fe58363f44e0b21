"""Costs are shown with the digits that matter: a request costing $0.00015 is not shown as $0.0001 or $0.00; and
a reply's cost prices the input a server read from its prompt cache at the cached price, each token once."""

from __future__ import annotations

import pytest

from cfkit.money import Cost, cached_count, token_cost, usd


@pytest.mark.parametrize("value, shown", [
    (0.00015, "$0.00015"),
    (0.000149, "$0.00015"),
    (0.0123, "$0.012"),
    (0.5, "$0.50"),
    (0.999, "$1.00"),
    (1.0, "$1.00"),
    (1234.567, "$1,234.57"),
    (0.0, "$0.00"),
    (-0.0003, "-$0.00030"),
])
def test_usd(value, shown):
    assert usd(value) == shown


@pytest.mark.parametrize("value", [1e-9, 3.7e-6, 0.00042, 0.042, 0.42])
def test_two_significant_digits_below_a_dollar(value):
    shown = float(usd(value).removeprefix("$"))
    assert shown == pytest.approx(value, rel=0.05)


def test_cached_input_is_priced_at_the_cached_price_and_the_rest_at_the_input_price():
    # 1,000 prompt tokens of which 800 cached, 50 out; USD 2 / 0.5 / 8 a million input / cached / output.
    assert token_cost(1000, 50, 2.0, 8.0, 800, 0.5) == pytest.approx((200 * 2.0 + 800 * 0.5 + 50 * 8.0) / 1e6)
    # Without a cached price every input token costs the input price, as when nothing was cached.
    assert token_cost(1000, 50, 2.0, 8.0, 800, None) == token_cost(1000, 50, 2.0, 8.0) == \
        pytest.approx((1000 * 2.0 + 50 * 8.0) / 1e6)
    # Everything cached, and nothing cached at a cached price.
    assert token_cost(1000, 0, 2.0, 8.0, 1000, 0.5) == pytest.approx(1000 * 0.5 / 1e6)
    assert token_cost(1000, 0, 2.0, 8.0, 0, 0.5) == pytest.approx(1000 * 2.0 / 1e6)
    # Unusable input or output counts are no cost, cached or not.
    assert token_cost(None, 50, 2.0, 8.0, 0, 0.5) is None and token_cost(1000, "50", 2.0, 8.0, 800, 0.5) is None


@pytest.mark.parametrize("n, within, counted", [
    (None, 100, 0),  # the reply says nothing of a cache
    (0, 100, 0), (80, 100, 80), (100, 100, 100), (80.0, 100, 80),
    (101, 100, None),  # more cached than was input: not believable
    (-1, 100, None), ("80", 100, None), (1.5, 100, None), (True, 100, None), (float("nan"), 100, None),
    (500, None, 500),  # no bound (Anthropic reports cached input beside input_tokens, not inside it)
])
def test_a_cached_count_is_a_whole_number_within_the_input(n, within, counted):
    assert cached_count(n, within) == counted


def test_attempts_abandoned_without_prices_are_counted_and_said_in_a_sum():
    """A run without prices: its abandoned attempts are still said (the count, no dollar figure), and a sum of
    such costs (a study's invocation) keeps them (before, the sum of two unpriced costs dropped them)."""
    total = Cost(abandoned=2) + Cost(abandoned=1) + Cost()
    assert (total.priced, total.abandoned) == (False, 3)
    assert total.shown() == "no prices known; 3 abandoned attempts may be billed"
    assert total.shown(short=True) == "no prices known + 3 abandoned"
    assert Cost().shown() == ""  # nothing to say
