"""A run of part of its suite, exported and read back, tells a case its selection left out from one added to the
suite since, as the stored run does.

Before, the export carried the run's selection (``--limit 1``) but not which cases it left out, so a report over
the file, or over the run imported elsewhere, said of a case added after the run that the run "asked only part of
the suite (--limit 1)", where the stored run says it was added since and that running the command again without
--limit asks it.
"""

from __future__ import annotations

import json
import shutil

import pytest

from support.workspace import run_cli, write_workspace

pytestmark = pytest.mark.timeout(300)


def _details(root, *extra) -> dict[str, str]:
    made = run_cli(["-w", str(root), "report", "--format", "json", "--resamples", "50", *extra])
    assert made.exit_code == 0, made.stderr
    return {m["case"]: m["detail"] for m in json.loads(made.stdout)["missing"] if m["model"] == "baseline:random"}


@pytest.fixture
def subset_run(tmp_path):
    root = write_workspace(tmp_path / "ws")
    ran = run_cli(["-w", str(root), "probe", "run", "-m", "baseline:random", "-s", "contextcanvas", "--limit", "1"])
    assert ran.exit_code == 0, ran.stderr
    [run_id] = [r["id"] for r in json.loads(run_cli(["-w", str(root), "runs", "list", "--json"]).stdout)]
    export = tmp_path / "run.jsonl"
    made = run_cli(["-w", str(root), "runs", "export", run_id, "--format", "jsonl", "--output", str(export)])
    assert made.exit_code == 0, made.stderr
    fresh = tmp_path / "fresh"
    shutil.copytree(root, fresh, ignore=shutil.ignore_patterns(".cfkit"))
    # A case added to the suite after the run: a copy of the last one under a new id.
    for folder in (root, fresh):
        cases = folder / "data" / "cases.jsonl"
        lines = cases.read_text().splitlines()
        added = {**json.loads(lines[-1]), "id": "T099"}
        cases.write_text("\n".join([*lines, json.dumps(added)]) + "\n")
    return root, fresh, export, run_id


def test_an_exported_subset_run_tells_a_case_added_since_from_one_its_selection_left_out(subset_run):
    root, fresh, export, run_id = subset_run
    rows = [json.loads(line) for line in export.read_text().splitlines()]
    assert {tuple(r["run_left_out"]) for r in rows} == {("T002", "T003")}
    stored = _details(root)
    assert stored["T099"].startswith(f"not asked: the case was added to the suite after run {run_id} was planned")
    assert stored["T002"] == f"not asked: run {run_id} asked only part of the suite (--limit 1)"
    read = _details(fresh, "--predictions", str(export))
    assert run_cli(["-w", str(fresh), "runs", "import", str(export)]).exit_code == 0
    imported = _details(fresh)
    for details in (read, imported):
        assert details == stored


def test_an_export_made_before_run_left_out_reads_its_absent_cases_as_left_out(subset_run, tmp_path):
    root, fresh, export, run_id = subset_run
    older = tmp_path / "older.jsonl"
    rows = [json.loads(line) for line in export.read_text().splitlines()]
    older.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "run_left_out"}) + "\n" for r in rows))
    read = _details(fresh, "--predictions", str(older))
    left_out = f"not asked: run {run_id} asked only part of the suite (--limit 1)"
    assert read == {"T002": left_out, "T003": left_out, "T099": left_out}  # as before: it cannot tell


def test_a_malformed_run_left_out_is_refused_in_one_line(subset_run, tmp_path):
    _, fresh, export, _ = subset_run
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps({**json.loads(line), "run_left_out": [2, 3]}) + "\n"
                           for line in export.read_text().splitlines()))
    made = run_cli(["-w", str(fresh), "runs", "import", str(bad)])
    assert made.exit_code != 0 and "'run_left_out' must be a list of texts" in made.stderr
