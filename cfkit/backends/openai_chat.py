"""``openai:MODEL`` — any server speaking the OpenAI Chat Completions API.

The official API, or an OpenAI-compatible server (vLLM, Ollama, SGLang, LM
Studio, ``transformers serve``) through ``base_url`` / ``OPENAI_BASE_URL``.
Images go as base64 data URLs; the answer is constrained with a JSON-schema
``response_format`` when the server accepts it, and asked for as plain text
when the server rejects that parameter (the reply records the fallback).

Base URL and key follow the one endpoint policy of :mod:`cfkit.endpoints`:
``OPENAI_API_KEY`` goes only to the official host over https, any other server
gets only the variable named by ``api_key_env`` (a placeholder otherwise), no
key travels over plain http except to loopback, and credentials in the URL are
redacted wherever the URL is recorded (``endpoint``, ``options``, the cache
identity, messages).

Requests go straight over HTTP (:mod:`cfkit.backends.http`: one pooled
aiohttp session, keep-alive, a total deadline per attempt, a 4 MiB cap on the
response); each JSON body is encoded once with orjson, and the reply is read
from the decoded JSON without building SDK models. The ``openai`` package is
not used here (the image editor still uses it).

Retries: 429, 408, 409, 5xx, timeouts, connection errors and malformed bodies
are retried ``max_retries`` times with jittered exponential backoff, honouring
``Retry-After`` (up to :data:`MAX_RETRY_AFTER_S`), and a 429 or 503 is told to
``on_overload`` first (the runner lowers its concurrency); a 400 or 422 naming a
parameter the request can do without (``response_format``, ``temperature``, the
output-token limit's name) is answered by dropping or renaming it, once per
backend, and noted; 401/403 stop the run (the key), 404 stops it (the model);
other 4xx, redirects and bodies over the cap fail the request without a retry.

A reply's text longer than :data:`MAX_STORED_CHARS` is cut to that length;
``Reply.raw_chars`` keeps its full length. A reasoning text the server returns
beside the answer (``reasoning_content``, or ``reasoning``) goes to
``Reply.reasoning`` (cut the same way), never into the graded text.
"""

from __future__ import annotations

import base64
import random
import time
import uuid
from collections.abc import Callable
from typing import Any, ClassVar, Literal

from pydantic import Field

from cfkit import __version__
from cfkit.backends import (
    BackendContext,
    BackendOptions,
    Capabilities,
    ProbeRequest,
    Reply,
    TransportError,
    cache_options,
)
from cfkit.backends.http import (
    Exchange,
    JSONClient,
    error_text,
    package_versions,
    retry_after_seconds,
)
from cfkit.endpoints import redact_url, resolve_endpoint
from cfkit.errors import BackendError, BackendUnavailable
from cfkit.hints import install_hint

#: A server asking to wait longer than this is treated as a failure, not waited for.
MAX_RETRY_AFTER_S = 120.0
#: The longest reply text stored (characters); a longer one is cut, its full length kept in ``raw_chars``.
MAX_STORED_CHARS = 256 * 1024

_NO_CACHE = {"cache": False}


class OpenAIOptions(BackendOptions):
    base_url: str | None = Field(None, description="server URL, e.g. http://localhost:8000/v1 "
                                                   "(default: $OPENAI_BASE_URL, else the official API)")
    api_key_env: str | None = Field(None, description="environment variable holding the key (default "
                                                      "OPENAI_API_KEY, for the official API only)",
                                    json_schema_extra=_NO_CACHE)
    timeout: float = Field(120.0, gt=0, le=3600, description="deadline of each attempt in seconds: connecting, "
                                                             "sending and reading the whole reply",
                           json_schema_extra=_NO_CACHE)
    max_retries: int = Field(4, ge=0, le=20, description="retries after 429, 5xx, timeouts",
                             json_schema_extra=_NO_CACHE)
    backoff: float = Field(1.0, ge=0, description="first retry delay in seconds; doubles each retry, jittered",
                           json_schema_extra=_NO_CACHE)
    json_schema: Literal["auto", "off"] = Field("auto", description="auto: ask for schema-constrained JSON, "
                                                                    "fall back to text if refused; off: never")
    detail: Literal["auto", "low", "high"] = Field("auto", description="image detail level sent with each image")
    token_param: Literal["max_completion_tokens", "max_tokens"] | None = Field(
        None, description="name of the output-token limit (default: max_completion_tokens for the official "
                          "API, max_tokens for other servers)")
    price_in: float | None = Field(None, ge=0, description="USD per million input tokens (enables --max-cost)",
                                   json_schema_extra=_NO_CACHE)
    price_out: float | None = Field(None, ge=0, description="USD per million output tokens",
                                    json_schema_extra=_NO_CACHE)


def _without_none(value: Any) -> Any:
    """``value`` with every None-valued key of every nested dict removed (the usage record as the SDK kept it)."""
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    return value


def _capped(text: str) -> tuple[str, int | None]:
    """``text`` cut to :data:`MAX_STORED_CHARS`, and its full length when it was cut."""
    if len(text) <= MAX_STORED_CHARS:
        return text, None
    return text[:MAX_STORED_CHARS], len(text)


class OpenAIBackend:
    """Chat Completions over HTTP, one request per probe question."""

    kind: ClassVar[str] = "openai"
    capabilities: ClassVar[Capabilities] = Capabilities(images=True, multi_image=True, json_schema=True, remote=True)
    Options: ClassVar[type[OpenAIOptions]] = OpenAIOptions
    requires: ClassVar[tuple[str, ...]] = ("aiohttp", "orjson")  # checked before a run opens (check_installed)
    extra: ClassVar[str] = "openai"

    def __init__(self, name: str, options: OpenAIOptions, context: BackendContext | None = None):
        # 1. Where requests go, and which key they carry (cfkit.endpoints decides).
        endpoint = resolve_endpoint(options.base_url, options.api_key_env, who="openai backend",
                                    url_flag="--base-url", key_flag="--api-key-env")
        if endpoint.key_problem is not None:
            raise BackendUnavailable(f"openai backend: {endpoint.key_problem}")
        self.versions = package_versions()
        missing = [name for name in ("aiohttp", "orjson") if name not in self.versions]
        if missing:
            raise BackendUnavailable(f"openai backend: {' and '.join(missing)} not installed. "
                                     f"Run: {install_hint('openai')}")
        self.name = name
        self.model = f"{self.kind}:{name}"
        # Recorded with the run: the base URL as given, with any credentials redacted.
        self.options = options.model_copy(update={"base_url": redact_url(options.base_url)}) if options.base_url \
            else options
        self.endpoint = endpoint.shown
        self.base_url = endpoint.shown
        self.official = endpoint.official
        self.notes = endpoint.notes  # e.g. that $OPENAI_API_KEY was withheld; added to every reply's notes
        # Told of every 429/503 before the retry, with the Retry-After (the runner lowers its concurrency).
        self.on_overload: Callable[[float | None], None] | None = None

        # 2. What changes answers (the cache key), and prices.
        self.token_param = options.token_param or ("max_completion_tokens" if self.official else "max_tokens")
        self.cache_identity = cache_options(self.options) | {"base_url": self.endpoint, "token_param": self.token_param}
        self.priced = options.price_in is not None and options.price_out is not None
        # Parameters this server refused; later requests leave them out (or use the other token limit).
        self._refused: set[str] = {"response_format"} if options.json_schema == "off" else set()

        # 3. The HTTP client (it opens its connections on the first request).
        self._client = JSONClient(endpoint.url, {"Authorization": endpoint.authorization,
                                                 "User-Agent": f"cfkit/{__version__}"},
                                  deadline=options.timeout)

    async def aclose(self) -> None:
        await self._client.aclose()

    # -- one request ---------------------------------------------------------

    def _content(self, request: ProbeRequest, *, slots: bool = False) -> list[dict[str, Any]]:
        """The user message's parts: the text, then each image as a base64 data URL (encoded once).

        With ``slots``, each URL is a marker that :func:`_encoded` replaces with the image's bytes once the
        rest of the body is JSON: the image is then never held as a Python string, nor copied through the
        JSON encoder (whose buffer for a 200 KB body is about 2 MB).
        """
        content: list[dict[str, Any]] = [{"type": "text", "text": request.user}]
        for i, image in enumerate(request.images):
            url = _slot(i).decode("ascii") if slots else \
                f"data:{image.mime};base64,{base64.b64encode(image.data).decode('ascii')}"
            part: dict[str, Any] = {"url": url}
            if self.options.detail != "auto":
                part["detail"] = self.options.detail
            content.append({"type": "image_url", "image_url": part})
        return content

    def _body(self, request: ProbeRequest, content: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.name,
            "messages": [{"role": "system", "content": request.system}, {"role": "user", "content": content}],
            "temperature": request.generation.temperature,
            self.token_param: request.generation.max_tokens,
        }
        if "temperature" in self._refused:
            del body["temperature"]
        if "response_format" not in self._refused and request.schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "probe_answer", "schema": request.schema, "strict": True},
            }
        return body

    def _delay(self, retry: int, headers: Any) -> float:
        wait = retry_after_seconds(headers)
        if wait is not None:
            return wait
        return self.options.backoff * (2.0 ** retry) * random.uniform(0.5, 1.0)

    def _drop_refused(self, error: str, body: dict[str, Any]) -> str | None:
        """When a 400 names a parameter we can do without, stop sending it; returns the note to record."""
        if "response_format" in body and "response_format" in error:
            self._refused.add("response_format")
            return "server refused response_format; asked for plain text"
        if "temperature" in body and "temperature" in error:
            self._refused.add("temperature")
            return "server refused temperature=0; it used its default temperature"
        other = "max_tokens" if self.token_param == "max_completion_tokens" else "max_completion_tokens"
        if self.token_param in body and self.token_param in error and other not in self._refused:
            self._refused.add(self.token_param)
            note = f"server refused {self.token_param}; sent {other} instead"
            self.token_param = other
            return note
        return None

    async def answer(self, request: ProbeRequest) -> Reply:
        import orjson

        content = self._content(request, slots=True)
        notes: list[str] = list(self.notes)
        started = time.perf_counter()
        retry = 0
        encoded_for: tuple | None = None
        while True:
            # The body is encoded once, and again only after the server refused a parameter.
            state = (frozenset(self._refused), self.token_param)
            if state != encoded_for:
                body = self._body(request, content)
                data = _encoded(orjson.dumps(body), request.images)
                encoded_for = state
            exchange = await self._client.post("/chat/completions", data)
            if exchange.failure is not None:
                if not exchange.retriable:
                    raise TransportError(f"{exchange.failure} from {self.endpoint}: {exchange.detail}")
                retry = await self._wait_or_give_up(retry, exchange.failure, exchange.detail, None)
                continue
            if 200 <= exchange.status < 300:
                try:
                    completion = orjson.loads(exchange.body)
                    if not isinstance(completion, dict):
                        raise ValueError(f"a JSON {type(completion).__name__}, not an object")
                except ValueError as exc:  # a proxy's HTML page, a cut-off body: retried, then left for the next run
                    retry = await self._wait_or_give_up(retry, "malformed response body", str(exc), None)
                    continue
                break
            note = self._refusal_answered(exchange, body)
            if note is not None:
                notes.append(note)
                continue
            retry = await self._after_error(exchange, retry)
        if retry:
            notes.append(f"succeeded after {retry} retries")
        return self._reply(completion, time.perf_counter() - started, notes)

    async def check_endpoint(self) -> str | None:
        """Why no request can reach the server (nothing listening, unknown host), or None; asked once before a
        run sends (cfkit.probe.stopping)."""
        return await self._client.endpoint_problem(self.endpoint)

    # -- the Batch API (cfkit.backends.openai_batch) ----------------------------

    def batch_body(self, request: ProbeRequest) -> dict[str, Any]:
        """The body a batch line carries for ``request``: what :meth:`answer` would send first."""
        return self._body(request, self._content(request))

    def reply_from_completion(self, completion: dict[str, Any], *, price_factor: float = 1.0) -> Reply:
        """A completion a batch returned, read as :meth:`answer` reads a live one; the cost is
        ``price_factor`` times the live prices (batches are billed at a discount)."""
        return self._reply(completion, 0.0, list(self.notes), price_factor=price_factor)

    def batch_api(self) -> Any:
        """The files and batches endpoints of this backend's server, with its key (:mod:`cfkit.backends.openai_batch`)."""
        from cfkit.backends.openai_batch import BatchAPI

        return BatchAPI(self._client, self.endpoint)

    def _refusal_answered(self, exchange: Exchange, body: dict[str, Any]) -> str | None:
        """For a 400/422 that names a parameter we can do without, the note of dropping it; else None."""
        if exchange.status not in (400, 422):
            return None
        return self._drop_refused(error_text(exchange.body)[0], body)

    async def _after_error(self, exchange: Exchange, retry: int) -> int:
        """Raise for an error status that retrying cannot mend; otherwise wait and return the retry count."""
        status = exchange.status
        message = error_text(exchange.body)[1]
        if status in (401, 403):
            raise BackendUnavailable(
                f"openai backend: {self.endpoint} refused the key (HTTP {status}: {message}). "
                "Check the key in the environment variable, or --api-key-env."
            )
        if status == 404:
            raise BackendError(
                f"openai backend: {self.endpoint} has no model '{self.name}' (HTTP 404: {message}). "
                "Check the model name the server lists."
            )
        if 300 <= status < 400:
            location = redact_url(exchange.headers.get("location", "?"))
            raise TransportError(f"HTTP {status} from {self.endpoint}: redirects are not followed; give the "
                                 f"address it points to ({location}) as --base-url.")
        if not (status in (408, 409, 429) or status >= 500):
            raise TransportError(f"HTTP {status} from {self.endpoint}: {message}")
        if status in (429, 503) and self.on_overload is not None:
            self.on_overload(retry_after_seconds(exchange.headers))
        return await self._wait_or_give_up(retry, f"HTTP {status}", message, exchange.headers)

    async def _wait_or_give_up(self, retry: int, what: str, detail: str, headers: Any) -> int:
        """Sleep before the next attempt and return the new retry count, or raise when none is left."""
        delay = self._delay(retry, headers)
        if retry >= self.options.max_retries or delay > MAX_RETRY_AFTER_S:
            raise TransportError(f"{what} from {self.endpoint} after {retry + 1} attempts: {detail}")
        import asyncio

        await asyncio.sleep(delay)
        return retry + 1

    def _reply(self, completion: dict[str, Any], latency: float, notes: list[str], *,
               price_factor: float = 1.0) -> Reply:
        choices = completion.get("choices")
        if not isinstance(choices, list) or not choices:
            raise TransportError(f"{self.endpoint} returned a completion without choices.")
        message = choices[0].get("message") if isinstance(choices[0], dict) else None
        if not isinstance(message, dict):
            raise TransportError(f"{self.endpoint} returned a choice without a message.")
        usage = completion.get("usage")
        usage = _without_none(usage) if isinstance(usage, dict) else {}
        cost = None
        if self.priced and usage:
            tokens_in, tokens_out = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
            if isinstance(tokens_in, (int, float)) and isinstance(tokens_out, (int, float)):
                cost = price_factor * (tokens_in * self.options.price_in + tokens_out * self.options.price_out) / 1e6
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        refusal = message.get("refusal")
        refused = isinstance(refusal, str) and bool(refusal) and not text
        raw, raw_chars = _capped(refusal if refused else text)
        if raw_chars is not None:
            notes.append(f"replies longer than {MAX_STORED_CHARS:,} characters were stored cut to that length")
        reasoning = message.get("reasoning_content") or message.get("reasoning")  # vLLM / SGLang, OpenRouter
        reasoning = _capped(reasoning)[0] if isinstance(reasoning, str) and reasoning else None
        server_model = completion.get("model")
        fingerprint = completion.get("system_fingerprint")
        return Reply(raw=raw, usage=usage, latency_s=latency, cost_usd=cost, notes=tuple(notes), refused=refused,
                     reasoning=reasoning, server_model=server_model if isinstance(server_model, str) else None,
                     system_fingerprint=fingerprint if isinstance(fingerprint, str) else None, raw_chars=raw_chars)


#: Marks where an image's data URL goes in an encoded body; random, so that no prompt can hold it.
_SLOT_MARK = f"cfkit-image-{uuid.uuid4().hex}-"


def _slot(i: int) -> bytes:
    return f"{_SLOT_MARK}{i}.".encode("ascii")


def _encoded(body: bytes, images) -> bytes:
    """``body`` (JSON with each image's URL a :func:`_slot` marker) with the markers replaced by the data URLs.

    Base64 uses only characters JSON carries as they are, so the bytes are the JSON of the full body.
    """
    if not images:
        return body
    parts, rest = [], body
    for i, image in enumerate(images):
        head, found, rest = rest.partition(_slot(i))
        if not found:
            raise AssertionError(f"image slot {i} missing from the encoded body")
        parts += [head, f"data:{image.mime};base64,".encode("ascii"), base64.b64encode(image.data)]
    parts.append(rest)
    return b"".join(parts)
