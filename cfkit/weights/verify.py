"""Verifying a backbone before it scores anything: a known checksum, else the published example distances."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cfkit.files import write_bytes_atomic
from cfkit.weights.locations import FINGERPRINT_TOLERANCE, KNOWN_CHECKSUMS, PUBLISHED_DISTANCES, weights_dir
from cfkit.weights.reading import read_alexnet_features

if TYPE_CHECKING:
    pass



@dataclass(frozen=True)
class Verification:
    """Whether a backbone file is AlexNet's ImageNet backbone, and how that was established."""

    ok: bool
    method: str  # "checksum" (a known SHA-256) or "fingerprint" (the published example distances)
    sha256: str
    distances: dict[str, float] | None = None  # LPIPS from ex_ref.png to each example, when fingerprinted
    what: str | None = None  # the known file a checksum matched

    def summary(self) -> str:
        """One phrase, e.g. ``verified by fingerprint: 0.722 / 0.138``."""
        if self.method == "checksum":
            return f"verified by checksum: {self.what}, sha256 {self.sha256[:8]}…"
        figures = " / ".join(f"{v:.3f}" for v in (self.distances or {}).values())
        return f"{'verified' if self.ok else 'refused'} by fingerprint: {figures}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def example_images() -> dict[str, np.ndarray]:
    """The LPIPS repository's example images shipped with cfkit, as uint8 RGB arrays."""
    from PIL import Image

    folder = resources.files("cfkit") / "data" / "lpips-examples"
    images = {}
    for name in ("ex_ref.png", *PUBLISHED_DISTANCES):
        with (folder / name).open("rb") as stream:
            images[name] = np.asarray(Image.open(stream).convert("RGB"))
    return images


def fingerprint(scorer: Any) -> dict[str, float]:
    """LPIPS (mean of the spatial map) from ``ex_ref.png`` to each published example, with ``scorer``."""
    images = example_images()
    reference = images["ex_ref.png"]
    return {name: float(scorer.distance_map(reference, images[name]).mean()) for name in PUBLISHED_DISTANCES}


def judge_fingerprint(sha256: str, distances: dict[str, float]) -> Verification:
    """A fingerprint verification: every distance within :data:`FINGERPRINT_TOLERANCE` of the published one."""
    ok = all(abs(distances[name] - value) <= FINGERPRINT_TOLERANCE for name, value in PUBLISHED_DISTANCES.items())
    return Verification(ok, "fingerprint", sha256, distances)


def refusal(verification: Verification, path: Path, source: str) -> str:
    """The one line refusing a backbone that failed verification."""
    got = " and ".join(f"{v:.3f}" for v in (verification.distances or {}).values())
    want = " and ".join(f"{v:.3f}" for v in PUBLISHED_DISTANCES.values())
    return (f"{source}: {path} is not AlexNet's ImageNet backbone (LPIPS of the reference examples is {got}, "
            f"published {want} ±{FINGERPRINT_TOLERANCE}); a random or other network cannot judge edits. "
            f"Get real weights with 'cfkit weights import lpips FILE' or 'cfkit weights fetch lpips'.")


def _checksum_verification(sha256: str) -> Verification | None:
    for prefix, what in KNOWN_CHECKSUMS.items():
        if sha256.startswith(prefix):
            return Verification(True, "checksum", sha256, what=what)
    return None


class _VerificationCache:
    """``verified.json`` in cfkit's cache: path -> size, mtime, sha256 and the verification."""

    def __init__(self) -> None:
        self.path = weights_dir() / "verified.json"
        try:
            self.entries: dict[str, dict[str, Any]] = json.loads(self.path.read_text())["files"]
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            self.entries = {}  # absent or unreadable: verify again (it is only a cache)

    def by_stat(self, path: Path, stat: os.stat_result) -> Verification | None:
        entry = self.entries.get(str(path))
        if entry and entry.get("size") == stat.st_size and entry.get("mtime_ns") == stat.st_mtime_ns:
            return _from_dict(entry["verification"])
        return None

    def by_sha(self, sha256: str) -> Verification | None:
        for entry in self.entries.values():
            if entry.get("verification", {}).get("sha256") == sha256:
                return _from_dict(entry["verification"])
        return None

    def store(self, path: Path, stat: os.stat_result, verification: Verification) -> None:
        self.entries[str(path)] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
                                   "verification": verification.to_dict()}
        try:
            write_bytes_atomic(self.path, json.dumps({"files": self.entries}, indent=1).encode())
        except OSError:
            pass  # a read-only cache only means verifying again next time


def _from_dict(data: dict[str, Any]) -> Verification | None:
    try:
        return Verification(**data)
    except TypeError:
        return None  # written by another cfkit version: verify again


def cached_verification(path: Path) -> Verification | None:
    """The stored verification of ``path`` when the file is unchanged since (size and mtime), else None."""
    path = Path(path).resolve()
    return _VerificationCache().by_stat(path, path.stat())


def verify_backbone(path: Path, *, source: str, scorer: Any | None = None, fix: str | None = None) -> Verification:
    """Verify a backbone file (cached): a known checksum, else the example-distance fingerprint.

    ``scorer`` is an LPIPS scorer already built from this file's features (saves
    building a second); without it one is built when a fingerprint is needed, and ``fix``
    is the advice for a file that cannot be read (see :func:`read_alexnet_features`).
    Raises :class:`ConfigError` for an unreadable file; a wrong network is a
    :class:`Verification` with ``ok=False``, not an exception.
    """
    path = Path(path).resolve()
    stat = path.stat()
    cache = _VerificationCache()
    found = cache.by_stat(path, stat)
    if found is None:
        sha256 = file_sha256(path)
        found = cache.by_sha(sha256) or _checksum_verification(sha256)
        if found is None:
            if scorer is None:
                from cfkit.preserve.scorer import scorer_from_features

                scorer = scorer_from_features(read_alexnet_features(path, source=source, fix=fix),
                                              description=str(path))
            found = judge_fingerprint(sha256, fingerprint(scorer))
        cache.store(path, stat, found)
    return found
