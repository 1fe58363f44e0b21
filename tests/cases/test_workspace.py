"""Workspace creation and discovery, and the start-up import budget."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cfkit.workspace import find_workspace
from support.workspace import REPO, run_cli

HEAVY = ("torch", "diffusers", "transformers", "openai", "lpips", "skimage")


def test_init_makes_a_workspace_and_refuses_to_overwrite(tmp_path: Path):
    target = tmp_path / "study"
    result = run_cli(["init", str(target), "--pairs", "12", "--no-check"])
    assert result.exit_code == 0, result.output
    for folder in ("interventions/masks", "captions", "probes"):
        assert (target / folder).is_dir()
    ws = find_workspace(target)
    assert ws.pairs == 12 and ws.store_dir == target.resolve() / ".cfkit"
    before = (target / "cfkit.toml").read_bytes()
    again = run_cli(["init", str(target), "--no-check"])
    assert again.exit_code == 2 and "already exists" in again.stderr
    assert (target / "cfkit.toml").read_bytes() == before


def test_discovery_order(tmp_path: Path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    run_cli(["init", str(a), "--no-check"])
    run_cli(["init", str(b), "--no-check"])
    deep = a / "interventions" / "masks"
    monkeypatch.chdir(deep)
    assert find_workspace().root == a.resolve()  # walking up
    monkeypatch.setenv("CFKIT_WORKSPACE", str(b))
    assert find_workspace().root == b.resolve()  # the variable beats the current folder
    assert find_workspace(str(a)).root == a.resolve()  # -w beats the variable
    result = run_cli(["-w", str(a), "specs", "list"])  # group-level -w works too
    assert result.exit_code == 0 and str(a) in result.stdout.replace("\n", "")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"],
                         capture_output=True, text=True, cwd=REPO, check=False)
    return set(out.stdout.split())


def test_import_cli_loads_no_heavy_library():
    loaded = _modules_after("import cfkit.cli")
    assert not [m for m in HEAVY if m in loaded]


def test_help_of_every_command_loads_no_heavy_library():
    code = (
        "from cfkit.cli import cli, COMMANDS\n"
        "import click\n"
        "ctx = click.Context(cli)\n"
        "for name in cli.list_commands(ctx):\n"
        "    cmd = cli.get_command(ctx, name)\n"
        "    cmd.get_help(click.Context(cmd, info_name=name, parent=ctx))\n"
    )
    loaded = _modules_after(code)
    assert not [m for m in HEAVY if m in loaded]


def test_importtime_flag_agrees():
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import cfkit.cli"],
                         capture_output=True, text=True, cwd=REPO, check=True)
    imported = {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines() if "|" in line}
    assert not [m for m in HEAVY if m in imported]


def test_a_byte_order_mark_non_utf8_text_or_a_folder_as_cfkit_toml(tmp_path):
    from cfkit.errors import ConfigError
    from cfkit.workspace import load_workspace

    root = tmp_path / "ws"
    root.mkdir()
    (root / "cfkit.toml").write_bytes(b"\xef\xbb\xbf[workspace]\npairs = 5\n")
    assert load_workspace(root).pairs == 5  # a BOM, as Windows editors write it, is read past
    (root / "cfkit.toml").write_bytes(b"[workspace]\nstore = \"caf\xe9\"\n")
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_workspace(root)
    (root / "cfkit.toml").unlink()
    (root / "cfkit.toml").mkdir()
    with pytest.raises(ConfigError, match="is a folder"):
        load_workspace(root)


def test_a_workspace_made_with_absolute_paths_inside_it_still_reads_its_own_dataset_once_moved(tmp_path: Path):
    # init wrote '--cases /abs/study/data/cases.jsonl' as given: a copy of the folder read the original's dataset
    # (an edit of the copy's cases file went unseen), and once the original was moved away nothing was found.
    import shutil

    from support.workspace import write_workspace

    data = write_workspace(tmp_path / "made")  # a cases file and images that validate
    study = tmp_path / "study"
    (study / "data").mkdir(parents=True)
    shutil.copy(data / "data" / "cases.jsonl", study / "data" / "cases.jsonl")
    shutil.copytree(data / "data" / "images", study / "data" / "images")
    outside = tmp_path / "outside"
    shutil.copytree(data / "data" / "images", outside)
    result = run_cli(["init", str(study), "--cases", str(study / "data" / "cases.jsonl"), "--images", str(outside)])
    assert result.exit_code == 0, result.output
    moved = tmp_path / "elsewhere" / "study"
    shutil.copytree(study, moved, copy_function=shutil.copy)
    shutil.rmtree(study)
    ws = find_workspace(moved)
    assert ws.cases_path == moved.resolve() / "data" / "cases.jsonl"
    assert ws.image_root == outside.resolve()  # a path outside the workspace stays as given
    assert run_cli(["cases", "validate", "-w", str(moved)]).exit_code == 0
