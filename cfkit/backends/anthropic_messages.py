"""``anthropic:MODEL`` — Anthropic's Messages API, natively, through the ``anthropic`` SDK (the ``anthropic`` extra).

Each image goes as a base64 ``image`` block before the question's text; the
system prompt as ``system``. The answer is read from the reply's text blocks;
``thinking`` blocks (extended thinking) go to ``Reply.reasoning``, never into
the graded text; a reply that stopped with ``refusal`` is marked refused, one
that stopped with ``max_tokens`` or ``model_context_window_exceeded`` cut off.

The same policy as the openai backend (:mod:`cfkit.endpoints`, with the
Anthropic provider): ``$ANTHROPIC_API_KEY`` goes only to
``https://api.anthropic.com``; any other server (``base_url``,
``$ANTHROPIC_BASE_URL``: a proxy, a gateway, a test server) gets only the key
in the variable named by ``api_key_env``, a placeholder otherwise, and no key
travels over plain http except to loopback. The SDK is always handed the key
cfkit chose, so it reads no credential of its own from the environment, and
it does not retry: cfkit retries 408, 409, 429, 5xx (529 "overloaded"
included), timeouts and connection errors ``max_retries`` times with jittered
exponential backoff, honouring ``Retry-After`` (and telling ``on_overload``
of a 429/529), within one deadline per attempt (``timeout``); 401/403 stop the
run (the key), 404 stops it (the model), and so does, at once, an answer that the
account cannot pay ("credit balance is too low", a 402 or ``billing_error``:
:mod:`cfkit.backends.billing`); other 4xx fail the request. Attempts
given up after the request reached the server (a timeout once connected, a
connection dropped mid-reply) are counted in ``Reply.abandoned``, or the
``TransportError``'s: a provider may bill them; a request cancelled (Ctrl-C,
SIGTERM) carries what it had sent on the cancellation (:mod:`cfkit.backends.attempts`).

Model controls: temperature, top_p, the token limit and ``extra_body`` (the
Messages API has no seed, and its reasoning is set through ``extra_body``'s
``thinking``). Prices (``price_in``, ``price_out``, ``price_cached_in``,
``price_cache_write``, ``price_cache_write_1h``) give each reply's cost: the
input read from the prompt cache at ``price_cached_in`` (``price_in`` when not
given), the input written to it at ``price_cache_write`` for the 5-minute cache
and ``price_cache_write_1h`` for the 1-hour one (when not given, Anthropic's
rates: :data:`CACHE_WRITE_FACTORS` times ``price_in``, and the run says so);
Message Batches (:mod:`cfkit.backends.anthropic_batch`) serve ``--batch`` and
``probe collect`` at half price, cache reads and writes included.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from importlib.metadata import PackageNotFoundError, version
from typing import Any, ClassVar

from pydantic import Field

from cfkit.backends import Backend, BackendContext, BackendOptions, Capabilities, ProbeRequest, Reply, TransportError, cache_options
from cfkit.backends.attempts import Attempts
from cfkit.backends.billing import billing_refusal, refusal_line, sdk_said
from cfkit.backends.controls import extra_body
from cfkit.backends.openai_wire import (CACHED_AT_FULL_NOTE, MAX_STORED_CHARS, UNREPORTED_NOTE, TokenPrices,
                                        b64encode, capped, token_prices)
from cfkit.money import AT_ASSUMED_RATE, cached_count, is_count, token_cost
from cfkit.endpoints import ANTHROPIC, PLACEHOLDER_KEY, redact_url, resolve_endpoint
from cfkit.errors import BackendError, BackendUnavailable, OptionError, QuotaRefused
from cfkit.hints import install_hint
from cfkit.option_words import key_refused

#: Stop reasons of a reply cut off before its end: the token limit, or the model's context window filled up.
CUT_OFF = ("max_tokens", "model_context_window_exceeded")
_NO_CACHE = {"cache": False}


class AnthropicOptions(BackendOptions):
    base_url: str | None = Field(None, description="server URL (default: $ANTHROPIC_BASE_URL, else "
                                                   "https://api.anthropic.com)")
    api_key_env: str | None = Field(None, description="environment variable holding the key (default "
                                                      "ANTHROPIC_API_KEY, for the official API only)",
                                    json_schema_extra=_NO_CACHE)
    timeout: float = Field(120.0, gt=0, le=3600, description="deadline of each attempt in seconds",
                           json_schema_extra=_NO_CACHE)
    max_retries: int = Field(4, ge=0, le=20, description="retries after 429, 5xx, timeouts",
                             json_schema_extra=_NO_CACHE)
    backoff: float = Field(1.0, ge=0, description="first retry delay in seconds; doubles each retry, jittered",
                           json_schema_extra=_NO_CACHE)
    price_in: float | None = Field(None, ge=0, description="USD per million input tokens (enables --max-cost)",
                                   json_schema_extra=_NO_CACHE)
    price_out: float | None = Field(None, ge=0, description="USD per million output tokens",
                                    json_schema_extra=_NO_CACHE)
    price_cached_in: float | None = Field(None, ge=0, description="USD per million input tokens read from the "
                                                                  "prompt cache (default: price_in)",
                                          json_schema_extra=_NO_CACHE)
    price_cache_write: float | None = Field(None, ge=0, description="USD per million input tokens written to the "
                                                                    "5-minute prompt cache (default: 1.25 x price_in)",
                                            json_schema_extra=_NO_CACHE)
    price_cache_write_1h: float | None = Field(None, ge=0, description="USD per million input tokens written to the "
                                                                       "1-hour prompt cache (default: 2 x price_in)",
                                               json_schema_extra=_NO_CACHE)


#: What Anthropic bills input written to its prompt cache, as a share of the input price: 1.25 for the 5-minute
#: cache (the default lifetime), 2 for the 1-hour one (the pricing table of Anthropic's prompt caching guide).
#: What such input costs when ``price_cache_write`` / ``price_cache_write_1h`` are not given.
CACHE_WRITE_FACTORS = (1.25, 2.0)
#: Said when a reply wrote input to the prompt cache and no price for cache writes was given.
CACHE_WRITE_NOTE = ("{where} reported input written to its prompt cache (usage.cache_creation_input_tokens) and no "
                    f"price for cache writes was given: it was {AT_ASSUMED_RATE}, Anthropic's 1.25 times the input "
                    "price (2 times for the 1-hour cache); if your rates differ, give "
                    "-o price_cache_write=USD_PER_M_TOKENS and -o price_cache_write_1h=…, or cache_write and "
                    "cache_write_1h in cfkit.toml [probe.prices]")
#: Said when a reply wrote input to the prompt cache without saying how much to which cache lifetime.
CACHE_SPLIT_NOTE = ("{where} reported input written to its prompt cache without a usable split by cache lifetime "
                    f"(usage.cache_creation) for some replies: it was {AT_ASSUMED_RATE}, the 5-minute cache's, so "
                    "if any of it went to the 1-hour cache, which costs more, the costs shown and what --max-cost "
                    "counts are lower than what was billed")
_READ_FIELD = "usage.cache_read_input_tokens"
_SPLIT = ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")


def _usage(usage: object) -> dict[str, Any]:
    """The numbers of a reply's usage record, and its split of cache writes by lifetime (``cache_creation``)."""
    if not isinstance(usage, dict):
        return {}
    kept: dict[str, Any] = {k: v for k, v in usage.items() if isinstance(v, (int, float))}
    split = usage.get("cache_creation")
    if isinstance(split, dict):
        kept["cache_creation"] = {k: v for k, v in split.items() if isinstance(v, (int, float))}
    return kept


def _written(usage: dict[str, Any], notes: list[str], where: str) -> tuple[int, int] | None:
    """(tokens written to the 5-minute cache, to the 1-hour cache); None when the count cannot be used. Without
    a usable split (``cache_creation``, whose parts add up to ``cache_creation_input_tokens``) all of them count as
    5-minute writes (the default lifetime), and the reply says so."""
    total = cached_count(usage.get("cache_creation_input_tokens"), None)
    split = usage.get("cache_creation")
    parts = [cached_count(split.get(name), None) for name in _SPLIT] if isinstance(split, dict) else [None, None]
    if parts[0] is not None and parts[1] is not None and (usage.get("cache_creation_input_tokens") is None
                                                          or total == parts[0] + parts[1]):
        return parts[0], parts[1]
    if total:
        notes.append(CACHE_SPLIT_NOTE.format(where=where))
    return None if total is None else (total, 0)


def reply_from_message(message: dict[str, Any], latency: float, notes: list[str], *,
                       prices: TokenPrices | None, where: str,
                       writes: tuple[float | None, float | None] = (None, None)) -> Reply:
    """A Messages API ``message`` (as JSON) read into a reply; ``prices`` (USD per million input, output and cached
    input tokens) and ``writes`` (USD per million input tokens written to the 5-minute and the 1-hour prompt cache;
    None: :data:`CACHE_WRITE_FACTORS` times the input price) give its cost. Anthropic's ``input_tokens`` leaves out
    the input read from the prompt cache (``cache_read_input_tokens``, at the cached price) and the input written
    to it (``cache_creation_input_tokens``, at the cache-write prices); all three are priced, each once."""
    blocks = message.get("content")
    if not isinstance(blocks, list):
        raise TransportError(f"{where} returned a message without content.")
    texts = [b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text"
             and isinstance(b.get("text"), str)]
    thoughts = [b["thinking"] for b in blocks if isinstance(b, dict) and b.get("type") == "thinking"
                and isinstance(b.get("thinking"), str)]
    raw, raw_chars = capped("".join(texts))
    if raw_chars is not None:
        notes.append(f"replies longer than {MAX_STORED_CHARS:,} characters were stored cut to that length")
    usage = _usage(message.get("usage"))
    cost = None
    if prices is not None:
        fresh = usage.get("input_tokens")
        read = cached_count(usage.get("cache_read_input_tokens"), None)
        written = _written(usage, notes, where)
        # Not knowing the cache's part of the input is not knowing the input: no cost, and the reply says so.
        known = read is not None and written is not None and is_count(fresh)
        cost = token_cost(fresh + read, usage.get("output_tokens"), prices[0], prices[1], read, prices[2]) \
            if known else None
        if cost is None:
            notes.append(UNREPORTED_NOTE.format(where=where, fields="usage.input_tokens, output_tokens and the "
                                                                    "cache_read/cache_creation_input_tokens"))
        else:
            if read and prices[2] is None:
                notes.append(CACHED_AT_FULL_NOTE.format(where=where, field=_READ_FIELD))
            rates = [prices[0] * factor if given is None else given
                     for given, factor in zip(writes, CACHE_WRITE_FACTORS)]
            cost += (written[0] * rates[0] + written[1] * rates[1]) / 1e6
            if any(n and given is None for n, given in zip(written, writes)):
                notes.append(CACHE_WRITE_NOTE.format(where=where))
    model = message.get("model")
    return Reply(raw=raw, usage=usage, latency_s=latency, cost_usd=cost, notes=tuple(notes),
                 refused=message.get("stop_reason") == "refusal", reasoning=capped("\n".join(thoughts))[0] or None,
                 server_model=model if isinstance(model, str) else None, raw_chars=raw_chars,
                 truncated=message.get("stop_reason") in CUT_OFF)


#: The SDK's HTTP library's failures that mean nothing reached the server (httpx's names, which httpx2 keeps).
NOT_SENT = ("ConnectError", "ConnectTimeout", "PoolTimeout")


def reached_server(exc: BaseException) -> bool:
    """Whether an attempt the SDK gave up with ``exc`` (its connection error or timeout) had reached the server:
    anything but a connection that could not be opened (refused, unknown host, connect or pool timeout), which
    the SDK's error is raised from."""
    cause = exc.__cause__
    return cause is None or not any(kind.__name__ in NOT_SENT for kind in type(cause).__mro__)


def _sdk_version() -> str | None:
    try:
        return version("anthropic")
    except PackageNotFoundError:
        return None


class AnthropicBackend(Backend):
    """The Messages API, one request per probe question, through ``anthropic.AsyncAnthropic``."""

    kind: ClassVar[str] = "anthropic"
    capabilities: ClassVar[Capabilities] = Capabilities(images=True, multi_image=True, json_schema=False, remote=True)
    Options: ClassVar[type[AnthropicOptions]] = AnthropicOptions
    requires: ClassVar[tuple[str, ...]] = ("anthropic",)
    extra: ClassVar[str] = "anthropic"
    controls: ClassVar[tuple[str, ...]] = ("temperature", "top_p", "max_completion_tokens", "extra_body")

    def __init__(self, name: str, options: AnthropicOptions, context: BackendContext | None = None):
        self.words = words = (context or BackendContext()).words  # how the command sets an option, for hints
        endpoint = resolve_endpoint(options.base_url, options.api_key_env, who="anthropic backend",
                                    url_flag=words.of("base_url"), key_flag=words.of("api_key_env"),
                                    provider=ANTHROPIC)
        if endpoint.key_problem is not None:
            raise BackendUnavailable(f"anthropic backend: {endpoint.key_problem}")
        if endpoint.credentials is not None:
            raise OptionError(f"anthropic backend: {endpoint.shown} carries credentials in the URL; give the key "
                              f"in a variable named with {words.of('api_key_env')} instead.")
        sdk = _sdk_version()
        if sdk is None:
            raise BackendUnavailable(f"anthropic backend: the anthropic SDK is not installed. Run: "
                                     f"{install_hint('anthropic')}")
        self.name = name
        self.model = f"{self.kind}:{name}"
        self.options = options.model_copy(update={"base_url": redact_url(options.base_url)}) if options.base_url \
            else options
        self.endpoint = endpoint.shown
        self.official = endpoint.official
        self.key_sent = endpoint.key is not None  # else the placeholder goes: for the 401 line
        self.notes = endpoint.notes
        self.versions = {"anthropic": sdk}
        self.on_overload: Callable[[float | None], None] | None = None
        self.cache_identity = cache_options(self.options) | {"base_url": self.endpoint}
        self.priced = options.price_in is not None and options.price_out is not None
        self._url = endpoint.url
        self._key = endpoint.key or PLACEHOLDER_KEY  # always given: the SDK then reads no key of its own
        self._client: Any = None
        self._loop: Any = None
        self._temperature_refused = False

    def client(self) -> Any:
        """The SDK client of the running event loop (its connection pool cannot cross loops)."""
        import asyncio

        import anthropic

        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = anthropic.AsyncAnthropic(api_key=self._key, base_url=self._url, max_retries=0,
                                                    timeout=self.options.timeout)
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    # -- one request ---------------------------------------------------------

    def batch_body(self, request: ProbeRequest) -> dict[str, Any]:
        """The Messages API parameters of ``request`` (what :meth:`answer` sends; a batch line's ``params``)."""
        content: list[dict[str, Any]] = [
            {"type": "image", "source": {"type": "base64", "media_type": image.mime,
                                         "data": b64encode(image.data).decode("ascii")}}
            for image in request.images]
        content.append({"type": "text", "text": request.user})
        generation = request.generation
        params: dict[str, Any] = {"model": self.name, "max_tokens": generation.max_tokens, "system": request.system,
                                  "messages": [{"role": "user", "content": content}],
                                  "temperature": generation.temperature}
        if generation.top_p is not None:
            params["top_p"] = generation.top_p
        params.update(extra_body(generation))
        return params

    async def answer(self, request: ProbeRequest) -> Reply:
        import asyncio

        import anthropic

        params = self.batch_body(request)
        # The SDK's own arguments; the rest (temperature and top_p among them: recent SDKs dropped them as
        # arguments, the API still reads them) travel as extra body fields.
        known = {k: params[k] for k in ("model", "max_tokens", "system", "messages")}
        extra = {k: v for k, v in params.items() if k not in known}
        notes: list[str] = list(self.notes)
        started = time.perf_counter()
        tried = Attempts()  # retries, attempts given up once sent (Reply.abandoned)
        client = self.client()
        try:
            while True:
                if self._temperature_refused:
                    extra.pop("temperature", None)
                try:
                    message = await tried.send(client.messages.create(**known, extra_body=extra or None))
                    break
                except anthropic.APIStatusError as exc:
                    if exc.status_code == 400 and "temperature" in extra and "temperature" in str(exc.message) \
                            and not self._temperature_refused:
                        self._temperature_refused = True  # a model that takes no sampling settings: its default
                        notes.append(f"server refused temperature={extra['temperature']:g}; it used its default")
                        continue
                    await self._after_status(exc, tried)
                except anthropic.APIConnectionError as exc:  # timeouts included
                    tried.abandoned += reached_server(exc)
                    what = "Timeout" if isinstance(exc, anthropic.APITimeoutError) else "ConnectionError"
                    await self._wait_or_give_up(tried, what, str(exc), None)
        except BackendError as exc:  # the request failed (or stops the run): its attempts given up once sent
            exc.abandoned = tried.abandoned   # may still be billed
            raise
        except (asyncio.CancelledError, KeyboardInterrupt) as stop:  # Ctrl-C, SIGTERM: what it had sent may be
            tried.stopped(stop)  # billed (an attempt out was marked so as it was sent; here: between attempts)
            raise
        reply = reply_from_message(message.model_dump(mode="json"), time.perf_counter() - started, notes,
                                   prices=self._prices(), where=self.endpoint, writes=self._writes())
        if tried.retry or tried.abandoned:  # counted per request by the run
            reply = replace(reply, retries=tried.retry, abandoned=tried.abandoned)
        return reply

    def _prices(self, factor: float = 1.0) -> TokenPrices | None:
        return token_prices(self.options, factor)

    def _writes(self, factor: float = 1.0) -> tuple[float | None, float | None]:
        """The cache-write prices given, times ``factor`` (None: Anthropic's share of the input price)."""
        given = (self.options.price_cache_write, self.options.price_cache_write_1h)
        return (None if given[0] is None else given[0] * factor, None if given[1] is None else given[1] * factor)

    async def _after_status(self, exc: Any, tried: Attempts) -> None:
        status = exc.status_code
        message = sdk_said(exc)  # the server's words, not the SDK's "Error code: 401 - {...}"
        if billing_refusal(status, getattr(exc, "body", None), message):  # "credit balance is too low": no retry can help
            raise QuotaRefused(refusal_line("anthropic backend", self.endpoint, status, sdk_said(exc)))
        if status in (401, 403):
            raise BackendUnavailable(key_refused("anthropic backend", self.endpoint, status, message, self.words,
                                                 sent=self.key_sent))
        if status == 404:
            raise BackendError(f"anthropic backend: {self.endpoint} has no model '{self.name}' (HTTP 404: {message}).")
        if not (status in (408, 409, 429) or status >= 500):
            raise TransportError(f"HTTP {status} from {self.endpoint}: {message}")
        headers = exc.response.headers if getattr(exc, "response", None) is not None else None
        if status in (429, 529) and self.on_overload is not None:
            from cfkit.backends.http import retry_after_seconds

            self.on_overload(retry_after_seconds(headers))
        await self._wait_or_give_up(tried, f"HTTP {status}", message, headers)

    async def _wait_or_give_up(self, tried: Attempts, what: str, detail: str, headers: Any) -> None:
        await tried.wait_or_give_up(self.options, what, detail, headers, self.endpoint, until_reset=False)

    # -- Message Batches (cfkit.backends.anthropic_batch) ----------------------

    def reply_from_completion(self, message: dict[str, Any], *, price_factor: float = 1.0) -> Reply:
        """A message a batch returned, read as :meth:`answer` reads a live one, at ``price_factor`` of the prices."""
        return reply_from_message(message, 0.0, list(self.notes), prices=self._prices(price_factor),
                                  where=self.endpoint, writes=self._writes(price_factor))

    def batch_api(self) -> Any:
        """The Message Batches of this backend's server, in the shape ``probe run --batch`` drives."""
        from cfkit.backends.anthropic_batch import MessageBatches

        return MessageBatches(self)
