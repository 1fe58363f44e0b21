"""aiohttp, imported without reading the system's CA certificates until a TLS connection needs them.

Importing aiohttp builds its two default TLS contexts (``aiohttp/connector.py``: one that verifies servers and
one that does not), and each reads the system's CA certificates: on this project's 2-core machine 33 ms of an
import of about 105 ms, paid before the first request of every run, a run against a plain-HTTP server on
loopback (vLLM, ``transformers serve``) included, which never opens a TLS connection.

:func:`aiohttp` imports it with that reading set aside for the contexts the import builds on its own thread,
and has aiohttp's connector read them into those same contexts, as the import would have, the first time it
picks a context for a TLS connection (``TCPConnector._get_ssl_context``, the one place aiohttp hands its
default contexts out, for any session in the process, cfkit's or a plug-in's). A process that only speaks
plain HTTP never reads them. Contexts built on other threads meanwhile are not touched; when aiohttp was
imported before (by a plug-in, say) nothing is set aside; and where aiohttp's connector has no such method
(another version) the certificates are read at once, as the import would have read them.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

#: Held while aiohttp is imported through :func:`aiohttp` and while set-aside certificates are read.
_lock = threading.Lock()
#: The TLS contexts built while :func:`aiohttp` imported it whose CA certificates are not read yet.
_pending: list[Any] = []


def aiohttp() -> Any:
    """The aiohttp module, imported (once a process) with its default contexts' certificates set aside."""
    if "aiohttp" not in sys.modules:
        with _lock:
            if "aiohttp" not in sys.modules:
                return _import_setting_certificates_aside()
    import aiohttp as module  # waits for an import under way on another thread

    return module


def _import_setting_certificates_aside() -> Any:
    import ssl

    this_thread = threading.get_ident()
    read = ssl.SSLContext.set_default_verify_paths
    own = "set_default_verify_paths" in ssl.SSLContext.__dict__

    def set_default_verify_paths(context: Any) -> None:
        if threading.get_ident() == this_thread:
            _pending.append(context)
        else:
            read(context)

    ssl.SSLContext.set_default_verify_paths = set_default_verify_paths  # type: ignore[method-assign]
    waiting = len(_pending)
    try:
        import aiohttp as module
    except BaseException:
        del _pending[waiting:]  # the contexts of an import that failed are nobody's
        raise
    finally:
        if own:
            ssl.SSLContext.set_default_verify_paths = read  # type: ignore[method-assign]
        else:
            del ssl.SSLContext.set_default_verify_paths
    if _pending:
        _read_before_tls(module)
    return module


def _read_before_tls(module: Any) -> None:
    """Have aiohttp's connector read the set-aside certificates before it first hands a context out."""
    connector = getattr(module, "connector", None)
    tcp = getattr(connector, "TCPConnector", None)
    choose = vars(tcp).get("_get_ssl_context") if isinstance(tcp, type) else None
    if not callable(choose):
        _load_now()  # not the aiohttp this was written for: read them now, as its import would have
        return

    def _get_ssl_context(self: Any, req: Any) -> Any:
        context = choose(self, req)
        if context is not None and _pending:
            load_certificates()
        return context

    tcp._get_ssl_context = _get_ssl_context


def load_certificates() -> None:
    """Read the CA certificates set aside into their contexts (a no-op when none are waiting)."""
    if _pending:
        with _lock:
            _load_now()


def _load_now() -> None:
    import ssl

    while _pending:
        ssl.SSLContext.set_default_verify_paths(_pending.pop())
