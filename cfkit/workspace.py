"""Workspace discovery, ``cfkit.toml`` and the paths derived from it.

A workspace is a folder holding ``cfkit.toml``. It is found, in order, from an
explicit ``--workspace/-w`` option, the ``CFKIT_WORKSPACE`` variable, or by
walking up from the current directory.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from cfkit.errors import ConfigError, SpecError
from cfkit.vocabulary import MAX_CONCURRENCY, MAX_MARGIN_PX

CONFIG_NAME = "cfkit.toml"
ENV_VAR = "CFKIT_WORKSPACE"

# The sections of cfkit.toml as plain values. What each may hold (types, ranges) is checked by
# cfkit.workspace_schema; a file whose values are plainly right is read by _plain without it.


@dataclass(frozen=True)
class DatasetConfig:
    cases: str = "data/cases.jsonl"
    images: str = "data/images"


@dataclass(frozen=True)
class WorkspaceSection:
    store: str = ".cfkit"
    pairs: int = 36
    pair_prefix: str = "CF"  # pair ids are PREFIX01, PREFIX02, …
    interventions: str = "interventions"
    captions: str = "captions"
    probes: str = "probes"


@dataclass(frozen=True)
class EditConfig:
    engine: str = "auto"  # an engine name, or auto
    candidates: int = 1
    auto: list[str] | None = None  # the engines auto tries, in order (default: each engine's auto_rank)
    engines: dict[str, dict[str, Any]] = field(default_factory=dict)  # [edit.engines.NAME]: that engine's options


@dataclass(frozen=True)
class PriceConfig:
    input: float  # USD per million input tokens
    output: float  # USD per million output tokens
    cached_input: float | None = None  # USD per million input tokens read from a prompt cache (None: input's)
    cache_write: float | None = None  # … written to a 5-minute prompt cache (None: 1.25 x input's; Anthropic)
    cache_write_1h: float | None = None  # … written to a 1-hour prompt cache (None: 2 x input's; Anthropic)


@dataclass(frozen=True)
class ProbeConfig:
    model: str | None = None
    concurrency: int = 4
    modality_subset: str = "modality-100.txt"
    protocol: str = "default"  # "default" or "paper": the preset 'probe run' uses without --protocol
    prices: dict[str, PriceConfig] = field(default_factory=dict)  # [probe.prices."KIND:NAME"]: for cost estimates
    base_urls: list[str] = field(default_factory=list)  # replicas of the openai: model when no --base-url is given


@dataclass(frozen=True)
class CheckConfig:
    margin: int = 4  # pixels between the edit mask and the keep region
    lpips_backbone: str | None = None  # AlexNet ImageNet weights (.pth); default: torch's hub cache


@dataclass(frozen=True)
class Config:
    dataset: DatasetConfig = DatasetConfig()
    workspace: WorkspaceSection = WorkspaceSection()
    edit: EditConfig = EditConfig()
    probe: ProbeConfig = ProbeConfig()
    check: CheckConfig = CheckConfig()
    as_json: dict[str, Any] | None = field(default=None, compare=False, repr=False)  # set when read by pydantic

    def model_dump(self, mode: str = "json") -> dict[str, Any]:
        """Every setting as JSON values, section by section (a run's identity holds it)."""
        if self.as_json is not None:
            return copy.deepcopy(self.as_json)
        return {name: dataclasses.asdict(getattr(self, name)) for name in _SECTIONS}


def _is_str(value: Any) -> bool:
    return type(value) is str


def _int_within(low: int, high: int) -> Callable[[Any], bool]:
    return lambda value: type(value) is int and low <= value <= high


def _strs(value: Any) -> bool:
    return type(value) is list and all(type(item) is str for item in value)


def _plain_json(value: Any) -> bool:
    """A value JSON holds as it is (no date, no infinite number), so both readings keep it unchanged."""
    if type(value) in (str, bool, int):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is list:
        return all(_plain_json(item) for item in value)
    return type(value) is dict and all(type(k) is str and _plain_json(v) for k, v in value.items())


def _engines(value: Any) -> bool:
    return type(value) is dict and all(type(k) is str and type(v) is dict and _plain_json(v) for k, v in value.items())


def _price(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value) and 0 <= value <= 2 ** 53


def _prices(value: Any) -> bool:
    return type(value) is dict and all(type(k) is str and type(v) is dict and _PRICE_KEYS[0] <= set(v) <= _PRICE_KEYS[1]
                                       and all(_price(p) for p in v.values()) for k, v in value.items())


#: The keys a [probe.prices."KIND:NAME"] table must have, and those it may have.
_PRICE_KEYS = ({"input", "output"}, {"input", "output", "cached_input", "cache_write", "cache_write_1h"})


_PREFIX = re.compile(r"[A-Za-z][A-Za-z_-]*")
#: Per section: its class, and for each key the test a value passes to be read without the full check.
_SECTIONS: dict[str, tuple[type, dict[str, Callable[[Any], bool]]]] = {
    "dataset": (DatasetConfig, {"cases": _is_str, "images": _is_str}),
    "workspace": (WorkspaceSection, {
        "store": _is_str, "pairs": _int_within(1, 10_000), "interventions": _is_str, "captions": _is_str,
        "probes": _is_str, "pair_prefix": lambda v: type(v) is str and _PREFIX.fullmatch(v) is not None}),
    "edit": (EditConfig, {"engine": _is_str, "candidates": _int_within(1, 100), "auto": _strs, "engines": _engines}),
    "probe": (ProbeConfig, {"model": _is_str, "concurrency": _int_within(1, MAX_CONCURRENCY),
                            "modality_subset": _is_str, "protocol": lambda v: v in ("default", "paper") and _is_str(v),
                            "prices": _prices, "base_urls": _strs}),
    "check": (CheckConfig, {"margin": _int_within(0, MAX_MARGIN_PX), "lpips_backbone": _is_str}),
}


def _sections(values: dict[str, dict[str, Any]], as_json: dict[str, Any] | None = None) -> Config:
    made = {}
    for name, section in values.items():
        section = dict(section)
        if name == "probe" and "prices" in section:
            section["prices"] = {k: PriceConfig(float(v["input"]), float(v["output"]),
                                                *(None if v.get(o) is None else float(v[o])
                                                  for o in ("cached_input", "cache_write", "cache_write_1h")))
                                 for k, v in section["prices"].items()}
        made[name] = _SECTIONS[name][0](**section)
    return Config(**made, as_json=as_json)


def _plain(raw: dict[str, Any]) -> Config | None:
    """``raw`` read without pydantic when every value is plainly of its type and in range; else None."""
    for name, section in raw.items():
        if name not in _SECTIONS or type(section) is not dict:
            return None
        tests = _SECTIONS[name][1]
        if not all(key in tests and tests[key](value) for key, value in section.items()):
            return None
    return _sections(raw)


def config_from(raw: Any, where: str, then: str) -> Config:
    """The configuration ``raw`` (parsed TOML) holds; a refusal names ``where`` and ends with ``then``."""
    plain = _plain(raw) if type(raw) is dict else None
    if plain is not None:
        return plain
    from cfkit.workspace_schema import checked

    values, as_json = checked(raw, where, then)
    return _sections(values, as_json)


DEFAULT_TOML = """\
# cfkit workspace. Paths are relative to this file's folder.

[dataset]
cases = {cases}          # ContextCanvas cases, one JSON record a line
images = {images}        # folder the cases' image paths are relative to

[workspace]
store = ".cfkit"           # edits, checks, reviews, runs and the SQLite store
pairs = {pairs}                 # how many counterfactual pairs the study expects
interventions = "interventions"
captions = "captions"
probes = "probes"

[edit]
engine = "auto"            # an engine name (see 'cfkit edits engines'), or auto

[edit.engines.openai]      # options of one engine, as -o KEY=VALUE would give them
model = "gpt-image-2"

[edit.engines.diffusers]
model = "stable-diffusion-v1-5/stable-diffusion-inpainting"

[probe]
concurrency = 4
modality_subset = "modality-100.txt"
"""


@dataclass(frozen=True)
class Workspace:
    """A workspace folder and its parsed configuration."""

    root: Path
    config: Config

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_NAME

    @property
    def cases_path(self) -> Path:
        return self._path(self.config.dataset.cases)

    @property
    def image_root(self) -> Path:
        return self._path(self.config.dataset.images)

    @property
    def store_dir(self) -> Path:
        return self._path(self.config.workspace.store)

    @property
    def db_path(self) -> Path:
        return self.store_dir / "cfkit.db"

    @property
    def edits_dir(self) -> Path:
        return self.store_dir / "edits"

    @property
    def interventions_dir(self) -> Path:
        return self._path(self.config.workspace.interventions)

    @property
    def captions_dir(self) -> Path:
        return self._path(self.config.workspace.captions)

    @property
    def probes_dir(self) -> Path:
        return self._path(self.config.workspace.probes)

    @property
    def pairs(self) -> int:
        return self.config.workspace.pairs

    def _path(self, value: str) -> Path:
        path = Path(value).expanduser()
        return path if path.is_absolute() else self.root / path

    def confined(self, value: str, *, base: Path | None = None, what: str = "path") -> Path:
        """Resolve ``value`` against ``base`` (default: the root) and refuse escapes.

        Spec files name masks and assets; a path that leaves the workspace is
        refused so that a shared spec cannot read or write outside it.
        """
        base = base or self.root
        candidate = (base / value).resolve()
        root = self.root.resolve()
        if not candidate.is_relative_to(root):
            raise SpecError(
                f"{what} '{value}' points outside the workspace {root}; "
                "keep masks and assets inside the workspace folder."
            )
        return candidate


def load_workspace(root: Path) -> Workspace:
    """Read ``root/cfkit.toml``."""
    path = root / CONFIG_NAME
    try:
        # utf-8-sig: a byte-order mark (as Windows editors write it) is read past, not reported as a TOML error.
        raw = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: not found. Run 'cfkit init {root}' to make a workspace.") from None
    except IsADirectoryError:
        raise ConfigError(f"{path} is a folder; cfkit.toml must be a file. Move the folder aside.") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8.") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror}); check its permissions.") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}). Fix the file or re-create it with 'cfkit init'.") from exc
    except RecursionError:
        raise ConfigError(f"{path}: a value is nested too deeply to read; cfkit.toml holds flat tables of "
                          "settings.") from None
    _refuse_first_version_edit_keys(path, raw)
    config = config_from(raw, str(path), "See 'cfkit init --help' for the format.")
    return Workspace(root=root.resolve(), config=config)


def _refuse_first_version_edit_keys(path: Path, raw: dict[str, Any]) -> None:
    """The first version kept engine options as flat [edit] keys; say where they go now."""
    edit = raw.get("edit")
    if not isinstance(edit, dict):
        return
    for key in edit:
        engine, sep, option = key.rpartition("_")
        if key == "quality" or (sep and option == "model" and engine):
            target = "ENGINE" if key == "quality" else engine
            name = "quality" if key == "quality" else "model"
            raise ConfigError(f"{path}: [edit] {key} is the first version's spelling; engine options now live in "
                              f"their own table: write it as [edit.engines.{target}] {name} = {edit[key]!r}.")


def find_workspace(explicit: str | os.PathLike[str] | None = None, start: Path | None = None) -> Workspace:
    """Find the workspace from an explicit folder, ``CFKIT_WORKSPACE`` or the current directory."""
    given = explicit or os.environ.get(ENV_VAR)
    if given:
        root = Path(given).expanduser()
        if not root.is_dir():
            source = "--workspace" if explicit else ENV_VAR
            raise ConfigError(f"{source} '{given}' is not a folder. Give a folder holding {CONFIG_NAME}.")
        return load_workspace(root)
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / CONFIG_NAME).is_file():
            return load_workspace(folder)
    raise ConfigError(
        f"No {CONFIG_NAME} in {here} or any folder above it. "
        "Pass -w DIR, set CFKIT_WORKSPACE, or run 'cfkit init DIR'."
    )


def toml_string(value: str) -> str:
    """``value`` as a TOML string that reads back exactly (TOML 1.0, section 2.4).

    A literal string ('...') when it needs no escape, so Windows paths stay
    readable (``'C:\\data\\cases.jsonl'``); otherwise a basic string with ``\\``,
    ``"`` and every control character escaped.
    """
    if "'" not in value and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return f"'{value}'"
    out = []
    for char in value:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


@dataclass(frozen=True)
class WorkspacePlan:
    """A workspace checked in memory and not yet written: its ``cfkit.toml`` text and parsed form."""

    workspace: Workspace
    text: str


def plan_workspace(root: Path, *, cases: str, images: str, pairs: int) -> WorkspacePlan:
    """Build and validate ``cfkit.toml`` for a new workspace without touching the disk.

    Raises :class:`ConfigError` when ``root/cfkit.toml`` exists, when ``root`` is
    not a folder, or when a value cannot be written so that it reads back the same.
    """
    path = root / CONFIG_NAME
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{root} is a file, not a folder; choose a folder for the workspace.")
    if path.exists() or path.is_symlink():
        raise ConfigError(f"{path} already exists; edit it, or choose another folder.")
    for flag, value in (("--cases", cases), ("--images", images)):
        if not value.strip():
            raise ConfigError(f"{flag} is empty; give a path relative to the workspace folder or absolute.")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"{flag} {value!r} is not valid Unicode; rename the path or give another.") from None
    # An absolute path inside the workspace folder is written relative to it: a workspace copied or moved then
    # reads its own dataset, not the one at the old place (or none).
    cases, images = _within(root, cases), _within(root, images)
    text = DEFAULT_TOML.format(cases=toml_string(cases), images=toml_string(images), pairs=pairs)
    # Read back what would be written: a value that does not survive the round trip is refused here.
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # a writer bug; refuse rather than leave a broken file
        raise ConfigError(f"{path}: the configuration would not be valid TOML ({exc}); nothing was written.") from exc
    config = config_from(raw, str(path), "Nothing was written.")
    if (config.dataset.cases, config.dataset.images, config.workspace.pairs) != (cases, images, pairs):
        raise ConfigError(f"{path}: the paths given do not read back unchanged from TOML; give simpler paths.")
    return WorkspacePlan(Workspace(root=root.resolve(), config=config), text)


def _within(root: Path, value: str) -> str:
    path = Path(value).expanduser()
    if not path.is_absolute():
        return value
    try:
        return path.resolve().relative_to(root.resolve()).as_posix() or "."
    except ValueError:
        return value


def write_workspace(plan: WorkspacePlan) -> Workspace:
    """Create the planned folder, ``cfkit.toml`` and its sub-folders; on failure remove what it created."""
    from cfkit.files import write_text_atomic

    ws = plan.workspace
    created: list[Path] = []
    try:
        for folder in (ws.root, ws.interventions_dir, ws.interventions_dir / "masks", ws.captions_dir, ws.probes_dir):
            missing = [p for p in (folder, *folder.parents) if not p.exists()]
            folder.mkdir(parents=True, exist_ok=True)
            created.extend(reversed(missing))
        write_text_atomic(ws.config_path, plan.text, overwrite=False)
    except FileExistsError:
        _remove_folders(created)
        raise ConfigError(f"{ws.config_path} already exists; edit it, or choose another folder.") from None
    except OSError as exc:
        _remove_folders(created)
        raise ConfigError(f"cannot make the workspace {ws.root} ({exc.strerror}); "
                          "check the folder's permissions and free space.") from exc
    return ws


def _remove_folders(folders: list[Path]) -> None:
    for folder in reversed(folders):
        try:
            folder.rmdir()  # only ever empty folders this call made
        except OSError:
            pass


def init_workspace(root: Path, *, cases: str, images: str, pairs: int) -> Workspace:
    """Create a workspace folder with ``cfkit.toml`` and its standard sub-folders (the dataset is not checked).

    Refuses to overwrite an existing ``cfkit.toml``.
    """
    return write_workspace(plan_workspace(root, cases=cases, images=images, pairs=pairs))
