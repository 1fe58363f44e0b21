"""Reading the YAML files users write (specs, captions): strict, safe, one-line errors.

Stricter than ``yaml.safe_load`` where silence would lose data: a key given
twice in one mapping is refused (PyYAML keeps the last one without a word),
and a document nested too deeply to read is refused rather than crashing the
reader. Errors name the file and the line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from functools import lru_cache

from cfkit.errors import InputError

# PyYAML is imported when a YAML file is first read: a command that reads none (a rerun decided by file
# states alone) does not pay for it.


@lru_cache(maxsize=1)
def _strict_loader() -> type:
    """A safe loader that refuses duplicate keys (libyaml's parser when PyYAML was built with it: the same
    documents, about ten times faster)."""
    import yaml

    def mapping_without_duplicates(loader, node, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key '{key}' is given twice (lines {seen[key]} and {line}); keep one",
                    key_node.start_mark)
            seen[key] = line
        return loader.construct_mapping(node, deep=deep)

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = type("StrictLoader", (base,), {})
    loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping_without_duplicates)
    return loader


def load_yaml(text: str, path: Path | str, error: type[InputError],
              shape: str = "a spec or caption is a flat mapping of fields") -> Any:
    """The document in ``text`` (read from ``path``); ``error`` names the file, the line and the problem.

    ``shape`` says what the file should look like, for a document nested too deeply to read.
    """
    import yaml

    try:
        return yaml.load(text, Loader=_strict_loader())  # noqa: S506 - a safe loader, only refusing duplicates
    except yaml.YAMLError as exc:
        if "nesting depth" in str(getattr(exc, "problem", "")):  # libyaml's own limit
            raise error(f"{path}: nested too deeply to read; {shape}.") from None
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "malformed YAML"
        raise error(f"{path}{where}: not valid YAML ({problem}). Fix the file.") from exc
    except RecursionError:
        raise error(f"{path}: nested too deeply to read; {shape}.") from None
