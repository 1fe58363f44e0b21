"""The worked plug-in package under examples/ installs and plugs into the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.workspace import REPO

PLUGIN = REPO / "examples" / "cfkit-plugin-example"


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("plugin-site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(target), str(PLUGIN)], check=True, capture_output=True)
    return target


def _cfkit(args: list[str], plugin_path: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(plugin_path))
    return subprocess.run([sys.executable, "-m", "cfkit", *args], capture_output=True, text=True, env=env, cwd=cwd)


def test_plugin_backend_and_editor_are_used(plugin_path: Path, mini_ws: Path):
    listed = _cfkit(["probe", "backends", "--json"], plugin_path, mini_ws)
    assert listed.returncode == 0, listed.stderr
    assert "keyword" in listed.stdout and "cfkit-plugin-example" in listed.stdout

    edit = _cfkit(["edit", "EX01", "--engine", "blur", "-o", "radius=12.5", "--json"], plugin_path, mini_ws)
    assert edit.returncode == 0, edit.stderr
    made = json.loads(_cfkit(["edits", "list", "--json"], plugin_path, mini_ws).stdout)
    assert [(e["engine"], e["params"]["radius"]) for e in made] == [("blur", 12.5)]  # the option reached the engine
    engines = _cfkit(["edits", "engines", "--json"], plugin_path, mini_ws)
    blur = next(e for e in json.loads(engines.stdout) if e["name"] == "blur")
    assert blur["package"] == "cfkit-plugin-example" and [o["name"] for o in blur["options"]] == ["radius"]
    bad = _cfkit(["edit", "EX01", "--engine", "blur", "-o", "radius=-1"], plugin_path, mini_ws)
    assert bad.returncode == 2 and "-o radius=-1" in bad.stderr and bad.stderr.count("\n") == 1

    run = _cfkit(["probe", "run", "-m", "keyword:matcha", "-o", "words=green,matcha", "-s", "modality"],
                 plugin_path, mini_ws)
    assert run.returncode == 0, run.stderr
    report = _cfkit(["report", "--format", "json"], plugin_path, mini_ws)
    assert report.returncode == 0, report.stderr
    rows = json.loads(report.stdout)["modality"]
    assert [r["model"] for r in rows] == ["keyword:matcha"]
    assert rows[0]["n"] > 0


def test_unknown_engine_lists_the_plugin(plugin_path: Path, mini_ws: Path):
    result = _cfkit(["edit", "EX01", "--engine", "sharpen"], plugin_path, mini_ws)
    assert result.returncode == 2
    assert "Unknown editor 'sharpen'" in result.stderr and "blur" in result.stderr
