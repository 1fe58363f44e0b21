"""Numeric command-line parameters: ASCII digits, finite values, documented ranges.

Click's own ``int`` and ``float`` take what Python's ``int()`` and ``float()``
take: ``١٢`` (Arabic-Indic digits), ``1_000``, ``nan`` and ``inf``. A flag that
then reads differently from what was typed, or a NaN that passes every range
check, is refused here with the flag's name and its range. Every number a
command takes goes through one of these types.
"""

from __future__ import annotations

import math
import re
from typing import Any

import click

_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")

#: Seeds are handed to numpy and torch generators; both take this range.
SEED_MAX = 2**32 - 1
#: Bootstrap resamples: beyond a million a report takes many minutes and gains nothing visible.
RESAMPLES_MAX = 1_000_000


class Integer(click.IntRange):
    """A whole number written with the digits 0-9, inside ``[min, max]``."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not _INTEGER.fullmatch(value.strip()):
            self.fail(f"{value!r} is not a whole number written with the digits 0-9{self._range()}.", param, ctx)
        return super().convert(value, param, ctx)

    def _range(self) -> str:
        if self.min is not None and self.max is not None:
            return f" (from {self.min} to {self.max})"
        if self.min is not None:
            return f" ({self.min} or more)"
        return ""


class Decimal(click.FloatRange):
    """A finite number written with the digits 0-9 (``nan`` and ``inf`` refused), inside ``[min, max]``."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not _DECIMAL.fullmatch(value.strip()):
            self.fail(f"{value!r} is not a number written with the digits 0-9 (e.g. 2.5).", param, ctx)
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(value, param, ctx)


def seed() -> Integer:
    """A generator seed: 0 to 2**32 - 1."""
    return Integer(min=0, max=SEED_MAX)


def resamples() -> Integer:
    """A number of bootstrap resamples: 1 to a million."""
    return Integer(min=1, max=RESAMPLES_MAX)


def positive(maximum: int | None = None) -> Integer:
    """A count or id: 1 or more (up to ``maximum``)."""
    return Integer(min=1, max=maximum)
