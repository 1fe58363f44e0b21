"""Editors and backends, found through entry points.

Built-in engines and backends register through the same entry-point groups a
third-party package uses (``cfkit.editors`` and ``cfkit.backends``), so there is
one way in. Loading a name imports only that plug-in's module; heavy libraries
are imported later still, when the plug-in is used.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points

from cfkit.errors import PluginError
from cfkit.suggest import did_you_mean

EDITORS = "cfkit.editors"
BACKENDS = "cfkit.backends"

_KIND = {EDITORS: ("editor", "engine", "cfkit edit --help"), BACKENDS: ("backend", "backend", "cfkit probe backends")}


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
    """Import and return the object registered as ``name`` in ``group``."""
    available = plugins(group)
    kind, flag, see = _KIND[group]
    if name not in available:
        names = ", ".join(sorted(available)) or "none"
        raise PluginError(f"Unknown {kind} '{name}'.{did_you_mean(name, available)} Installed: {names}. See '{see}'.")
    plugin = available[name]
    return EntryPoint(name=name, value=plugin.value, group=group).load()


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
