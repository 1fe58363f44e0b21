"""``cfkit report`` as a whole process: what it asks of the libraries it starts, and its one-line refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: Runs the CLI in this process, then says what OPENBLAS_NUM_THREADS was when it ended.
ENDED_WITH = ("import os, sys\nfrom cfkit.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as exc:\n"
              "    code = exc.code\nprint('ENDED', os.environ.get('OPENBLAS_NUM_THREADS'), code, file=sys.stderr)\n")


def _predictions(path: Path) -> Path:
    lines = [{"model": "m", "suite": "contextcanvas", "case": case, "pair": None, "condition": "image",
              "answer": "A", "parse": "json", "error": None, "raw": "A", "reason": None, "confidence": None}
             for case in ("T001", "T002", "T003")]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _ended(ws: Path, predictions: Path, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | env
    done = subprocess.run([sys.executable, "-c", ENDED_WITH, "-w", str(ws), "report", "--predictions",
                           str(predictions), "--resamples", "50", "--format", "json"], capture_output=True, text=True,
                          cwd=REPO, timeout=120, env=environ)
    line = [x for x in done.stderr.splitlines() if x.startswith("ENDED ")]
    assert line, done.stderr
    return line[-1]


def test_a_report_starts_no_pool_of_blas_threads_unless_the_user_asks_for_one(tiny_ws, tmp_path):
    """Its products stay on one thread (cfkit.stats.bootstrap.PRODUCT_CELLS): OpenBLAS is asked for no pool, which
    would cost every report start-up time and CPU; a number the user set is kept."""
    predictions = _predictions(tmp_path / "p.jsonl")
    assert _ended(tiny_ws, predictions) == "ENDED 1 0"
    assert _ended(tiny_ws, predictions, OPENBLAS_NUM_THREADS="3") == "ENDED 3 0"


def test_the_report_is_the_same_with_and_without_the_pool(tiny_ws, tmp_path):
    predictions = _predictions(tmp_path / "p.jsonl")
    outputs = []
    for threads in ("1", "2"):
        environ = os.environ | {"OPENBLAS_NUM_THREADS": threads}
        done = subprocess.run([sys.executable, "-m", "cfkit", "-w", str(tiny_ws), "report", "--predictions",
                               str(predictions), "--resamples", "200", "--format", "json"], capture_output=True,
                              text=True, cwd=REPO, timeout=120, env=environ)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]


def test_two_bare_labels_are_refused_in_one_line(tiny_ws, tmp_path):
    predictions = _predictions(tmp_path / "p.jsonl")
    done = subprocess.run([sys.executable, "-m", "cfkit", "-w", str(tiny_ws), "report", "--predictions",
                           str(predictions), "--label", "a", "--label", "b", "--format", "json"], capture_output=True,
                          text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "--label NAME names the model of a --predictions file, and was given 2 names (a, b)" in done.stderr


#: Says, as the process ends (after the handlers the command registered), how many objects were frozen.
FROZEN_AT_EXIT = ("import atexit, gc, sys\natexit.register(lambda: print('FROZEN', gc.get_freeze_count(), "
                  "file=sys.stderr))\nfrom cfkit.cli import main\nmain(sys.argv[1:])\n")


def test_the_objects_left_at_exit_skip_the_last_cycle_collection_and_the_output_is_whole(tiny_ws, tmp_path):
    """The interpreter's last collection would walk every object left once more: a report hands them to the
    permanent generation first, at the exit of its process only (a test calling the command keeps its collector)."""
    import gc

    from click.testing import CliRunner

    from cfkit.cli import cli

    predictions = _predictions(tmp_path / "p.jsonl")
    args = ["-w", str(tiny_ws), "report", "--predictions", str(predictions), "--resamples", "50", "--format", "json"]
    done = subprocess.run([sys.executable, "-c", FROZEN_AT_EXIT, *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    frozen = [int(x.split()[1]) for x in done.stderr.splitlines() if x.startswith("FROZEN ")]
    assert frozen and frozen[0] > 10_000, done.stderr  # numpy's and cfkit's objects among them
    assert json.loads(done.stdout)["contextcanvas"][0]["model"] == "m"
    before = gc.get_freeze_count()
    assert CliRunner().invoke(cli, args).exit_code == 0
    assert gc.get_freeze_count() == before


#: Runs the CLI in this process, then lists the store's modules and sqlite3 if loaded.
STORE_MODULES = ("import sys\nfrom cfkit.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as exc:\n"
                 "    code = exc.code\nprint('STORE', sorted(m for m in sys.modules if m.startswith(('cfkit.store', "
                 "'sqlite3'))), code, file=sys.stderr)\n")


def test_a_report_from_files_without_a_store_loads_none_of_the_store(tiny_ws, tmp_path):
    """The store's owners (runs, edits, checks, reviews: dataclasses built at import) and sqlite3 load only where
    a report reads the store; a report of predictions files in a workspace that has none needs none of them."""
    from cfkit.workspace import load_workspace

    assert not load_workspace(tiny_ws).db_path.exists()
    for spec in (tiny_ws / "interventions").glob("*.yaml"):
        spec.unlink()
    predictions = _predictions(tmp_path / "p.jsonl")
    done = subprocess.run([sys.executable, "-c", STORE_MODULES, "-w", str(tiny_ws), "report", "--predictions",
                           str(predictions), "--resamples", "50", "--format", "json"], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert "STORE [] 0" in done.stderr, done.stderr
