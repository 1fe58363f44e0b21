"""Anthropic's Message Batches in the shape ``probe run --batch`` and ``probe collect`` drive (:mod:`cfkit.probe.batch`).

That machinery writes batch input files (one line a request: ``custom_id``
the cache key, ``body`` the request's parameters), uploads each and starts a
batch, then asks where each batch stands and reads its results as batch
output lines. :class:`MessageBatches` gives it the same five calls over the
Message Batches API:

- ``upload(path)`` reads the file back (a Message Batch is created with its
  requests in the body; there is no file to upload) and returns the path as
  the file's id;
- ``create(file_id)`` creates the batch with each line's ``custom_id`` and
  ``params``;
- ``get(id)`` describes it: ``in_progress``, ``cancelling`` or, once it has
  ``ended``, ``cancelled`` when requests of it were canceled, ``expired`` when
  some expired, else ``completed``, with its counts (completed: succeeded;
  failed: errored, canceled and expired); an ended batch's results hold what
  it answered in every case;
- ``cancel(id)`` asks for the batch to be stopped (it goes ``cancelling``,
  then ends with what it answered);
- ``content(id)`` reads its results and writes each as an output line:
  a succeeded message as a 200 response whose body is the message, an
  errored, canceled or expired request as an error with Anthropic's words;
  a line that is not a result goes on as it came, so that one bad line (a
  download cut short) costs only its own request, as in an OpenAI file.

A batch the server answers 404 for is described as
:data:`~cfkit.backends.openai_batch.NOT_FOUND`, as the OpenAI one is.

The results come from the batch's ``results_url``; one on another host than
the backend's server is refused rather than followed (it would carry the key
there). Each call is tried up to :data:`ATTEMPTS` times on a connection
error, 429 or 5xx.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cfkit.backends.batch_api import NOT_FOUND, BatchAPI, BatchInfo
from cfkit.backends.billing import billing_refusal, refusal_line, sdk_said
from cfkit.errors import BackendUnavailable, QuotaRefused, TransportError
from cfkit.option_words import key_refused

ATTEMPTS = 4
_STATUS = {"in_progress": "in_progress", "canceling": "cancelling", "ended": "completed"}


def _info(batch: Any) -> BatchInfo:
    counts = batch.request_counts
    failed = counts.errored + counts.canceled + counts.expired
    total = counts.processing + counts.succeeded + failed
    ended = batch.processing_status == "ended"
    status = _STATUS.get(batch.processing_status, batch.processing_status)
    if ended and (counts.canceled or counts.expired):  # ended part way: said as OpenAI says it
        status = "cancelled" if counts.canceled else "expired"
    return BatchInfo(id=batch.id, status=status,
                     output_file_id=batch.id if ended else None,
                     counts={"total": total, "completed": counts.succeeded, "failed": failed})


def _line(raw: bytes) -> bytes:
    """One line of a batch's results as a batch output line. What the server wrote is data: a line that is not a
    JSON object with a ``custom_id`` goes on as it came, for :class:`~cfkit.probe.batch_results.BatchResults` to
    say (and to fail the request whose ``custom_id`` it still shows); a result it cannot read fails its request."""
    import orjson

    try:
        entry = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw
    if not isinstance(entry, dict) or not isinstance(entry.get("custom_id"), str):
        return raw
    result = entry.get("result") if isinstance(entry.get("result"), dict) else {}
    kind = result.get("type")
    if kind == "succeeded" and isinstance(result.get("message"), dict):
        return orjson.dumps({"custom_id": entry["custom_id"],
                             "response": {"status_code": 200, "body": result["message"]}})
    if kind == "errored":
        error = result.get("error") if isinstance(result.get("error"), dict) else {}
        error = error.get("error") if isinstance(error.get("error"), dict) else error
        words = {"code": str(error.get("type") or "errored"), "message": str(error.get("message") or "")}
    elif kind in ("canceled", "expired"):
        words = {"code": kind, "message": f"the request was {kind} before it was answered"}
    else:
        words = {"code": "unreadable", "message": f"the batch's result for it is not one cfkit can read ({kind!r}: "
                                                  "neither a message nor an error)"}
    return orjson.dumps({"custom_id": entry["custom_id"], "error": words})


class MessageBatches(BatchAPI):
    """The Message Batches of an :class:`~cfkit.backends.anthropic_messages.AnthropicBackend`'s server."""

    def __init__(self, backend: Any):
        self.backend = backend
        self.endpoint = backend.endpoint
        self.words = backend.words  # how the command that built the backend sets an option, for hints
        self._requests: dict[str, list[dict[str, Any]]] = {}

    async def _call(self, what: str, call: Any, *, missing_ok: bool = False) -> Any:
        """``call()``, retried while retrying can help; a 404 is None when ``missing_ok``."""
        import anthropic

        for attempt in range(ATTEMPTS):
            try:
                return await call()
            except anthropic.APIStatusError as exc:
                if missing_ok and exc.status_code == 404:
                    return None
                if billing_refusal(exc.status_code, getattr(exc, "body", None), str(exc.message)):
                    raise QuotaRefused(refusal_line("anthropic backend", self.endpoint, exc.status_code,
                                                    f"while {what}: {sdk_said(exc)}")) from exc
                if exc.status_code in (401, 403):
                    raise BackendUnavailable(key_refused("anthropic backend", self.endpoint, exc.status_code,
                                                         f"while {what}: {sdk_said(exc)}", self.words,
                                                         sent=self.backend.key_sent)) from exc
                if not (exc.status_code in (408, 409, 429) or exc.status_code >= 500) or attempt == ATTEMPTS - 1:
                    raise TransportError(f"{self.endpoint} while {what}: HTTP {exc.status_code}: "
                                         f"{' '.join(str(exc.message).split())[:300]}") from exc
            except anthropic.APIConnectionError as exc:
                if attempt == ATTEMPTS - 1:
                    raise TransportError(f"{self.endpoint} while {what}: {exc}") from exc
            await asyncio.sleep(min(8.0, 0.5 * 2 ** attempt))
        raise AssertionError("unreachable")

    async def check_model(self) -> str | None:
        """Before a batch is created: refuse, in one line (:func:`~cfkit.backends.model_lists.refusal`, with the
        models it lists: :func:`~cfkit.backends.model_lists.not_listed`), a model the server does not have.
        Anthropic lists its models by dated id only, not by the aliases a run may name, so the model is asked
        for by name (``GET /v1/models/NAME`` resolves an alias); a 404 there refuses only when the server does
        list its models (``GET /v1/models``): a proxy without these routes, or any other failure, leaves it to
        the batch itself, and why the model could not be checked is returned (None: it was)."""
        import anthropic

        from cfkit.backends.model_lists import not_listed, refusal

        name, client = self.backend.name, self.backend.client()

        def failed(what: str, exc: Exception) -> str:
            code = exc.status_code if isinstance(exc, anthropic.APIStatusError) else None
            return f"{self.endpoint}: {what} {f'answered HTTP {code}' if code else 'did not answer'}"

        try:
            await client.models.retrieve(name)
            return None
        except anthropic.NotFoundError:
            pass
        except (anthropic.APIStatusError, anthropic.APIConnectionError) as exc:
            return failed(f"GET /v1/models/{name}", exc)
        try:
            page = await client.models.list(limit=1000)
        except (anthropic.APIStatusError, anthropic.APIConnectionError) as exc:
            return failed("GET /v1/models", exc)
        entries = [{"id": m.id} for m in page.data if isinstance(m.id, str)]
        if entries:
            raise BackendUnavailable(refusal("anthropic backend", name, [(self.endpoint, not_listed(entries, name))],
                                             url_flag=self.words.of("base_url")))
        return f"{self.endpoint}: it answered 404 for '{name}' and lists no models"

    async def upload(self, path: Path) -> str:
        import orjson

        requests = []
        with path.open("rb") as fh:
            for line in fh:
                entry = orjson.loads(line)
                requests.append({"custom_id": entry["custom_id"], "params": entry["body"]})
        self._requests[str(path)] = requests
        return str(path)

    async def create(self, file_id: str, *, metadata: dict[str, str]) -> BatchInfo:
        client = self.backend.client()
        requests = self._requests.pop(file_id)
        batch = await self._call("creating a message batch",
                                 lambda: client.messages.batches.create(requests=requests))
        return _info(batch)

    async def get(self, batch_id: str) -> BatchInfo:
        client = self.backend.client()
        batch = await self._call(f"asking about batch {batch_id}", lambda: client.messages.batches.retrieve(batch_id),
                                 missing_ok=True)
        if batch is None:
            return BatchInfo(id=batch_id, status=NOT_FOUND, errors=("HTTP 404: the server has no such batch",))
        return _info(batch)

    async def cancel(self, batch_id: str) -> BatchInfo:
        client = self.backend.client()
        return _info(await self._call(f"cancelling batch {batch_id}", lambda: client.messages.batches.cancel(batch_id)))

    async def content(self, file_id: str) -> bytes:
        client = self.backend.client()
        batch = await self._call(f"asking about batch {file_id}", lambda: client.messages.batches.retrieve(file_id))
        where = urlsplit(batch.results_url or "")
        if where.netloc and where.netloc != urlsplit(self.backend._url).netloc:
            raise TransportError(f"{self.endpoint}: batch {file_id} names its results at {where.scheme}://"
                                 f"{where.netloc}, another host; cfkit does not send the key there.")

        async def read() -> bytes:  # the bytes, read line by line here (the SDK's reader stops at a bad line)
            response = await client.messages.batches.with_raw_response.results(file_id)
            return await response.read()

        data = await self._call(f"reading the results of batch {file_id}", read)
        return b"".join(_line(raw) + b"\n" for raw in data.splitlines() if raw.strip())

    async def aclose(self) -> None:
        await self.backend.aclose()
