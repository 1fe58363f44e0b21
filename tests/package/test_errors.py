"""The error tree: every class is raised by the library, documented, and rendered by the CLI as one line."""

from __future__ import annotations

import inspect
import re
import sqlite3
from pathlib import Path

import click
import pytest

import cfkit.errors as errors
from support.workspace import REPO, run_cli

SOURCE = {p: p.read_text(encoding="utf-8") for p in (REPO / "cfkit").rglob("*.py") if p.name != "errors.py"}


def _tree(cls: type = errors.CfkitError) -> list[type]:
    found = [cls]
    for sub in cls.__subclasses__():
        if sub.__module__ == "cfkit.errors":
            found += _tree(sub)
    return found


CLASSES = _tree()
#: Bases that only group their subclasses; the library raises a subclass instead.
BASES = {errors.CfkitError, errors.InputError}


def test_the_tree_is_drawn_in_the_module_docstring_and_every_class_says_what_it_means():
    for cls in CLASSES:
        assert cls.__name__ in errors.__doc__, f"{cls.__name__} is missing from the drawn tree"
        assert cls.__doc__ and cls.__doc__.strip(), f"{cls.__name__} has no docstring"


@pytest.mark.parametrize("cls", [c for c in CLASSES if c not in BASES], ids=lambda c: c.__name__)
def test_every_class_is_raised_somewhere(cls):
    pattern = re.compile(rf"raise {cls.__name__}\(")
    assert any(pattern.search(text) for text in SOURCE.values()), f"nothing raises {cls.__name__}"


def test_no_input_error_is_raised_as_the_base_class():
    offenders = [f"{p.relative_to(REPO)}:{text[:m.start()].count(chr(10)) + 1}"
                 for p, text in SOURCE.items() for m in re.finditer(r"raise (InputError|CfkitError)\(", text)]
    assert not offenders, offenders


def test_exit_codes():
    for cls in CLASSES:
        expected = 2 if issubclass(cls, errors.InputError) or cls in (errors.EditorUnavailable,
                                                                      errors.BackendUnavailable,
                                                                      errors.QuotaRefused,
                                                                      errors.EditorKeyRefused) else 1
        assert cls.exit_code == expected, cls.__name__


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_class_is_rendered_as_one_line_with_its_exit_status(cls, monkeypatch):
    from cfkit.cli import COMMANDS

    monkeypatch.setitem(COMMANDS, "fail-now", (__name__, "fail_now"))
    monkeypatch.setitem(globals(), "RAISE", cls)
    result = run_cli(["fail-now"])
    assert result.exit_code == cls.exit_code
    assert result.stderr == f"error: {cls.__name__} happened at line 1 of x.yaml; fix it.\n"
    assert "Traceback" not in result.output


RAISE: type = errors.CfkitError


@click.command("fail-now")
def fail_now() -> None:
    raise RAISE(f"{RAISE.__name__} happened at line 1 of x.yaml; fix it.")


def test_third_party_failures_are_translated_where_they_happen(tmp_path: Path):
    from cfkit.images import open_image
    from cfkit.specs import parse_spec
    from cfkit.store import Store

    damaged = tmp_path / "cfkit.db"
    damaged.write_bytes(b"this is not an SQLite file" * 100)
    with pytest.raises(errors.StoreError) as info:
        Store(damaged)
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)

    image = tmp_path / "x.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    with pytest.raises(errors.ImageError) as info:
        open_image(image)
    assert info.value.__cause__ is not None

    with pytest.raises(errors.SpecError, match="not valid YAML") as info:
        parse_spec("id: [unclosed", tmp_path / "CF01.yaml")
    assert info.value.__cause__ is not None


def test_no_silent_broad_except_in_the_library():
    # A broad except must re-raise or translate; each allowed one says why on its line.
    for path, text in SOURCE.items():
        for m in re.finditer(r"except (Exception|BaseException)( as \w+)?:(.*)", text):
            line = text[:m.start()].count("\n") + 1
            body = text[m.end():m.end() + 800].split("\n")[1:7]
            reasoned = "#" in m.group(3)
            reraises = any(re.search(r"\braise\b", b) for b in body)
            assert reasoned or reraises, f"{path.relative_to(REPO)}:{line} swallows everything silently"


def test_library_modules_never_print():
    for path, text in SOURCE.items():
        if "cli" in path.parts or path.name == "__main__.py":
            continue
        assert not re.search(r"^\s*print\(", text, re.M), f"{path.relative_to(REPO)} prints"
    assert inspect.getsource(errors).count("print(") == 0
