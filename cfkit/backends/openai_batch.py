"""The OpenAI Batch API, for ``cfkit probe run --batch`` and ``cfkit probe collect``: files and batches.

The wire format is OpenAI's documented one, on the same server, key and
endpoint policy as the Chat Completions backend (:mod:`cfkit.endpoints`):

- ``POST /files`` (``multipart/form-data``: ``purpose=batch`` and ``file``, a
  JSONL file with one request a line: ``{"custom_id", "method": "POST", "url":
  "/v1/chat/completions", "body": {…}}``; at most 50,000 lines and 200 MB)
  answers a file object (``id``);
- ``POST /batches`` (``input_file_id``, ``endpoint``, ``completion_window``
  ``"24h"``, ``metadata``) answers a batch object;
- ``GET /batches/{id}`` answers it again: ``status`` (``validating``,
  ``in_progress``, ``finalizing``, ``completed``, or ``failed``, ``expired``,
  ``cancelling``, ``cancelled``), ``output_file_id``, ``error_file_id``,
  ``request_counts`` and ``errors``;
- ``GET /files/{id}/content`` answers the output or error file: one line a
  request, ``{"id", "custom_id", "response": {"status_code", "request_id",
  "body"}, "error": {"code", "message"} | null}``;
- ``POST /batches/{id}/cancel`` asks the server to stop a batch (it goes
  ``cancelling``, then ``cancelled`` with what it answered so far).

A batch the server answers 404 for is described as :data:`NOT_FOUND` (it
deleted or forgot it, or the URL is another server's) rather than raised, so
``probe collect`` can say so and go on with the run's other batches.

Each call is retried (a connection error, a timeout, 429, 5xx) up to
:data:`ATTEMPTS` times, honouring ``Retry-After``, within one total deadline
for all its attempts together; 401/403 means the key
(:class:`BackendUnavailable`), an answer that the account cannot pay (HTTP 402,
``insufficient_quota``: :mod:`cfkit.backends.billing`) is a :class:`QuotaRefused`
at once, anything else that fails is a
:class:`TransportError` (nothing is lost: the batch ids are in the store and
``cfkit probe collect`` can be run again).

What the server answers is data: a success that is not JSON (a proxy's or a
captive portal's page) is a :class:`TransportError` of one line, and every
id it chooses (batch, file) must look like an id (:func:`server_id`) before
it is stored or put, quoted, into a request path.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cfkit.backends.batch_api import FILE_DEADLINE_S, FINAL, NOT_FOUND, BatchAPI, BatchInfo
from cfkit.backends.billing import billing_refusal, refusal_line
from cfkit.backends.http import Exchange, JSONClient, error_text, retry_after_seconds
from cfkit.errors import BackendUnavailable, QuotaRefused, TransportError
from cfkit.option_words import PLAIN, OptionWords, key_refused

__all__ = ["FINAL", "NOT_FOUND", "BatchInfo", "OpenAIBatches"]  # FINAL, NOT_FOUND, BatchInfo: cfkit.backends.batch_api's
#: The documented limits of one batch input file.
MAX_LINES = 50_000
MAX_FILE_BYTES = 200 * 1024 * 1024
#: The endpoint every line of a cfkit batch asks.
ENDPOINT = "/v1/chat/completions"
#: Attempts per call, and the largest output file read (bytes).
ATTEMPTS = 4
MAX_OUTPUT_BYTES = 2 * 1024 ** 3
#: Seconds any other call may take, all its attempts together.
CALL_DEADLINE_S = 300.0
#: What a server-chosen id may be: OpenAI's look like ``batch_6721…`` and ``file-abc…``.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:=+-]{0,255}")


def server_id(value: Any, what: str, endpoint: str) -> str:
    """``value`` if it is a plain id (letters, digits and ``_ . : = + -``, no ``..``); else a TransportError."""
    if isinstance(value, str) and _ID.fullmatch(value) and ".." not in value:
        return value
    shown = repr(value)[:80]
    raise TransportError(f"{endpoint} answered a {what} id that is not a plain id ({shown}); cfkit does not put it "
                         f"in a request path. Check the base URL ({endpoint}): is this the provider's API?")


def _json(exchange: Exchange, what: str, endpoint: str) -> Any:
    """The body of a successful answer as JSON, or one line saying it was something else."""
    import orjson

    try:
        return orjson.loads(exchange.body)
    except orjson.JSONDecodeError:
        start = exchange.body[:60].decode("utf-8", "replace").split("\n")[0].strip()
        kind = exchange.headers.get("content-type", "no content type") if exchange.headers else "no content type"
        raise TransportError(f"{endpoint} answered {what} with HTTP {exchange.status} but not JSON ({kind}: "
                             f"{start!r}); a proxy or login page may be in the way. Check the base URL.") from None


def _info(data: Any, endpoint: str) -> BatchInfo:
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not isinstance(data.get("status"), str):
        raise TransportError(f"{endpoint} answered a batch request with something that is not a batch object.")
    for name in ("input_file_id", "output_file_id", "error_file_id"):
        if data.get(name) is not None:
            server_id(data[name], name.removesuffix("_id").replace("_", " "), endpoint)
    counts = data.get("request_counts") if isinstance(data.get("request_counts"), dict) else {}
    errors = data.get("errors") if isinstance(data.get("errors"), dict) else {}
    messages = tuple(f"{e.get('code') or 'error'}: {e.get('message') or ''}".strip()
                     + (f" (line {e['line']})" if e.get("line") is not None else "")
                     for e in errors.get("data") or () if isinstance(e, dict))
    return BatchInfo(id=server_id(data["id"], "batch", endpoint), status=data["status"], input_file_id=data.get("input_file_id"),
                     output_file_id=data.get("output_file_id"), error_file_id=data.get("error_file_id"),
                     counts={k: int(v) for k, v in counts.items() if isinstance(v, int)}, errors=messages)


class OpenAIBatches(BatchAPI):
    """The files and batches endpoints of one server, through the backend's pooled client."""

    def __init__(self, client: JSONClient, endpoint: str, *, model: str = "", file_deadline_s: float = FILE_DEADLINE_S,
                 words: OptionWords = PLAIN, key_sent: bool = True):
        self.client = client
        self.key_sent = key_sent  # a key goes with each call (else a 401 says none was sent)
        self.words = words  # how the command that built the backend sets an option, for hints
        self.endpoint = endpoint  # as shown to people (credentials redacted)
        self.model = model  # the name the batch's lines ask for
        self.file_deadline_s = file_deadline_s  # a whole download, every attempt together

    async def check_model(self) -> str | None:
        """Before anything is uploaded: refuse, in one line, a model the server lists its models without (a typo,
        the wrong server), by the check a replica set's start-up makes
        (:func:`~cfkit.backends.model_lists.check_served`); why it could not tell, where the server gave no list."""
        from cfkit.backends.model_lists import check_served

        return await check_served(self.client, self.endpoint, self.model, who="openai backend",
                                  url_flag=self.words.of("base_url"))

    async def _call(self, what: str, method: str, path: str, prepare: Callable[[], tuple[Any, dict]] | None = None,
                    *, deadline: float = CALL_DEADLINE_S, whole: bool = False, missing_ok: bool = False,
                    **options: Any) -> Exchange:
        """One call, retried while retrying can help, within ``deadline`` seconds in all; raises for an answer
        that is not a success (but returns a 404 when ``missing_ok``). Each attempt also keeps to the backend's
        own deadline (``-o timeout``), unless ``whole`` (a file, which may take all the time there is).

        ``prepare`` makes the body and its headers afresh for each attempt (an upload streams its file once).
        """
        last = ""
        extra = options.pop("headers", {})
        ends = time.monotonic() + deadline
        for attempt in range(ATTEMPTS):
            left = ends - time.monotonic()
            if left <= 0:
                last += f"; {deadline:g} s in all were spent" if last else f"nothing within {deadline:g} s"
                break
            body, headers = prepare() if prepare is not None else (None, {})
            exchange = await self.client.request(method, path, body, headers=headers | extra,
                                                 deadline=left if whole else min(left, self.client.deadline),
                                                 **options)
            if exchange.failure is None and (200 <= exchange.status < 300 or (missing_ok and exchange.status == 404)):
                return exchange
            if exchange.failure is not None:
                last = f"{exchange.failure}: {exchange.detail}"
                if not exchange.retriable:
                    break
                wait = 2.0 ** attempt
            else:
                message = error_text(exchange.body)[1]
                if billing_refusal(exchange.status, exchange.body, message):  # no retry can help
                    raise QuotaRefused(refusal_line("openai batch", self.endpoint, exchange.status,
                                                    f"while {what}: {message}"))
                if exchange.status in (401, 403):
                    raise BackendUnavailable(key_refused("openai batch", self.endpoint, exchange.status,
                                                         f"while {what}: {message}", self.words,
                                                         sent=self.key_sent))
                last = f"HTTP {exchange.status}: {message}"
                if not (exchange.status in (408, 409, 429) or exchange.status >= 500):
                    break
                wait = retry_after_seconds(exchange.headers) or 2.0 ** attempt
            if attempt + 1 < ATTEMPTS:
                await asyncio.sleep(max(0.0, min(wait, 60.0, ends - time.monotonic())))
        raise TransportError(f"{what} at {self.endpoint} failed ({last}).")

    async def upload(self, path: Path) -> str:
        """Upload a batch input file (streamed from disk); returns its file id."""
        import orjson

        from cfkit.backends.aiohttp_import import aiohttp as aiohttp_module

        aiohttp = aiohttp_module()

        def form() -> tuple[Any, dict]:
            writer = aiohttp.MultipartWriter("form-data")
            writer.append("batch").set_content_disposition("form-data", name="purpose")
            writer.append(path.open("rb")).set_content_disposition("form-data", name="file", filename=path.name)
            return writer, {"Content-Type": writer.headers["Content-Type"]}

        exchange = await self._call(f"uploading {path.name}", "POST", "/files", form, deadline=FILE_DEADLINE_S,
                                    whole=True)
        data = _json(exchange, f"the upload of {path.name}", self.endpoint)
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            raise TransportError(f"{self.endpoint} answered the upload of {path.name} without a file id.")
        return server_id(data["id"], "file", self.endpoint)

    async def create(self, file_id: str, *, metadata: dict[str, str]) -> BatchInfo:
        """Start a batch over an uploaded file, to be done within 24 hours."""
        import orjson

        data = orjson.dumps({"input_file_id": file_id, "endpoint": ENDPOINT, "completion_window": "24h",
                             "metadata": metadata})
        exchange = await self._call("creating a batch", "POST", "/batches", lambda: (data, {}))
        return _info(_json(exchange, "the creation of a batch", self.endpoint), self.endpoint)

    async def get(self, batch_id: str) -> BatchInfo:
        """Where a batch stands now (:data:`NOT_FOUND`, with the server's words, when it answers 404)."""
        exchange = await self._call(f"asking about batch {batch_id}", "GET", f"/batches/{_quoted(batch_id)}",
                                    missing_ok=True)
        if exchange.status == 404:
            return BatchInfo(id=batch_id, status=NOT_FOUND, errors=(f"HTTP 404: {error_text(exchange.body)[1]}",))
        return _info(_json(exchange, f"a question about batch {batch_id}", self.endpoint), self.endpoint)

    async def cancel(self, batch_id: str) -> BatchInfo:
        """Ask the server to stop a batch; it answers the batch, ``cancelling``."""
        exchange = await self._call(f"cancelling batch {batch_id}", "POST", f"/batches/{_quoted(batch_id)}/cancel")
        return _info(_json(exchange, f"the cancelling of batch {batch_id}", self.endpoint), self.endpoint)

    async def content(self, file_id: str) -> bytes:
        """A file's bytes (a batch's output or error file)."""
        exchange = await self._call(f"downloading file {file_id}", "GET", f"/files/{_quoted(file_id)}/content",
                                    headers={"Accept": "application/jsonl, application/octet-stream"},
                                    max_bytes=MAX_OUTPUT_BYTES, deadline=self.file_deadline_s, whole=True)
        return exchange.body

    async def aclose(self) -> None:
        await self.client.aclose()


def _quoted(value: str) -> str:
    """An id as one path segment: checked ids need no quoting, and this keeps it so should a check ever loosen."""
    from urllib.parse import quote

    return quote(value, safe="")
