"""The layout docs/architecture.md promises: small rooms, no import cycle, no reference to a missing document."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from support.workspace import REPO

PACKAGE = REPO / "cfkit"
MAX_LINES = 450


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str, path: Path) -> set[str]:
    """Every cfkit module ``name`` imports, at module level or inside functions."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            # `from cfkit.store import edits` imports the submodule, not only the package.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in MODULES and t != name)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_a_warehouse(name):
    lines = MODULES[name].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{name} has {lines} lines; split it by concept"


def test_there_is_no_import_cycle():
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)


def test_pure_rooms_import_no_other_room():
    for name, deps in GRAPH.items():
        if name.startswith(("cfkit.stats", "cfkit.parse")):
            # cfkit.plural writes the counts in their messages; it imports nothing (asserted below).
            assert all(d.startswith(("cfkit.stats", "cfkit.parse")) or d == "cfkit.plural" for d in deps), (name, deps)
        if name.startswith("cfkit.store"):
            # Besides the errors and the names, the store may use the leaf text helpers its messages need.
            leaves = ("cfkit.errors", "cfkit.vocabulary", "cfkit.suggest", "cfkit.visible", "cfkit.plural")
            assert all(d.startswith("cfkit.store") or d in leaves for d in deps), (name, deps)
    assert not GRAPH["cfkit.plural"], GRAPH["cfkit.plural"]


def test_the_preservation_check_is_pure():
    """preserve/ measures arrays: it reads no store, workspace, spec, mask or weights file."""
    allowed = ("cfkit.preserve", "cfkit.errors", "cfkit.vocabulary", "cfkit.plural")
    for name, deps in GRAPH.items():
        if name.startswith("cfkit.preserve"):
            assert all(d.startswith(allowed) for d in deps), (name, sorted(deps))


def test_the_terminal_room_imports_nothing_of_cfkit():
    for name, deps in GRAPH.items():
        if name.startswith("cfkit.terminal"):
            assert all(d.startswith("cfkit.terminal") for d in deps), (name, sorted(deps))


def test_weights_and_preserve_point_one_way():
    """Finding LPIPS's weights (weights/) builds the scorer (preserve/); the scorer never looks for weights."""
    upward = [(name, d) for name, deps in GRAPH.items() if name.startswith("cfkit.preserve")
              for d in deps if d.startswith("cfkit.weights")]
    assert not upward, upward


def _calls(path: Path, names: tuple[str, ...]) -> list[ast.Call]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names]


PLUGIN_OBJECT = re.compile(r"\b(backend|editor|engine|plugin|cls)\b|editor_class\(|backend_class\(|editors\[", re.IGNORECASE)


def test_plugin_members_are_read_as_attributes():
    """Backends and editors have base classes with defaults; nothing probes them with getattr/hasattr."""
    probes = []
    for name, path in MODULES.items():
        for call in _calls(path, ("getattr", "hasattr")):
            target = ast.unparse(call.args[0]) if call.args else ""
            if PLUGIN_OBJECT.search(target):
                probes.append(f"{path.relative_to(REPO)}:{call.lineno}: {ast.unparse(call)}")
    assert not probes, probes


def test_one_place_ends_the_process():
    """Code raises from the error tree; the CLI's entry point (cli/__init__.py) alone turns it into an exit status."""
    direct = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and node.exc is not None and "SystemExit" in ast.unparse(node.exc):
                direct.append(f"{path.relative_to(REPO)}:{node.lineno}")
            exits = isinstance(node, ast.Call) and ast.unparse(node.func) in ("sys.exit", "exit", "quit", "os._exit")
            if exits and name != "cfkit.cli":
                direct.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not direct, direct


def test_library_code_makes_no_message_of_an_exception():
    """A caught exception is raised again (or translated into the error tree), never drawn as text for a person
    outside cli/: the interactive loops take the CLI's words for it (``failed``, ``refused``)."""
    drawn = []
    for name, path in MODULES.items():
        if name.startswith("cfkit.cli"):
            continue
        for handler in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(handler, ast.ExceptHandler) or handler.name is None:
                continue
            for node in (n for stmt in handler.body for n in ast.walk(stmt)):
                if (isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in ("Text", "print", "echo")
                        and re.search(rf"\b{handler.name}\b", ast.unparse(node))):
                    drawn.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    assert not drawn, drawn


ARCHITECTURE = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
ROOM_NAME = re.compile(r"^(?:\w+/|\w+\.py)$")


def _room(module: str) -> str | None:
    """``cfkit.probe.runner`` -> ``probe/``, ``cfkit.edit`` -> ``edit.py``; None for the package itself."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return None
    return parts[1] + "/" if (PACKAGE / parts[1]).is_dir() else parts[1] + ".py"


ROOMS_ON_DISK = {_room(name) for name in MODULES} - {None}


def _floors() -> dict[str, int]:
    """Each room of the layer picture with its floor (0 = the top line); a line's rooms come before its comment."""
    start = ARCHITECTURE.index("```", ARCHITECTURE.index("## Layers")) + 3
    picture = ARCHITECTURE[start:ARCHITECTURE.index("```", start)].strip("\n").splitlines()
    floors: dict[str, int] = {}
    for number, line in enumerate(picture):
        for token in line.split():
            if not ROOM_NAME.match(token):
                break
            assert token not in floors, f"{token} is drawn twice in the layer picture"
            floors[token] = number
    return floors


def test_the_rooms_table_names_exactly_the_rooms_on_disk():
    table = ARCHITECTURE[ARCHITECTURE.index("## Rooms"):ARCHITECTURE.index("## Layers")]
    named = set(re.findall(r"^\| `([^`]+)` \|", table, re.MULTILINE))
    assert ROOMS_ON_DISK - named == set(), "rooms on disk that docs/architecture.md does not name"
    assert named - ROOMS_ON_DISK == set(), "rooms docs/architecture.md names that are not on disk"


def test_the_layer_picture_holds_every_room_and_no_import_runs_up():
    floors = _floors()
    assert set(floors) == ROOMS_ON_DISK, (sorted(ROOMS_ON_DISK - set(floors)), sorted(set(floors) - ROOMS_ON_DISK))
    upward = sorted({f"{_room(a)} -> {_room(b)}" for a, deps in GRAPH.items() for b in deps
                     if _room(a) and _room(b) and _room(a) != _room(b) and floors[_room(b)] < floors[_room(a)]})
    assert not upward, f"imports that run up the layer picture of docs/architecture.md: {upward}"


DOC_REFERENCE = re.compile(r"(?<![\w/.-])((?:docs/|examples/[\w-]+/|probes/|benchmarks/)?[\w-]+\.md)\b")


def test_every_referenced_document_is_in_the_repository():
    texts = [p for p in REPO.rglob("*") if p.suffix in (".py", ".md", ".toml", ".txt", ".yaml")
             and ".venv" not in p.parts and ".git" not in p.parts and "build" not in p.parts]
    missing = []
    for path in texts:
        for match in DOC_REFERENCE.finditer(path.read_text(encoding="utf-8", errors="replace")):
            ref = match.group(1)
            candidates = [REPO / ref, path.parent / ref, REPO / "docs" / ref]
            if not any(c.is_file() for c in candidates):
                missing.append(f"{path.relative_to(REPO)}: {ref}")
    assert not missing, missing


# ── the tests' own layout ──────────────────────────────────────────────────

TESTS = REPO / "tests"
TEST_MODULES = sorted(p for p in TESTS.rglob("*.py") if "support" not in p.relative_to(TESTS).parts[:1])
SQL_STATEMENT = re.compile(r"\bSELECT\b[^\n]*\bFROM\s+\w|\bINSERT\s+INTO\s+\w|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\s+\w"
                           r"|\bPRAGMA\s+\w|\bALTER\s+TABLE\s+\w|\bCREATE\s+TABLE\b")
SQL_MODULE = TESTS / "support" / "store_sql.py"


def test_tests_hold_sql_only_in_their_one_sql_module():
    """Tests read and change the store through its owner modules; the raw statements that cannot go through
    them (old schemas, damage on purpose, rows past the owners) are gathered in tests/support/store_sql.py."""
    holders = {p.relative_to(REPO).as_posix() for p in TESTS.rglob("*.py")
               if SQL_STATEMENT.search(p.read_text(encoding="utf-8"))}
    assert holders == {SQL_MODULE.relative_to(REPO).as_posix()}


def test_test_modules_import_helpers_from_support_only():
    """Helpers live in tests/support/: no module imports conftest.py or a test module (test_*.py)."""
    wrong = []
    for path in TEST_MODULES + sorted((TESTS / "support").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                last = name.split(".")[-1]
                if last == "conftest" or last.startswith("test_") or name.startswith("tests."):
                    wrong.append(f"{path.relative_to(REPO)}: {name}")
    assert not wrong, wrong


def test_test_modules_sit_in_folders_beside_their_rooms():
    """tests/ holds folders (one per room or group of rooms) and conftest.py, no loose test module."""
    loose = [p.name for p in TESTS.glob("*.py") if p.name != "conftest.py"]
    assert not loose, loose


def test_the_tests_table_names_exactly_the_test_folders():
    section = ARCHITECTURE[ARCHITECTURE.index("## Tests"):]
    named = set(re.findall(r"^\| `(\w+)/` \|", section, re.MULTILINE))
    on_disk = {p.name for p in TESTS.iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert named == on_disk, (sorted(on_disk - named), sorted(named - on_disk))
