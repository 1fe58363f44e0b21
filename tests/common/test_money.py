"""Costs are shown with the digits that matter: a request costing $0.00015 is not shown as $0.0001 or $0.00."""

from __future__ import annotations

import pytest

from cfkit.money import usd


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
