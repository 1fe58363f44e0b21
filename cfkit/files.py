"""Atomic file writes: write to a temporary name in the same folder, then rename; and text, CSV and JSON read
with one-line errors.

A crash or a full disk mid-write leaves the previous file intact.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from cfkit.errors import InputError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: Permissions of a file cfkit writes: what open() would give (mkstemp alone gives 0600).
FILE_MODE = 0o666 & ~_umask()


@contextmanager
def atomic_writer(path: Path, *, overwrite: bool = True) -> Iterator[BinaryIO]:
    """A binary handle whose bytes become ``path`` atomically when the block ends without an error.

    For content too large to hold in memory (a streamed import); with
    ``overwrite=False`` an existing file is refused (``FileExistsError``). If the
    block raises, nothing is left behind.
    """
    import tempfile  # here: it brings shutil and the compressors, which a probe run does not need to start

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            # link() fails if the target exists, so two writers cannot both win.
            try:
                os.link(tmp, path)
            except FileExistsError as exc:  # named by the file kept, not by the temporary one
                raise FileExistsError(exc.errno, exc.strerror, str(path)) from None
            os.unlink(tmp)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_bytes_atomic(path: Path, data: bytes, *, overwrite: bool = True) -> None:
    """Write ``data`` to ``path`` atomically; with ``overwrite=False`` refuse an existing file."""
    with atomic_writer(path, overwrite=overwrite) as handle:
        handle.write(data)


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


def json_value(text: str | bytes, where: str, error: type[InputError], *, shape: str = "", hint: str = "") -> Any:
    """``text`` read as JSON, or ``error`` in one line naming ``where``: why it is not JSON and where in it (the
    column alone for one line), followed by ``hint``; or that it nests too deeply to read, and ``shape``."""
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at = f"column {exc.colno}" if exc.lineno == 1 else f"line {exc.lineno} column {exc.colno}"
        raise error(f"{where}: not valid JSON ({exc.msg} at {at}){'. ' + hint if hint else '.'}") from None
    except UnicodeDecodeError as exc:
        raise error(f"{where}: not UTF-8 text (byte {exc.start}: {exc.reason}){'. ' + hint if hint else '.'}") from None
    except RecursionError:
        raise error(f"{where}: JSON nested too deeply to read{'; ' + shape if shape else ''}.") from None


#: The longest CSV cell read by default, in characters (Python's csv module alone stops at 131,072).
CSV_CELL_LIMIT = 10_000_000


def csv_reader(lines: Iterable[str], *, delimiter: str = ",", limit: int = CSV_CELL_LIMIT) -> Iterator[list[str]]:
    """``csv.reader`` over ``lines`` that reads cells up to ``limit`` characters and notices an unclosed quote.

    ``strict`` makes a quote left open at the end of the file an error (the
    lenient reader would return the rest of the file as one cell).
    """
    import csv  # here: most commands read no CSV (a probe run's path to its first request among them)

    csv.field_size_limit(max(limit, 131_072))
    return csv.reader(lines, delimiter=delimiter, strict=True)


def csv_dict_reader(stream: Iterable[str], *, limit: int = CSV_CELL_LIMIT) -> csv.DictReader:
    """``csv.DictReader`` with the bound and strictness of :func:`csv_reader`."""
    import csv

    csv.field_size_limit(max(limit, 131_072))
    return csv.DictReader(stream, strict=True)


def csv_problem(exc: Exception) -> str:
    """What a ``csv.Error`` means for the person who wrote the file, in words they can act on."""
    import csv

    text = str(exc)
    if "field larger than field limit" in text:
        return (f"a cell is longer than {csv.field_size_limit():,} characters, the most cfkit reads in one cell; "
                "if the file has a quote (\") that is opened and never closed, close it")
    if "unexpected end of data" in text:
        return "a quote (\") is opened and never closed before the end of the file; close it"
    if "expected after" in text:
        return f"{text}: a quoted cell must end at its closing quote; double a quote inside a cell (\"\")"
    return text
