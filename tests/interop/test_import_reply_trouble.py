"""``runs import`` says, as it stores a file, when its replies are cut off at the token limit, empty or read as
no option: the same line ``probe run`` ends with and ``runs show`` repeats, with the counts and the command
that lists them, instead of leaving it to a later report. The file is always stored; the import exits 1 when most
of a run's requests got no reply (failed or empty), as ``probe run`` does on mostly empty replies, so that a
script does not go on to report on it as if it were fine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.interop_files import write_peer_files
from support.workspace import run_cli


@pytest.fixture(scope="module")
def peer_files(tmp_path_factory):
    return write_peer_files(tmp_path_factory.mktemp("import-trouble"))


def _flat(text: str) -> str:
    return " ".join(text.split())


def _lmms_with(source: Path, target: Path, reply: str, count: int) -> Path:
    """The lmms-eval samples file with its first ``count`` replies replaced by ``reply``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, line in enumerate(source.read_text().splitlines()):
        sample = json.loads(line)
        if i < count:
            sample["resps"], sample["filtered_resps"] = [[reply]], [reply]
        lines.append(json.dumps(sample) + "\n")
    target.write_text("".join(lines))
    return target


def _inspect_empty(source: Path, target: Path, count: int) -> Path:
    """The inspect_ai log with its first ``count`` replies empty: the model wrote nothing (no error, no limit).
    (An empty lmms-eval reply is its record of a failed request, not an empty reply: see test_interop.py.)"""
    log = json.loads(source.read_text())
    for sample in log["samples"][:count]:
        sample["output"]["choices"][0]["message"]["content"] = [{"type": "text", "text": ""}]
    target.write_text(json.dumps(log))
    return target


def _inspect_one_empty(source: Path, target: Path) -> Path:
    """The inspect_ai log cut down to its first sample, whose reply is empty."""
    log = json.loads(source.read_text())
    log["samples"] = log["samples"][:1]
    log["samples"][0]["output"]["choices"][0]["message"]["content"] = [{"type": "text", "text": ""}]
    target.write_text(json.dumps(log))
    return target


def _inspect_cut(source: Path, target: Path, count: int) -> Path:
    log = json.loads(source.read_text())
    for sample in log["samples"][:count]:
        sample["output"]["choices"][0]["stop_reason"] = "max_tokens"
    target.write_text(json.dumps(log))
    return target


def _imported(ws: Path, path: Path, label: str, status: int = 0) -> tuple[str, str]:
    """(run id, the import's stderr, flattened) of a file imported through the CLI, which must store it."""
    result = run_cli(["-w", str(ws), "runs", "import", str(path), "--label", label])
    assert result.exit_code == status, result.stderr
    [run_id] = result.stdout.split()
    return run_id, _flat(result.stderr)


def _shown_line(ws: Path, run_id: str) -> str:
    shown = run_cli(["-w", str(ws), "runs", "show", run_id], env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.stderr
    return _flat(shown.stdout)


@pytest.mark.parametrize("kind, said", [
    ("empty", "64 of 100 replies have no valid answer, 60 of them empty: no text came back"),
    ("unread", "64 of 100 replies have no valid answer; the parser found no option in most of them"),
    ("cut", "40 of 100 replies were cut off at the token limit when they were made"),
])
def test_the_import_says_what_its_replies_are_in_the_words_runs_show_uses(peer_files, tmp_path, kind, said):
    ws, files = peer_files
    if kind == "cut":
        path = _inspect_cut(files["inspect-json"], tmp_path / "2026-11-02T10-00-00_contextcanvas_cut.json", 40)
    elif kind == "empty":
        path = _inspect_empty(files["inspect-json"], tmp_path / "2026-11-02T10-00-00_contextcanvas_empty.json", 60)
    else:
        reply = "It depends on what the couple wants."
        path = _lmms_with(files["lmms"], tmp_path / "lmms" / "peer-vlm" / files["lmms"].name, reply, 60)

    # 60 of 100 replies empty: most requests got no reply, so the import ends with exit status 1 and says so last.
    run_id, stderr = _imported(ws, path, f"peer-{kind}", status=1 if kind == "empty" else 0)
    if kind == "empty":
        stderr, last = stderr.split("error: ")
        assert last.startswith(f"most requests of 1 imported run got no reply ({run_id}: 60 of 100: ")
        assert last.rstrip().endswith("said above): they are stored, and a report counts them wrong."), last
    else:
        assert "error" not in stderr

    [line] = [ln for ln in stderr.split("warning: ")[1:] if said in ln]
    assert f"peer-{kind} contextcanvas: " in line
    assert f"runs unparsed {run_id}' shows them" in line, line  # the file's ambiguous replies among them
    assert line.strip() in _shown_line(ws, run_id)  # one wording, not a second one


def test_a_clean_file_is_stored_without_the_line(peer_files):
    ws, files = peer_files
    run_id, stderr = _imported(ws, files["lmms"], "peer-clean")
    assert "warning" not in stderr and "no valid answer" not in stderr and "cut off" not in stderr, stderr
    assert run_id in _flat(run_cli(["-w", str(ws), "runs", "list"], env={"COLUMNS": "400"}).stdout)


def test_a_run_of_one_empty_reply_is_said_in_the_singular(peer_files, tmp_path):
    ws, files = peer_files
    path = _inspect_one_empty(files["inspect-json"], tmp_path / "2026-11-02T10-00-00_contextcanvas_one.json")
    run_id, stderr = _imported(ws, path, "peer-one", status=1)
    last = stderr.split("error: ")[-1]
    assert last == (f"most requests of 1 imported run got no reply ({run_id}: 1 of 1: failed, or empty; said above): "
                    "it is stored, and a report counts it wrong."), last
