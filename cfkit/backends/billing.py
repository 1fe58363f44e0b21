"""A provider's answer that the account cannot pay: no credit, no quota, billing not set up.

No retry mends it (the account must be topped up), so the backends raise
:class:`~cfkit.errors.QuotaRefused` at once (with :func:`refusal_line`): it stops the run (or the judge, or a
batch's submission) as a refused key does, instead of each request being retried
and counted failed. A plain rate limit (HTTP 429 with ``rate_limit_exceeded``, or
no code) is not this: it is retried as before.

What providers answer (seen, or documented):

* OpenAI: HTTP 429 (sometimes 400 or 403) with ``code``/``type``
  ``insufficient_quota`` ("You exceeded your current quota, please check your
  plan and billing details"), ``billing_hard_limit_reached``,
  ``billing_not_active``;
* Anthropic: HTTP 400 ``invalid_request_error`` "Your credit balance is too low
  to access the Anthropic API", or a ``billing_error``;
* OpenAI-compatible gateways (OpenRouter, DeepSeek, …): HTTP 402 Payment
  Required ("Insufficient credits", "Insufficient Balance").
"""

from __future__ import annotations

from typing import Any

#: Error codes and types by which a provider says the account cannot pay.
BILLING_KINDS = frozenset({"insufficient_quota", "billing_hard_limit_reached", "billing_not_active",
                           "billing_error", "insufficient_credits", "insufficient_balance", "payment_required"})

#: What a provider's error message says when the account is out of credit (compared in lower case).
BILLING_PHRASES = ("exceeded your current quota", "credit balance is too low", "insufficient credit",
                   "insufficient balance", "insufficient_quota")


def _error_object(body: Any) -> dict[str, Any] | None:
    """The error object of an error body (bytes of JSON, or already decoded), or None."""
    if isinstance(body, (bytes, bytearray, memoryview)):
        import orjson

        try:
            body = orjson.loads(bytes(body))
        except orjson.JSONDecodeError:
            return None
    if not isinstance(body, dict):
        return None
    error = body.get("error", body)
    return error if isinstance(error, dict) else None


def billing_refusal(status: int | None, body: Any, message: str = "") -> bool:
    """Whether an error answer (HTTP ``status``, its ``body``: bytes or decoded JSON; ``message``: what the server
    said, when read already) says the account has no credit or quota left. HTTP 402 always does; a 4xx or a 200
    (a proxy's error object) does when its error code or type names billing or quota, or its message says so."""
    if status == 402:
        return True
    if status is None or not (status == 200 or 400 <= status < 500):
        return False
    error = _error_object(body)
    if status == 200 and not (isinstance(body, dict) and body.get("error") is error):
        return False  # a 200 says so only in an error object: a completion's own fields are not read as one
    said = [message]
    if error is not None:
        kinds = {str(error.get(field)).lower() for field in ("code", "type") if error.get(field) is not None}
        if kinds & BILLING_KINDS:
            return True
        if isinstance(error.get("message"), str):
            said.append(error["message"])
    text = " ".join(said).lower()
    return any(phrase in text for phrase in BILLING_PHRASES)


#: What a run does once the account has credit again (``refusal_line``'s default ``then``).
ASK_THE_REST = "run the same command again: what was answered is kept, and only the rest is asked"
#: What to do about an account that cannot pay (each line about one ends so, with what to run then).
ADD_CREDIT = "Add credit to the account (or use a key of one that has it), then "


def said(status: int | None, message: str) -> str:
    """What a billing refusal said, as every line about one gives it: ``(HTTP 429: …): the account has no credit
    or quota left`` (``status`` None: an error object, as a proxy's 200 or a batch result carries it)."""
    answered = f"HTTP {status}" if status is not None else "an error object"
    return f"({answered}: {message.rstrip('.')}): the account has no credit or quota left"


def refusal_line(who: str, where: str, status: int | None, message: str, then: str = ASK_THE_REST) -> str:
    """The line of the :class:`~cfkit.errors.QuotaRefused` that stops a run on a billing refusal: who refused,
    what it said, and what to do (``then``: what to run once the account has credit)."""
    return (f"{who}: {where} refused the request for quota or billing {said(status, message)}, so it was not "
            f"retried. {ADD_CREDIT}{then}.")


def left_out_why(status: int | None, message: str) -> str:
    """Why a replica that refused a request for quota or billing is left out of the run (its line and the run's
    notes: :mod:`cfkit.backends.replicas`)."""
    return f"it refused a request for quota or billing {said(status, message)}"


def sdk_said(exc: Any) -> str:
    """What the server said in an SDK's status error (Anthropic's): its error object's message, else the SDK's line
    (short)."""
    error = _error_object(getattr(exc, "body", None))
    text = error.get("message") if error is not None else None
    return " ".join(str(text if isinstance(text, str) and text else getattr(exc, "message", exc)).split())[:300]


def result_refusal(status: int | None, body: Any, error: Any) -> tuple[int | None, str] | None:
    """What one result of a batch says when the account could not pay for its request: (its HTTP status, or None
    for an error object; the provider's message), else None. ``error``: the line's error (OpenAI's ``{"code",
    "message"}``; an Anthropic result ``errored``, as :mod:`cfkit.backends.anthropic_batch` writes it, ``{"code":
    its error type, "message"}``; vLLM's nested ``{"error": {…}}``, or a string); ``status`` and ``body``: its
    ``response`` (an error status whose body names billing or quota: :func:`billing_refusal`)."""
    if isinstance(error, dict):
        inner = error.get("error") if isinstance(error.get("error"), dict) else error
        message = inner.get("message") if isinstance(inner.get("message"), str) else ""
        # An error object has no HTTP status of its own: it is read as a 4xx's error body would be.
        if billing_refusal(400, {"error": {"code": inner.get("code"), "type": inner.get("type"), "message": message}}):
            return None, " ".join(message.split())[:300] or str(inner.get("code") or inner.get("type"))
    elif isinstance(error, str) and billing_refusal(400, {"error": {"message": error}}):
        return None, " ".join(error.split())[:300]
    if isinstance(status, int) and status != 200 and billing_refusal(status, body):
        inner = _error_object(body) or {}
        message = inner.get("message") if isinstance(inner.get("message"), str) else ""
        return status, " ".join(message.split())[:300] or "no message"
    return None


#: What ``probe collect`` says to run once the account has credit again (the failed requests are sent again).
ASK_THE_FAILED = ("run the same 'cfkit probe run' again: what was answered is kept, and only the requests without "
                  "a reply are asked")


def unpaid_results_line(where: str, count: int, status: int | None, message: str,
                        then: str = ASK_THE_FAILED) -> str:
    """The one line said when the results of a batch (``where``: which) say the account could not pay for
    ``count`` of its requests (``status`` and ``message``: the first one's, :func:`result_refusal`): they are
    stored as failed, and ``then`` asks them again."""
    from cfkit.plural import agree, plural

    return (f"{where}: the provider refused {plural(count, 'request')} for quota or billing {said(status, message)}; "
            f"{agree(count, 'they')} {agree(count, 'are')} stored as failed (not answered). {ADD_CREDIT}{then}.")
