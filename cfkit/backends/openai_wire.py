"""The Chat Completions wire format as the openai backend writes and reads it: image slots in an encoded body,
and a completion read into a :class:`~cfkit.backends.Reply`.

A reply's text longer than :data:`MAX_STORED_CHARS` is cut to that length;
``Reply.raw_chars`` keeps its full length. A reasoning text the server returns
beside the answer (``reasoning_content``, or ``reasoning``) goes to
``Reply.reasoning`` (cut the same way), never into the graded text.

Images are base64-encoded with pybase64 (SIMD, about 25 times faster than the
standard library's encoder, which took half of a fast run's CPU) where it is
installed (the ``openai`` extra brings it); the bytes are the same.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from typing import Any

from cfkit.backends import Reply, TransportError
from cfkit.money import AT_INPUT_RATE, cached_count, token_cost
from cfkit.option_words import PLAIN, OptionWords, key_refused

#: The longest reply text stored (characters); a longer one is cut, its full length kept in ``raw_chars``.
MAX_STORED_CHARS = 256 * 1024

#: Marks where an image's data URL goes in an encoded body; random, so that no prompt can hold it.
_SLOT_MARK = f"cfkit-image-{uuid.uuid4().hex}-"


def without_none(value: Any) -> Any:
    """``value`` with every None-valued key of every nested dict removed (the usage record as the SDK kept it)."""
    if isinstance(value, dict):
        return {k: without_none(v) for k, v in value.items() if v is not None}
    return value


def capped(text: str) -> tuple[str, int | None]:
    """``text`` cut to :data:`MAX_STORED_CHARS`, and its full length when it was cut."""
    if len(text) <= MAX_STORED_CHARS:
        return text, None
    return text[:MAX_STORED_CHARS], len(text)


#: The base64 encoder in use, found on the first :func:`b64encode`.
_encoder: Callable[[bytes], bytes] | None = None


def b64encode(data: bytes) -> bytes:
    """``data`` as standard base64 (padded, no newlines): pybase64's encoder where it is installed, else the
    standard library's; the same bytes either way."""
    global _encoder
    if _encoder is None:
        try:
            from pybase64 import b64encode as found
        except ImportError:
            found = base64.b64encode
        _encoder = found
    return _encoder(data)


def image_base64(image) -> bytes:
    """The base64 of an image's bytes: the one it holds (:class:`~cfkit.images.EncodedImage`), else encoded now."""
    encoded = getattr(image, "base64", None)
    return encoded if encoded is not None else b64encode(image.data)


#: The markers of the first few image slots, made once.
_SLOTS = [f"{_SLOT_MARK}{i}.".encode("ascii") for i in range(8)]


def slot(i: int) -> bytes:
    return _SLOTS[i] if i < len(_SLOTS) else f"{_SLOT_MARK}{i}.".encode("ascii")


def encoded_body(body: bytes, images) -> bytes:
    """``body`` (JSON with each image's URL a :func:`slot` marker) with the markers replaced by the data URLs.

    Base64 uses only characters JSON carries as they are, so the bytes are the JSON of the full body.
    """
    return b"".join(body_parts(body, images))


def body_parts(body: bytes, images) -> list[bytes]:
    """:func:`encoded_body` as the pieces it is joined from: the text before each image with the image's data
    URL prefix, the image's base64, and the text after the last image. The HTTP client writes them one after
    another (:meth:`cfkit.backends.http.JSONClient.post`), so the body is never copied whole into one buffer
    before it reaches the socket."""
    if not images:
        return [body]
    parts, rest = [], body
    for i, image in enumerate(images):
        head, found, rest = rest.partition(slot(i))
        if not found:
            raise AssertionError(f"image slot {i} missing from the encoded body")
        parts += [head + f"data:{image.mime};base64,".encode("ascii"), image_base64(image)]
    parts.append(rest)
    return parts


#: Said when a priced reply came without usable token counts (missing, negative, text): its cost is not known.
UNREPORTED_NOTE = ("{where} reported no usable token counts ({fields}) for some replies: their cost is not known, "
                   "so the costs shown are at least what was spent, and --max-cost stops sending")


#: Said when replies reported cached input and no price for it was given (:func:`cfkit.money.token_cost`).
CACHED_AT_FULL_NOTE = ("{where} reported cached input tokens ({field}) and no price for cached input was given: "
                       f"they were {AT_INPUT_RATE}, so the costs shown may be higher than what was billed (give "
                       "-o price_cached_in=USD_PER_M_TOKENS, or cached_input in cfkit.toml [probe.prices])")
#: Said when a cached token count cannot be used (text, negative, more than the input): the full input rate.
UNUSABLE_CACHED_NOTE = ("{where} reported a cached input token count that is not a whole number of zero or more "
                        f"within the input tokens ({{field}}) for some replies: their whole input was {AT_INPUT_RATE}")

_CACHED_FIELD = "usage.prompt_tokens_details.cached_tokens"

#: (USD per million input tokens, output tokens, cached input tokens or None): what a backend prices replies at.
TokenPrices = tuple[float, float, float | None]


def token_prices(options: Any, factor: float = 1.0) -> TokenPrices | None:
    """A backend's ``price_in``, ``price_out`` and ``price_cached_in`` options times ``factor`` (batch prices);
    None unless both ``price_in`` and ``price_out`` are given."""
    if options.price_in is None or options.price_out is None:
        return None
    cached = options.price_cached_in
    return factor * options.price_in, factor * options.price_out, None if cached is None else factor * cached


#: The kinds of error object a 200 reply may carry that retrying can mend, as the status they stand for.
_ERROR_KINDS = {"rate_limit_exceeded": 429, "rate_limit_error": 429, "overloaded_error": 503, "server_error": 500}


def error_status(completion: dict[str, Any]) -> int | None:
    """The HTTP status an error object in a 200 reply stands for when retrying can mend it (a rate limit, an
    overloaded or failing server: its numeric ``code``, or its ``type`` or ``code`` by name), else None: a
    completion, or an error no retry mends (said as it is by :func:`reply_from_completion`)."""
    error = completion.get("error")
    if not isinstance(error, dict) or completion.get("choices"):
        return None
    for field in ("code", "status"):
        code = error.get(field)
        if isinstance(code, str) and code.isdigit():
            code = int(code)
        if isinstance(code, int) and not isinstance(code, bool) and (code in (408, 409, 429) or 500 <= code < 600):
            return code
    for field in ("type", "code"):
        kind = error.get(field)
        if isinstance(kind, str) and kind in _ERROR_KINDS:
            return _ERROR_KINDS[kind]
    return None


def reply_from_completion(completion: dict[str, Any], latency: float, notes: list[str], *,
                          prices: TokenPrices | None, where: str) -> Reply:
    """A completion read into a reply; ``prices`` (USD per million input, output and cached input tokens) give its
    cost: the input tokens the server says it read from its prompt cache (``usage.prompt_tokens_details
    .cached_tokens``, a part of ``prompt_tokens``) at the cached price, the rest at the input price."""
    choices = completion.get("choices")
    if not isinstance(choices, list) or not choices:
        error = completion.get("error")  # some servers and proxies answer 200 with the error object
        said = error.get("message") if isinstance(error, dict) else error if isinstance(error, str) else None
        if said:
            raise TransportError(f"{where} answered with an error instead of a completion: "
                                 f"{' '.join(str(said).split())[:300]}")
        raise TransportError(f"{where} returned a completion without choices.")
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    if not isinstance(message, dict):
        raise TransportError(f"{where} returned a choice without a message.")
    usage = completion.get("usage")
    usage = without_none(usage) if isinstance(usage, dict) else {}
    cost = None
    if prices is not None:
        tokens_in = usage.get("prompt_tokens")
        details = usage.get("prompt_tokens_details")
        cached = cached_count(details.get("cached_tokens") if isinstance(details, dict) else None, tokens_in)
        if cached is None:
            notes.append(UNUSABLE_CACHED_NOTE.format(where=where, field=_CACHED_FIELD))
            cached = 0
        elif cached and prices[2] is None:
            notes.append(CACHED_AT_FULL_NOTE.format(where=where, field=_CACHED_FIELD))
        cost = token_cost(tokens_in, usage.get("completion_tokens"), prices[0], prices[1], cached, prices[2])
        if cost is None:
            notes.append(UNREPORTED_NOTE.format(where=where, fields="usage.prompt_tokens and completion_tokens"))
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    refusal = message.get("refusal")
    refused = isinstance(refusal, str) and bool(refusal) and not text
    raw, raw_chars = capped(refusal if refused else text)
    if raw_chars is not None:
        notes.append(f"replies longer than {MAX_STORED_CHARS:,} characters were stored cut to that length")
    reasoning = message.get("reasoning_content") or message.get("reasoning")  # vLLM / SGLang, OpenRouter
    reasoning = capped(reasoning)[0] if isinstance(reasoning, str) and reasoning else None
    server_model = completion.get("model")
    fingerprint = completion.get("system_fingerprint")
    truncated = choices[0].get("finish_reason") == "length"  # stopped at max_tokens, not at its end
    return Reply(raw=raw, usage=usage, latency_s=latency, cost_usd=cost, notes=tuple(notes), refused=refused,
                 reasoning=reasoning, server_model=server_model if isinstance(server_model, str) else None,
                 system_fingerprint=fingerprint if isinstance(fingerprint, str) else None, raw_chars=raw_chars,
                 truncated=truncated)


def raise_unless_retriable(exchange: Any, where: str, model: str,
                           on_overload: Callable[[float | None], None] | None, words: OptionWords = PLAIN, *,
                           key_sent: bool = True) -> None:
    """Raise for an error status of ``exchange`` (:class:`cfkit.backends.http.Exchange`) that retrying cannot
    mend (``model``: the name asked for): a billing refusal (:mod:`cfkit.backends.billing`), the key, the model,
    a redirect, another 4xx; tell ``on_overload`` of a 429/503. ``words``: how the command that built the
    backend sets an option (its hints name that); ``key_sent``: a key went with the request."""
    from cfkit.backends.http import error_text, server_wait
    from cfkit.endpoints import redact_url
    from cfkit.errors import BackendError, BackendUnavailable, QuotaRefused

    from cfkit.backends.billing import billing_refusal, refusal_line

    status = exchange.status
    message = error_text(exchange.body)[1]
    if billing_refusal(status, exchange.body, message):  # no credit or quota left: no retry can help
        raise QuotaRefused(refusal_line("openai backend", where, status, message))
    if status in (401, 403):
        raise BackendUnavailable(key_refused("openai backend", where, status, message, words, sent=key_sent))
    if status == 404:
        raise BackendError(
            f"openai backend: {where} has no model '{model}' (HTTP 404: {message}). "
            "Check the model name the server lists."
        )
    if 300 <= status < 400:
        location = redact_url(exchange.headers.get("location", "?"))
        raise TransportError(f"HTTP {status} from {where}: redirects are not followed; give the "
                             f"address it points to ({location}) as {words.of('base_url')}.")
    if not (status in (408, 409, 429) or status >= 500):
        raise TransportError(f"HTTP {status} from {where}: {message}")
    if status in (429, 503) and on_overload is not None:
        on_overload(server_wait(exchange.headers))
