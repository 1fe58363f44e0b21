"""An edit's arguments: which engines it names, how many candidates, and each engine's options.

An engine's options come from ``cfkit.toml [edit.engines.NAME]``, then the
spec's ``engines: {NAME: …}``, then ``-o KEY=VALUE`` (``--model`` and
``--input`` set the ``model`` and ``input`` options); each engine's
``Options`` model checks them (:mod:`cfkit.options`). Checked once, before any
spec is read, so a batch of edits fails at once on a misspelt option.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cfkit.editors import Editor, auto_chain, editor_class, load_editor
from cfkit.errors import OptionError, UsageError
from cfkit.options import OptionValues, Setting, blamed
from cfkit.plural import plural
from cfkit.specs import Spec
from cfkit.workspace import EditConfig


def engine_options(configured: Mapping[str, Any] | None, spec: Spec, engine: str, given: OptionValues) -> OptionValues:
    """An engine's options: ``configured`` (``cfkit.toml [edit.engines.NAME]``), then the spec's ``engines:``,
    then ``given``."""
    from_config = OptionValues.of(configured, f"cfkit.toml [edit.engines.{engine}]")
    from_spec = OptionValues.of((spec.engines or {}).get(engine), f"spec {spec.id} engines.{engine}")
    return given.over(from_spec.over(from_config))


@dataclass(frozen=True)
class SpecEngine:
    """One engine of an edit, built with its options for one spec."""

    editor: Editor
    asked: dict[str, Any]  # the options this edit asked for (``-o``, ``--model``, ``--input``), as JSON keeps them


def spec_engines(arguments: "EditArguments", spec: Spec,
                 configured: Mapping[str, Mapping[str, Any]]) -> dict[str, SpecEngine]:
    """Every engine of the chain built for ``spec``; ``configured`` is ``cfkit.toml [edit.engines]``."""
    return {name: SpecEngine(load_editor(name, engine_options(configured.get(name), spec, name,
                                                              arguments.given[name])),
                             plain_values(arguments.given[name].values))
            for name in arguments.chain}


def given_options(chain: tuple[str, ...], options: Mapping[str, Any], model: str | None,
                   input_path: Path | None) -> dict[str, OptionValues]:
    """``-o`` values (and ``--model`` / ``--input``) for each engine of the chain.

    With one engine every key is its own; with a chain a key names its engine
    (``-o diffusers.steps=40``), and ``--model`` / ``--input`` are refused.
    Library callers may also pass ``{ENGINE: {KEY: VALUE}}``.
    """
    given: dict[str, OptionValues] = {name: OptionValues() for name in chain}

    def put(engine: str, key: str, value: Any, origin: str) -> None:
        given[engine] = OptionValues.of({key: value}, origin).over(given[engine])

    for key, value in options.items():
        if key in given and isinstance(value, Mapping):  # a library caller's {ENGINE: {KEY: VALUE}}
            for name, item in value.items():
                put(key, name, item, "options")
            continue
        engine, dot, name = key.partition(".")
        if dot:
            if engine not in given:
                raise OptionError(f"-o {key}={value}: '{engine}' is not an engine of this edit ({', '.join(chain)}).")
            put(engine, name, value, "-o")
        elif len(chain) == 1:
            put(chain[0], key, value, "-o")
        else:
            raise OptionError(f"-o {key}={value}: --engine auto tries {', '.join(chain)}; name the engine the option "
                             f"is for, e.g. -o {chain[0]}.{key}={value}.")
    for flag, key, value in (("--model", "model", model), ("--input", "input", input_path)):
        if value is None:
            continue
        if len(chain) != 1:
            raise UsageError(f"{flag} sets an option of one engine; with --engine auto ({', '.join(chain)}) name "
                             f"the engine, e.g. --engine {chain[0]} {flag} …, or use -o ENGINE.{key}=….")
        put(chain[0], key, value, flag)
    return given


@dataclass(frozen=True)
class EditArguments:
    """The engine chain, candidate count and ``-o`` values of an edit, checked (they hold for any spec)."""

    chain: tuple[str, ...]
    n: int
    given: dict[str, OptionValues]


def edit_arguments(config: EditConfig, *, engine: str | None = None, n: int | None = None, model: str | None = None,
                   options: Mapping[str, Any] | None = None, input_path: Path | None = None) -> EditArguments:
    """Check what an edit's arguments name (engines, candidates, option keys) before any spec is read;
    ``config`` is cfkit.toml's ``[edit]``."""
    chosen = Setting.of(engine, "--engine", config.engine, "[edit] engine")
    count = Setting.of(n, "-n", config.candidates, "[edit] candidates")
    engine, n = chosen.value, count.value
    chain = auto_chain(config.auto) if engine == "auto" else (engine,)
    if not chain:
        raise UsageError(f"{chosen.where} auto: no installed engine takes part in auto; name one with --engine NAME.")
    for name in chain:
        with blamed(chosen):
            editor_class(name)  # an unknown engine name is refused here
        with blamed(count):
            check_candidates(name, n)
    given = given_options(chain, options or {}, model, input_path)
    for name in chain:
        if set(given[name].values) - set(editor_class(name).Options.model_fields):
            load_editor(name, given[name])  # refuses the unknown key, listing the engine's options
    return EditArguments(tuple(chain), n, given)


def plain_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Option values as JSON keeps them (paths as text)."""
    return {key: str(value) if isinstance(value, Path) else value for key, value in values.items()}


def check_candidates(name: str, n: int) -> None:
    most = editor_class(name).max_candidates
    if n <= most:
        return
    if most == 1:
        raise UsageError(f"engine '{name}' makes one image per call; give 1.")
    raise UsageError(f"engine '{name}' makes at most {plural(most, 'image')} per call; give {most} or fewer.")
