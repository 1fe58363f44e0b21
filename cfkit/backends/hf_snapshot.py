"""Where an ``hf:`` checkpoint's files are on this machine, and what identifies them.

The hf backend never downloads. A local folder is used as it is; a hub id is
looked up in the local Hugging Face cache only
(``snapshot_download(..., local_files_only=True)``, no network, offline or
not), so a model that is not here fails at once with the command that fetches
it. What identifies the checkpoint is the snapshot's commit (for a hub id) and
the SHA-256 of every file in it; both enter the backend's cache identity, so
new weights under an old name never reuse replies cached from the old ones.

Hashes: a file in the hub cache is a link to a blob named by its content
hash; for large (LFS) files that name is the file's SHA-256 and is used as it
is. Any other file is read and hashed; the result is remembered in
``<store>/hf-file-sha256.json`` by path, size and modification time, so a
multi-gigabyte folder is hashed once, not on every run. As for images
(:meth:`cfkit.store.digests.FileDigest.holds`), a hash taken within
``RACY_S`` of the file's modification time is not trusted later: a file
rewritten with the same size within one tick of the filesystem's clock keeps
its mtime, and would otherwise pass as the file hashed before.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from cfkit.errors import BackendUnavailable
from cfkit.files import write_text_atomic
from cfkit.hints import download_hint

#: File endings of weight files; a checkpoint without any cannot be loaded.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf")
MEMO_NAME = "hf-file-sha256.json"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CHUNK = 8 << 20


@dataclass(frozen=True)
class Snapshot:
    """A checkpoint on this machine: its folder, its hub commit (None for a plain folder), its files' hashes."""

    folder: Path
    revision: str | None
    files: dict[str, str]  # path relative to the folder -> SHA-256 of its content

    @property
    def weights(self) -> dict[str, str]:
        return {name: sha for name, sha in self.files.items() if name.endswith(WEIGHT_SUFFIXES)}

    def identity(self) -> dict[str, object]:
        """What enters the cache key: the commit, each weight file's hash and one hash over every file."""
        listing = json.dumps(sorted(self.files.items())).encode()
        return {"revision": self.revision, "weights_sha256": self.weights,
                "files_sha256": hashlib.sha256(listing).hexdigest()}


def looks_like_path(name: str) -> bool:
    """A name meant as a folder (``/models/x``, ``./x``, ``~/x``) rather than a hub id (``org/name``)."""
    return name.startswith(("/", ".", "~")) or "\\" in name or name.count("/") > 1


def find_snapshot(name: str, revision: str | None = None, *, memo_dir: Path | None = None) -> Snapshot:
    """The checkpoint ``name`` (a folder or a hub id) as it is on this machine; never downloads.

    Raises :class:`BackendUnavailable` naming the model and how to fetch it
    when it is not here or has no weight files.
    """
    local = Path(name).expanduser()
    if local.is_dir():
        folder, commit = local.resolve(), None
        where = f"folder {local}"
        fetch = download_hint("MODEL_ID", local)
    elif looks_like_path(name):
        raise BackendUnavailable(f"hf backend: folder {local} does not exist. Point hf: at the folder "
                                 f"save_pretrained wrote, or fetch a model there: {download_hint('MODEL_ID', local)}")
    else:
        folder, commit = _cached_snapshot(name, revision)
        where = f"the cached snapshot {folder}"
        fetch = download_hint(name) + (f" --revision {revision}" if revision else "")
    if not (folder / "config.json").is_file():
        raise BackendUnavailable(f"hf backend: {where} has no config.json, so it holds no saved model. Point hf: at "
                                 f"the folder save_pretrained wrote, or fetch one: {fetch}")
    files = file_hashes(folder, memo_dir)
    if not any(n.endswith(WEIGHT_SUFFIXES) for n in files):
        raise BackendUnavailable(f"hf backend: {where} has a config.json but no weight files "
                                 f"({', '.join('*' + s for s in WEIGHT_SUFFIXES[:2])}); fetch them: {fetch}")
    return Snapshot(folder=folder, revision=commit, files=files)


def _cached_snapshot(repo_id: str, revision: str | None) -> tuple[Path, str]:
    """The local cache's snapshot folder of ``repo_id`` at ``revision`` (default: main) and its commit."""
    try:
        from huggingface_hub import constants, snapshot_download
        from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError
    except ImportError as exc:  # the hf extra brings huggingface_hub with transformers
        from cfkit.hints import install_hint

        raise BackendUnavailable(f"hf backend: huggingface_hub is not installed. Run: {install_hint('hf')}") from exc
    fetch = download_hint(repo_id) + (f" --revision {revision}" if revision else "")
    try:
        folder = Path(snapshot_download(repo_id, revision=revision, local_files_only=True))
    except HFValidationError as exc:
        raise BackendUnavailable(f"hf backend: '{repo_id}' is neither a folder here nor a hub id "
                                 f"({str(exc).splitlines()[0]}). Give hf:ORG/NAME or hf:/path/to/model.") from exc
    except (LocalEntryNotFoundError, FileNotFoundError, OSError) as exc:
        at = f" at revision {revision}" if revision else ""
        raise BackendUnavailable(f"hf backend: '{repo_id}'{at} is not in the local Hugging Face cache "
                                 f"({constants.HF_HUB_CACHE}); cfkit never downloads weights. Fetch it first: "
                                 f"{fetch} (or pass a local folder: hf:/path/to/model).") from exc
    return folder, folder.name


def file_hashes(folder: Path, memo_dir: Path | None = None) -> dict[str, str]:
    """SHA-256 of every file under ``folder`` (hidden files and folders left out), by relative path."""
    memo_path = memo_dir / MEMO_NAME if memo_dir is not None else None
    memo = _read_memo(memo_path)
    changed = False
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        target = path.resolve()
        if _SHA256.fullmatch(target.name) and target.parent.name == "blobs":
            found[relative.as_posix()] = target.name  # a hub-cache blob is named by its content hash
            continue
        stat = target.stat()
        key = str(target)
        entry = memo.get(key)
        if entry and _holds(entry, stat.st_size, stat.st_mtime_ns):
            found[relative.as_posix()] = entry["sha256"]
            continue
        hashed_at = time.time_ns()  # before reading: a write after this is newer than the hash
        digest = _sha256(target)
        memo[key] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest, "hashed_at_ns": hashed_at}
        found[relative.as_posix()] = digest
        changed = True
    if changed and memo_path is not None and memo_path.parent.is_dir():
        try:
            write_text_atomic(memo_path, json.dumps(memo, indent=1, sort_keys=True) + "\n", overwrite=True)
        except OSError:
            pass  # only a shortcut for the next run; the hashes above are right either way
    return found


def _holds(entry: dict, size: int, mtime_ns: int) -> bool:
    """Whether a remembered hash still stands for a file found with ``size`` and ``mtime_ns``: the same size and
    mtime, and hashed long enough after that mtime (whole-second timestamps: a second more)."""
    from cfkit.store.digests import RACY_S

    if entry.get("size") != size or entry.get("mtime_ns") != mtime_ns or not isinstance(entry.get("sha256"), str):
        return False
    hashed_at = entry.get("hashed_at_ns")
    window = RACY_S + (1.0 if mtime_ns % 1_000_000_000 == 0 else 0.0)
    return isinstance(hashed_at, int) and hashed_at - mtime_ns >= window * 1e9


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _read_memo(path: Path | None) -> dict[str, dict]:
    if path is None or not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}  # a damaged memo is rebuilt
    return data if isinstance(data, dict) else {}
