"""Which format a results file is in, told from its name and its first bytes (no reader is imported for it)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from cfkit.errors import PredictionError


#: The first bytes of a gzip stream, and how a file so compressed is named in messages.
GZIP_MAGIC = b"\x1f\x8b"


def refuse_compressed(path: Path) -> None:
    """Refuse a gzip-compressed results file in one line (read as text it is only bytes that are not UTF-8)."""
    try:
        with path.open("rb") as handle:
            magic = handle.read(2)
    except OSError:
        return  # the reader says why the file cannot be read
    if magic == GZIP_MAGIC:
        plain = path.name[:-3] if path.name.lower().endswith(".gz") else f"{path.name} (uncompressed)"
        raise PredictionError(f"{path}: gzip-compressed; cfkit reads results files uncompressed: 'gunzip -k {path}' "
                              f"writes {plain} beside it; give that file.")


def detect(path: Path) -> str:
    """The format of a results file, from its name and its first bytes."""
    refuse_compressed(path)
    suffix = path.suffix.lower()
    if suffix == ".eval":
        return "inspect"
    if suffix in (".xlsx", ".tsv"):
        return "vlmevalkit"
    if suffix == ".parquet":
        return "export"
    try:
        with path.open("rb") as handle:
            head = handle.read(64 * 1024).decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise PredictionError(f"predictions file {path} not found. Check the path given.") from None
    except OSError as exc:
        raise PredictionError(f"{path}: cannot be read ({exc.strerror}).") from exc
    if suffix == ".csv":
        first = head.splitlines()[0] if head else ""
        names = next(csv.reader([first]), [])
        return "export" if {"run", "suite", "condition"} <= set(names) else "vlmevalkit"
    stripped = head.lstrip()
    first = stripped.splitlines()[0] if stripped else ""
    try:
        record = json.loads(first)
    except (json.JSONDecodeError, RecursionError):
        record = None
    if isinstance(record, dict):
        if "doc_id" in record and ("resps" in record or "filtered_resps" in record):  # (0.4 on: resps may go)
            return "lmms"
        if "run" in record and "suite" in record:
            return "export"
        if "suite" in record and "condition" in record:
            return "native"
    if suffix == ".json" and stripped.startswith("["):
        # A list of row objects: VLMEvalKit's prediction table saved under PRED_FORMAT=json (an inspect_ai log is
        # one object); its reader names what it lacks if it is not one.
        return "vlmevalkit"
    if suffix == ".json" or (stripped.startswith("{") and '"eval"' in head):
        return "inspect"
    # Anything else is read as cfkit's predictions, whose reader names the first line it cannot take.
    return "native"
