"""Editors and backends, found through entry points.

Built-in engines and backends register through the same entry-point groups a
third-party package uses (``cfkit.editors`` and ``cfkit.backends``), so there is
one way in. Loading a name imports only that plug-in's module; heavy libraries
are imported later still, when the plug-in is used.

A built-in name (:data:`BUILT_IN`, the same table as cfkit's own entry points)
is loaded without reading every installed distribution's entry points (tens of
ms a command, and importlib.metadata itself): a built-in name always means the
built-in. Any other name is looked up in the entry points, and the listings
(``cfkit probe backends``, ``cfkit edits engines``) read them all, so a package
that claims a built-in's name is still reported there.

:func:`installed_version` reads an installed distribution's version from its
``.dist-info`` folder, as :func:`importlib.metadata.version` does, without
importing importlib.metadata or parsing the whole metadata file.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any
from functools import lru_cache

from cfkit.errors import PluginError
from cfkit.suggest import did_you_mean

EDITORS = "cfkit.editors"
BACKENDS = "cfkit.backends"

#: cfkit's own plug-ins, by group and name: what its entry points in pyproject.toml register (a test holds the
#: two equal).
BUILT_IN: dict[str, dict[str, str]] = {
    EDITORS: {"openai": "cfkit.editors.openai_images:OpenAIEditor",
              "diffusers": "cfkit.editors.diffusers_inpaint:DiffusersEditor",
              "classical": "cfkit.editors.classical:ClassicalEditor",
              "file": "cfkit.editors.file_import:FileEditor"},
    BACKENDS: {"openai": "cfkit.backends.openai_chat:OpenAIBackend",
               "hf": "cfkit.backends.hf_local:HFBackend",
               "replay": "cfkit.backends.replay:ReplayBackend",
               "baseline": "cfkit.backends.baseline:BaselineBackend",
               "anthropic": "cfkit.backends.anthropic_messages:AnthropicBackend"},
}

_KIND = {EDITORS: ("editor", "engine", "cfkit edits engines"), BACKENDS: ("backend", "backend", "cfkit probe backends")}


@dataclass(frozen=True)
class Plugin:
    name: str
    value: str  # "module:attr"
    dist: Any = field(default=None, compare=False, repr=False)  # the distribution that registered it

    @property
    def package(self) -> str:
        """The name of the distribution that registered the plug-in. Read from its metadata only when asked:
        parsing every distribution's metadata costs a command that only loads a plug-in tens of ms."""
        return self.dist.name if self.dist is not None else "?"


def plugins(group: str) -> dict[str, Plugin]:
    """Every plug-in registered in ``group``, by name; two packages claiming one name is an error."""
    return dict(_plugins(group, tuple(sys.path)))


@lru_cache(maxsize=16)
def _plugins(group: str, path: tuple[str, ...]) -> dict[str, Plugin]:
    # Reading every installed distribution's entry points takes about 10 ms; a command asks several
    # times. What is installed changes only with the import path, which is part of the key.
    from importlib.metadata import entry_points

    found: dict[str, Plugin] = {}
    for ep in entry_points(group=group):
        plugin = Plugin(ep.name, ep.value, ep.dist)
        previous = found.get(ep.name)
        if previous is not None and previous.value != plugin.value:
            raise PluginError(
                f"{_KIND[group][0]} name '{ep.name}' is registered twice: by {previous.package} "
                f"({previous.value}) and by {plugin.package} ({ep.value}). Uninstall one of them."
            )
        found[ep.name] = plugin
    return found


def load(group: str, name: str):
    """Import and return the object registered as ``name`` in ``group`` (a built-in name without reading the
    entry points)."""
    built_in = BUILT_IN.get(group, {}).get(name)
    if built_in is not None:
        return _load_target(built_in)
    available = plugins(group)
    kind, flag, see = _KIND[group]
    if name not in available:
        names = ", ".join(sorted(available)) or "none"
        raise PluginError(f"Unknown {kind} '{name}'.{did_you_mean(name, available)} Installed: {names}. See '{see}'.")
    return _load_target(available[name].value)


def _load_target(value: str) -> Any:
    """The object an entry point's ``value`` names ("module:attr.attr", or a module alone), as
    :meth:`importlib.metadata.EntryPoint.load` finds it."""
    import importlib

    module_name, _, attrs = value.partition(":")
    found = importlib.import_module(module_name.strip())
    for attr in filter(None, attrs.strip().split(".")):
        found = getattr(found, attr)
    return found


_DIST_NAME = re.compile(r"[-_.]+")


def installed_version(name: str) -> str | None:
    """The version of the installed distribution ``name``, None when none is installed.

    What :func:`importlib.metadata.version` answers, found the way it finds it: the first folder of
    ``sys.path`` holding a ``NAME-VERSION.dist-info`` (or ``.egg-info``) folder of that name (compared as
    normalised names), whose metadata's ``Version:`` line is read. Where ``sys.path`` holds something else
    than folders (a zip archive), importlib.metadata itself answers.
    """
    wanted = _DIST_NAME.sub("_", name).lower()
    for entry in sys.path:
        listing = _distributions_in(entry or ".")
        if listing is None:
            return _metadata_version(name)
        folder = listing.get(wanted)
        if folder is not None:
            return _version_in(folder) or _metadata_version(name)
    return None


@functools.cache
def _distributions_in(entry: str) -> dict[str, str] | None:
    """Each distribution's metadata folder in the ``sys.path`` folder ``entry``, by normalised name (the first
    listed where two claim one name, as importlib.metadata takes it); {} when ``entry`` is absent or cannot be
    listed, None when it is not a plain folder."""
    if not os.path.isdir(entry):
        return None if os.path.exists(entry) else {}
    found: dict[str, str] = {}
    try:
        names = os.listdir(entry)
    except OSError:
        return {}
    for item in names:
        low = item.lower()
        if low.endswith((".dist-info", ".egg-info")):
            dist = _DIST_NAME.sub("_", low.rpartition(".")[0].partition("-")[0])
            found.setdefault(dist, os.path.join(entry, item))
    return found


def _version_in(folder: str) -> str | None:
    """The ``Version:`` of a metadata folder's METADATA (PKG-INFO in an .egg-info), read up to its headers' end."""
    path = os.path.join(folder, "PKG-INFO" if folder.endswith(".egg-info") else "METADATA")
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line in ("\n", "\r\n"):
                    break
                key, sep, value = line.partition(":")
                if sep and key.lower() == "version":
                    return value.lstrip(" \t").rstrip("\r\n")  # as the email parser importlib uses reads it
    except OSError:
        return None
    return None


def _metadata_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def with_defaults(plugin: Any, base: type) -> Any:
    """``plugin`` (a class) as a subclass of ``base``, so ``base``'s defaults fill the members it leaves out.

    A class that already subclasses ``base`` (every built-in) comes back as it is;
    another gets a subclass of both, in which everything it defines itself comes
    first. Anything that is not a class is returned unchanged.
    """
    if not isinstance(plugin, type) or issubclass(plugin, base):
        return plugin
    return _adopted(plugin, base)


@lru_cache(maxsize=64)
def _adopted(plugin: type, base: type) -> type:
    return type(plugin.__name__, (plugin, base), {"__module__": plugin.__module__, "__qualname__": plugin.__qualname__,
                                                  "__doc__": plugin.__doc__})
