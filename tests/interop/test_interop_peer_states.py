"""What a peer's file says of a sample beyond its reply, read as it is meant: an inspect_ai sample invalidated
after the eval, or blocked by a provider's content filter; lmms-eval lines of several filters; VLMEvalKit's
predictions saved as JSON (PRED_FORMAT=json) and its SPLIT_THINK ``thinking`` column.

Each file is a real one changed as the harness's own source writes the state (cited at each test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.report_workspace import build_workspace
from support.workspace import run_cli

DATA = Path(__file__).resolve().parents[1] / "data" / "inspect"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return build_workspace(tmp_path_factory.mktemp("peer-states") / "ws")


def _report(ws: Path, path: Path) -> tuple[dict, str]:
    result = run_cli(["report", "-w", str(ws), "--predictions", str(path), "--format", "json", "--resamples", "200"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), " ".join(result.stderr.split())


def _log(tmp_path: Path, name: str, change) -> tuple[Path, dict]:
    """The inspect_ai 0.3.285 log of tests/data/inspect with its first sample changed by ``change``."""
    log = json.loads((DATA / "contextcanvas.json").read_text())
    change(log["samples"][0])
    path = tmp_path / name
    path.write_text(json.dumps(log))
    return path, log


def _missing(report: dict, case: str) -> list[dict]:
    return [m for m in report["missing"] if m["case"] == case]


def test_an_invalidated_inspect_sample_is_not_counted_as_an_answer(ws, tmp_path):
    """inspect_ai's invalidate_samples (src/inspect_ai/log/_edit.py) sets a sample's ``invalidation`` to a
    ProvenanceData (timestamp, author, reason) and the log's ``invalidated``; the sample keeps its reply. Its
    answer is left out (the case is absent, counted wrong), and a warning says which and why."""
    def invalidate(sample):
        sample["invalidation"] = {"timestamp": "2026-11-03T09:00:00+00:00", "author": "jdoe",
                                  "reason": "the image failed to load in the sandbox", "metadata": {}}

    path, log = _log(tmp_path, "invalidated.json", invalidate)
    log["invalidated"] = True
    path.write_text(json.dumps(log))
    case = log["samples"][0]["id"]
    got, stderr = _report(ws, path)
    [missing] = _missing(got, case)
    assert missing["reason"] == "absent", missing
    assert ("invalidated.json: 1 sample left out, not counted as answers: the log marks them invalidated "
            f"(first: {path}, sample '{case}' (#1): invalidated by jdoe on 2026-11-03 after the eval (the image "
            "failed to load in the sandbox))") in stderr, stderr
    assert "inspect eval-retry" in stderr
    assert "11 replies read with cfkit's parser" in stderr  # 12 samples, one left out
    assert any("invalidated" in note for note in got["notes"]), got["notes"]


def test_a_reply_a_content_filter_blocked_is_read_as_declined_not_as_the_model_s_answer(ws, tmp_path):
    """inspect_ai records a reply a provider's filter blocked with ``stop_reason: content_filter`` (StopReason in
    src/inspect_ai/model/_model_output.py), its content often the provider's error message and ``output.error``
    what it said ("Error message in the case of content moderation refusals"). The content names option B
    here: read as a reply it would count as the model's answer. It is a declined reply (error 'refused'), as
    cfkit records a refusal of its own runs, and the report lists it so."""
    said = "Your request was rejected as a result of our safety system. Answer: B"

    def filtered(sample):
        sample["output"]["choices"][0]["message"]["content"] = said
        sample["output"]["choices"][0]["stop_reason"] = "content_filter"
        sample["output"]["completion"] = said
        sample["output"]["error"] = "content_policy_violation: the prompt was flagged"

    path, log = _log(tmp_path, "filtered.json", filtered)
    case = log["samples"][0]["id"]
    got, stderr = _report(ws, path)
    [missing] = _missing(got, case)
    assert missing["reason"] == "refused", missing
    assert ("1 reply recorded as declined (refused), counted wrong (first: "
            f"{path}, sample '{case}' (#1): the provider's content filter blocked the reply (inspect_ai recorded "
            "stop_reason content_filter: content_policy_violation: the prompt was flagged))") in stderr, stderr
    # Stored by runs import as a declined reply too, with the filter's words as its detail.
    result = run_cli(["-w", str(ws), "runs", "import", str(path), "--label", "filtered"])
    assert result.exit_code == 0, result.output
    run_id = result.stdout.split()[0]
    shown = run_cli(["-w", str(ws), "runs", "show", run_id, "--json"])
    assert shown.exit_code == 0, shown.output
    assert "content filter blocked the reply" in shown.stdout


def test_a_text_part_marked_a_refusal_is_a_declined_reply(ws, tmp_path):
    """ContentText.refusal (src/inspect_ai/_util/content.py): the provider marked the text a refusal."""
    def refused(sample):
        sample["output"]["choices"][0]["message"]["content"] = [
            {"type": "text", "text": "I can't help with judging this image. B", "refusal": True}]

    path, log = _log(tmp_path, "refusal.json", refused)
    got, stderr = _report(ws, path)
    [missing] = _missing(got, log["samples"][0]["id"])
    assert missing["reason"] == "refused", missing
    assert "the model refused (inspect_ai recorded its reply as a refusal)" in stderr


@pytest.fixture(scope="module")
def peer_files(tmp_path_factory):
    from support.interop_files import write_peer_files

    return write_peer_files(tmp_path_factory.mktemp("peer-files"))


def test_lmms_lines_of_several_filters_are_refused_naming_the_filters(peer_files, tmp_path):
    """lmms_eval/evaluator.py logs each doc once per filter key of the task (``for filter_key in filter_keys``,
    then every doc), and the line names no filter; the results file keys its metrics ``METRIC,FILTER``
    (``exact_match,strict-match``). Refused, saying so, not as 'a second answer for case …'."""
    ws, files = peer_files
    lines = [json.loads(line) for line in files["lmms"].read_text().splitlines()][:5]
    folder = tmp_path / "lmms" / "peer-vlm"
    folder.mkdir(parents=True)
    samples = folder / files["lmms"].name
    filtered = [dict(line, filtered_resps=["A"]) for line in lines]  # the second filter's extraction
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines + filtered))
    (folder / "20261102_100000_results.json").write_text(json.dumps({
        "results": {"contextcanvas": {"alias": "contextcanvas", "exact_match,strict-match": 0.4,
                                      "exact_match_stderr,strict-match": 0.1,
                                      "exact_match,flexible-extract": 0.6}}, "model_name": "Peer-VLM"}))
    result = run_cli(["report", "-w", str(ws), "--predictions", str(samples)])
    assert result.exit_code == 2 and not result.stdout, result.output
    [line] = result.stderr.strip().splitlines()
    assert f"{samples}:6 (doc_id 0): a second line for doc_id 0 (the first is line 1)" in line, line
    assert "several filters ('flexible-extract', 'strict-match') in its filter_list" in line, line
    assert "Run the task with one filter" in line and "second answer" not in line, line
