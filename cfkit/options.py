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

    if isinstance(options, PlainOptions):
        return json.loads(json.dumps(options.identity(), default=str))
    keep = {}
    for name, info in type(options).model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if extra.get("cache", True):
            keep[name] = getattr(options, name)
    return json.loads(json.dumps(keep, default=str))


# ── options read without pydantic ────────────────────────────────────────
# A built-in plug-in may declare its options twice: its pydantic ``Options`` model (built when first asked for:
# the listings, the full check) and a :class:`PlainSpec` of the same fields. Values that are plainly right (the
# type the field holds, or a plain decimal text for a number, within its bounds) are read by the spec alone, with
# the conversions pydantic would make; anything else (an unknown key, a value pydantic might convert or refuse)
# goes to the model, so what is accepted, refused and said about it stays the model's. A test holds the two
# declarations equal.

_DECIMAL = r"(?:0|[1-9][0-9]{0,14})(?:\.[0-9]{1,15})?"


class PlainField:
    """One field of a :class:`PlainSpec`: its default, the reading of a plainly right value (``read(value)`` ->
    ``(True, the value as the model holds it)``, or ``(False, None)`` when not plainly right), and whether it is
    identity. (A plain class: a dataclass costs about a millisecond to build at import, on the path to a run's
    first request.)"""

    __slots__ = ("default", "read", "cache")

    def __init__(self, default: Any, read: Any, cache: bool = True):
        self.default, self.read, self.cache = default, read, cache


def plain_text(optional: bool = True) -> Any:
    return lambda v: (True, v) if type(v) is str or (v is None and optional) else (False, None)


def plain_texts(value: Any) -> tuple[bool, Any]:
    """``str | list[str] | None``."""
    if value is None or type(value) is str:
        return True, value
    if type(value) is list and all(type(item) is str for item in value):
        return True, list(value)
    return False, None


def plain_choice(*choices: str, optional: bool = False) -> Any:
    return lambda v: (True, v) if (type(v) is str and v in choices) or (v is None and optional) else (False, None)


def plain_number(*, gt: float | None = None, ge: float | None = None, le: float | None = None,
                 integer: bool = False, optional: bool = False) -> Any:
    """A float (``integer``: an int) field's plain values: a number of that kind, or a short decimal text
    (digits, and for a float one fractional part), within the bounds."""
    import re

    pattern = re.compile("0|[1-9][0-9]{0,14}" if integer else _DECIMAL)

    def read(value: Any) -> tuple[bool, Any]:
        if value is None:
            return (True, None) if optional else (False, None)
        if type(value) is str:
            if pattern.fullmatch(value) is None:
                return False, None
            number = int(value) if integer else float(value)
        elif type(value) is int and abs(value) < 2 ** 53:
            number = value if integer else float(value)
        elif type(value) is float and not integer and abs(value) < 2 ** 53:
            number = value
        else:
            return False, None
        if (gt is not None and not number > gt) or (ge is not None and not number >= ge) \
                or (le is not None and not number <= le):
            return False, None
        return True, number

    return read


class PlainSpec:
    """A plug-in's options as plain readings, field by field, in the order of its ``Options`` model."""

    def __init__(self, **fields: PlainField):
        self.fields = fields

    def read(self, values: Mapping[str, Any]) -> "PlainOptions | None":
        """``values`` read without pydantic, or None when one is not plainly right (or not a field)."""
        found = {}
        for key, value in values.items():
            spec = self.fields.get(key)
            if spec is None:
                return None
            ok, found[key] = spec.read(value)
            if not ok:
                return None
        return PlainOptions(self, {name: found.get(name, spec.default) for name, spec in self.fields.items()})


class PlainOptions:
    """Validated options read by a :class:`PlainSpec`: they answer as the model's instance does where cfkit and the
    built-ins read them (attributes, ``model_copy(update=…)``, ``model_dump()``) and are frozen."""

    __slots__ = ("_spec", "_values")

    def __init__(self, spec: PlainSpec, values: dict[str, Any]):
        object.__setattr__(self, "_spec", spec)
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"options are frozen: cannot set {name}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlainOptions) and self._spec is other._spec and self._values == other._values

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "PlainOptions(" + ", ".join(f"{k}={v!r}" for k, v in self._values.items()) + ")"

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> "PlainOptions":
        return PlainOptions(self._spec, {**self._values, **(update or {})})

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        import copy

        return copy.deepcopy(self._values)

    def identity(self) -> dict[str, Any]:
        return {name: self._values[name] for name, spec in self._spec.fields.items() if spec.cache}


def option_names(plugin: type) -> set[str]:
    """The option keys ``plugin`` (a backend class) takes, from its plain spec where it has one (its model is not
    built)."""
    spec = plugin.plain_options
    return set(spec.fields) if spec is not None else set(plugin.Options.model_fields)


def validate_plugin_options(plugin: type, values: OptionValues | Mapping[str, Any], *, what: str,
                            see: str) -> Any:
    """:func:`validate_options` of ``plugin.Options``, read by ``plugin.plain_options`` when every value is
    plainly right (the model, and pydantic, are then never built). ``plugin``: a backend class (its
    ``plain_options`` None when it has no plain spec)."""
    spec = plugin.plain_options
    if spec is not None:
        plain = spec.read(values.values if isinstance(values, OptionValues) else values)
        if plain is not None:
            return plain
    return validate_options(plugin.Options, values, what=what, see=see)


class LazyModel:
    """A class attribute whose value, an ``Options`` model, is built by ``build`` when first read."""

    def __init__(self, build: Any):
        self._build = build
        self._built: Any = None

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if self._built is None:
            self._built = self._build()
        return self._built
