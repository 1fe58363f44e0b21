"""A peer's failed or declined sample is listed under the report's ``missing`` with the harness's own words, the
same whether its file is read directly (``cfkit report --predictions FILE``) or imported first (``cfkit runs
import FILE`` then ``cfkit report``): inspect_ai's sample error and a content filter's reason, lmms-eval's empty
reply, VLMEvalKit's 'Failed to obtain answer'. Each file is the peer file of tests/support/interop_files.py with
samples changed as the harness itself records such a sample (cited in cfkit/interop/)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import openpyxl
import pytest

from support.interop_files import write_peer_files
from support.workspace import run_cli

#: What each harness's file says of its failed (and declined) samples, as the report should list them.
WORDS = {
    "inspect": {"Y000": ("transport", "inspect_ai recorded an error that halted the sample: RuntimeError: CUDA "
                                      "error: out of memory"),
                "Y001": ("refused", "the provider's content filter blocked the reply (inspect_ai recorded "
                                    "stop_reason content_filter: content_policy_violation: the prompt was flagged)")},
    "lmms": {"Y000": ("transport", "lmms-eval recorded an empty reply, which is what its API models write when every "
                                   "try of a request failed")},
    "vlmevalkit": {"Y000": ("transport", "VLMEvalKit recorded 'Failed to obtain answer via API.' in place of a "
                                         "prediction: its request to the model failed"),
                   "Y001": ("transport", "VLMEvalKit recorded 'Failed to obtain answer: <class 'RuntimeError'> "
                                         "boom' in place of a prediction: the model raised an error and the run went "
                                         "on (SKIP_ERR)")},
}


@pytest.fixture(scope="module")
def peers(tmp_path_factory):
    root = tmp_path_factory.mktemp("peer-details")
    ws, files = write_peer_files(root)
    log = json.loads(files["inspect-json"].read_text())
    failed, filtered = log["samples"][0], log["samples"][1]
    # inspect_ai's EvalError on a sample an error halted (fail_on_error=False), and no output
    failed["error"] = {"message": "RuntimeError: CUDA error: out of memory", "traceback": "Traceback ...",
                       "traceback_ansi": ""}
    failed["output"] = {"model": "peer-vlm-2026-01", "choices": []}
    filtered["output"]["choices"][0]["stop_reason"] = "content_filter"
    filtered["output"]["error"] = "content_policy_violation: the prompt was flagged"
    files["inspect-json"].write_text(json.dumps(log))
    lines = [json.loads(line) for line in files["lmms"].read_text().splitlines()]
    lines[0]["resps"] = [[""]]  # what its API models return once every retry failed
    files["lmms"].write_text("".join(json.dumps(line) + "\n" for line in lines))
    book = openpyxl.load_workbook(files["vlmevalkit"])
    sheet = book.active
    sheet.cell(row=2, column=7).value = "Failed to obtain answer via API."
    sheet.cell(row=3, column=7).value = "Failed to obtain answer: <class 'RuntimeError'> boom"
    book.save(files["vlmevalkit"])
    return root, ws, {"inspect": files["inspect-json"], "lmms": files["lmms"], "vlmevalkit": files["vlmevalkit"]}


def _report(*args: str) -> dict:
    result = run_cli(["report", *args, "--format", "json", "--resamples", "200"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _without_runs(report: dict) -> dict:
    """The report apart from what names a stored run (a file read directly is none) and the notes (the line on
    how the file was read is said where it is read: by 'report --predictions', else by 'runs import')."""
    out = {k: v for k, v in report.items() if k not in ("notes", "runs_read", "missing")}
    out["contextcanvas"] = [{k: v for k, v in row.items() if k != "runs"} for row in report["contextcanvas"]]
    return out


@pytest.mark.parametrize("fmt", sorted(WORDS))
def test_a_peer_s_failed_and_declined_samples_say_the_same_read_directly_or_imported(peers, fmt):
    root, ws, files = peers
    own = root / f"ws-{fmt}"
    shutil.copytree(ws, own)
    direct = _report("-w", str(own), "--predictions", str(files[fmt]))
    imported = run_cli(["-w", str(own), "runs", "import", str(files[fmt])])
    assert imported.exit_code == 0, imported.output
    stored = _report("-w", str(own))

    def listed(report: dict) -> dict:
        return {m["case"]: (m["reason"], m["detail"]) for m in report["missing"] if m["reason"] != "absent"}

    assert listed(stored) == WORDS[fmt]
    assert listed(direct) == WORDS[fmt]
    absent = [{m["case"] for m in r["missing"] if m["reason"] == "absent"} for r in (direct, stored)]
    assert absent[0] == absent[1] and absent[0]  # the cases the file does not hold, both ways
    assert _without_runs(direct) == _without_runs(stored)
    # The terminal's line on them gives the harness's words too
    said = run_cli(["report", "-w", str(own), "--predictions", str(files[fmt]), "--resamples", "200"])
    assert said.exit_code == 0, said.output
    case, (reason, words) = next(iter(WORDS[fmt].items()))
    assert f"e.g. case {case}: {words}" in " ".join(said.stderr.split()), said.stderr


def test_a_case_the_imported_file_lacks_is_said_to_be_missing_from_it_beside_a_failed_sample(peers):
    """An imported file's run that ended with failed samples is not complete (a failed request), but the cases
    its file does not hold were never asked of it: they are missing from the file, not 'not answered' by a run
    that 'is done'."""
    root, ws, files = peers
    own = root / "ws-absent"
    shutil.copytree(ws, own)
    imported = run_cli(["-w", str(own), "runs", "import", str(files["vlmevalkit"])])
    assert imported.exit_code == 0, imported.output
    run_id = imported.stdout.split()[0]
    stored = _report("-w", str(own))
    details = {m["detail"] for m in stored["missing"] if m["reason"] == "absent"}
    assert details == {f"not in {files['vlmevalkit']}, the file imported as run {run_id}: it holds no answer for "
                       "this case; import a file that covers the suite"}, details
