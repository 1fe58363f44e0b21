"""Amounts of money in messages and tables: enough digits that a small cost is not shown as zero."""

from __future__ import annotations

import math


def usd(value: float) -> str:
    """``$12.34`` for a dollar or more; below that two significant digits (``$0.50``, ``$0.012``, ``$0.00015``)."""
    if value < 0:
        return "-" + usd(-value)
    if value == 0:
        return "$0.00"
    if value >= 1:
        return f"${value:,.2f}"
    digits = max(2, 1 - math.floor(math.log10(value)))
    return f"${value:.{digits}f}"
