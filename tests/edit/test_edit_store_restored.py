"""A store restored from an older copy beside newer edit files.

An edit's files are named by its id (``edits/SPEC/ID-raw.png``), and a file is
never overwritten. A store put back from a backup gives its next edit the id of
a file written after that backup: the edit is refused before any engine runs
(an engine call may cost money, and its image could not be saved), in one line
naming the file that is in the way, and nothing is recorded or written.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cfkit.files import write_bytes_atomic
from cfkit.store import Store, edits
from cfkit.workspace import load_workspace
from support.workspace import run_cli


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.png"))}


def test_an_edit_on_a_store_older_than_its_edit_files_is_refused_before_the_engine_runs(tiny_ws):
    ws = load_workspace(tiny_ws)
    edit = ["edit", "TX01", "--engine", "classical", "--again", "-w", str(tiny_ws)]
    assert run_cli(edit).exit_code == 0
    shutil.copy(ws.db_path, tiny_ws / "backup.db")  # a backup after edit 1 …
    assert run_cli(edit).exit_code == 0  # … edit 2 made after it …
    shutil.copy(tiny_ws / "backup.db", ws.db_path)  # … and the backup put back (the store closed: no -wal left)
    before = _files(ws.edits_dir)

    result = run_cli(edit)

    assert result.exit_code == 2, result.stdout + result.stderr
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert str(ws.edits_dir / "TX01" / "2-composite.png") in line and ".tmp" not in line, line
    assert "no edit" in line and "older copy" in line and "move those files aside" in line.lower(), line
    with Store(ws.db_path) as store:
        assert [e.id for e in edits.list_edits(store)] == [1]  # nothing recorded: no failed edit piles up
    assert _files(ws.edits_dir) == before  # and nothing written or overwritten

    (ws.edits_dir / "TX01" / "2-raw.png").rename(tiny_ws / "2-raw.png")  # moved aside, as the line says
    (ws.edits_dir / "TX01" / "2-composite.png").rename(tiny_ws / "2-composite.png")
    again = run_cli(edit)
    assert again.exit_code == 0, again.stderr
    assert "#2" in again.stdout


def test_a_file_that_is_never_overwritten_is_named_when_refused_not_its_temporary_copy(tmp_path):
    target = tmp_path / "kept.png"
    target.write_bytes(b"first")
    with pytest.raises(FileExistsError) as refused:
        write_bytes_atomic(target, b"second", overwrite=False)
    assert refused.value.filename == str(target)
    assert target.read_bytes() == b"first" and [p.name for p in tmp_path.iterdir()] == ["kept.png"]
