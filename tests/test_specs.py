import json
from pathlib import Path

from conftest import run_cli, tree_snapshot


def test_specs_list_shows_coverage_and_authored_count(tiny_ws: Path):
    result = run_cli(["specs", "list", "-w", str(tiny_ws)])
    assert result.exit_code == 0, result.output
    assert "TX01" in result.stdout
    assert "0 of 3 authored; not in this workspace: CF01–CF03; also here: TX01" in result.stdout
    data = json.loads(run_cli(["specs", "list", "--json", "-w", str(tiny_ws)]).stdout)
    assert data["specs"][0]["coverage"] == 6.25  # a quarter of each side → 1/16 of the image
    assert "0 of 3 authored; not in this workspace: CF01–CF03; also here: TX01" in result.stdout


def test_specs_validate_ok(tiny_ws: Path):
    result = run_cli(["specs", "validate", "-w", str(tiny_ws)])
    assert result.exit_code == 0, result.output
    assert "1 of 1 specs valid" in result.stdout


def test_specs_new_refuses_to_overwrite(tiny_ws: Path):
    args = ["specs", "new", "-w", str(tiny_ws), "--id", "TX01", "--case", "T001", "--title", "t",
            "--cue", "c", "--replacement", "r"]
    before = tree_snapshot(tiny_ws)
    result = run_cli(args)
    assert result.exit_code == 2
    assert "already exists" in result.stderr
    assert tree_snapshot(tiny_ws) == before


def test_specs_new_writes_a_valid_spec(tiny_ws: Path):
    result = run_cli(["specs", "new", "-w", str(tiny_ws), "--id", "CF02", "--case", "T001", "--title", "Swap",
                      "--cue", "a red hat", "--replacement", "a blue hat"])
    assert result.exit_code == 0, result.output
    text = (tiny_ws / "interventions" / "CF02.yaml").read_text()
    assert "mask: masks/CF02.png" in text
    result = run_cli(["specs", "validate", "CF02", "-w", str(tiny_ws)])
    assert result.exit_code == 2
    assert "masks/CF02.png is missing" in result.stderr
