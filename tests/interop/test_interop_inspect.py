"""Logs written by inspect_ai itself (0.3.285, by tests/data/inspect/make_logs.py: a real eval of a
multiple_choice task, scored by the choice scorer, answered by mockllm), read by cfkit without inspect_ai."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.report_workspace import build_workspace
from support.workspace import run_cli

DATA = Path(__file__).resolve().parents[1] / "data" / "inspect"
#: What a careful grader reads from each reply of replies.json (None: the reply echoes both options).
EXPECTED = {"Y000": "A", "Y001": "A", "Y002": "B", "Y003": None, "N000": "B", "N001": "B", "N002": "A",
            "N003": "B", "N004": None, "N005": "B", "N006": "A", "N007": "B"}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("inspect")
    ws = build_workspace(root / "ws")
    replies = json.loads((DATA / "replies.json").read_text())
    native = root / "native.jsonl"
    native.write_text("".join(json.dumps({
        "model": "mockllm/model", "suite": "contextcanvas", "case": case, "pair": None, "condition": "image",
        "answer": answer, "parse": None, "error": None if answer else "ambiguous", "raw": replies[case],
        "reason": None, "confidence": None}) + "\n" for case, answer in EXPECTED.items()))
    return ws, native


def report(ws: Path, path: Path) -> tuple[dict, str]:
    result = run_cli(["report", "-w", str(ws), "--predictions", str(path), "--format", "json", "--resamples", "200"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


@pytest.mark.parametrize("name", ["contextcanvas.eval", "contextcanvas.json"])
def test_a_log_inspect_ai_wrote_gives_the_native_report(workspace, name):
    ws, native = workspace
    got, stderr = report(ws, DATA / name)
    expected, _ = report(ws, native)
    file_note, *notes = got.pop("notes")  # the line on how the log was read leads the saved report's notes
    assert file_note.startswith(f"{name}: {len(EXPECTED)} replies read with cfkit's parser")
    assert notes == expected.pop("notes")
    assert got == expected and got["contextcanvas"][0]["model"] == "mockllm/model"
    # The choice scorer's own extraction, read straight from the log, against cfkit's readings.
    samples = json.loads((DATA / "contextcanvas.json").read_text())["samples"]
    theirs = {s["id"]: s["scores"]["choice"]["answer"] or None for s in samples}
    differ = sum(theirs[case] != answer for case, answer in EXPECTED.items())
    assert 0 < differ < len(EXPECTED)
    verb = "differs" if differ == 1 else "differ"
    assert f"{differ} of {len(EXPECTED)} answers {verb} from the inspect file's own extraction" in stderr


def test_the_log_is_real_inspect_output():
    log = json.loads((DATA / "contextcanvas.json").read_text())
    assert (log["version"], log["status"], log["eval"]["packages"]) == (2, "success", {"inspect_ai": "0.3.285"})
    assert {s["id"] for s in log["samples"]} == set(EXPECTED)


def test_a_zstandard_member_that_unpacks_beyond_its_entry_is_refused(workspace, tmp_path):
    import zipfile

    import zstandard

    ws, _ = workspace
    # A member whose zip entry says 10 bytes but whose Zstandard stream holds a megabyte.
    packed = zstandard.ZstdCompressor().compress(b" " * 1_000_000)
    path = tmp_path / "lying.eval"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("header.json", json.dumps({"eval": {"model": "m"}}))
    with zipfile.ZipFile(path, "a") as archive:
        info = zipfile.ZipInfo("samples/Y000_epoch_1.json")
        archive.writestr(info, packed)
    # Mark the stored member as Zstandard with the size it claims, as a hostile archive would.
    data = bytearray(path.read_bytes())
    name = b"samples/Y000_epoch_1.json"
    for signature, method_at, size_at in ((b"PK\x03\x04", 8, 22), (b"PK\x01\x02", 10, 24)):
        at = data.find(signature + b"", data.find(signature) if signature == b"PK\x03\x04" else 0)
        while at != -1:
            start = at + (30 if signature == b"PK\x03\x04" else 46)
            if data[start:start + len(name)] == name:
                data[at + method_at:at + method_at + 2] = (93).to_bytes(2, "little")
                data[at + size_at:at + size_at + 4] = (10).to_bytes(4, "little")
            at = data.find(signature, at + 4)
    path.write_bytes(bytes(data))
    result = run_cli(["report", "-w", str(ws), "--predictions", str(path)])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    try:
        import inspect_ai  # noqa: F401  (then inspect_ai's reader refuses it, in its words)
    except ImportError:
        assert "unpacks to 11 bytes, not the 10 its zip entry says" in result.stderr


def test_inspect_ai_reads_what_cfkit_writes(tmp_path):
    # Skipped where inspect_ai is not installed (it is not in cfkit's pinned environment). This file and
    # tests/interop/test_interop.py also pass in a venv with inspect_ai 0.3.285, where its reader reads every log.
    inspect_log = pytest.importorskip("inspect_ai.log")
    from support.interop_files import store_run

    ws = build_workspace(tmp_path / "ws")
    run_id = store_run(ws)
    for name in ("run.eval", "run.json"):
        assert run_cli(["runs", "export", run_id, "-w", str(ws), "--format", "inspect", "--output",
                        str(tmp_path / name)]).exit_code == 0
        log = inspect_log.read_eval_log(str(tmp_path / name))
        assert log.eval.model == "openai:gpt-5.5" and len(log.samples) == 6


@pytest.mark.parametrize("stop", ["max_tokens", "model_length", "length"])
def test_a_reply_cut_off_at_the_token_limit_or_the_context_window_is_marked_cut_off(workspace, tmp_path, stop):
    """inspect_ai records why generation stopped in ``output.choices[0].stop_reason`` (``StopReason`` in
    src/inspect_ai/model/_model_output.py): ``max_tokens`` at the output limit, ``model_length`` where the reply
    filled the model's context window, and ``length`` in logs written before it was renamed max_tokens. Each is a
    reply cut off before its end, counted as cut off in the report (it was read as whole)."""
    ws, _ = workspace
    log = json.loads((DATA / "contextcanvas.json").read_text())
    log["samples"][0]["output"]["choices"][0]["stop_reason"] = stop
    path = tmp_path / f"cut-{stop}.json"
    path.write_text(json.dumps(log))
    got, _ = report(ws, path)
    [problem] = got["reply_problems"]
    assert problem["truncated"] == 1, problem


def test_a_log_of_a_format_version_cfkit_does_not_know_is_refused(workspace, tmp_path):
    """inspect_ai numbers its log format (``EvalLog.version``, 2 today: LOG_SCHEMA_VERSION in
    src/inspect_ai/_util/constants.py). A log of a later version may hold its replies and errors under other
    names: it is refused in one line, not read as if it were of a version cfkit knows."""
    ws, _ = workspace
    log = json.loads((DATA / "contextcanvas.json").read_text())
    log["version"] = 3
    path = tmp_path / "later.json"
    path.write_text(json.dumps(log))
    result = run_cli(["report", "-w", str(ws), "--predictions", str(path)])
    assert result.exit_code == 2 and not result.stdout
    [line] = result.stderr.strip().splitlines()
    assert str(path) in line and "format version 3" in line and "pip install -U" in line, line


def test_a_version_1_log_s_single_score_is_the_extraction_compared(workspace, tmp_path):
    """A version 1 log holds one scorer's result as the sample's ``score`` (inspect_ai's reader moves it into
    ``scores``: EvalSample.migrate_deprecated in src/inspect_ai/log/_log.py); its extraction is compared as a
    version 2 log's is, not taken for a log without one."""
    ws, _ = workspace
    log = json.loads((DATA / "contextcanvas.json").read_text())
    log["version"] = 1
    for sample in log["samples"]:
        sample["score"] = sample.pop("scores")["choice"]
    path = tmp_path / "version1.json"
    path.write_text(json.dumps(log))
    _, stderr = report(ws, path)
    theirs = {s["id"]: s["score"]["answer"] or None for s in log["samples"]}
    differ = sum(theirs[case] != answer for case, answer in EXPECTED.items())
    verb = "differs" if differ == 1 else "differ"
    assert f"{differ} of {len(EXPECTED)} answers {verb} from the inspect file's own extraction" in stderr, stderr
