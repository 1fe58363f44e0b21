"""``cfkit view`` served from a thread on a loopback port, for the view's tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def serving(root: Path, studies: tuple = (), **options) -> Iterator[str]:
    """The view of the workspace at ``root`` (with the page of each study in ``studies``, loaded study files) on a
    loopback port, as ``cfkit view`` serves it (``options``: make_server's, such as ``recheck_s``): its URL while
    the block runs."""
    from cfkit.view.server import make_server
    from cfkit.workspace import load_workspace

    server = make_server(load_workspace(root), studies, **options)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
