"""Whether the served view's reading of a workspace is still current.

``cfkit view`` reads a workspace once per reading (:class:`cfkit.view.data.ViewData`) and renders each page of
that reading at most once. While it serves, a study or a probe run may add runs and replies, a person may review an
edit or change a caption, a case or an image: a page loaded again after that must show it, not the reading made
when the server started. :func:`stamp` is what the view's pages are made from, as each file's size and mtime (the
store with its write-ahead log, ``cfkit.toml``, the cases file, the captions, specs and probe files, and the cases'
images); the server reads the workspace again when the stamp has changed (:class:`Current`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cfkit.cases import CaseSet
    from cfkit.view.site import Site
    from cfkit.workspace import Workspace

#: The served view looks at the workspace's files at most this often (seconds): a page's images and stylesheet,
#: asked for with it, do not each stat the workspace.
RECHECK_S = 1.0


def _state(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _tree(folder: Path) -> list[Any]:
    """Every file under ``folder`` with its size and mtime (a folder that is not there: empty)."""
    found: list[Any] = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend((os.path.join(root, name), _state(os.path.join(root, name))) for name in sorted(names))
    return found


def stamp(ws: Workspace, cases: CaseSet | None) -> tuple[Any, ...]:
    """What the view's pages of ``ws`` are made from, by each file's size and mtime (``cases``: the case set the
    last reading loaded, whose images are looked at; None when it could not be read)."""
    db = str(ws.db_path)
    files = [_state(p) for p in (db, db + "-wal", str(ws.config_path), str(ws.cases_path))]
    folders = [_tree(folder) for folder in (ws.captions_dir, ws.interventions_dir, ws.probes_dir)]
    images = [] if cases is None else [_state(str(p)) for case in cases for p in cases.image_paths(case)]
    return tuple(files), tuple(map(tuple, folders)), tuple(images)


class Current:
    """The site of the workspace's latest reading: :meth:`site` gives the one in hand while the workspace's files
    are as they were, and a new one (``make()``) once they changed, looked at at most every ``recheck_s``."""

    def __init__(self, ws: Workspace, make: Callable[[], Site], *, recheck_s: float = RECHECK_S):
        self._ws, self._make, self.recheck_s = ws, make, recheck_s
        self._lock = threading.Lock()
        self._site = make()
        self._stamp = self._stamp_of(self._site)
        self._looked = time.monotonic()

    def _stamp_of(self, site: Site) -> tuple[Any, ...]:
        return stamp(self._ws, site.data.cases)

    def site(self) -> Site:
        """The site to answer from now: read again when the workspace changed since the one in hand was read."""
        with self._lock:
            if time.monotonic() - self._looked >= self.recheck_s:
                self._looked = time.monotonic()
                now = self._stamp_of(self._site)
                if now != self._stamp:
                    self._site, self._stamp = self._make(), now
            return self._site
