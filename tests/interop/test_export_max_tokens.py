"""A run's token limit travels with its export (``run_max_tokens``): a report over the export (``--predictions``)
and over it imported says of replies cut off at the limit what the report over the stored run says, the limit
included, and ``runs show`` names it. The run is real: the CLI against a loopback Chat Completions server that cuts
one reply off at the token limit, fails one request and has the model refuse one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.chat_api_server import Scripted, completion, error_body, user_text
from support.probe_runs import openai_run
from support.workspace import run_cli, write_workspace

CUT = "1 of 2 replies was cut off at the token limit (64 tokens)"


def _script(body, n) -> Scripted:
    text, model = user_text(body), body.get("model")
    if "winter card" in text:  # cut off at the token limit
        return Scripted(body=completion('{"answer": "A", "rea', model=model, finish_reason="length"))
    if "Which event" in text:  # the request fails
        return Scripted(400, error_body("the image could not be decoded"))
    return Scripted(body=completion(None, model=model, refusal="I can't judge this image."))  # refused


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")
    from support.chat_api_server import ChatServer

    root = tmp_path_factory.mktemp("max-tokens")
    ws = write_workspace(root / "ws")
    with ChatServer(_script) as server:
        openai_run(ws, server.url, "contextcanvas", "--max-tokens", "64")
    [run] = json.loads(run_cli(["runs", "list", "-w", str(ws), "--json"]).stdout)
    return ws, run["id"], root


def _report(ws: Path, *extra: str) -> dict:
    result = run_cli(["report", "-w", str(ws), "--format", "json", "--resamples", "100", *extra])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def _apart_from_where(report: dict) -> dict:
    """A report without what tells a run read from a file from a stored one: the file it was read from, and the
    advice on raising the limit (where the replies were made, for a file), and the line on how a peer's format
    was read."""
    report = json.loads(json.dumps(report))
    report["notes"] = [n for n in report["notes"] if not n.startswith("run.eval: ")]
    for run in report["runs_read"]:
        run.pop("imported")
    for problem in report["reply_problems"]:
        problem.pop("message")
    return report


@pytest.mark.parametrize("fmt, name", [("jsonl", "run.jsonl"), ("csv", "run.csv"), ("inspect", "run.eval")])
def test_the_limit_a_run_s_replies_were_cut_off_at_survives_its_export(stored, tmp_path, fmt, name):
    ws, run_id, _ = stored
    original = _report(ws)
    [problem] = original["reply_problems"]
    assert problem["truncated"] == 1 and CUT in problem["message"], problem
    assert {m["reason"] for m in original["missing"]} == {"transport", "refused"}

    export = tmp_path / name
    assert run_cli(["runs", "export", run_id, "-w", str(ws), "--format", fmt, "--output", str(export)]).exit_code == 0
    fresh = tmp_path / "fresh"
    shutil.copytree(ws, fresh)
    assert run_cli(["runs", "rm", run_id, "-w", str(fresh)]).exit_code == 0
    imported = run_cli(["runs", "import", str(export), "-w", str(fresh)])
    assert imported.exit_code == 0, imported.stderr
    assert CUT in " ".join(imported.stderr.split())

    for report in (_report(ws, "--predictions", str(export)), _report(fresh)):
        [read_back] = report["reply_problems"]
        assert CUT in read_back["message"], read_back  # the limit, said as over the stored run
        assert _apart_from_where(report) == _apart_from_where(original)
    shown = run_cli(["runs", "show", run_id, "-w", str(fresh)], env={"COLUMNS": "400"})
    assert CUT in " ".join(shown.stdout.split()), shown.stdout
    assert "its replies were made with max_tokens 64" in " ".join(shown.stdout.split())  # the 'imported' row


def test_an_export_made_before_the_column_reads_as_before(stored, tmp_path):
    """A file without ``run_max_tokens`` (cfkit before it wrote it) is read, its limit not known, not said."""
    ws, run_id, _ = stored
    export = tmp_path / "run.jsonl"
    assert run_cli(["runs", "export", run_id, "-w", str(ws), "--format", "jsonl", "--output", str(export)]).exit_code == 0
    rows = [json.loads(line) for line in export.read_text().splitlines()]
    assert {r["run_max_tokens"] for r in rows} == {64}
    before = tmp_path / "before.jsonl"
    before.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "run_max_tokens"}) + "\n" for r in rows))
    [problem] = _report(ws, "--predictions", str(before))["reply_problems"]
    assert ("1 of 2 replies was cut off at the token limit when it was made, and a replay keeps it as recorded"
            in problem["message"]), problem
    assert "Raise the token limit in the harness that produced it, then" in problem["message"], problem
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r | {"run_max_tokens": "lots"}) + "\n" for r in rows))
    result = run_cli(["report", "-w", str(ws), "--predictions", str(bad)])
    assert result.exit_code == 2 and "'run_max_tokens' must be a whole number, not 'lots'" in result.stderr
