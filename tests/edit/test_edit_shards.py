"""`cfkit edit --all --shard i/N`: N processes split a spec set without two of them making the same edit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cfkit.edit_batch import batch_ids
from cfkit.workspace import load_workspace
from support.store_sql import table_rows
from support.workspace import REPO, run_cli


def _edits(ws: Path) -> list[str]:
    return [r["spec_id"] for r in table_rows(ws, "edits", "spec_id", order_by="id")]


def _more_specs(ws: Path, count: int) -> list[str]:
    """``count`` more classical recolour specs on the example's first case."""
    source = (ws / "interventions" / "EX01.yaml").read_text()
    ids = []
    for i in range(count):
        spec_id = f"EY{i:02d}"
        (ws / "interventions" / f"{spec_id}.yaml").write_text(source.replace("EX01", spec_id))
        mask = ws / "interventions" / "masks" / "EX01.png"
        if mask.is_file():
            (ws / "interventions" / "masks" / f"{spec_id}.png").write_bytes(mask.read_bytes())
        ids.append(spec_id)
    return ids


def test_shards_are_disjoint_cover_everything_and_do_not_move_as_edits_are_made(mini_ws):
    _more_specs(mini_ws, 7)
    ws = load_workspace(mini_ws)
    everything = batch_ids(ws, [], all_specs=True)
    parts = [batch_ids(ws, [], all_specs=True, shard=(i, 3)) for i in (1, 2, 3)]
    assert sorted(s for p in parts for s in p) == sorted(everything) and len(everything) == 10
    assert max(map(len, parts)) - min(map(len, parts)) <= 1  # balanced
    # --pending shrinks as edits are made; a spec never changes shard meanwhile.
    done = run_cli(["edit", everything[0], everything[4], "--engine", "classical", "-w", str(mini_ws)])
    assert done.exit_code == 0, done.stderr
    pending = [batch_ids(ws, [], pending=True, shard=(i, 3)) for i in (1, 2, 3)]
    for before, after in zip(parts, pending):
        assert set(after) == set(before) - {everything[0], everything[4]}


def test_two_processes_with_two_shards_make_each_edit_once(mini_ws, tmp_path):
    _more_specs(mini_ws, 5)
    env = dict(os.environ, TORCH_HOME=str(tmp_path / "no-torch-cache"), PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-m", "cfkit", "edit", "--all", "--shard", f"{i}/2", "--engine",
                               "classical", "-w", str(mini_ws)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in (1, 2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outputs]
    made = _edits(mini_ws)
    assert sorted(made) == sorted(set(made)) and len(made) == 8  # every spec once, none twice
    first = {line.split()[1] for line in outputs[0][1].splitlines() if line.startswith("[")}
    second = {line.split()[1] for line in outputs[1][1].splitlines() if line.startswith("[")}
    assert first and second and not first & second and first | second == set(made)


@pytest.mark.parametrize("bad", ["0/2", "3/2", "1", "a/b", "1/0"])
def test_a_bad_shard_is_refused(mini_ws, bad):
    result = run_cli(["edit", "--all", "--shard", bad, "-w", str(mini_ws)])
    assert result.exit_code == 2 and "--shard" in result.stderr and "I/N" in result.stderr


def test_a_shard_is_for_a_batch(mini_ws):
    one = run_cli(["edit", "EX01", "--shard", "1/2", "-w", str(mini_ws)])
    assert one.exit_code == 2 and "splits a batch" in one.stderr
    empty = run_cli(["edit", "--all", "--shard", "4/4", "-w", str(mini_ws), "--engine", "classical"])
    assert empty.exit_code == 0 and "holds no spec" in empty.stderr
