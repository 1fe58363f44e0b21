"""Every single-value option of every command refuses to be given twice (Click alone keeps the last)."""

from __future__ import annotations

import click
import pytest

from cfkit.cli import COMMANDS, cli
from cfkit.cli.once import repeated_options
from support.workspace import run_cli


def _commands() -> list[tuple[list[str], click.Command]]:
    found: list[tuple[list[str], click.Command]] = [([], cli)]
    ctx = click.Context(cli)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        if command is None:
            continue
        stack = [([name], command)]
        while stack:
            path, cmd = stack.pop()
            found.append((path, cmd))
            if isinstance(cmd, click.Group):
                stack.extend((path + [sub], c) for sub, c in cmd.commands.items())
    return found


def _single_value_options():
    for path, command in _commands():
        for param in command.params:
            if isinstance(param, click.Option) and not param.multiple and not param.count and not param.is_eager:
                yield pytest.param(path, param, id=" ".join(["cfkit", *path, param.opts[0]]))


@pytest.mark.parametrize(("path", "param"), list(_single_value_options()))
def test_a_single_value_option_given_twice_is_refused(path, param, tmp_path):
    given = [param.opts[0]] if param.is_flag else [param.opts[0], "1"]
    result = run_cli(["-w", str(tmp_path), *path, *given, *given] if path else [*given, *given])
    assert result.exit_code == 2, result.output
    assert f"{param.opts[0]}" in result.output and "given more than once" in result.output


def test_the_walk_covers_the_commands_that_matter():
    paths = {" ".join(p) for p, _ in _commands()}
    assert {"probe run", "report", "runs list", "edit"} <= paths
    assert len(list(_single_value_options())) > 100


def test_probe_run_twice_model_points_to_a_study(tmp_path):
    result = run_cli(["-w", str(tmp_path), "probe", "run", "-m", "baseline:always-no", "-m", "baseline:majority",
                      "-s", "contextcanvas"])
    assert result.exit_code == 2
    assert "-m/--model given more than once" in result.output and "cfkit study run" in result.output
    result = run_cli(["-w", str(tmp_path), "probe", "run", "-m", "baseline:always-no", "-s", "contextcanvas",
                      "-s", "modality"])
    assert result.exit_code == 2 and "-s/--suite given more than once" in result.output


def test_repeatable_options_stay_repeatable():
    ctx = click.Context(cli)
    run = cli.get_command(ctx, "probe").commands["run"]
    args = ["-m", "x:y", "-s", "modality", "-o", "a=1", "-o", "b=2"]
    assert repeated_options(run, click.Context(run), args) == []
    assert [p.name for p in repeated_options(run, click.Context(run), args + ["-j", "2", "-j", "3"])] == ["concurrency"]
