"""Counts in messages go through ``cfkit.plural.plural`` ("1 run", "3 runs"), never "3 run(s)"."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from support.workspace import REPO

PACKAGE = REPO / "cfkit"

#: A noun (or a placeholder standing for one, as in ``f"{unit}(s)"``) written with "(s)".
PLURAL_S = re.compile(r"[\w}]\(s\)")

#: (module path under cfkit/, the text as this test reads it) -> why "(s)" is right there. A count is at hand in
#: nearly every message, and where none is, a rewording reads better; add an entry only with its reason.
ALLOWED: dict[tuple[str, str], str] = {}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes (prose for readers of the code, not a message)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _text(node: ast.AST) -> str | None:
    """A string literal's text, with ``{}`` where an f-string puts a value."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)
    return None


def plural_s_literals(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each string literal in ``path`` that writes a noun with "(s)", docstrings aside."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    inside_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    found = []
    for node in ast.walk(tree):
        if id(node) in skip or id(node) in inside_fstrings:
            continue
        text = _text(node)
        if text is not None and PLURAL_S.search(text):
            found.append((node.lineno, text))
    return found


def test_no_message_counts_with_parenthesised_s():
    found = {(str(path.relative_to(PACKAGE)), text): line
             for path in sorted(PACKAGE.rglob("*.py")) for line, text in plural_s_literals(path)}
    wrong = [f"cfkit/{where}:{line}: {text!r}" for (where, text), line in found.items()
             if (where, text) not in ALLOWED]
    assert not wrong, ("write counts with cfkit.plural.plural (plural(n, 'run') -> '1 run' / '3 runs'), not "
                       "'run(s)'; where no count is at hand, reword or allow it in ALLOWED with a reason:\n"
                       + "\n".join(wrong))
    stale = [key for key in ALLOWED if key not in found]
    assert not stale, f"ALLOWED names texts no longer in cfkit; remove them: {stale}"


def test_the_scan_sees_the_ways_a_message_is_written(tmp_path):
    """The check reads f-strings, implicit concatenations and placeholders, and passes over docstrings."""
    sample = tmp_path / "sample.py"
    sample.write_text('"""A module of run(s)."""\n'
                      'def f(n, unit):\n'
                      '    """Docstring about case(s)."""\n'
                      '    a = f"{n} request(s) failed"\n'
                      '    b = (f"{n} of the "\n'
                      '         "item(s) left")\n'
                      '    c = f"{n} {unit}(s) skipped"\n'
                      '    d = "no count: file(s)"\n'
                      '    e = f"{n} runs"\n', encoding="utf-8")
    assert [line for line, _ in sorted(plural_s_literals(sample))] == [4, 5, 7, 8]
