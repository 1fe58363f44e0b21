"""One pooled HTTP client for a JSON API: keep-alive, a total deadline per attempt, a cap on the response.

The openai backend sends every request through :class:`JSONClient`, whose one
method, :meth:`JSONClient.post`, makes one attempt and says what came back
(:class:`Exchange`); retrying and reading the API's meaning are the caller's.

- **Pool.** One ``aiohttp`` session per event loop, with HTTP keep-alive and
  no limit of its own: it holds one connection per request in flight, so its
  size follows the runner's concurrency. aiohttp rather than httpx2 (the
  client the openai SDK uses): sending ~200 KB requests to a loopback
  server one at a time, httpx2 spent about twice aiohttp's time per request
  (3.6 ms against 1.7 ms on a 2-core machine), which made it two to three
  times slower at 64 requests in flight; benchmarks/bench_probe.py measures
  both, and this transport, beside a bare aiohttp client.
- **Deadline.** Each attempt has one deadline covering connecting, sending
  the body and reading the whole response, not only the gap between reads:
  a server that drips a byte every few seconds, or never ends its body,
  holds a request no longer than the deadline.
- **Cap.** A response body over ``max_bytes`` (:data:`MAX_RESPONSE_BYTES`
  unless told otherwise) is cut off: refused at once when its declared
  length is over, dropped as soon as the bytes read pass it otherwise.
- **A body in parts.** :meth:`JSONClient.post` takes the body as a list of
  byte strings too (the openai backend's: the JSON around each image, and the
  image's base64): they go to the socket one after another under one
  ``Content-Length``, the same bytes on the wire as the joined body, without
  copying a few hundred KB into one buffer first.
- **Nothing implicit.** Redirects are not followed (one could lead a key to
  another host); the body is asked for uncompressed and never decompressed
  (a small compressed body can expand without bound); HTTP(S)_PROXY and
  NO_PROXY are read once from the environment, as the openai SDK does, and
  a loopback server is never reached through a proxy.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from cfkit.backends.aiohttp_import import aiohttp as aiohttp_module
from cfkit.endpoints import is_loopback
from cfkit.plural import plural

#: The largest response body read (bytes). A chat completion for a probe
#: question is a few KiB; even a long reasoning trace stays far below this.
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
#: The packages the client is built on (for the run's record and install checks).
PACKAGES = ("aiohttp", "orjson")


@dataclass(frozen=True)
class Exchange:
    """What one attempt got back.

    A complete response has ``status`` and ``body``; an attempt that got none
    has ``failure`` (a short kind: ``Timeout``, ``ConnectionError``,
    ``response too large``…) and ``detail``, and says whether trying again
    could help.
    """

    status: int | None
    headers: Mapping[str, str]  # case-insensitive
    body: bytes
    failure: str | None = None
    detail: str = ""
    retriable: bool = True
    #: Given up after the request was sent (a timeout once connected, a connection dropped or a body cut off
    #: mid-reply, a response thrown away): the server may have generated a reply, and a provider billed it.
    abandoned: bool = False
    #: The attempt got no answer at all (:mod:`cfkit.backends.no_answer`: connection refused, host not known,
    #: unreachable, timed out), which :func:`~cfkit.backends.no_answer.no_answer` words; None otherwise.
    no_answer: str | None = None


def package_versions() -> dict[str, str]:
    """Installed version of each package the client needs; a missing one is absent."""
    from cfkit.registry import installed_version

    return {name: found for name in PACKAGES if (found := installed_version(name)) is not None}


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (HTTP_PROXY, HTTPS_PROXY, NO_PROXY), or None."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if is_loopback(host):
        return None
    import urllib.request

    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    return proxy


#: How much of an error body is searched for a refused parameter's name, and shown (characters).
_ERROR_TEXT_CHARS = 64 * 1024
_ERROR_SHOWN_CHARS = 300


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
        import email.utils

        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, parsed.timestamp() - time.time())
    return None


#: OpenAI's rate-limit headers: each limit's requests or tokens left, and the time until it resets.
_LIMITS = ("requests", "tokens")
_DURATION = None  # the pattern of a reset time ("1s", "6m0s", "20ms", "1h2m3.5s"), compiled on first use


def _duration_seconds(text: str) -> float | None:
    """A reset time as OpenAI writes it ("20ms", "1.5s", "6m0s", "1h2m3s", or plain seconds), or None."""
    global _DURATION
    import re

    text = text.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    if _DURATION is None:
        _DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?"
                               r"(?:(\d+(?:\.\d+)?)ms)?")
    found = _DURATION.fullmatch(text)
    if not text or found is None:
        return None
    hours, minutes, seconds, millis = (float(part or 0) for part in found.groups())
    return hours * 3600 + minutes * 60 + seconds + millis / 1000


def rate_limit_reset_seconds(headers: Any) -> float | None:
    """Seconds until a rate limit with nothing left resets, as OpenAI says it (``x-ratelimit-remaining-requests``
    "0" and ``x-ratelimit-reset-requests`` "6s"; the same for tokens): the longest of those, or None when no
    limit says it has nothing left (a 429 then waits its backoff)."""
    if headers is None:
        return None
    waits = []
    for limit in _LIMITS:
        if (headers.get(f"x-ratelimit-remaining-{limit}") or "").strip() != "0":
            continue
        reset = headers.get(f"x-ratelimit-reset-{limit}")
        wait = _duration_seconds(reset) if reset else None
        if wait is not None:
            waits.append(wait)
    return max(waits) if waits else None


def server_wait(headers: Any) -> float | None:
    """How long a refusing server says to wait: its ``Retry-After`` (:func:`retry_after_seconds`), else the reset
    of a rate limit it says is used up (:func:`rate_limit_reset_seconds`); None when it says neither."""
    wait = retry_after_seconds(headers)
    return wait if wait is not None else rate_limit_reset_seconds(headers)


def error_text(body: bytes) -> tuple[str, str]:
    """(the error body as text, the server's message in one short line) of a failed response."""
    import orjson

    text = body[:_ERROR_TEXT_CHARS].decode("utf-8", "replace")
    message = text
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            message = error["message"]
        elif isinstance(error, str):  # {"error": "…"} (Ollama)
            message = error
        elif isinstance(data.get("detail"), str):  # {"detail": "…"} (FastAPI servers)
            message = data["detail"]
    message = " ".join(message.split())
    if len(message) > _ERROR_SHOWN_CHARS:
        message = message[:_ERROR_SHOWN_CHARS] + "…"
    return text, message or "(empty body)"


#: The aiohttp payload class of a body sent in parts, made on first use (aiohttp is imported only to send).
_Parts: Any = None
#: A part at least this long goes to the socket as a view of itself: a socket that takes only some of it then
#: keeps a copy of the rest alone (slicing bytes would copy the rest twice).
_VIEW_BYTES = 64 * 1024


def parts_payload(parts: list[bytes]) -> Any:
    """An aiohttp payload that writes ``parts`` one after another, its size their sum (see :meth:`JSONClient.post`)."""
    global _Parts
    if _Parts is None:
        payload = aiohttp_module().payload

        class Parts(payload.Payload):
            _autoclose = True  # bytes in memory: nothing to close; written again as they are on a retry

            def __init__(self, value: list[bytes]) -> None:
                super().__init__(value)
                self._size = sum(map(len, value))

            def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
                return b"".join(self._value).decode(encoding, errors)

            async def as_bytes(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
                return b"".join(self._value)

            async def write(self, writer: Any) -> None:
                await self.write_with_length(writer, None)

            async def write_with_length(self, writer: Any, content_length: int | None) -> None:
                left = content_length
                for part in self._value:
                    if left is not None:
                        if left <= 0:
                            return
                        part = part[:left]
                        left -= len(part)
                    if part:
                        await writer.write(memoryview(part) if len(part) >= _VIEW_BYTES else part)

        _Parts = Parts
    return _Parts(parts)


def _while_connecting(exc: BaseException) -> bool:
    """Whether an attempt's deadline passed while aiohttp was still opening its connection (nothing was sent):
    the cancellation the deadline raised went through aiohttp's connector. Read from the failure alone, so a
    reply that comes costs nothing more; a timeout this cannot place counts as sent, the side a budget is
    safe on."""
    cancelled = exc.__context__
    tb = cancelled.__traceback__ if cancelled is not None else None
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__") == "aiohttp.connector":
            return True
        tb = tb.tb_next
    return False


#: Seconds :meth:`JSONClient.endpoint_problem` waits for a connection.
CHECK_TIMEOUT_S = 5.0


class JSONClient:
    """POSTs JSON bodies to ``base_url`` + path with fixed headers; see the module docstring.

    ``deadline`` is the whole attempt in seconds; ``max_bytes`` the largest
    response body read.
    """

    def __init__(self, base_url: str, headers: Mapping[str, str], *, deadline: float,
                 max_bytes: int = MAX_RESPONSE_BYTES):
        self.base_url = base_url.rstrip("/")
        self.deadline = deadline
        self.max_bytes = max_bytes
        self._headers = {"Content-Type": "application/json", "Accept": "application/json",
                         "Accept-Encoding": "identity", **headers}
        self._proxy = env_proxy(self.base_url)
        self._session: Any = None
        self._loop: Any = None  # the asyncio loop the session belongs to

    def _session_for_this_loop(self) -> Any:
        """The session of the running event loop (a connection pool cannot cross loops)."""
        import asyncio

        aiohttp = aiohttp_module()
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            # keepalive_timeout below the 5 s after which common servers (uvicorn) drop an idle
            # connection, so a connection the server is about to close is not reused.
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=4.0)
            self._session = aiohttp.ClientSession(
                connector=connector, headers=self._headers, auto_decompress=False,
                # The deadline is ours (asyncio.timeout in post); aiohttp's own default of 5 minutes is off.
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=None, sock_read=None),
            )
            self._loop = loop
        return self._session

    async def post(self, path: str, body: bytes | list[bytes]) -> Exchange:
        """One attempt: send ``body``, read the whole response within the deadline and the cap.

        A list is the body's parts, sent one after another as one body (the bytes on the wire, headers and
        ``Content-Length`` included, are those of the joined parts): a request body of a few hundred KB is not
        copied whole once more to join it."""
        return await self.request("POST", path, parts_payload(body) if type(body) is list else body)

    async def endpoint_problem(self, shown: str, *, timeout: float = CHECK_TIMEOUT_S,
                               url: str = "--base-url") -> str | None:
        """Why nothing can be sent to the server (``shown`` as people see it; ``url``: where the command sets it):
        nothing listens on its port, its host is not known; None when a connection opens, or when the check cannot tell (through a proxy, or
        a slow network, which the requests' own deadlines handle)."""
        import asyncio

        from cfkit.backends.no_answer import TIMED_OUT, kind_of, no_answer

        parts = urlsplit(self.base_url)
        if self._proxy is not None or not parts.hostname:
            return None
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return None
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, port), timeout)
        except OSError as exc:  # refused, host not known, network unreachable, no route; a timeout
            kind = kind_of(exc)
            return None if kind == TIMED_OUT else no_answer(shown, kind, detail=exc.strerror or str(exc), url=url)
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass
        return None

    async def request(self, method: str, path: str, body: Any = None, *, headers: Mapping[str, str] | None = None,
                      max_bytes: int | None = None, deadline: float | None = None) -> Exchange:
        """One attempt of any method: ``body`` is bytes or an aiohttp payload (a multipart upload, streamed);
        ``headers`` add to or replace the client's; ``max_bytes`` and ``deadline`` replace its cap and deadline
        for this attempt (a batch's output file is larger than any reply)."""
        import asyncio

        from cfkit.backends.no_answer import NO_HOST, TIMED_OUT, kind_of

        aiohttp = aiohttp_module()
        session = self._session_for_this_loop()
        deadline = self.deadline if deadline is None else deadline
        try:
            async with asyncio.timeout(deadline):
                async with session.request(method, self.base_url + path, data=body, headers=headers,
                                           proxy=self._proxy, allow_redirects=False) as response:
                    return await self._read(response, self.max_bytes if max_bytes is None else max_bytes)
        except TimeoutError as exc:  # also aiohttp's own timeouts, which subclass it
            return Exchange(None, {}, b"", "Timeout", f"no complete response within {deadline:g} s",
                            abandoned=not _while_connecting(exc), no_answer=TIMED_OUT)
        except aiohttp.ClientPayloadError as exc:
            return Exchange(None, {}, b"", "ConnectionError", f"the response body was cut off ({exc})", abandoned=True)
        except aiohttp.ClientConnectorError as exc:  # refused, unknown host, TLS: nothing reached the server
            kind = NO_HOST if isinstance(exc, aiohttp.ClientConnectorDNSError) else kind_of(exc.os_error)
            return Exchange(None, {}, b"", "ConnectionError", str(exc) or type(exc).__name__, no_answer=kind)
        except (aiohttp.ClientError, OSError) as exc:  # dropped once connected: the request may have been read
            return Exchange(None, {}, b"", "ConnectionError", str(exc) or type(exc).__name__, abandoned=True)

    async def _read(self, response: Any, max_bytes: int) -> Exchange:
        status, headers = response.status, response.headers
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            response.close()
            return Exchange(status, headers, b"", "compressed response",
                            f"the server sent a {encoding} body although asked for an uncompressed one",
                            retriable=False, abandoned=True)
        cap = f"{max_bytes:,}-byte cap"
        declared = response.content_length
        if declared is not None and declared > max_bytes:
            response.close()  # drop the connection rather than read what will be thrown away
            return Exchange(status, headers, b"", "response too large",
                            f"the body declares {plural(declared, 'byte', spec=',')}, over the {cap}", retriable=False, abandoned=True)
        if declared is not None:
            return Exchange(status, headers, await response.read())
        chunks, size = [], 0
        async for chunk in response.content.iter_any():
            size += len(chunk)
            if size > max_bytes:
                response.close()
                return Exchange(status, headers, b"", "response too large",
                                f"the body was cut off after {plural(size, 'byte', spec=',')}, over the {cap}", retriable=False,
                                abandoned=True)
            chunks.append(chunk)
        return Exchange(status, headers, b"".join(chunks))

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
