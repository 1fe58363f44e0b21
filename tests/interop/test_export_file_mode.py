"""A file ``cfkit runs export --output`` writes gets the permissions any other file cfkit writes gets (what
``open()`` gives under the umask), not the 0600 of the temporary file it is renamed from: a run's export is
made to be shared (with a collaborator on the same machine, a web server, another harness)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from cfkit.files import FILE_MODE
from support.workspace import run_cli


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("fmt", ["predictions", "jsonl", "csv", "lmms"])
def test_an_exported_file_is_as_readable_as_any_file_cfkit_writes(tiny_ws: Path, tmp_path: Path, fmt: str):
    ws = str(tiny_ws)
    run = run_cli(["probe", "run", "-m", "baseline:always-yes", "-s", "contextcanvas", "-w", ws])
    assert run.exit_code == 0, run.stderr
    run_id = run.stdout.strip().splitlines()[-1]
    out = tmp_path / f"export.{'csv' if fmt == 'csv' else 'jsonl'}"
    done = run_cli(["runs", "export", run_id, "--format", fmt, "--output", str(out), "-w", ws])
    assert done.exit_code == 0, done.stderr
    written = [out] + sorted(p for p in tmp_path.iterdir() if p.is_file() and p != out)
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == FILE_MODE == 0o666 & ~_umask(), (path.name, oct(path.stat().st_mode))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left behind
