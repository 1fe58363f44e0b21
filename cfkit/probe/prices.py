"""Prices for cost estimates and ``--max-cost``: given, configured, or from a small built-in table.

In order: ``-o price_in=… -o price_out=…`` (USD per million input / output
tokens, with ``-o price_cached_in=…`` if you like, and for Anthropic's
prompt-cache writes ``-o price_cache_write=…`` / ``-o price_cache_write_1h=…``),
then ``cfkit.toml``::

    [probe.prices."openai:gpt-5.5"]
    input = 5.0          # USD per million input tokens
    output = 30.0        # USD per million output tokens
    cached_input = 0.5   # optional: USD per million input tokens read from the provider's prompt cache
    cache_write = 6.25   # optional, anthropic: models only: input written to the 5-minute prompt cache
    cache_write_1h = 10  # optional, anthropic: models only: input written to the 1-hour prompt cache

then :data:`BUILT_IN`, which applies only to requests that go to OpenAI's own
API (``api.openai.com``): the same model name on another server costs what
that server charges. Prices reach a backend as its ``price_in``,
``price_out`` and ``price_cached_in`` options, so only a backend that has them
is priced. The cached price applies to the input tokens a reply says the
server read from its prompt cache; without it they cost the input price, and
the run says so. The cache-write prices apply to the input an Anthropic reply
says was written to the prompt cache; without them such input costs what
Anthropic bills for it, 1.25 times the input price for the 5-minute cache and
2 times for the 1-hour one (:data:`cfkit.backends.anthropic_messages.CACHE_WRITE_FACTORS`),
and the run says so.

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
#: The options of the prices of input written to a 5-minute and a 1-hour prompt cache, and their cfkit.toml keys.
CACHE_WRITE_OPTIONS = ("price_cache_write", "price_cache_write_1h")
CACHE_WRITE_KEYS = ("cache_write", "cache_write_1h")


@dataclass(frozen=True)
class Prices:
    """USD per million input, output and cached input tokens (None: at the input price), and where they came from."""

    price_in: float
    price_out: float
    source: str
    price_cached_in: float | None = None
    #: USD per million input tokens written to a 5-minute and a 1-hour prompt cache (Anthropic's; None: the
    #: backend's default share of the input price); there only when given.
    cache_writes: tuple[float | None, float | None] = (None, None)

    def record(self) -> dict[str, Any]:
        return {"price_in": self.price_in, "price_out": self.price_out, "price_cached_in": self.price_cached_in,
                **self._writes(), "source": self.source}

    def options(self) -> dict[str, float | None]:
        """The backend options that carry these prices (the cache-write ones only when given)."""
        return {"price_in": self.price_in, "price_out": self.price_out, "price_cached_in": self.price_cached_in,
                **self._writes()}

    def _writes(self) -> dict[str, float]:
        return {name: price for name, price in zip(CACHE_WRITE_OPTIONS, self.cache_writes) if price is not None}

    def scaled(self, factor: float) -> "Prices":
        """These prices times ``factor`` (batch prices: :data:`BATCH_PRICE_FACTOR`)."""
        cached = None if self.price_cached_in is None else self.price_cached_in * factor
        writes = tuple(None if p is None else p * factor for p in self.cache_writes)
        return Prices(self.price_in * factor, self.price_out * factor, f"{self.source}, × {factor:g} for a batch",
                      cached, writes)  # type: ignore[arg-type]


def resolve_prices(model: str, model_name: str, endpoint: str | None, options: dict[str, Any],
                   configured: dict[str, Any]) -> Prices | None:
    """The prices for ``model`` ("KIND:NAME") sent to ``endpoint``: given, configured, or built in; None if unknown."""
    given = [k for k in ("price_in", "price_out") if options.get(k) is not None]
    if len(given) == 1:
        other = "price_out" if given[0] == "price_in" else "price_in"
        raise UsageError(f"-o {given[0]} was given without -o {other}; give both (USD per million tokens).")
    cached = options.get("price_cached_in")
    writes = tuple(_number(options.get(name)) for name in CACHE_WRITE_OPTIONS)
    if given:
        return Prices(float(options["price_in"]), float(options["price_out"]), "-o price_in/price_out",
                      _number(cached), writes)  # type: ignore[arg-type]
    for name, key, price in (("price_cached_in", "cached_input", cached),
                             *zip(CACHE_WRITE_OPTIONS, CACHE_WRITE_KEYS, writes)):
        if price is not None:
            raise UsageError(f"-o {name} was given without -o price_in and -o price_out; give those too "
                             f"(USD per million tokens), or this price as {key} in cfkit.toml [probe.prices].")
    entry = configured.get(model)
    if entry is not None:
        return Prices(float(entry.input), float(entry.output), f"cfkit.toml [probe.prices.\"{model}\"]",
                      _number(getattr(entry, "cached_input", None)),
                      tuple(_number(getattr(entry, key, None)) for key in CACHE_WRITE_KEYS))  # type: ignore[arg-type]
    if endpoint is not None and urlsplit(endpoint).hostname == OFFICIAL_HOST and model_name in BUILT_IN:
        price_in, price_out = BUILT_IN[model_name]
        return Prices(price_in, price_out, f"cfkit's built-in estimate of {BUILT_IN_AS_OF} ({BUILT_IN_SOURCE})")
    return None


def _number(value: Any) -> float | None:
    return None if value is None else float(value)
