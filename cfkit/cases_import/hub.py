"""``cfkit cases import hf://datasets/OWNER/NAME[:SPLIT]``: a dataset on the Hugging Face Hub, by name.

Loaded with ``datasets.load_dataset``, so the datasets cache
(``HF_DATASETS_CACHE``, under ``HF_HOME``) and offline mode
(``HF_HUB_OFFLINE=1``, ``HF_DATASETS_OFFLINE=1``) work as they do for every
other datasets user: a dataset loaded once is read from the cache, offline
too. When the hub cannot be reached, a snapshot of the dataset's files in the
hub cache (``HF_HUB_CACHE``, left by ``snapshot_download`` or ``hf
download``) is loaded instead; with neither, the import stops with one line
saying so.
"""

from __future__ import annotations

import re

from cfkit.errors import CaseError

PREFIX = "hf://datasets/"
_REF = re.compile(r"^hf://datasets/(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?::(?P<split>[\w.-]+))?$")


def is_hub(source: object) -> bool:
    """Whether an import source names a hub dataset (``hf://datasets/…``)."""
    return isinstance(source, str) and source.startswith("hf://")


def parse_ref(ref: str) -> tuple[str, str | None]:
    """``hf://datasets/OWNER/NAME[:SPLIT]`` → (``OWNER/NAME``, SPLIT or None)."""
    m = _REF.match(ref)
    if m is None:
        raise CaseError(f"{ref}: a hub dataset is named hf://datasets/OWNER/NAME, or hf://datasets/OWNER/NAME:SPLIT "
                        "for one split.")
    return m.group("repo"), m.group("split")


def load(ref: str, split: str | None):
    """The dataset (or, without a split, every split as a DatasetDict) that ``ref`` names."""
    repo, named = parse_ref(ref)
    if named is not None and split is not None and named != split:
        raise CaseError(f"{ref} names split '{named}' and --split says '{split}'; give one.")
    split = named or split
    try:
        import datasets
    except ImportError:
        raise CaseError(f"{ref}: reading a hub dataset needs the 'datasets' package; run 'pip install datasets'.") \
            from None
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # library progress bars would mix with cfkit's output
    verbosity = datasets.logging.get_verbosity()
    datasets.logging.set_verbosity_error()  # "using the cached version" notes: the offline load is what was asked
    try:
        try:
            return datasets.load_dataset(repo, split=split)
        except ConnectionError as exc:
            snapshot = _hub_snapshot(repo)
            if snapshot is None:
                offline = datasets.config.HF_HUB_OFFLINE
                raise CaseError(f"{ref}: the Hugging Face Hub cannot be reached"
                                f"{' (offline mode is on)' if offline else ''} and the dataset is in neither the "
                                f"datasets cache ({datasets.config.HF_DATASETS_CACHE}) nor the hub cache; connect "
                                "once to download it, then it loads offline too.") from exc
            return datasets.load_dataset(snapshot, split=split)
    except CaseError:
        raise
    except ValueError as exc:  # an unknown split, among others
        raise CaseError(f"{ref}: {exc}".rstrip(".") + ".") from exc
    except Exception as exc:  # datasets' own DatasetNotFoundError and hub errors
        name = type(exc).__name__
        if "NotFound" in name or "RepositoryNotFound" in name:
            raise CaseError(f"{ref}: no such dataset on the hub (or it is private and no token is set).") from exc
        raise CaseError(f"{ref}: the dataset cannot be loaded ({name}: {exc}).") from exc
    finally:
        datasets.logging.set_verbosity(verbosity)
        if bars:
            datasets.enable_progress_bars()


def _hub_snapshot(repo: str) -> str | None:
    """The folder of the dataset's newest snapshot in the hub cache (``HF_HUB_CACHE``: what
    ``huggingface_hub.snapshot_download`` and ``hf download --repo-type dataset`` leave), or None."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        return None
    try:
        return snapshot_download(repo, repo_type="dataset", local_files_only=True)
    except (LocalEntryNotFoundError, FileNotFoundError):
        return None
