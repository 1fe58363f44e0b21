"""The rerun shortcut: the same command again on a finished run, answered without building its backend.

Running ``cfkit probe run`` a second time on unchanged inputs finds the run
finished by its settings and its inputs manifest (one ``stat`` per input
file). Resolving those settings builds the backend: its options, the protocol
preset and the prices are pydantic models, and building them is most of what
such a rerun costs. Yet they are a function of what the command was given, the
workspace's configuration, the environment and cfkit's own code.

So after a run ends complete, the command is remembered under a digest of all
of those (:func:`command_key`): which run it resolved to, with that run's
settings digest, the digest of its input settings, and what the summary shows
that the store does not hold (the backend's notes, whether it is priced, the
protocol preset's name). The same command again, with every one of those facts
the same, finds the run by that digest and checks it exactly as the full path
does: the run exists, is complete with these settings, its manifest's input
settings are the remembered ones and every input file has its recorded size
and mtime. Anything different (a flag, an option, cfkit.toml, an environment
variable, the working directory, a cfkit source file, a package installed or
removed) gives another key, and the command takes the full path.

Only backends built from their options and the environment alone take the
shortcut (:data:`SHORTCUT_KINDS`, one endpoint): one that asks its servers at
start-up (several replicas report the weights they serve) could resolve to
other settings with the same command.

The remembered commands live in ``.cfkit/reruns.json`` beside the store; a
lost or stale entry only sends the next rerun down the full path.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cfkit import __version__
from cfkit.probe.progress import RunProgress, RunSummary
from cfkit.store import runs

if TYPE_CHECKING:
    from cfkit.store import Store
    from cfkit.store.runs import RunRecord
    from cfkit.workspace import Workspace

#: Backend kinds whose settings follow from their options and the environment alone (nothing read from a server
#: or a file at start-up), with one endpoint.
SHORTCUT_KINDS = frozenset({"openai"})
#: The remembered commands kept (the newest).
KEEP = 64
_FILE = "reruns.json"
_PACKAGE = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Remembered:
    """What a finished run's summary needs beyond the store, and how to find and check the run."""

    run_id: str
    suite: str
    settings_sha256: str  # the run's settings digest (runs.settings_sha256)
    inputs_settings: str  # its manifest's digest of the input settings that are not files
    priced: bool
    notes: tuple[str, ...]
    protocol: str


def _code_stamp() -> list[Any]:
    """Each of cfkit's source files by size and mtime, and each import-path folder's mtime (a package installed
    or removed there changes it): a change to either may change how a command resolves."""
    files = []
    for folder, dirs, names in os.walk(_PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith(".py"):
                st = os.stat(os.path.join(folder, name))
                files.append([os.path.join(folder, name), st.st_size, st.st_mtime_ns])
    folders = []
    cwd = os.getcwd()
    for entry in sys.path:
        try:
            if os.path.abspath(entry or ".") == cwd:
                folders.append([entry, _importable(cwd)])
            else:
                folders.append([entry, os.stat(entry or ".").st_mtime_ns])
        except OSError:
            folders.append([entry, None])
    return [files, folders]


#: What the import system finds in a folder as a module or a package (a namespace folder never hides another).
_MODULE_SUFFIXES = (".py", ".pyc", ".pyw", ".so", ".pyd")


def _importable(folder: str) -> list[list[Any]]:
    """The modules and packages ``folder`` offers, by name and mtime: for the working directory on the import path
    (``python -m``), whose own mtime moves with every log or output file written there, which changes nothing
    a command imports."""
    found = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.endswith(_MODULE_SUFFIXES) or (
                    entry.is_dir() and os.path.isfile(os.path.join(entry.path, "__init__.py"))):
                found.append([entry.name, entry.stat().st_mtime_ns])
    return sorted(found)


def command_key(ws: Workspace, values: Mapping[str, Any]) -> str:
    """The digest of a ``probe run`` command: its ``values`` (as the command line gave them), the workspace's
    root and configuration, the working directory, the environment, the interpreter and cfkit's code."""
    facts = {"version": __version__, "values": dict(values), "root": str(ws.root),
             "config": ws.config.model_dump(mode="json"), "cwd": os.getcwd(), "env": sorted(os.environ.items()),
             "python": sys.executable, "code": _code_stamp()}
    text = json.dumps(facts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _read(ws: Workspace) -> dict[str, Any]:
    try:
        found = json.loads((ws.store_dir / _FILE).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def files_unchanged(manifest: Mapping[str, Any]) -> bool:
    """Whether every file of an inputs manifest has its recorded size and mtime (an absent one is still absent),
    with no mtime so close to when the manifest was taken that a rewrite in the same clock tick could hide."""
    from cfkit.store.digests import RACY_S

    recorded_at = manifest.get("at_ns") or 0
    for path, size, mtime_ns in manifest.get("files", ()):
        try:
            st = os.stat(path)  # the recorded text as it is: no Path built per file
            now = [st.st_size, st.st_mtime_ns]
        except OSError:
            now = [None, None]
        if now != [size, mtime_ns]:
            return False
        if mtime_ns is not None and recorded_at - mtime_ns < RACY_S * 1e9 + (1e9 if mtime_ns % 10**9 == 0 else 0):
            return False
    return bool(manifest.get("files"))


def recall(ws: Workspace, store: Store, key: str) -> tuple[RunRecord, Remembered] | None:
    """The finished run the command ``key`` resolved to, when it is still complete from unchanged inputs."""
    entry = _read(ws).get(key)
    if not isinstance(entry, dict):
        return None
    try:
        remembered = Remembered(**{**entry, "notes": tuple(entry["notes"])})
    except (TypeError, KeyError):
        return None
    for record, manifest in runs.complete_with_manifest(store, remembered.suite, remembered.settings_sha256):
        if record.id != remembered.run_id:
            continue
        if manifest.get("settings") == remembered.inputs_settings and files_unchanged(manifest):
            return record, remembered
        return None
    return None


def remember(ws: Workspace, store: Store, key: str, *, run_id: str, suite: str, settings_sha256: str, priced: bool,
             notes: tuple[str, ...], protocol: str) -> bool:
    """Remember that command ``key`` resolved to the complete run ``run_id``; False (nothing written) when the
    run recorded no inputs manifest. A file that cannot be written is left as it is: the shortcut is only
    speed."""
    manifest = next((m for r, m in runs.complete_with_manifest(store, suite, settings_sha256) if r.id == run_id),
                    None)
    if manifest is None or not manifest.get("settings"):
        return False
    entries = _read(ws)
    entries.pop(key, None)
    entries[key] = {"run_id": run_id, "suite": suite, "settings_sha256": settings_sha256,
                    "inputs_settings": manifest["settings"], "priced": priced, "notes": list(notes),
                    "protocol": protocol}
    entries = dict(list(entries.items())[-KEEP:])
    path = ws.store_dir / _FILE
    temporary = path.with_name(f".{_FILE}.{os.getpid()}")
    try:
        temporary.write_text(json.dumps(entries, indent=1))
        os.replace(temporary, path)
    except OSError:
        temporary.unlink(missing_ok=True)
        return False
    return True


def finished_summary(store: Store, finished: RunRecord, suite: str, *, priced: bool, notes: tuple[str, ...],
                     protocol: str, on_progress: Callable[[RunProgress], None] | None = None,
                     replayed_from: str | None = None) -> RunSummary:
    """The summary of ``finished``, a run that ended complete from the same inputs (the full path's and the
    shortcut's alike); ``replayed_from``: the file a replay backend reads its replies from."""
    progress = RunProgress(total=finished.n_requests, done=finished.n_requests, priced=priced)
    if on_progress:
        on_progress(progress)
    invalid, truncated, empty = runs.count_unanswered(store, finished.id)
    return RunSummary(run_id=finished.id, model=finished.model, suite=suite, status="done",
                      total=finished.n_requests, kept=finished.n_requests, from_cache=0, sent=0, errors=0,
                      invalid=invalid, truncated=truncated, empty=empty,
                      max_tokens=(finished.settings.get("generation") or {}).get("max_tokens"),
                      cost_usd=0.0 if priced else None, skipped=(), endpoint=finished.endpoint, protocol=protocol,
                      unreviewed=tuple(finished.notes.get("unreviewed", ())), notes=notes, replayed_from=replayed_from)
