"""Atomic file writes: write to a temporary name in the same folder, then rename.

A crash or a full disk mid-write leaves the previous file intact.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from cfkit.errors import InputError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: Permissions of a file cfkit writes: what open() would give (mkstemp alone gives 0600).
FILE_MODE = 0o666 & ~_umask()


def write_bytes_atomic(path: Path, data: bytes, *, overwrite: bool = True) -> None:
    """Write ``data`` to ``path`` atomically; with ``overwrite=False`` refuse an existing file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            # link() fails if the target exists, so two writers cannot both win.
            os.link(tmp, path)
            os.unlink(tmp)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text_atomic(path: Path, text: str, *, overwrite: bool = True) -> None:
    write_bytes_atomic(path, text.encode("utf-8"), overwrite=overwrite)


def read_text(path: Path, what: str, error: type[InputError]) -> str:
    """A UTF-8 text file, or ``error`` saying why it cannot be read (``FileNotFoundError`` passes through)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} {path} is not UTF-8 text (byte {exc.start}: {exc.reason}). Save it as UTF-8.") from exc
    except IsADirectoryError:
        raise error(f"{what} {path} is a folder; give a file.") from None


def csv_problem(exc: Exception) -> str:
    """What a ``csv.Error`` means for the person who wrote the file, in words they can act on."""
    text = str(exc)
    if "field larger than field limit" in text:
        # Almost always a quote opened and never closed: the rest of the file became one cell.
        return "a cell is longer than 131,072 characters; look for a quote (\") that is opened and never closed"
    return text
