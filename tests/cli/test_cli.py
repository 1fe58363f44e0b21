"""The command line's shared vocabulary: one-line usage errors, --debug anywhere, -o for engine options."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.workspace import run_cli, tree_snapshot


def _cfkit(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cfkit", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("args, says", [
    (["specs", "list", "--bogus"], "No such option '--bogus'. See 'cfkit specs list --help'."),
    (["specs", "show"], "Missing argument 'SPEC_ID'. See 'cfkit specs show --help'."),
    (["edit"], "give spec ids, --all or --pending (one of them)."),
    (["probe", "run", "-m", "baseline:always-no", "-s", "nope"], "'nope' is not one of"),
    (["nosuchcommand"], "No such command 'nosuchcommand'."),
])
def test_usage_errors_are_one_line_in_cfkits_style(args, says):
    result = run_cli(args)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert says in result.stderr and "Usage:" not in result.stderr and "Try " not in result.stderr


def test_debug_is_accepted_after_the_subcommand(mini_ws: Path):
    quiet = _cfkit(["specs", "show", "NOPE", "-w", str(mini_ws)])
    assert quiet.returncode == 2 and "Traceback" not in quiet.stderr
    for args in (["--debug", "specs", "show", "NOPE"], ["specs", "show", "NOPE", "--debug"]):
        loud = _cfkit([*args, "-w", str(mini_ws)])
        assert loud.returncode != 0 and "Traceback" in loud.stderr and "SpecError" in loud.stderr, args


def test_an_unknown_engine_option_names_it_and_the_allowed_ones(mini_ws: Path):
    before = tree_snapshot(mini_ws)
    result = run_cli(["edit", "EX01", "-w", str(mini_ws), "--engine", "classical", "-o", "no_such_option=1"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "engine 'classical' has no option 'no_such_option' (-o no_such_option=1)" in result.stderr
    assert "Allowed: op, color, strength, asset, feather" in result.stderr
    flag = run_cli(["edit", "EX01", "-w", str(mini_ws), "--input", str(mini_ws / "images" / "coffee.jpg")])
    assert flag.exit_code == 2 and "no option 'input'" in flag.stderr and "Taken by: file." in flag.stderr
    assert tree_snapshot(mini_ws) == before


def _params(ws: Path) -> dict:
    listed = json.loads(run_cli(["edits", "list", "--json", "-w", str(ws)]).stdout)
    return listed[-1]["params"]


def test_engine_options_come_from_config_then_spec_then_the_command_line(mini_ws: Path):
    # EX01's spec sets feather 2; cfkit.toml may set the engine's defaults; -o wins over both.
    with open(mini_ws / "cfkit.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[edit.engines.classical]\nfeather = 5.0\nstrength = 0.5\n')
    assert run_cli(["edit", "EX01", "-w", str(mini_ws)]).exit_code == 0
    assert (_params(mini_ws)["feather"], _params(mini_ws)["strength"]) == (2.0, 0.9)  # the spec's own recipe
    assert run_cli(["edit", "EX01", "-w", str(mini_ws), "--again", "-o", "feather=1"]).exit_code == 0
    assert (_params(mini_ws)["feather"], _params(mini_ws)["strength"]) == (1.0, 0.9)
    assert run_cli(["edit", "EX03", "-w", str(mini_ws), "-o", "feather=7"]).exit_code == 0
    assert _params(mini_ws)["op"] == "remove"


def test_auto_needs_the_engine_named_in_an_option(mini_ws: Path):
    result = run_cli(["edit", "EX01", "-w", str(mini_ws), "--engine", "auto", "-o", "steps=3"])
    assert result.exit_code == 2
    assert "name the engine the option is for, e.g. -o openai.steps=3" in result.stderr


def test_first_version_edit_keys_point_to_the_engine_table(mini_ws: Path):
    config = mini_ws / "cfkit.toml"
    config.write_text(config.read_text().replace('[edit]\n', '[edit]\ndiffusers_model = "my/model"\n'))
    result = run_cli(["specs", "list", "-w", str(mini_ws)])
    assert result.exit_code == 2
    assert "[edit] diffusers_model is the first version's spelling" in result.stderr
    assert "[edit.engines.diffusers] model = 'my/model'" in result.stderr


def test_engines_are_listed_with_their_options():
    result = run_cli(["edits", "engines", "--json"])
    assert result.exit_code == 0
    engines = {e["name"]: e for e in json.loads(result.stdout)}
    assert {"openai", "diffusers", "classical", "file"} <= set(engines)
    assert engines["openai"]["auto_rank"] < engines["diffusers"]["auto_rank"]
    assert engines["classical"]["auto_rank"] is None and engines["classical"]["max_candidates"] == 1
    assert {"op", "color", "feather"} <= {o["name"] for o in engines["classical"]["options"]}


def test_files_written_take_output_and_existing_ones_need_force(mini_ws: Path, tmp_path: Path):
    target = tmp_path / "conditions.jsonl"
    assert run_cli(["captions", "build", "-w", str(mini_ws), "--output", str(target)]).exit_code == 0
    again = run_cli(["captions", "build", "-w", str(mini_ws), "--output", str(target)])
    assert again.exit_code == 2 and "--force" in again.stderr
    assert run_cli(["captions", "build", "-w", str(mini_ws), "--output", str(target), "--force"]).exit_code == 0
    spec = ["specs", "new", "-w", str(mini_ws), "--id", "EX01", "--case", "MX01", "--title", "t", "--cue", "c",
            "--replacement", "r"]
    refused = run_cli(spec)
    assert refused.exit_code == 2 and "--force" in refused.stderr
    assert "-o" not in run_cli(["runs", "export", "--help"]).stdout.split("--output")[0]


@pytest.mark.parametrize("group", [[], ["specs"], ["edits"], ["captions"], ["probe"], ["runs"], ["cases"], ["audit"],
                                   ["weights"]])
def test_help_listings_never_cut_a_summary_mid_sentence(group):
    for width in ("80", "100"):
        result = run_cli([*group, "--help"], env={"COLUMNS": width})
        assert result.exit_code == 0
        listing = result.stdout.split("Commands:", 1)[1]
        assert "..." not in listing, listing


def test_counts_are_in_the_right_number():
    from cfkit.plural import plural

    assert (plural(1, "pair"), plural(0, "pair"), plural(3, "case file"), plural(2, "query", "queries")) == (
        "1 pair", "0 pairs", "3 case files", "2 queries")
