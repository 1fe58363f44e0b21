"""``openai:MODEL`` — any server speaking the OpenAI Chat Completions API.

The official API, or an OpenAI-compatible server (vLLM, Ollama, SGLang, LM
Studio) through ``base_url`` / ``OPENAI_BASE_URL``. Images go as base64 data
URLs; the answer is constrained with a JSON-schema ``response_format`` when the
server accepts it, and asked for as plain text when the server rejects that
parameter (the reply records the fallback).

Keys: for the official endpoint the key comes from ``OPENAI_API_KEY`` (or
``api_key_env``). For any other server the key comes only from the variable
named by ``api_key_env``; without it a placeholder is sent, so an OpenAI key is
never handed to a third-party server by accident.

Retries are our own loop rather than the client's: the client's backoff
cannot be shortened without touching its private methods, and we need the
number of attempts for the record. 429, 408, 5xx, timeouts and connection
errors are retried with jittered exponential backoff, honouring
``Retry-After``; other 4xx are not retried.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import os
import random
import time
from typing import Any, ClassVar, Literal
from urllib.parse import urlparse

from pydantic import Field

from cfkit.backends import (
    BackendContext, BackendOptions, Capabilities, ProbeRequest, Reply, TransportError, cache_options, redact_url,
)
from cfkit.errors import BackendError, BackendUnavailable
from cfkit.hints import install_hint

OFFICIAL_URL = "https://api.openai.com/v1"
OFFICIAL_KEY_ENV = "OPENAI_API_KEY"
#: Sent as the key to a custom server when no ``api_key_env`` is given; most local servers ignore it.
PLACEHOLDER_KEY = "cfkit-no-key"
#: A server asking to wait longer than this is treated as a failure, not waited for.
MAX_RETRY_AFTER_S = 120.0

_NO_CACHE = {"cache": False}


class OpenAIOptions(BackendOptions):
    base_url: str | None = Field(None, description="server URL, e.g. http://localhost:8000/v1 "
                                                   "(default: $OPENAI_BASE_URL, else the official API)")
    api_key_env: str | None = Field(None, description="environment variable holding the key (default "
                                                      "OPENAI_API_KEY, for the official API only)",
                                    json_schema_extra=_NO_CACHE)
    timeout: float = Field(120.0, gt=0, description="seconds per attempt", json_schema_extra=_NO_CACHE)
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


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds a response asks us to wait (``retry-after-ms``, ``retry-after`` as seconds or a date)."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / divisor)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, parsed.timestamp() - time.time())
    return None


def _mentions(exc: Exception, word: str) -> bool:
    text = str(getattr(exc, "message", "")) + " " + str(getattr(exc, "body", "")) + " " + str(exc)
    return word in text


class OpenAIBackend:
    """Chat Completions over HTTP, one request per probe question."""

    kind: ClassVar[str] = "openai"
    capabilities: ClassVar[Capabilities] = Capabilities(images=True, multi_image=True, json_schema=True, remote=True)
    Options: ClassVar[type[OpenAIOptions]] = OpenAIOptions
    requires: ClassVar[tuple[str, ...]] = ("openai",)  # checked before a run opens (cfkit.backends.check_installed)
    extra: ClassVar[str] = "openai"

    def __init__(self, name: str, options: OpenAIOptions, context: BackendContext | None = None):
        # 1. Where requests go, and which key they carry.
        self.name = name
        self.model = f"{self.kind}:{name}"
        self.options = options
        self.base_url = (options.base_url or os.environ.get("OPENAI_BASE_URL") or OFFICIAL_URL).rstrip("/")
        self.endpoint = redact_url(self.base_url)  # recorded with the run
        self.official = urlparse(self.base_url).hostname == urlparse(OFFICIAL_URL).hostname
        key_env = options.api_key_env or (OFFICIAL_KEY_ENV if self.official else None)
        if key_env is None:
            self._api_key = PLACEHOLDER_KEY
        else:
            key = os.environ.get(key_env, "")
            if not key:
                hint = "" if options.api_key_env else " or name another variable with --api-key-env"
                raise BackendUnavailable(
                    f"openai backend: ${key_env} is not set; export your key in it{hint} "
                    f"(server {self.base_url})."
                )
            self._api_key = key
        # 2. What changes answers (the cache key), and prices.
        self.token_param = options.token_param or ("max_completion_tokens" if self.official else "max_tokens")
        self.cache_identity = cache_options(options) | {"base_url": self.base_url, "token_param": self.token_param}
        self.priced = options.price_in is not None and options.price_out is not None
        # Parameters this server refused; later requests leave them out (or use the other token limit).
        self._refused: set[str] = {"response_format"} if options.json_schema == "off" else set()
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    # -- the client ---------------------------------------------------------

    def _client_for_this_loop(self):
        """An AsyncOpenAI client bound to the running event loop (its connection pool cannot cross loops)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            try:
                import openai
            except ImportError as exc:
                raise BackendUnavailable(
                    f"openai backend: the 'openai' package is not installed. Run: {install_hint('openai')}"
                ) from exc
            from openai.types.chat import ChatCompletion

            self._completion_type = ChatCompletion
            self._client = openai.AsyncOpenAI(api_key=self._api_key, base_url=self.base_url,
                                              timeout=self.options.timeout, max_retries=0)
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    # -- one request ---------------------------------------------------------

    def _body(self, request: ProbeRequest) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": request.user}]
        for image in request.images:
            url = f"data:{image.mime};base64,{base64.b64encode(image.data).decode('ascii')}"
            part: dict[str, Any] = {"url": url}
            if self.options.detail != "auto":
                part["detail"] = self.options.detail
            content.append({"type": "image_url", "image_url": part})
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

    def _drop_refused(self, exc: Exception, body: dict[str, Any]) -> str | None:
        """When a 400 names a parameter we can do without, stop sending it; returns the note to record."""
        if "response_format" in body and _mentions(exc, "response_format"):
            self._refused.add("response_format")
            return "server refused response_format; asked for plain text"
        if "temperature" in body and _mentions(exc, "temperature"):
            self._refused.add("temperature")
            return "server refused temperature=0; it used its default temperature"
        other = "max_tokens" if self.token_param == "max_completion_tokens" else "max_completion_tokens"
        if self.token_param in body and _mentions(exc, self.token_param) and other not in self._refused:
            self._refused.add(self.token_param)
            note = f"server refused {self.token_param}; sent {other} instead"
            self.token_param = other
            return note
        return None

    async def answer(self, request: ProbeRequest) -> Reply:
        import openai

        client = self._client_for_this_loop()
        notes: list[str] = []
        started = time.perf_counter()
        retry = 0
        while True:
            body = self._body(request)
            try:
                # client.post is the client's public call for raw bodies. chat.completions.create would
                # send the same JSON, but first walks every nested dict of the body against its typed
                # parameters (for renamed keys; chat has none), which costs milliseconds of CPU a request.
                completion = await client.post("/chat/completions", cast_to=self._completion_type, body=body)
                break
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                note = self._drop_refused(exc, body)
                if note is not None:
                    notes.append(note)
                    continue
                raise TransportError(f"HTTP {exc.status_code} from {self.base_url}: {exc.message}") from exc
            except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
                raise BackendUnavailable(
                    f"openai backend: {self.base_url} refused the key (HTTP {exc.status_code}: {exc.message}). "
                    "Check the key in the environment variable, or --api-key-env."
                ) from exc
            except openai.NotFoundError as exc:
                raise BackendError(
                    f"openai backend: {self.base_url} has no model '{self.name}' (HTTP 404: {exc.message}). "
                    "Check the model name the server lists."
                ) from exc
            except (openai.APIConnectionError, openai.APIStatusError) as exc:
                # APITimeoutError is an APIConnectionError.
                status = getattr(exc, "status_code", None)
                retriable = status is None or status in (408, 409, 429) or status >= 500
                headers = getattr(getattr(exc, "response", None), "headers", None)
                what = f"HTTP {status}" if status is not None else type(exc).__name__
                if not retriable:
                    raise TransportError(f"{what} from {self.base_url}: {getattr(exc, 'message', exc)}") from exc
                delay = self._delay(retry, headers)
                if retry >= self.options.max_retries or delay > MAX_RETRY_AFTER_S:
                    raise TransportError(
                        f"{what} from {self.base_url} after {retry + 1} attempts: {getattr(exc, 'message', exc)}"
                    ) from exc
                retry += 1
                await asyncio.sleep(delay)
            except (ValueError, openai.APIResponseValidationError) as exc:
                # A 200 whose body is not a Chat Completions object (a proxy's HTML page, a cut-off
                # body): retried like a transport failure, then left for the next run.
                if retry >= self.options.max_retries:
                    raise TransportError(
                        f"malformed response body from {self.base_url} after {retry + 1} attempts: {exc}"
                    ) from exc
                await asyncio.sleep(self._delay(retry, None))
                retry += 1
        latency = time.perf_counter() - started
        if retry:
            notes.append(f"succeeded after {retry} retries")
        return self._reply(completion, latency, notes)

    def _reply(self, completion: Any, latency: float, notes: list[str]) -> Reply:
        if not completion.choices:
            raise TransportError(f"{self.base_url} returned a completion without choices.")
        message = completion.choices[0].message
        usage = completion.usage.model_dump(exclude_none=True) if completion.usage is not None else {}
        cost = None
        if self.priced and usage:
            cost = (usage.get("prompt_tokens", 0) * self.options.price_in
                    + usage.get("completion_tokens", 0) * self.options.price_out) / 1e6
        refusal = getattr(message, "refusal", None)
        served = {"server_model": getattr(completion, "model", None),
                  "system_fingerprint": getattr(completion, "system_fingerprint", None)}
        if refusal and not message.content:
            return Reply(raw=refusal, usage=usage, latency_s=latency, cost_usd=cost, notes=tuple(notes), refused=True,
                         **served)
        return Reply(raw=message.content or "", usage=usage, latency_s=latency, cost_usd=cost, notes=tuple(notes),
                     **served)
