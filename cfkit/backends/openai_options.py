"""The options of ``openai:MODEL`` (:mod:`cfkit.backends.openai_chat`): its pydantic model, built when first asked
for (``cfkit probe backends``, and values that are not plainly right), and the same fields as a
:class:`cfkit.options.PlainSpec`, which reads plainly right values (``--base-url``, ``-o timeout=30``) without
importing pydantic, on a run's path to its first request."""

from __future__ import annotations

from cfkit.options import PlainField, PlainSpec, plain_choice, plain_number, plain_text, plain_texts

_NO_CACHE = {"cache": False}


def openai_options() -> type:
    """The options model (pydantic), built when first asked for: the listings, and values not plainly right."""
    from typing import Literal

    from pydantic import Field

    from cfkit.backends import BackendOptions

    class OpenAIOptions(BackendOptions):
        base_url: str | list[str] | None = Field(
            None, description="server URL, e.g. http://localhost:8000/v1 (default: $OPENAI_BASE_URL, else the official "
                              "API); several (--base-url repeated): replicas of one model")
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
        replica_recheck: float = Field(30.0, gt=0, le=3600, description="with several --base-url: seconds "
                                                                        "between asking a replica left out of the "
                                                                        "run again whether it serves the model",
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
        price_cached_in: float | None = Field(None, ge=0, description="USD per million cached input tokens "
                                                                      "(default: price_in)",
                                              json_schema_extra=_NO_CACHE)

    OpenAIOptions.__module__, OpenAIOptions.__qualname__ = __name__, "OpenAIOptions"
    return OpenAIOptions


#: The same fields as :func:`openai_options`' model, read without pydantic when plainly right
#: (:class:`cfkit.options.PlainSpec`; a test holds the two equal).
PLAIN_OPTIONS = PlainSpec(
    base_url=PlainField(None, plain_texts),
    api_key_env=PlainField(None, plain_text(), cache=False),
    timeout=PlainField(120.0, plain_number(gt=0, le=3600), cache=False),
    max_retries=PlainField(4, plain_number(ge=0, le=20, integer=True), cache=False),
    backoff=PlainField(1.0, plain_number(ge=0), cache=False),
    replica_recheck=PlainField(30.0, plain_number(gt=0, le=3600), cache=False),
    json_schema=PlainField("auto", plain_choice("auto", "off")),
    detail=PlainField("auto", plain_choice("auto", "low", "high")),
    token_param=PlainField(None, plain_choice("max_completion_tokens", "max_tokens", optional=True)),
    price_in=PlainField(None, plain_number(ge=0, optional=True), cache=False),
    price_out=PlainField(None, plain_number(ge=0, optional=True), cache=False),
    price_cached_in=PlainField(None, plain_number(ge=0, optional=True), cache=False),
)
