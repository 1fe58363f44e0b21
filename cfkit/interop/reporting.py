"""``cfkit report --predictions`` over files of any supported format."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from cfkit.errors import UsageError
from cfkit.workspace import Workspace


@contextlib.contextmanager
def predictions_files(ws: Workspace, paths: Sequence[str | Path], *, fmt: str = "auto", map_path: str | None = None,
                      label: str | None = None) -> Iterator[tuple[list[Path], list[str]]]:
    """The predictions JSONL files to report on for ``paths`` (peers' files converted), with a line per converted
    file saying how many of cfkit's readings differ from the peer's own."""
    if not paths:
        if fmt != "auto" or map_path or label:
            raise UsageError("--predictions-format, --map and --label describe --predictions files; give --predictions.")
        yield [], []
        return
    from cfkit.interop import as_predictions_files
    from cfkit.interop.mapping import detect, load_map

    kinds = {detect(Path(p)) if fmt == "auto" else fmt for p in paths}
    if kinds == {"native"} and not map_path and not label:
        yield [Path(p) for p in paths], []
        return
    from cfkit.dataset import load_cases

    cases = load_cases(ws.cases_path, ws.image_root)
    mapping = load_map(map_path) if map_path else None
    with as_predictions_files(paths, cases, fmt=fmt, mapping=mapping, label=label) as result:
        yield result
