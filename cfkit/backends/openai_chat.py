"""``openai:MODEL`` — any server speaking the OpenAI Chat Completions API.

The official API, or an OpenAI-compatible server (vLLM, Ollama, SGLang, LM
Studio, ``transformers serve``) through ``base_url`` / ``OPENAI_BASE_URL``.
Images go as base64 data URLs; the answer is constrained with a JSON-schema
``response_format`` when the server accepts it, and asked for as plain text
when the server rejects that parameter (the reply records the fallback).

Base URL and key follow the one endpoint policy of :mod:`cfkit.endpoints`: ``OPENAI_API_KEY`` goes only to the
official host over https, any other server gets only the variable named by ``api_key_env`` (a placeholder
otherwise), no key travels over plain http except to loopback, and credentials in the URL are redacted wherever
the URL is recorded (``endpoint``, ``options``, the cache identity, messages).

Requests go straight over HTTP (:mod:`cfkit.backends.http`: one pooled aiohttp session, keep-alive, a total
deadline per attempt, a 4 MiB cap on the response); each JSON body is encoded once with orjson, and the reply is
read from the decoded JSON without building SDK models (no ``openai`` package here; the image editor uses it).

Replicas: ``base_url`` may name several servers of one model (``--base-url``
repeated, ``[probe] base_urls``); :mod:`cfkit.backends.replicas` checks at
start-up that they serve the same model, which then keys the cache and the run
instead of the URL, and spreads requests over them (``-j`` at each). A server
that cannot be asked or does not list the model is left out (a note says so);
a failed attempt backs its server off and goes to another at once, without a
wait; a 401, 403, 404 or an answer that its account cannot pay (billing, below)
leaves its server out while another remains, its request sent to another at once
(after a 404, or at start-up, it is asked again every ``replica_recheck`` s and
put back once it lists the model); each reply records the server that answered.

Retries: 429, 408, 409, 5xx, timeouts, connection errors and malformed bodies
are retried ``max_retries`` times with jittered exponential backoff, honouring
``Retry-After`` (up to :data:`~cfkit.backends.attempts.MAX_RETRY_AFTER_S`) or, without one, waiting at
least until a rate limit the reply says is used up resets (OpenAI's
``x-ratelimit-remaining-*`` "0" and ``x-ratelimit-reset-*``), and a 429 or 503 is told to
``on_overload`` first (the runner lowers its concurrency); a 400 or 422 naming a
parameter the request can do without (``response_format``, ``temperature``, the
output-token limit's name) is answered by dropping or renaming it, once per
backend, and noted; 401/403 stop the run (the key), 404 stops it (the model),
and so does, at its first attempt, an answer that the account cannot pay (HTTP 402,
or an error naming ``insufficient_quota`` or billing: :mod:`cfkit.backends.billing`; of replicas, the last one's);
other 4xx, redirects and bodies over the cap fail the request without a retry.
Attempts given up after the request was sent (timeouts once connected, connections
dropped mid-reply, bodies thrown away) are counted in ``Reply.abandoned``, or the
``TransportError``'s when the request fails: a provider may bill them. A request
cancelled (Ctrl-C, SIGTERM) carries what it had sent on the cancellation, with
whether an attempt was out or it waited to retry (:mod:`cfkit.backends.attempts`,
which also waits between attempts).
A 200 whose body is an error object naming a rate limit or a server error
(some proxies answer so) is handled as that status.

Model controls (``-o temperature``, ``top_p``, ``seed``, ``reasoning_effort``,
``max_completion_tokens``, ``extra_body``; :mod:`cfkit.backends.controls`)
arrive in the request's ``Generation``: each is sent only when given,
``extra_body`` laid over the body last; a 400/422 naming one of them stops
the run (it is never dropped).

A reply's text longer than :data:`MAX_STORED_CHARS` is cut to that length;
``Reply.raw_chars`` keeps its full length. A reasoning text the server returns
beside the answer (``reasoning_content``, or ``reasoning``) goes to
``Reply.reasoning`` (cut the same way), never into the graded text.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from cfkit import __version__
from cfkit.backends import Backend
from cfkit.backends import (
    BackendContext,
    Capabilities,
    ProbeRequest,
    Reply,
    TransportError,
    cache_options,
)
from cfkit.backends.attempts import Attempts
from cfkit.backends.billing import billing_refusal
from cfkit.backends.controls import CONTROL_KEYS, extra_body
from cfkit.backends.http import (
    Exchange,
    JSONClient,
    error_text,
    package_versions,
    retry_after_seconds,
)
from cfkit.backends.openai_wire import (MAX_STORED_CHARS, body_parts, error_status, image_base64,
                                        raise_unless_retriable, reply_from_completion, slot, token_prices)
from cfkit.backends.replica_notes import end_notes, start_notes
from cfkit.backends.replicas import Replica, ReplicaPool, served_model
from cfkit.endpoints import redact_url, resolve_endpoint
from cfkit.errors import BackendError, BackendUnavailable, UsageError
from cfkit.hints import install_hint
from cfkit.backends.openai_options import PLAIN_OPTIONS, openai_options
from cfkit.options import LazyModel, PlainSpec

if TYPE_CHECKING:
    from pydantic import BaseModel

    OpenAIOptions = BaseModel

#: A run's endpoint when its model has several (they are provenance; each reply records the one that answered).
REPLICAS_ENDPOINT = "replicas"


def __getattr__(name: str) -> Any:
    if name == "OpenAIOptions":
        return OpenAIBackend.Options
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class OpenAIBackend(Backend):
    """Chat Completions over HTTP, one request per probe question."""

    kind: ClassVar[str] = "openai"
    capabilities: ClassVar[Capabilities] = Capabilities(images=True, multi_image=True, json_schema=True, remote=True)
    Options: ClassVar[type[OpenAIOptions]] = LazyModel(openai_options)  # type: ignore[assignment]
    plain_options: ClassVar[PlainSpec] = PLAIN_OPTIONS
    requires: ClassVar[tuple[str, ...]] = ("aiohttp", "orjson")  # checked before a run opens (check_installed)
    batch_file_format: ClassVar[str | None] = "openai"  # probe run --batch-file (vllm run-batch, OpenAI's files)
    sends_base64: ClassVar[bool] = True  # images go as base64 data URLs
    extra: ClassVar[str] = "openai"
    controls: ClassVar[tuple[str, ...]] = CONTROL_KEYS  # every model control (cfkit.backends.controls)

    def __init__(self, name: str, options: OpenAIOptions, context: BackendContext | None = None):
        # 1. Where requests go, and which key they carry (cfkit.endpoints decides, for each replica).
        urls = list(dict.fromkeys(options.base_url)) if isinstance(options.base_url, list) else [options.base_url]
        if not urls or len(urls) == 1:
            options = options.model_copy(update={"base_url": urls[0] if urls else None})
        words = (context or BackendContext()).words  # how the command that built it sets an option, for hints
        self.words = words
        endpoints = [resolve_endpoint(url, options.api_key_env, who="openai backend", url_flag=words.of("base_url"),
                                      key_flag=words.of("api_key_env")) for url in urls or [None]]
        for endpoint in endpoints:
            if endpoint.key_problem is not None:
                raise BackendUnavailable(f"openai backend: {endpoint.key_problem}")
        endpoint = endpoints[0]
        self.versions = package_versions()
        missing = [name for name in ("aiohttp", "orjson") if name not in self.versions]
        if missing:
            raise BackendUnavailable(f"openai backend: {' and '.join(missing)} not installed. "
                                     f"Run: {install_hint('openai')}")
        self.name = name
        self.model = f"{self.kind}:{name}"
        # Recorded with the run: the base URL(s) as given, with any credentials redacted.
        shown = [e.shown for e in endpoints]
        self.options = options.model_copy(update={"base_url": shown if len(shown) > 1 else
                                                  redact_url(options.base_url) if options.base_url else None})
        # With replicas the endpoint is not identity (the served model is): they are provenance.
        self.endpoint = endpoint.shown if len(endpoints) == 1 else REPLICAS_ENDPOINT
        self.endpoints = tuple(shown)
        self.base_url = endpoint.shown
        self.official = endpoint.official
        self.key_sent = any(e.key or e.credentials for e in endpoints)  # else the placeholder goes: for the 401 line
        self.notes = tuple(dict.fromkeys(n for e in endpoints for n in e.notes))  # e.g. a withheld $OPENAI_API_KEY
        # Told of every 429/503 before the retry, with the Retry-After (the runner lowers its concurrency).
        self.on_overload: Callable[[float | None], None] | None = None

        # 2. What changes answers (the cache key), and prices.
        self.token_param = options.token_param or ("max_completion_tokens" if self.official else "max_tokens")
        self.cache_identity = cache_options(self.options) | {"base_url": self.endpoint, "token_param": self.token_param}
        headers = {"User-Agent": f"cfkit/{__version__}"}
        self._pool: ReplicaPool | None = None
        if len(endpoints) > 1:
            self._pool = ReplicaPool([Replica(e.shown, JSONClient(e.url, headers | {"Authorization": e.authorization},
                                                                  deadline=options.timeout)) for e in endpoints])
            # One run, one cache: keyed on the model the servers serve, not on where they are.
            served = served_model(self._pool.replicas, name, who="openai backend", words=words, key_sent=self.key_sent)
            self.cache_identity = {k: v for k, v in self.cache_identity.items() if k != "base_url"} | served
            self._pool.name, self._pool.root = name, served.get("root")  # what a replica back in use must serve
            self._pool.on_back, self._pool.recheck_s = self._news, options.replica_recheck
            self.notes += tuple(start_notes(self._pool.replicas, options.replica_recheck))
        self.priced = options.price_in is not None and options.price_out is not None
        # Parameters this server refused; later requests leave them out (or use the other token limit).
        self._refused: set[str] = {"response_format"} if options.json_schema == "off" else set()

        # 3. The HTTP client (it opens its connections on the first request).
        self._client = JSONClient(endpoint.url, headers | {"Authorization": endpoint.authorization},
                                  deadline=options.timeout)

    def _news(self, line: str, widen: bool) -> None:
        """A replica is back in use: say so, and (``widen``: one the run started without) let -j more requests be
        in flight (its share)."""
        if self.on_news is not None:
            self.on_news(line, self._pool.limit if self._pool is not None and widen else 0)

    @property
    def replicas(self) -> int:
        """How many endpoints were given (the runner keeps ``-j`` requests in flight at each in use)."""
        return len(self.endpoints)

    @property
    def replicas_in_use(self) -> int:
        """The replicas not left out at start (:func:`~cfkit.backends.replica_notes.start_notes` says why)."""
        return len(self._pool.in_use()) if self._pool is not None else 1

    def set_concurrency(self, per_endpoint: int) -> None:
        """Requests each replica may have in flight."""
        if self._pool is not None:
            self._pool.set_limit(per_endpoint)

    def run_notes(self) -> list[str]:
        """At the end of a run: the replicas left out during it, or that failed attempts (see the pool)."""
        return end_notes(self._pool.replicas, self._pool.recheck_s) if self._pool is not None else []

    async def aclose(self) -> None:
        await self._client.aclose()
        if self._pool is not None:
            await self._pool.aclose()
        for replica in self._pool.replicas if self._pool is not None else ():
            await replica.client.aclose()

    # -- one request ---------------------------------------------------------

    def _content(self, request: ProbeRequest, *, slots: bool = False) -> list[dict[str, Any]]:
        """The user message's parts: the text, then each image as a base64 data URL (encoded once).

        With ``slots``, each URL is a marker that :func:`~cfkit.backends.openai_wire.body_parts` replaces with
        the image's bytes once the rest of the body is JSON: the image is then never held as a Python string,
        nor copied through the JSON encoder (whose buffer for a 200 KB body is about 2 MB), nor joined with the
        rest of the body (the parts go to the socket one after another).
        """
        content: list[dict[str, Any]] = [{"type": "text", "text": request.user}]
        for i, image in enumerate(request.images):
            url = slot(i).decode("ascii") if slots else \
                f"data:{image.mime};base64,{image_base64(image).decode('ascii')}"
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
        generation = request.generation
        for key in ("top_p", "seed", "reasoning_effort"):  # model controls, sent only when given
            if getattr(generation, key) is not None:
                body[key] = getattr(generation, key)
        body.update(extra_body(generation))
        if "response_format" not in self._refused and request.schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "probe_answer", "schema": request.schema, "strict": True},
            }
        return body

    def _drop_refused(self, error: str, body: dict[str, Any]) -> str | None:
        """When a 400 names a parameter we can do without, stop sending it; returns the note to record."""
        if "response_format" in body and "response_format" in error:
            self._refused.add("response_format")
            return "server refused response_format; asked for plain text"
        if "temperature" in body and "temperature" in error:
            self._refused.add("temperature")
            return f"server refused temperature={body['temperature']:g}; it used its default temperature"
        other = "max_tokens" if self.token_param == "max_completion_tokens" else "max_completion_tokens"
        if self.token_param in body and self.token_param in error and other not in self._refused:
            self._refused.add(self.token_param)
            note = f"server refused {self.token_param}; sent {other} instead"
            self.token_param = other
            return note
        return None

    async def answer(self, request: ProbeRequest) -> Reply:
        import asyncio

        import orjson

        content = self._content(request, slots=True)
        notes: list[str] = list(self.notes)
        started = time.perf_counter()
        tried = Attempts()  # retries, failovers, attempts given up once sent (Reply.abandoned)
        encoded_for: tuple | None = None
        try:
            while True:
                # The body is encoded once, and again only after the server refused a parameter.
                state = (frozenset(self._refused), self.token_param)
                if state != encoded_for:
                    body = self._body(request, content)
                    data = body_parts(orjson.dumps(body), request.images)
                    encoded_for = state
                exchange, replica = await self._post(data, tried)
                where = replica.shown if replica is not None else self.endpoint
                if exchange.failure is not None:
                    tried.abandoned += exchange.abandoned
                    if not exchange.retriable:
                        raise TransportError(f"{exchange.failure} from {where}: {exchange.detail}")
                    if self._fail_over(replica, tried.failovers):
                        tried.failovers += 1
                        continue
                    await tried.wait_or_give_up(self.options, exchange.failure, exchange.detail, None, where)
                    continue
                answered = 200 <= exchange.status < 300  # (the pool counted it answered)
                if answered:
                    try:
                        completion = orjson.loads(exchange.body)
                        if not isinstance(completion, dict):
                            raise ValueError(f"a JSON {type(completion).__name__}, not an object")
                    except ValueError as exc:  # a proxy's HTML page, a cut-off body: retried, then left for next run
                        tried.abandoned += 1  # a whole response the server may have generated, thrown away
                        await tried.wait_or_give_up(self.options, "malformed response body", str(exc), None, where)
                        continue
                    meant = error_status(completion)  # a proxy's 200 carrying a rate limit or a server error
                    if meant is None and billing_refusal(200, completion):  # …or saying the account cannot pay
                        meant = 402
                    if meant is None:
                        break
                    exchange = replace(exchange, status=meant)  # retried (and told as an overload) as that status
                note = self._refusal_answered(exchange, body)
                if note is not None:
                    notes.append(note)
                    continue
                if replica is not None and billing_refusal(exchange.status, exchange.body):  # its account cannot pay:
                    if not self._pool.unpaid(replica, None if answered else exchange.status,  # left out (a 200:
                                             error_text(exchange.body)[1], counted=answered):  # an error object)
                        raise self._pool.none_left()  # the last one: QuotaRefused
                if replica is None or replica.left_out is None or not self._pool.in_use():  # type: ignore[union-attr]
                    raise_unless_retriable(exchange, where, self.name, self.on_overload, self.words,
                                           key_sent=self.key_sent)
                if self._fail_over(replica, tried.failovers):
                    tried.failovers += 1
                    continue
                await tried.wait_or_give_up(self.options, f"HTTP {exchange.status}", error_text(exchange.body)[1],
                                            exchange.headers, where)
            reply = self._reply(completion, time.perf_counter() - started, notes)
        except BackendError as exc:  # the request failed (or stops the run): its attempts given up once sent
            exc.abandoned = tried.abandoned   # may still be billed
            raise
        except (asyncio.CancelledError, KeyboardInterrupt) as stop:  # Ctrl-C, SIGTERM: what it had sent may be
            tried.stopped(stop)  # billed (an attempt out was marked so as it was sent; here: between attempts)
            raise
        if tried.retry or tried.failovers or tried.abandoned:  # counted per request by the run (cfkit.probe.sending)
            reply = replace(reply, retries=tried.retry, failovers=tried.failovers, abandoned=tried.abandoned)
        return replace(reply, endpoint=where) if replica is not None else reply

    async def _post(self, data: list[bytes], tried: Attempts) -> tuple[Exchange, Replica | None]:
        """One attempt: at the one endpoint, or at the replica the pool picks (which it then tells the outcome)."""
        if self._pool is None:
            return await tried.send(self._client.post("/chat/completions", data)), None
        replica = await self._pool.acquire()
        try:
            exchange = await tried.send(replica.client.post("/chat/completions", data))
        except BaseException:
            await self._pool.release(replica, healthy=None)
            raise
        status = exchange.status
        # An account that cannot pay is no failing server (answer() leaves it out: _unpaid).
        unpaid = status is not None and status != 200 and billing_refusal(status, exchange.body)
        failing = not unpaid and ((exchange.failure is not None and exchange.retriable) or
                                  (status is not None and (status in (408, 429) or status >= 500)))
        refused = unpaid or status in (401, 403, 404)  # no key it takes, no such model there, not paid
        healthy = False if failing else None if exchange.failure is not None or refused else True
        said = error_text(exchange.body or b"")[1] if failing or refused else ""
        if refused and not unpaid:
            self._pool.leave_out(replica, f"it answered HTTP {status}: {said}", recheck=status == 404)
        await self._pool.release(replica, healthy=healthy,
                                 failure=f"{exchange.failure or f'HTTP {status}'}: {exchange.detail or said}"
                                 if failing else "",
                                 retry_after=retry_after_seconds(exchange.headers) if failing else None)
        return exchange, replica

    def _fail_over(self, replica: Replica | None, failovers: int) -> bool:
        """Whether a failed attempt goes straight to another replica (no wait, no retry counted): its replica is
        left out now (another remains), or there is one up and this request has not yet failed over twice per
        replica."""
        return replica is not None and self._pool is not None and (replica.left_out is not None or (
            failovers < 2 * len(self._pool.replicas) and self._pool.another_is_up(replica)))

    async def check_endpoint(self) -> str | None:
        """Why no request can reach the server (nothing listening, unknown host), or None; asked once before a
        run sends (cfkit.probe.stopping)."""
        if self._pool is None:
            return await self._client.endpoint_problem(self.endpoint, url=self.words.of("base_url"))
        # Replicas: the run can go on while one of them answers (the pool backs off those that do not).
        problems = [await r.client.endpoint_problem(r.shown, url=self.words.of("base_url")) for r in self._pool.in_use()]
        return None if any(p is None for p in problems) else "; ".join(p for p in problems if p)

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
        from cfkit.backends.openai_batch import OpenAIBatches

        if self._pool is not None:
            raise UsageError(f"--batch goes to one server's Batch API; give one {self.words.of('base_url')} "
                             "(replicas answer live runs).")

        return OpenAIBatches(self._client, self.endpoint, model=self.name, words=self.words,
                             key_sent=self.key_sent)

    def _refusal_answered(self, exchange: Exchange, body: dict[str, Any]) -> str | None:
        """For a 400/422 that names a parameter we can do without, the note of dropping it; else None.

        A model control the user set (``-o top_p``, ``seed``, ``reasoning_effort``, an ``extra_body`` key) is
        never dropped: the server refusing it stops the run, since every request would carry it.
        """
        if exchange.status not in (400, 422):
            return None
        error, message = error_text(exchange.body)
        note = self._drop_refused(error, body)
        if note is None:
            for key in self._user_controls(body):
                if key in error:
                    raise BackendError(f"openai backend: {self.endpoint} refused the model control '{key}' "
                                       f"(HTTP {exchange.status}: {message}). Drop -o {key} (or that key of "
                                       "extra_body), or use a server that takes it.")
        return note

    @staticmethod
    def _user_controls(body: dict[str, Any]) -> list[str]:
        builtin = {"model", "messages", "temperature", "max_tokens", "max_completion_tokens", "response_format"}
        return [key for key in body if key not in builtin]

    def _reply(self, completion: dict[str, Any], latency: float, notes: list[str], *,
               price_factor: float = 1.0) -> Reply:
        return reply_from_completion(completion, latency, notes, prices=token_prices(self.options, price_factor),
                                     where=self.endpoint)
