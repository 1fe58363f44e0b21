"""The words for a server that gave no answer at all: nothing listens on its port, its host is not known, it did
not answer in time, or the network has no way to it.

One function words it (:func:`no_answer`), from the kind of failure (:func:`kind_of`, read from the exception the
connection raised), for every check that asks a server before anything is sent: ``probe run``'s start-up check
(:meth:`cfkit.backends.http.JSONClient.endpoint_problem`), a replica left out because its ``GET /models`` got no
answer (:func:`cfkit.backends.model_lists.read_listing`), a study's endpoint check
(:func:`cfkit.study.check.reach`), and ``cfkit edit``'s check of a remote engine's server before its first call
(:func:`connect_problem`). The same failure is said in the same words; only how the url is fixed differs
(``--base-url``, the endpoint's url in the study file, an engine's ``-o base_url=URL``).
"""

from __future__ import annotations

import errno
import socket

REFUSED = "connection refused"
TIMED_OUT = "timed out"
NO_HOST = "host not known"
UNREACHABLE = "unreachable"


def kind_of(exc: BaseException) -> str:
    """Which of :data:`REFUSED`, :data:`TIMED_OUT`, :data:`NO_HOST` or :data:`UNREACHABLE` a failure to get an
    answer is: ``exc`` as a socket, asyncio, or urllib (its ``reason``) call raised
    it (aiohttp's: :meth:`cfkit.backends.http.JSONClient.request` reads it)."""
    from urllib.error import URLError

    if isinstance(exc, URLError) and isinstance(exc.reason, BaseException):
        return kind_of(exc.reason)
    if isinstance(exc, socket.gaierror):
        return NO_HOST
    if isinstance(exc, TimeoutError):
        return TIMED_OUT
    # several addresses (::1 and 127.0.0.1), each refused: asyncio raises one OSError for all of them
    if isinstance(exc, ConnectionRefusedError) or f"[Errno {errno.ECONNREFUSED}]" in str(exc):
        return REFUSED
    return UNREACHABLE


#: The servers a model's requests usually go to, named where nothing listens.
MODEL_SERVERS = "the server (e.g. 'transformers serve' or 'vllm serve')"


def no_answer(shown: str, kind: str, *, detail: str = "", seconds: float | None = None,
              url: str = "--base-url", start: str = MODEL_SERVERS) -> str:
    """The one line for server ``shown`` (as people see it) giving no answer of ``kind`` (:func:`kind_of`):
    ``detail`` what the system said (for :data:`UNREACHABLE`), ``seconds`` how long it was waited for
    (:data:`TIMED_OUT`), ``url`` where its url is set, to fix it, ``start`` the server to start where nothing
    listens."""
    if kind == REFUSED:
        return f"nothing is listening at {shown} (connection refused): start {start}, or fix {url}"
    if kind == NO_HOST:
        return f"the host of {shown} is not known (DNS): check {url} and the network"
    if kind == TIMED_OUT:
        within = f" within {seconds:g} s" if seconds is not None else ""
        return (f"{shown} did not answer{within} (timed out): check that the server is up and not stuck, "
                f"that no firewall drops the connection, and {url}")
    return f"{shown} cannot be reached ({detail or 'no detail'}): check the network and {url}"



def connect_problem(address: str, shown: str, *, timeout: float, url: str = "--base-url",
                    start: str = MODEL_SERVERS) -> str | None:
    """Why the server at ``address`` (an http(s) base URL, shown as ``shown``) gives no answer at all, in the words
    of :func:`no_answer` (``url``: where its url is set, ``start``: the server to start), or None when a connection opens within ``timeout``
    seconds, or when the check cannot tell (a proxy carries the requests, the address names no host or port).

    One TCP connection, closed at once, nothing sent: a server that would answer 401 or 404 answers, and so does
    a busy one (the system accepts the connection for it). Unlike ``probe run``'s start-up check, which lets the
    requests' own deadlines judge it, a connection that does not open within ``timeout`` counts as no answer
    (:data:`TIMED_OUT`): an engine's call waits minutes for its connection, and retries."""
    import socket
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(address)
    host = parts.hostname
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if not host:
        return None
    proxies = urllib.request.getproxies()
    if (proxies.get(parts.scheme) or proxies.get("all")) and not urllib.request.proxy_bypass(host):
        return None  # the proxy answers for the server: what lies beyond it is known only once a request is sent
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:  # refused, host not known, network unreachable, no route; timed out
        return no_answer(shown, kind_of(exc), detail=exc.strerror or str(exc), seconds=timeout, url=url,
                         start=start)
    return None
