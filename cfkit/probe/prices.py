"""Prices for cost estimates and ``--max-cost``: given, configured, or from a small built-in table.

In order: ``-o price_in=… -o price_out=…`` (USD per million input / output
tokens, with ``-o price_cached_in=…`` if you like), then ``cfkit.toml``::

    [probe.prices."openai:gpt-5.5"]
    input = 5.0          # USD per million input tokens
    output = 30.0        # USD per million output tokens
    cached_input = 0.5   # optional: USD per million input tokens read from the provider's prompt cache

then :data:`BUILT_IN`, which applies only to requests that go to OpenAI's own
API (``api.openai.com``): the same model name on another server costs what
that server charges. Prices reach a backend as its ``price_in``,
``price_out`` and ``price_cached_in`` options, so only a backend that has them
is priced. The cached price applies to the input tokens a reply says the
server read from its prompt cache; without it they cost the input price, and
the run says so.

The built-in figures are an estimate, not a quote: they were set on
:data:`BUILT_IN_AS_OF` from :data:`BUILT_IN_SOURCE` and are not updated by
cfkit. Check them before you rely on a budget, and give your own in
cfkit.toml when they differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from cfkit.errors import UsageError

#: USD per million (input, output) tokens at OpenAI's own API, for the models cfkit's documentation uses.
BUILT_IN: dict[str, tuple[float, float]] = {"gpt-5.5": (5.00, 30.00)}
BUILT_IN_AS_OF = "2026-12-01"
BUILT_IN_SOURCE = ("OpenAI's published API price list (https://openai.com/api/pricing), as quoted by several "
                   "independent price summaries of May-June 2026; cfkit could not read OpenAI's page itself")
OFFICIAL_HOST = "api.openai.com"
#: What a request sent through a provider's Batch API costs, as a share of the live price (OpenAI bills
#: batches at half price: its Batch API guide, "50% lower costs").
BATCH_PRICE_FACTOR = 0.5


@dataclass(frozen=True)
class Prices:
    """USD per million input, output and cached input tokens (None: at the input price), and where they came from."""

    price_in: float
    price_out: float
    source: str
    price_cached_in: float | None = None

    def record(self) -> dict[str, Any]:
        return {"price_in": self.price_in, "price_out": self.price_out, "price_cached_in": self.price_cached_in,
                "source": self.source}

    def options(self) -> dict[str, float | None]:
        """The backend options that carry these prices."""
        return {"price_in": self.price_in, "price_out": self.price_out, "price_cached_in": self.price_cached_in}

    def scaled(self, factor: float) -> "Prices":
        """These prices times ``factor`` (batch prices: :data:`BATCH_PRICE_FACTOR`)."""
        cached = None if self.price_cached_in is None else self.price_cached_in * factor
        return Prices(self.price_in * factor, self.price_out * factor, f"{self.source}, × {factor:g} for a batch",
                      cached)


def resolve_prices(model: str, model_name: str, endpoint: str | None, options: dict[str, Any],
                   configured: dict[str, Any]) -> Prices | None:
    """The prices for ``model`` ("KIND:NAME") sent to ``endpoint``: given, configured, or built in; None if unknown."""
    given = [k for k in ("price_in", "price_out") if options.get(k) is not None]
    if len(given) == 1:
        other = "price_out" if given[0] == "price_in" else "price_in"
        raise UsageError(f"-o {given[0]} was given without -o {other}; give both (USD per million tokens).")
    cached = options.get("price_cached_in")
    if given:
        return Prices(float(options["price_in"]), float(options["price_out"]), "-o price_in/price_out",
                      None if cached is None else float(cached))
    if cached is not None:
        raise UsageError("-o price_cached_in was given without -o price_in and -o price_out; give all three "
                         "(USD per million tokens), or the cached price as cached_input in cfkit.toml "
                         "[probe.prices].")
    entry = configured.get(model)
    if entry is not None:
        cached = getattr(entry, "cached_input", None)
        return Prices(float(entry.input), float(entry.output), f"cfkit.toml [probe.prices.\"{model}\"]",
                      None if cached is None else float(cached))
    if endpoint is not None and urlsplit(endpoint).hostname == OFFICIAL_HOST and model_name in BUILT_IN:
        price_in, price_out = BUILT_IN[model_name]
        return Prices(price_in, price_out, f"cfkit's built-in estimate of {BUILT_IN_AS_OF} ({BUILT_IN_SOURCE})")
    return None
