"""Plug-in options: one mechanism for engines and backends, built-in or third-party.

Every engine and backend declares an ``Options`` pydantic model (a subclass of
:class:`PluginOptions`). Values reach it from three places, each recorded so a
refusal names where the bad value came from:

- ``-o/--option KEY=VALUE`` on the command line (strings, parsed by pydantic),
- ``cfkit.toml`` (``[edit.engines.NAME]``, backends' own sections),
- a spec's ``engines: {NAME: {…}}`` (edits only).

:func:`validate_options` is the one place they are checked: an unknown key is
refused with the allowed ones, a bad value with the field's own rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from typing import TYPE_CHECKING

from cfkit.errors import InputError, OptionError

if TYPE_CHECKING:
    from pydantic import BaseModel


def _plugin_options() -> type:
    from pydantic import BaseModel, ConfigDict

    class PluginOptions(BaseModel):
        """Base of every engine's and backend's ``Options``: unknown keys are refused, values are frozen.

        Mark a field ``json_schema_extra={"cache": False}`` when it cannot change
        a result (timeouts, retries, prices); the others identify the result.
        """

        model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    PluginOptions.__qualname__ = "PluginOptions"
    return PluginOptions


def __getattr__(name: str) -> Any:
    """``PluginOptions`` is built when first asked for: importing pydantic and building a first model costs a
    command that only reads :class:`Setting` or :func:`parse_option_pairs` (a cached rerun) a large part of its
    time."""
    if name == "PluginOptions":
        built = globals()["PluginOptions"] = _plugin_options()
        return built
    raise AttributeError(f"module 'cfkit.options' has no attribute {name!r}")


@dataclass(frozen=True)
class OptionValues:
    """Option values with where each came from (``-o timeout=30``, ``cfkit.toml [edit.engines.openai]`` …)."""

    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, values: Mapping[str, Any] | None, origin: str) -> "OptionValues":
        values = dict(values or {})
        return cls(values, {key: origin for key in values})

    def over(self, base: "OptionValues") -> "OptionValues":
        """These values laid over ``base`` (these win)."""
        return OptionValues(base.values | self.values, base.origins | self.origins)

    def origin(self, key: str) -> str:
        return self.origins.get(key, "options")


@dataclass(frozen=True)
class Setting:
    """A value a flag gives or, without the flag, the workspace's configuration; ``where`` names the one used."""

    value: Any
    where: str

    @classmethod
    def of(cls, given: Any, flag: str, configured: Any, key: str) -> "Setting":
        """``given`` (from ``flag``) unless it is None, else ``configured`` (cfkit.toml's ``key``, e.g.
        ``[edit] engine``)."""
        if given is not None:
            return cls(given, flag)
        return cls(configured, f"cfkit.toml {key}")


@contextmanager
def blamed(setting: Setting) -> Iterator[None]:
    """A refusal of ``setting``'s value raised inside names where the value came from: the flag the user typed,
    or the configuration key it was read from when no flag was given."""
    try:
        yield
    except InputError as exc:
        raise type(exc)(f"{setting.where} {setting.value}: {exc}") from exc


def parse_option_pairs(pairs: Iterable[str]) -> dict[str, str]:
    """``["key=value", …]`` from repeated ``-o`` flags as a dict; a malformed or repeated key is refused."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise OptionError(f"option '{pair}' is not KEY=VALUE; write it as -o KEY=VALUE (e.g. -o timeout=30).")
        if key in options:
            raise OptionError(f"option '{key}' is given twice (-o {key}={options[key]} and -o {pair}); keep one.")
        options[key] = value
    return options


def describe_origin(origin: str, key: str, value: Any) -> str:
    """How a refusal names a value: ``-o steps=abc`` or ``cfkit.toml [edit.engines.x] steps = 'abc'``."""
    if origin == "-o":
        return f"-o {key}={value}"
    if origin.startswith("--"):  # a flag that sets the option, e.g. --model NAME
        return f"{origin} {value}"
    return f"{origin} {key} = {value!r}"


def validate_options(options_cls: type[BaseModel], values: OptionValues | Mapping[str, Any], *, what: str,
                     see: str, elsewhere: Mapping[str, type[BaseModel]] | None = None) -> BaseModel:
    """``values`` checked against ``options_cls``.

    ``what`` names the plug-in ("engine 'classical'", "backend 'openai'"),
    ``see`` the command that lists its options. An unknown key is refused
    with the allowed ones (and, from ``elsewhere``, the other plug-ins that
    take it); a bad value with the field's rule and the value's origin.
    """
    if not isinstance(values, OptionValues):
        values = OptionValues.of(values, "-o")
    allowed = ", ".join(options_cls.model_fields) or "none"
    unknown = sorted(set(values.values) - set(options_cls.model_fields))
    if unknown:
        key = unknown[0]
        takers = sorted(name for name, cls in (elsewhere or {}).items() if key in cls.model_fields)
        hint = f" Taken by: {', '.join(takers)}." if takers else ""
        raise OptionError(f"{what} has no option '{key}' ({describe_origin(values.origin(key), key, values.values[key])})."
                         f" Allowed: {allowed}.{hint} See '{see}'.")
    from pydantic import ValidationError

    try:
        return options_cls.model_validate(values.values)
    except ValidationError as exc:
        problem = exc.errors()[0]
        key = ".".join(str(p) for p in problem["loc"]) or "?"
        message = problem["msg"].removeprefix("Value error, ")
        if key in values.values:
            where = describe_origin(values.origin(key), key, values.values[key])
        elif key == "?" or not problem["loc"]:
            where = ", ".join(describe_origin(values.origin(k), k, v) for k, v in values.values.items()) or "defaults"
        else:
            where = f"option '{key}'"
        raise OptionError(f"{what} {where}: {message}. See '{see}'.") from exc


@dataclass(frozen=True)
class OptionField:
    """One option, as the listing commands show it."""

    name: str
    type: str
    default: Any
    help: str


def option_fields(options_cls: type[BaseModel]) -> list[OptionField]:
    """Name, type, default and help of each option of an ``Options`` model."""
    rows = []
    for name, info in options_cls.model_fields.items():
        annotation = info.annotation
        type_name = getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")
        default = None if info.is_required() else info.default
        rows.append(OptionField(name, type_name, default, info.description or ""))
    return rows


def identity_options(options: BaseModel) -> dict[str, Any]:
    """The options that can change a result (see :class:`PluginOptions`), JSON-ready."""
    import json

    keep = {}
    for name, info in type(options).model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if extra.get("cache", True):
            keep[name] = getattr(options, name)
    return json.loads(json.dumps(keep, default=str))
