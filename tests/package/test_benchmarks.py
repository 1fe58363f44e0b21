"""The benchmarks keep up with the code: every cfkit name a benchmark imports exists.

A benchmark imports cfkit inside its ``run()`` (so that its figures include no
import), and a name moved to another module would surface only when someone runs
``benchmarks/run.py``. The benchmarks themselves are not run here: they measure.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util

import pytest

from support.workspace import REPO

BENCHMARKS = sorted((REPO / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("path", BENCHMARKS, ids=[p.name for p in BENCHMARKS])
def test_every_cfkit_name_a_benchmark_imports_exists(path):
    missing = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "cfkit":
            module = importlib.import_module(node.module)
            missing += [f"{node.module}.{a.name} (line {node.lineno})" for a in node.names
                        if not hasattr(module, a.name) and importlib.util.find_spec(f"{node.module}.{a.name}") is None]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "cfkit":
                    importlib.import_module(alias.name)
    assert not missing, f"{path.name} imports names cfkit no longer has: {missing}"
