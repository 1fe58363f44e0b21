"""Peers' files that answer a case twice, or hold several models under one ``--label``: refused in one line
that names both places and what to do, by ``report --predictions`` and ``runs import`` alike, and nothing is
stored."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import openpyxl
import pytest

from support.interop_files import CASES, MODEL, write_peer_files
from support.workspace import run_cli


@pytest.fixture(scope="module")
def peer_files(tmp_path_factory):
    return write_peer_files(tmp_path_factory.mktemp("hostile"))


def _runs(ws: Path) -> str:
    listed = run_cli(["runs", "list", "-w", str(ws)])
    assert listed.exit_code == 0, listed.stderr
    return listed.stdout


def _refused(ws: Path, path: Path, *extra: str) -> list[str]:
    """The one error line each command gives for ``path``; neither stores a run."""
    before = _runs(ws)
    lines = []
    for command in (["report", "--predictions", str(path)], ["runs", "import", str(path)]):
        result = run_cli([*command, "-w", str(ws), *extra])
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.stderr
        [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("error: ")]
        lines.append(" ".join(line.split()))
    assert _runs(ws) == before
    return lines


@pytest.mark.parametrize("same", [True, False], ids=["same-answer", "other-answer"])
def test_a_table_that_answers_a_case_twice_names_both_rows(peer_files, tmp_path, same):
    # A VLMEvalKit table appended to by a resumed run: the case's two rows are named, whichever answer they give.
    ws, files = peer_files
    book = openpyxl.load_workbook(files["vlmevalkit"])
    sheet = book.active
    repeated = [cell.value for cell in sheet[5]]
    if not same:
        repeated[6] = "B" if repeated[6] != "B" else "A"
    sheet.append(repeated)
    table = tmp_path / f"{MODEL}_ContextCanvas.xlsx"
    book.save(table)
    last = sheet.max_row
    for line in _refused(ws, table):
        assert f"{table}, row {last} (index {repeated[0]}): a second answer for case {repeated[0]}; the first is " \
               f"{table}, row 5 (index {repeated[0]})" in line
        assert "remove one of the two" in line


def test_two_ids_mapped_to_one_case_are_named(peer_files, tmp_path):
    ws, files = peer_files
    ids = tmp_path / "ids.csv"
    ids.write_text("".join(f"{c},{c}\n" for c in CASES) + f"{CASES[1]},{CASES[0]}\n")  # the second to the first
    for line in _refused(ws, files["lmms"], "--map", str(ids)):
        assert f"a second answer for case {CASES[0]} (ids '{CASES[0]}' and '{CASES[1]}', both mapped to it by " \
               "--map)" in line
        assert f"{files['lmms']}:1 (doc_id 0)" in line


def test_a_label_over_a_file_of_two_models_is_refused(peer_files, tmp_path):
    # --label would give both models one name, and the second model's answers would read as repeats of the first's.
    ws, files = peer_files
    lines = [json.loads(line) for line in files["native"].read_text().splitlines()]
    two = tmp_path / "two.jsonl"
    two.write_text("".join(json.dumps(line | {"model": name}) + "\n" for name in ("m1", "m2") for line in lines))
    for line in _refused(ws, two, "--label", "mine"):
        assert line == (f"error: {two}: --label names the one model of a file, but this one holds the answers of 2 "
                        "models (m1, m2); drop --label to keep each model's name, or split the file by model.")
    report = run_cli(["report", "--predictions", str(two), "-w", str(ws), "--format", "json", "--resamples", "200"])
    assert report.exit_code == 0, report.stderr  # without --label, each model keeps its own name
    assert sorted(row["model"] for row in json.loads(report.stdout)["contextcanvas"]) == ["m1", "m2"]


@pytest.mark.parametrize("kind", ["native", "lmms", "vlmevalkit", "inspect-json"])
def test_a_gzipped_file_is_refused_with_the_command_that_unpacks_it(peer_files, tmp_path, kind):
    ws, files = peer_files
    packed = tmp_path / f"{files[kind].name}.gz"
    with gzip.open(packed, "wb") as handle:
        handle.write(files[kind].read_bytes())
    for line in _refused(ws, packed):
        assert line == (f"error: {packed}: gzip-compressed; cfkit reads results files uncompressed: 'gunzip -k "
                        f"{packed}' writes {files[kind].name} beside it; give that file.")


def test_a_samples_file_cut_off_in_its_last_line_says_so(peer_files, tmp_path):
    ws, files = peer_files
    text = files["lmms"].read_text()
    cut = tmp_path / "lmms" / files["lmms"].name
    cut.parent.mkdir()
    cut.write_text(text[:-40])  # the last sample's end, and its newline, never written
    count = len(text.splitlines())
    for line in _refused(ws, cut, "--label", "cut"):
        assert line.startswith(f"error: {cut}:{count}: the file ends inside this sample, with no newline: it was "
                               "cut off")
        assert "delete this last line" in line
    whole = tmp_path / "whole" / files["lmms"].name  # a last line complete without its newline is read
    whole.parent.mkdir()
    whole.write_text(text.rstrip("\n"))
    assert run_cli(["report", "--predictions", str(whole), "-w", str(ws), "--label", "whole"]).exit_code == 0


def test_an_inspect_log_of_an_eval_that_did_not_finish_is_stored_incomplete(peer_files, tmp_path):
    # inspect_ai writes what it has when an eval is cancelled or stops on an error: the log's status says so, and
    # the cases it never reached are not answers the model got wrong by choice; the run is not 'done'.
    ws, files = peer_files
    log = json.loads(files["inspect-json"].read_text())
    log.update(status="error", error={"message": "RateLimitError: quota exhausted\nmore", "traceback": "..."})
    log["samples"] = log["samples"][:60]
    path = tmp_path / "2026-11-02T10-00-00_contextcanvas_stopped.json"
    path.write_text(json.dumps(log))
    said = (f"{path.name}: its status is 'error': the eval stopped on an error (RateLimitError: quota exhausted); "
            "its 60 samples are read as a run that did not finish (incomplete)")
    report = run_cli(["report", "--predictions", str(path), "-w", str(ws), "--format", "json", "--resamples", "200"])
    assert report.exit_code == 0, report.stderr
    assert said in " ".join(report.stderr.split())
    assert any(note.startswith(said) for note in json.loads(report.stdout)["notes"])
    imported = run_cli(["runs", "import", str(path), "-w", str(ws), "--label", "stopped"])
    assert imported.exit_code == 0, imported.stderr
    assert said in " ".join(imported.stderr.split())
    shown = run_cli(["runs", "show", imported.stdout.strip(), "-w", str(ws), "--json"])
    assert json.loads(shown.stdout)["run"]["status"] == "incomplete"
    run_cli(["runs", "rm", imported.stdout.strip(), "-w", str(ws)])
