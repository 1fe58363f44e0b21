"""``cfkit edit`` over several specs: one process, a line per spec, a summary, failures that do not stop the rest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cfkit.edit_batch import batch_ids, settings_of
from cfkit.store import Store, edits, reviews
from cfkit.workspace import load_workspace
from support.store_sql import table_rows
from support.workspace import REPO, run_cli, tree_snapshot


def _edit_rows(ws_root: Path) -> list[dict]:
    return table_rows(ws_root, "edits", "id, spec_id, engine, status", order_by="id")


def test_edit_all_on_the_mini_example_makes_every_edit_in_one_process(mini_ws: Path, tmp_path: Path):
    env = dict(os.environ, TORCH_HOME=str(tmp_path / "no-torch-cache"), PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "cfkit", "edit", "--all", "-w", str(mini_ws)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = _edit_rows(mini_ws)
    assert [(r["spec_id"], r["status"]) for r in rows] == [("EX01", "ok"), ("EX02", "ok"), ("EX03", "ok")]
    lines = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert [line.split()[:3] for line in lines] == [["[1/3]", "EX01", "made"], ["[2/3]", "EX02", "made"],
                                                   ["[3/3]", "EX03", "made"]]
    assert "LPIPS unavailable" in done.stderr and done.stderr.count("LPIPS unavailable") == 1  # said once
    assert "Edits made" in done.stdout and all(spec in done.stdout for spec in ("EX01", "EX02", "EX03"))
    assert "3 specs: 3 made." in done.stderr
    ws = load_workspace(mini_ws)
    with Store(ws.db_path) as store:
        for spec_id in ("EX01", "EX02", "EX03"):
            assert edits.selected(store, spec_id) is not None  # each checked and passing
    # Nothing is left to do for --pending; --all again adds a candidate to each.
    assert "Nothing pending" in run_cli(["edit", "--pending", "-w", str(mini_ws)]).stderr


@pytest.fixture
def three_specs(tiny_ws: Path) -> Path:
    """TX01 (recolour), TX02 (breaks: no operation for the classical engine), TX03 (a no-op that fails its check)."""
    config = tiny_ws / "cfkit.toml"
    config.write_text(config.read_text() + '\n[edit]\nengine = "classical"\n')
    (tiny_ws / "interventions" / "TX02.yaml").write_text(
        "id: TX02\ncase: T001\ntitle: No recipe\ncue: a corner\nreplacement: another corner\nprompt: p\n"
        "regions: [{box: [0.5, 0.5, 0.75, 0.75]}]\n")
    (tiny_ws / "interventions" / "TX03.yaml").write_text(
        "id: TX03\ncase: T001\ntitle: Too faint\ncue: a corner\nreplacement: the same corner\nprompt: p\n"
        "regions: [{box: [0.1, 0.1, 0.3, 0.3]}]\nchecks: {change_in_min: 0.9}\n"
        "engines: {classical: {op: recolor, color: '#808080', strength: 0.01}}\n")
    return tiny_ws


def test_a_failure_is_listed_and_does_not_stop_the_others(three_specs: Path, no_torch):
    result = run_cli(["edit", "TX01", "TX02", "TX03", "-w", str(three_specs)])
    assert result.exit_code == 1
    rows = _edit_rows(three_specs)
    assert [(r["spec_id"], r["status"]) for r in rows] == [("TX01", "ok"), ("TX03", "ok")]  # TX02 wrote nothing
    assert "[1/3] TX01 made #1" in result.stderr
    assert "[2/3] TX02 failed: spec TX02 gives the classical engine no operation" in result.stderr
    assert "[3/3] TX03 check failed #2" in result.stderr
    assert "1 made, 1 check failed, 1 failed" in result.stderr
    assert "2 of 3 specs did not end with an edit that passed its check (TX02, TX03)" in result.stderr
    for spec in ("TX01", "TX02", "TX03"):
        assert spec in result.stdout  # the summary table has a row for each


def test_the_last_line_says_what_takes_each_failed_spec_up_again(three_specs: Path, no_torch):
    """TX02 got no edit: 'edit --pending' takes it up. TX03's edit failed its check but is saved for a person to
    accept or reject, so 'edit --pending' passes over it: the line must not send it there."""
    result = run_cli(["edit", "TX01", "TX02", "TX03", "-w", str(three_specs)])
    assert result.exit_code == 1
    last = result.stderr.strip().splitlines()[-1]
    assert "Fix TX02 and run 'cfkit edit --pending'." in last
    assert "Accept or reject the saved edit of TX03 in 'cfkit review SPEC'" in last
    assert "make another with 'cfkit edit SPEC'" in last
    assert batch_ids(load_workspace(three_specs), [], pending=True) == ["TX02"]  # as the line says


def test_a_failed_spec_whose_earlier_edit_stands_is_named_not_sent_to_pending(three_specs: Path, no_torch):
    """TX01 already has an edit no review rejected, so 'edit --pending' passes over it: when a new edit of it
    fails, the last line names the command that takes it up again, not --pending (which says 'Nothing pending')."""
    ws = str(three_specs)
    run_cli(["edit", "--all", "-w", ws])
    no_key = {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None}
    result = run_cli(["edit", "TX01", "TX02", "--engine", "openai", "-w", ws], env=no_key)
    assert result.exit_code == 1
    last = result.stderr.strip().splitlines()[-1]
    assert "Fix TX01, TX02 and run 'cfkit edit TX01 TX02'." in last, last
    assert batch_ids(load_workspace(three_specs), [], pending=True) == ["TX02"]  # --pending would skip TX01


def test_json_lists_each_spec_and_still_fails(three_specs: Path, no_torch):
    result = run_cli(["edit", "--all", "--json", "-w", str(three_specs)])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    specs = data["specs"]
    assert [(d["spec"], d["status"]) for d in specs] == [("TX01", "made"), ("TX02", "failed"), ("TX03", "check failed")]
    assert specs[0]["edits"][0]["check"].startswith("pass") and "no operation" in specs[1]["error"]
    assert data["spent"]["calls"] == 0 and data["stopped"] is None  # a local engine: nothing billed


def test_accepted_specs_are_kept_and_pending_means_no_usable_edit(three_specs: Path, no_torch):
    ws = str(three_specs)
    run_cli(["edit", "--all", "-w", ws])
    assert run_cli(["review", "TX01", "--accept", "-w", ws]).exit_code == 0
    assert run_cli(["review", "TX03", "--reject", "--note", "no change", "-w", ws]).exit_code == 0
    workspace = load_workspace(three_specs)
    assert batch_ids(workspace, [], pending=True) == ["TX02", "TX03"]  # none made / the only one rejected
    again = run_cli(["edit", "TX01", "TX03", "-w", ws])
    assert "[1/2] TX01 kept: accepted edit #1 stays" in again.stderr
    assert [r["spec_id"] for r in _edit_rows(three_specs)].count("TX01") == 1
    more = run_cli(["edit", "TX01", "TX03", "--again", "-w", ws])
    assert "[1/2] TX01 made" in more.stderr
    with Store(workspace.db_path) as store:
        assert edits.selected(store, "TX01").id == 1  # the accepted edit stays selected
        assert reviews.accepted_edit_id(store, "TX01") == 1


def test_arguments_that_hold_for_every_spec_are_checked_once_before_any(three_specs: Path):
    before = tree_snapshot(three_specs)
    unknown = run_cli(["edit", "--all", "--engine", "sdxl", "-w", str(three_specs)])
    assert unknown.exit_code == 2 and "sdxl" in unknown.stderr and "[1/" not in unknown.stderr
    assert run_cli(["edit", "--all", "-o", "colour=red", "-w", str(three_specs)]).exit_code == 2
    many = run_cli(["edit", "TX01", "TX03", "--input", "x.png", "-w", str(three_specs)])
    assert many.exit_code == 2 and "edits import" in many.stderr
    both = run_cli(["edit", "TX01", "--all", "-w", str(three_specs)])
    assert both.exit_code == 2 and "one of them" in both.stderr
    missing = run_cli(["edit", "TX01", "NOPE", "-w", str(three_specs)])
    assert missing.exit_code == 2 and "no spec 'NOPE'" in missing.stderr
    assert tree_snapshot(three_specs) == before


def test_dry_run_of_a_batch_plans_each_and_writes_nothing(three_specs: Path):
    before = tree_snapshot(three_specs)
    result = run_cli(["edit", "--all", "--dry-run", "-w", str(three_specs)])
    assert result.exit_code == 2  # TX02 cannot be edited as asked
    assert "TX01" in result.stdout and "TX03" in result.stdout and "TX02" in result.stderr
    assert tree_snapshot(three_specs) == before


def test_an_edit_records_the_options_it_was_asked_for_and_can_be_made_again(three_specs: Path, no_torch):
    ws = str(three_specs)
    assert run_cli(["edit", "TX01", "-o", "color=#102030", "-o", "strength=0.5", "-w", ws]).exit_code == 0
    workspace = load_workspace(three_specs)
    with Store(workspace.db_path) as store:
        record = edits.get(store, 1)
    assert record.params["requested_options"] == {"color": "#102030", "strength": "0.5"}
    settings = settings_of(record)
    assert settings.engine == "classical" and settings.model is None  # the classical engine takes no model
    assert settings.options == {"color": "#102030", "strength": "0.5"}
    assert settings.describe() == "classical, color=#102030, strength=0.5"


@pytest.fixture
def no_torch(tmp_path, monkeypatch):
    """No LPIPS weights: the checks run without LPIPS, as on a fresh machine."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "no-torch-cache"))
    monkeypatch.delenv("CFKIT_LPIPS_BACKBONE", raising=False)


def test_an_imported_edit_is_not_made_again_from_the_same_file(three_specs: Path, tmp_path: Path, no_torch):
    from PIL import Image

    from cfkit.errors import UsageError

    edited = tmp_path / "TX01.png"
    Image.open(three_specs / "data" / "images" / "T001.png").save(edited)
    run_cli(["edit", "TX01", "--engine", "file", "--input", str(edited), "-w", str(three_specs)])
    with Store(load_workspace(three_specs).db_path) as store:
        record = edits.get(store, 1)
    with pytest.raises(UsageError, match="imported from TX01.png; made again it would be the same image"):
        settings_of(record)


def test_the_spinner_names_engine_and_model_with_the_time_on_a_terminal_only(monkeypatch):
    import io
    import time

    from rich.console import Console

    from cfkit.cli import progress

    screen = io.StringIO()
    monkeypatch.setattr(progress, "err", Console(file=screen, force_terminal=True, width=100))
    with progress.engine_spinner("CF18", "openai", "gpt-image-2"):
        time.sleep(0.4)
    drawn = screen.getvalue()
    assert "CF18 openai gpt-image-2 working" in drawn and "0:00:0" in drawn
    pipe = io.StringIO()
    monkeypatch.setattr(progress, "err", Console(file=pipe, width=100))  # not a terminal: nothing drawn
    with progress.engine_spinner("CF18", "openai", "gpt-image-2"):
        pass
    assert pipe.getvalue() == ""
