"""aiohttp, imported without waiting for the system's CA certificates.

Importing aiohttp builds its two default TLS contexts (``aiohttp/connector.py``: one that verifies servers and
one that does not), and each reads the system's CA certificates: on this project's 2-core machine 33 ms of an
import of about 105 ms, paid before the first request of every run, a run against a plain-HTTP server on
loopback (vLLM, ``transformers serve``) included, although such a run never opens a TLS connection.

:func:`aiohttp` imports it with that reading set aside for the contexts the import builds on its own thread,
and :func:`load_certificates` reads the certificates into those same contexts afterwards, as the import would
have (``set_default_verify_paths`` on each). :class:`~cfkit.backends.http.JSONClient` calls it before its first
TLS connection (an ``https`` endpoint, or any proxy), and for plain HTTP on a daemon thread once its first
attempt has ended, so that other code in the process that uses aiohttp's default contexts finds them whole
moments later. Contexts built on other threads meanwhile are not touched; when aiohttp was imported before
(by a plug-in, say) nothing is set aside.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

#: Held while aiohttp is imported through :func:`aiohttp` and while set-aside certificates are read.
_lock = threading.Lock()
#: The TLS contexts built while :func:`aiohttp` imported it whose CA certificates are not read yet.
_pending: list[Any] = []
_loader: threading.Thread | None = None


def aiohttp() -> Any:
    """The aiohttp module, imported (once a process) with its default contexts' certificates set aside."""
    module = sys.modules.get("aiohttp")
    if module is None:
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
    return module


def load_certificates() -> None:
    """Read the CA certificates set aside into their contexts (at once; a no-op when none are waiting)."""
    if not _pending:
        return
    import ssl

    with _lock:
        while _pending:
            ssl.SSLContext.set_default_verify_paths(_pending.pop())


def load_certificates_soon() -> None:
    """:func:`load_certificates` on a daemon thread, started once, when any are waiting."""
    global _loader
    if _pending and _loader is None:
        _loader = threading.Thread(target=load_certificates, name="cfkit-load-certificates", daemon=True)
        _loader.start()
