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
    assert ("invalidated.json: 1 sample left out, not counted as answers: the log marks it invalidated "
            f"(first: {path}, sample '{case}' (#1): invalidated by jdoe on 2026-11-03 after the eval (the image "
            "failed to load in the sandbox))") in stderr, stderr
    assert "inspect eval-retry" in stderr
    assert "1 of 11 answers differs from the inspect file's own extraction" in stderr, stderr
    flat = " ".join(stderr.split())
    assert "a report counts its case wrong (absent). Run it again (inspect eval-retry" in flat, flat
    assert "or uninvalidate it in inspect_ai." in flat, flat
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


def _vlmevalkit_json(xlsx: Path, target: Path, split_think: bool) -> list[dict]:
    """The VLMEvalKit table saved as PRED_FORMAT=json saves it: vlmeval/smp/file.py's dump turns the DataFrame
    into ``to_dict('records')`` and writes it with ``json.dump(indent=4)``, an empty cell (an option the question
    lacks) as NaN. Under SPLIT_THINK (vlmeval/inference.py: split_thinking) the prediction keeps what follows
    ``</think>`` and the ``thinking`` column what the tags held."""
    import openpyxl

    sheet = openpyxl.load_workbook(xlsx, read_only=True).worksheets[0]
    header, *rows = [list(r) for r in sheet.iter_rows(values_only=True)]
    records = []
    for row in rows:
        record = dict(zip(header, row)) | {"C": float("nan")}
        if split_think:
            said = record["prediction"]
            thinking = said.split("</think>")[0].split("<think>")[1].strip() if "</think>" in said else ""
            record["prediction"] = said.split("</think>")[-1].strip()
            record["thinking"] = thinking
        records.append(record)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(records, indent=4, ensure_ascii=False))
    return records


def _answers(report: dict) -> dict:
    return {k: v for k, v in report.items() if k not in ("notes", "runs_read")}


def test_a_vlmevalkit_prediction_file_saved_as_json_reads_as_its_table(peer_files, tmp_path):
    ws, files = peer_files
    path = tmp_path / "Peer-VLM" / "Peer-VLM_ContextCanvas.json"
    records = _vlmevalkit_json(files["vlmevalkit"], path, split_think=False)
    assert "NaN" in path.read_text()  # as Python's json.dump writes pandas' empty cell
    table, _ = _report(ws, files["vlmevalkit"])
    got, stderr = _report(ws, path)
    assert _answers(got) == _answers(table)
    assert got["contextcanvas"][0]["model"] == "Peer-VLM"
    assert f"Peer-VLM_ContextCanvas.json: {len(records)} replies read with cfkit's parser (vlmevalkit" in stderr


def test_a_json_list_that_is_not_a_vlmevalkit_table_is_refused_saying_what_it_should_be(peer_files, tmp_path):
    ws, _ = peer_files
    path = tmp_path / "scores.json"
    path.write_text(json.dumps([0.5, 0.7]))
    result = run_cli(["report", "-w", str(ws), "--predictions", str(path)])
    assert result.exit_code == 2 and not result.stdout, result.output
    [line] = result.stderr.strip().splitlines()
    assert "VLMEvalKit prediction file saved as JSON (PRED_FORMAT=json) is a list of one object per row" in line
    assert "no 'eval' header" not in line, line


def test_split_think_s_thinking_column_and_inspect_reasoning_are_kept_as_reasoning(peer_files, tmp_path):
    ws, files = peer_files
    path = tmp_path / "think" / "Peer-VLM_ContextCanvas.json"
    records = _vlmevalkit_json(files["vlmevalkit"], path, split_think=True)
    thought = [r for r in records if r["thinking"]]
    assert thought and all("<think>" not in r["prediction"] for r in records)
    table, _ = _report(ws, files["vlmevalkit"])
    got, _ = _report(ws, path)
    assert _answers(got) == _answers(table)  # the same answers: the reasoning is never graded
    result = run_cli(["-w", str(ws), "runs", "import", str(path), "--label", "thinking"])
    assert result.exit_code == 0, result.output
    shown = run_cli(["-w", str(ws), "runs", "export", result.stdout.split()[0], "--format", "jsonl",
                     "--output", str(tmp_path / "out.jsonl")])
    assert shown.exit_code == 0, shown.output
    rows = {r["case"]: r for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    assert rows[thought[0]["index"]]["reasoning"] == "weighing both"
    # inspect_ai keeps a reply's reasoning as a 'reasoning' part of its content (ContentReasoning).
    def reasoned(sample):
        sample["output"]["choices"][0]["message"]["content"] = [
            {"type": "reasoning", "reasoning": "the dress code says black"}, {"type": "text", "text": "ANSWER: B"}]

    log_path, log = _log(tmp_path, "reasoned.json", reasoned)
    result = run_cli(["-w", str(ws), "runs", "import", str(log_path), "--label", "reasoned"])
    assert result.exit_code == 0, result.output
    assert run_cli(["-w", str(ws), "runs", "export", result.stdout.split()[0], "--format", "jsonl", "--output",
                    str(tmp_path / "log.jsonl")]).exit_code == 0
    rows = {r["case"]: r for r in map(json.loads, (tmp_path / "log.jsonl").read_text().splitlines())}
    assert rows[log["samples"][0]["id"]]["reasoning"] == "the dress code says black"


def test_runs_export_to_a_json_vlmevalkit_file_writes_what_pred_format_json_writes(peer_files, tmp_path):
    ws, files = peer_files
    result = run_cli(["-w", str(ws), "runs", "import", str(files["vlmevalkit"]), "--label", "to-json"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "to-json_ContextCanvas.json"
    assert run_cli(["-w", str(ws), "runs", "export", result.stdout.split()[0], "--format", "vlmevalkit",
                    "--output", str(out)]).exit_code == 0
    rows = json.loads(out.read_text())  # a list of row objects, not a table with commas in a .json
    assert isinstance(rows, list) and {"index", "prediction", "A", "B", "answer"} <= set(rows[0])
    table, _ = _report(ws, files["vlmevalkit"])
    got, _ = _report(ws, out)
    assert _answers(got)["contextcanvas"][0]["accuracy"] == _answers(table)["contextcanvas"][0]["accuracy"]
