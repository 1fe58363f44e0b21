"""Case subsets: a text file of case ids, one a line (``#`` comments and blank lines ignored).

The modality probe runs on a subset (``[probe] modality_subset``, the paper's
100 cases); :func:`read_subset` is the one reader every command uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from cfkit.errors import CaseError, UsageError
from cfkit.files import read_text
from cfkit.suggest import did_you_mean
from cfkit.workspace import Workspace

if TYPE_CHECKING:  # the cases are read by whoever asks for them (a rerun that needs no case imports neither)
    from cfkit.cases import CaseSet


def read_subset(path: Path, cases: CaseSet) -> list[str]:
    """Case ids of a subset file: one id a line, ``#`` comments and blank lines ignored."""
    try:
        lines = read_text(path, "subset file", CaseError).splitlines()
    except FileNotFoundError:
        raise CaseError(f"subset file {path} not found. Give a file with one case id a line.") from None
    ids: list[str] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(lines, start=1):
        case_id = line.split("#", 1)[0].strip()
        if not case_id:
            continue
        if case_id not in cases:
            raise CaseError(f"{path}:{lineno}: case '{case_id}' is not in {cases.path}."
                            f"{did_you_mean(case_id, cases.ids)} Fix or remove the line.")
        if case_id in seen:
            raise CaseError(f"{path}:{lineno}: case '{case_id}' repeats line {seen[case_id]}. Remove one.")
        seen[case_id] = lineno
        ids.append(case_id)
    if not ids:
        raise CaseError(f"subset file {path} lists no case ids. Write one case id a line there.")
    return ids


def modality_subset_path(ws: Workspace) -> Path:
    """Where the workspace's modality subset file is configured (``[probe] modality_subset``)."""
    return ws.probes_dir / ws.config.probe.modality_subset


def resolve_subset(ws: Workspace, value: str | Path) -> Path:
    """A subset path as given, or relative to the workspace's probes folder."""
    path = Path(value).expanduser()
    if path.exists() or path.is_absolute():
        return path
    return ws.probes_dir / path


def modality_cases(ws: Workspace, cases: CaseSet, *, subset: str | Path | None = None,
                   all_cases: bool = False) -> list[str]:
    """The cases of the modality probe, the same way for every command.

    ``--subset FILE`` when given; every case with ``--all-cases``; else the
    configured subset (``[probe] modality_subset``). A configured subset file
    that does not exist is refused in one line, never replaced by every case.
    """
    if subset is not None and all_cases:
        raise UsageError(f"give --subset {subset} or --all-cases, not both.")
    if all_cases:
        return list(cases.ids)
    if subset is not None:
        return read_subset(resolve_subset(ws, subset), cases)
    configured = modality_subset_path(ws)
    if not configured.exists():
        raise CaseError(missing_subset_message(ws))
    return read_subset(configured, cases)


def missing_subset_message(ws: Workspace) -> str:
    """Why the configured modality subset cannot be used, and the three ways on."""
    return (f"[probe] modality_subset = '{ws.config.probe.modality_subset}' is configured, but "
            f"{modality_subset_path(ws)} does not exist. Write the subset there (one case id a line; the paper's "
            "100-case subset comes with the ContextCanvas release, not with cfkit), or pass --subset FILE or "
            "--all-cases.")


def select_cases(ws: Workspace, cases: CaseSet, case_ids: Iterable[str] = (), subset: str | Path | None = None,
                 *, all_cases: bool = False) -> list[str]:
    """Which cases a captions command covers: explicit ids, else :func:`modality_cases`."""
    ids = list(case_ids)
    if ids and (subset is not None or all_cases):
        raise UsageError(f"give case ids or {'--subset ' + str(subset) if subset is not None else '--all-cases'}, "
                         "not both.")
    if ids:
        for case_id in ids:
            cases.get(case_id)  # raises a CaseError naming the cases file
        return ids
    return modality_cases(ws, cases, subset=subset, all_cases=all_cases)


def workspace_cases(ws: Workspace) -> CaseSet:
    from cfkit.dataset import load_cases

    return load_cases(ws.cases_path, ws.image_root)
