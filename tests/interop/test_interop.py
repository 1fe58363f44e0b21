"""Peers' results files read by ``cfkit report --predictions`` and ``cfkit runs import``.

The peers' files are written here by hand, field by field, from each peer's
documented layout (inspect_ai cannot be installed beside cfkit's pinned fsspec
— inspect_ai 0.3.285 needs fsspec<=2026.6.0 —; logs inspect_ai itself wrote, in
another environment, are read by tests/interop/test_interop_inspect.py):

- inspect_ai ``EvalLog``: https://inspect.aisi.org.uk/eval-logs.html and the
  ``inspect_ai.log`` reference (``eval.model``; samples with ``id``,
  ``choices``, ``output.choices[0].message.content``, ``scores[*].answer``;
  a ``.eval`` file is a zip of ``header.json`` and ``samples/{id}_epoch_{n}.json``).
- lmms-eval ``--log_samples``: ``lmms_eval/loggers/evaluation_tracker.py`` in
  EvolvingLMMs-Lab/lmms-eval (``{date}_samples_{task}.jsonl`` lines with
  ``doc_id``, ``doc``, ``target``, ``resps``, ``filtered_resps``; the model in
  ``{date}_results.json``'s ``model_name``).
- VLMEvalKit: ``vlmeval/inference.py`` in open-compass/VLMEvalKit (the
  dataset's columns ``index``, ``question``, ``A``…, ``answer`` plus
  ``prediction``, saved as ``{model}_{dataset}.xlsx``).
"""

from __future__ import annotations

import csv
import json
import zipfile
from pathlib import Path

import openpyxl
import pytest

from support.interop_files import CASES, MODEL, intended, store_run, write_peer_files
from support.report_workspace import NO_IDS, THREE_IDS, YES_IDS, build_workspace
from support.workspace import run_cli

@pytest.fixture(scope="module")
def peer_files(tmp_path_factory):
    return write_peer_files(tmp_path_factory.mktemp("interop"))


def report_json(ws: Path, path: Path, *extra: str) -> tuple[dict, str]:
    result = run_cli(["report", "-w", str(ws), "--predictions", str(path), "--format", "json", "--resamples", "200",
                      *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def assert_same_report(got: dict, native: dict, path: Path) -> None:
    """The report of a peer's file is the report of the same answers in cfkit's own file, and its notes begin
    with the line on how the file was read, so a saved report says it."""
    notes, native_notes = got["notes"], native["notes"]
    assert notes[0].startswith(f"{path.name}: 100 replies read with cfkit's parser"), notes
    assert notes[1:] == native_notes
    assert {k: v for k, v in got.items() if k != "notes"} == {k: v for k, v in native.items() if k != "notes"}


@pytest.mark.parametrize("kind", ["inspect-json", "inspect-eval", "lmms", "vlmevalkit"])
def test_a_peers_file_gives_the_native_report(peer_files, kind):
    ws, files = peer_files
    native, _ = report_json(ws, files["native"])
    got, stderr = report_json(ws, files[kind])
    assert_same_report(got, native, files[kind])
    row = got["contextcanvas"][0]
    assert row["model"] == MODEL
    # The 201 cases the file does not hold are absent; all 100 it holds were read.
    assert sorted(m["case"] for m in got["missing"]) == sorted(set(YES_IDS[40:] + NO_IDS[60:] + THREE_IDS))
    if kind == "vlmevalkit":
        assert "records no extraction of its own" in stderr
    else:  # the ten echoed option lists: the peer read A, cfkit reads no answer
        assert "10 of 100 answers differ" in stderr


def test_a_peer_reply_stopped_at_the_token_limit_is_reported_as_cut_off(peer_files, tmp_path):
    ws, files = peer_files
    log = json.loads(files["inspect-json"].read_text())
    for sample in log["samples"][:3]:
        sample["output"]["choices"][0]["stop_reason"] = "max_tokens"
    cut = tmp_path / "2026-11-02T10-00-00_contextcanvas_cut.json"
    cut.write_text(json.dumps(log))
    result = run_cli(["report", "-w", str(ws), "--predictions", str(cut), "--format", "json", "--resamples", "200"])
    assert result.exit_code == 0, result.stderr
    [problem] = json.loads(result.stdout)["reply_problems"]  # said beside the numbers it concerns
    assert (problem["model"], problem["truncated"]) == (MODEL, 3)
    assert "3 cut off at the token limit" in result.stderr


def _failed_peer_files(files: dict, tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """The inspect_ai log, the VLMEvalKit table and the lmms-eval samples with their first two samples recorded as
    failed requests, as each peer records one: (file, the case of the first failed sample). lmms-eval's API models
    append an empty reply when every try failed; a sample may also hold no reply at all."""
    log = json.loads(files["inspect-json"].read_text())
    for sample in log["samples"][:2]:
        sample["error"] = {"message": "RateLimitError: Error code: 429 - rate limit reached\nretry later",
                           "traceback": "Traceback (most recent call last): ...", "traceback_ansi": ""}
        sample["output"] = {"model": MODEL, "choices": []}
        sample.pop("scores")
    inspect_file = tmp_path / "2026-11-02T10-00-00_contextcanvas_failed.json"
    inspect_file.write_text(json.dumps(log))
    book = openpyxl.load_workbook(files["vlmevalkit"])
    sheet = book.active
    for row in (2, 3):
        sheet.cell(row=row, column=7).value = "Failed to obtain answer via API. "
    table = tmp_path / f"{MODEL}_ContextCanvas.xlsx"
    book.save(table)
    lines = [json.loads(line) for line in files["lmms"].read_text().splitlines()]
    lines[0].update(resps=[[""]], filtered_resps=[""])
    lines[1].update(resps=[[]], filtered_resps=[])
    samples = tmp_path / "lmms" / files["lmms"].name
    samples.parent.mkdir()
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines))
    for results in files["lmms"].parent.glob("*_results.json"):  # the model's name, beside the samples
        (samples.parent / results.name).write_bytes(results.read_bytes())
    return {"inspect": (inspect_file, log["samples"][0]["id"]),
            "vlmevalkit": (table, sheet.cell(row=2, column=1).value),
            "lmms": (samples, lines[0]["doc"]["id"])}


@pytest.mark.parametrize("peer, said", [
    ("inspect", "inspect_ai recorded an error that halted the sample: RateLimitError: Error code: 429 - rate limit "
                "reached"),
    ("vlmevalkit", "VLMEvalKit recorded 'Failed to obtain answer via API.' in place of a prediction: its request "
                   "to the model failed"),
    ("lmms", "lmms-eval recorded an empty reply, which is what its API models write when every try of a request "
             "failed")])
def test_a_request_the_peer_records_as_failed_is_a_failed_request_not_a_reply(peer_files, tmp_path, peer, said):
    # Counted wrong either way, but listed as failed (with the peer's words), not read as a reply that names no
    # option: the report's 'missing', 'runs import' and 'runs show' say the requests failed, and the line on how
    # the file was read counts them.
    ws, files = peer_files
    path, first = _failed_peer_files(files, tmp_path)[peer]
    data, stderr = report_json(ws, path)
    failed = [m for m in data["missing"] if m["reason"] == "transport"]
    assert len(failed) == 2 and failed[0]["case"] == first
    assert "2 units without a usable answer, counted wrong (transport; contextcanvas 2)" in stderr
    assert f"2 recorded as failed requests, counted wrong (first: {path}" in stderr and said in stderr
    assert data["reply_problems"] == []  # two failed requests are not empty replies
    imported = run_cli(["runs", "import", str(path), "-w", str(ws), "--label", f"failed-{peer}"])
    assert imported.exit_code == 0, imported.stderr
    assert "2 recorded as failed requests" in imported.stderr
    run_id = imported.stdout.strip()
    shown = run_cli(["runs", "show", run_id, "-w", str(ws), "--json"])
    assert shown.exit_code == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert record["run"]["n_errors"] == 2
    assert [f["detail"] for f in record["failures"] if f["error"] == "transport"] == [said, said]
    stored = run_cli(["report", "-w", str(ws), "--run", run_id, "--only-named", "--format", "json", "--resamples",
                      "200"])
    assert [m["detail"] for m in json.loads(stored.stdout)["missing"] if m["reason"] == "transport"] == [said, said]
    run_cli(["runs", "rm", run_id, "-w", str(ws)])


def test_a_sample_an_inspect_limit_halted_is_cut_off_or_failed(peer_files, tmp_path):
    # inspect_ai records the limit that halted a sample: a token limit after some text is a reply cut off; a
    # time limit before any text is a request that got no reply, not a reply that names no option.
    ws, files = peer_files
    log = json.loads(files["inspect-json"].read_text())
    log["samples"][0]["limit"] = {"type": "token", "limit": 64}
    log["samples"][0]["output"]["choices"][0]["message"]["content"] = [{"type": "text", "text": "The photo shows"}]
    log["samples"][1]["limit"] = {"type": "time", "limit": 300}
    log["samples"][1]["output"] = {"model": MODEL, "choices": []}
    halted = tmp_path / "2026-11-02T10-00-00_contextcanvas_halted.json"
    halted.write_text(json.dumps(log))
    data, stderr = report_json(ws, halted)
    [problem] = data["reply_problems"]
    assert problem["truncated"] == 1
    assert [m["case"] for m in data["missing"] if m["reason"] == "transport"] == [log["samples"][1]["id"]]
    stored = run_cli(["runs", "import", str(halted), "-w", str(ws), "--label", "halted"])
    run_id = stored.stdout.strip()
    record = json.loads(run_cli(["runs", "show", run_id, "-w", str(ws), "--json"]).stdout)
    assert [f["detail"] for f in record["failures"] if f["error"] == "transport"] == [
        "inspect_ai halted the sample at its time limit (300) before the model replied"]
    run_cli(["runs", "rm", run_id, "-w", str(ws)])


def test_the_peer_answers_are_read_by_cfkits_parser(peer_files):
    ws, files = peer_files
    from cfkit.dataset import load_cases
    from cfkit.interop import read_file
    from cfkit.workspace import load_workspace

    w = load_workspace(ws)
    cases = load_cases(w.cases_path, w.image_root)
    imported = read_file(files["inspect-eval"], cases)
    assert {r.case: r.answer for r in imported.rows} == {c: a for c, a, _, _ in intended()}
    assert {r.error for r in imported.rows if r.answer is None} == {"ambiguous"}
    assert imported.fmt == "inspect" and imported.model_source == "the log header's eval.model"
    assert (imported.compared, imported.differ) == (100, 10)


# ── export → import: every stored field ────────────────────────────────────


@pytest.fixture()
def stored(tmp_path):
    ws = build_workspace(tmp_path / "ws")
    return ws, store_run(ws)


def export_rows(ws: Path, run_id: str, *args: str) -> list[dict]:
    result = run_cli(["runs", "export", run_id, "-w", str(ws), "--format", "jsonl", *args])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_jsonl_export_holds_every_stored_field(stored):
    ws, run_id = stored
    rows = export_rows(ws, run_id)
    assert len(rows) == 6
    edit = next(r for r in rows if r["pair"] == "CF01" and r["condition"] == "edit")
    assert edit["server_model"] == "gpt-5.5-2026-08-01" and edit["system_fingerprint"] == "fp_9b1"
    assert edit["reasoning"] == "I look at the sign, then at the clothes." and edit["parser"] == "3"
    assert (edit["edit_id"], edit["image_sha256"]) == (7, "0" * 64)
    assert (edit["prompt_tokens"], edit["completion_tokens"], edit["total_tokens"]) == (1000, 40, 1040)
    assert edit["usage"]["completion_tokens_details"] == {"reasoning_tokens": 30}
    assert edit["latency_s"] == 1.25 and edit["cost_usd"] == 0.0012 and edit["run"] == run_id
    failed = next(r for r in rows if r["error"] == "transport")
    assert failed["detail"] == "HTTP 500 after 3 tries" and failed["raw"] is None
    assert next(r for r in rows if r["raw_chars"])["raw_chars"] == 12_000
    assert [(r["pair"], r["condition"]) for r in rows if r["truncated"]] == [("CF01", "original")]
    assert {r["endpoint"] for r in rows} == {"http://gpu1:8000/v1", "http://gpu2:8000/v1"}


@pytest.mark.parametrize(("fmt", "name"), [("jsonl", "run.jsonl"), ("csv", "run.csv"), ("parquet", "run.parquet"),
                                           ("inspect", "run.eval"), ("inspect", "run.json"),
                                           ("lmms", "20261102_samples_counterfactual.jsonl"),
                                           ("vlmevalkit", "gpt_ContextCanvas.tsv"),
                                           ("vlmevalkit", "gpt_ContextCanvas.xlsx")])
def test_export_then_import_is_lossless(stored, tmp_path, fmt, name):
    ws, run_id = stored
    before = export_rows(ws, run_id)
    target = tmp_path / name
    result = run_cli(["runs", "export", run_id, "-w", str(ws), "--format", fmt, "--output", str(target)])
    assert result.exit_code == 0, result.output
    other = build_workspace(tmp_path / "other")
    result = run_cli(["runs", "import", str(target), "-w", str(other)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == run_id
    assert export_rows(other, run_id) == before
    again = run_cli(["runs", "import", str(target), "-w", str(other)])
    assert again.exit_code == 2 and f"run {run_id} is already in the store" in again.stderr


def test_imported_peer_run_is_reported_like_the_file(peer_files, tmp_path):
    ws, files = peer_files
    result = run_cli(["runs", "import", str(files["lmms"]), "-w", str(ws)])
    assert result.exit_code == 0, result.output
    run_id = result.stdout.strip()
    assert run_id.startswith(f"contextcanvas-import-{MODEL}-")
    assert "10 of 100 answers differ from the lmms file's own extraction" in result.stderr
    assert ("it answers 100 of the suite's 301 cases: a report counts the other 201 wrong (absent) and marks its "
            "row (incomplete).") in result.stderr
    # Its replies, read by cfkit's parser, can be read again by a newer one (the model's name is the file's, not
    # KIND:NAME): nothing changes with this parser.
    reread = run_cli(["runs", "reparse", run_id, "--all", "--json", "-w", str(ws)])
    assert reread.exit_code == 0, reread.output
    assert (json.loads(reread.stdout)["reread"], json.loads(reread.stdout)["changed"]) == (100, [])
    listed = run_cli(["runs", "list", "-w", str(ws)], env={"COLUMNS": "200"})
    assert "done (imported)" in next(line for line in listed.stdout.splitlines() if run_id in line)
    # 'runs show' says where the answers came from, not how cfkit would have asked for them.
    shown = run_cli(["runs", "show", run_id, "-w", str(ws)], env={"COLUMNS": "200"}).stdout
    assert (f"imported  from {files['lmms']} (lmms file); cfkit reads 10 answers otherwise than the file's own "
            "extraction") in shown
    assert "protocol" not in shown and "the whole suite" not in shown
    from_store = run_cli(["report", "-w", str(ws), "--run", run_id, "--format", "json", "--resamples", "200"])
    assert from_store.exit_code == 0, from_store.output
    native, _ = report_json(ws, files["native"])
    # The same figures; the stored run is marked incomplete, since it holds 100 of the suite's 301 cases.
    (row,) = json.loads(from_store.stdout)["contextcanvas"]
    assert row.pop("incomplete") is True and row.pop("runs") == [run_id]
    assert row == {k: v for k, v in native["contextcanvas"][0].items() if k not in ("incomplete", "runs")}
    # The cases the file did not answer are said to be missing from the file, not from a run to be done again.
    (missing,) = [line for line in from_store.stderr.splitlines() if "without a usable answer" in line]
    assert f"not in {files['lmms']}, the file imported as run {run_id}: it holds no answer for this case" in missing
    assert "run the suite again" not in missing
    run_cli(["runs", "rm", run_id, "-w", str(ws)])


# ── refusals ───────────────────────────────────────────────────────────────


def test_a_file_of_other_cases_is_refused_naming_the_first(peer_files, tmp_path):
    ws, files = peer_files
    lines = files["lmms"].read_text().splitlines()
    bad = json.loads(lines[3])
    bad["doc"]["id"] = "MMB-0042"
    odd = tmp_path / "x_samples_contextcanvas.jsonl"
    odd.write_text("\n".join(lines[:3] + [json.dumps(bad)] + lines[4:]) + "\n")
    result = run_cli(["report", "-w", str(ws), "--predictions", str(odd), "--label", "P"])
    assert result.exit_code == 2
    line = result.stderr.strip().splitlines()[-1]
    assert f"{odd}:4 (doc_id 3): 'MMB-0042' is not a case of" in line and "--map" in line


def test_options_that_differ_are_refused(peer_files, tmp_path):
    ws, files = peer_files
    book = openpyxl.load_workbook(files["vlmevalkit"])
    book.active.cell(row=5, column=3, value="Maybe")
    odd = tmp_path / f"{MODEL}_ContextCanvas.xlsx"
    book.save(odd)
    result = run_cli(["report", "-w", str(ws), "--predictions", str(odd)])
    assert result.exit_code == 2
    assert f"row 5 (index {CASES[3]}): its options (A. Maybe; B. No) are not case {CASES[3]}'s (A. Yes; B. No)" \
        in result.stderr


def test_a_log_likelihood_task_is_refused_not_read_as_unparsed_replies(peer_files, tmp_path):
    # An lmms-eval multiple_choice task scores each option: its resps are numbers, not a reply to read. Read as
    # text, every answer would have named no option.
    ws, files = peer_files
    lines = [json.loads(line) for line in files["lmms"].read_text().splitlines()]
    for line in lines:
        line["resps"] = [[[-0.7, False]], [[-2.3, False]]]
        line["filtered_resps"] = [[-0.7, False], [-2.3, False]]
    scored = tmp_path / "20261102_100000_samples_contextcanvas.jsonl"
    scored.write_text("".join(json.dumps(line) + "\n" for line in lines))
    for command in (["report", "--predictions", str(scored), "--label", "P"],
                    ["runs", "import", str(scored), "--label", "P"]):
        result = run_cli([*command, "-w", str(ws)])
        assert result.exit_code == 2
        assert result.stderr.strip().splitlines()[-1] == (
            f"error: {scored}:1 (doc_id 0): 'resps' holds numbers (log-likelihood scores of a multiple_choice task), "
            "not a reply the model wrote; cfkit reads written replies: run the task with output_type generate_until "
            "and import its samples.")


def test_an_inspect_log_of_several_epochs_is_read_one_epoch_at_a_time(peer_files, tmp_path):
    ws, files = peer_files
    log = json.loads(files["inspect-json"].read_text())
    second = json.loads(json.dumps(log["samples"]))
    for sample in second:  # epoch 2 answers every case A
        sample["epoch"] = 2
        sample["output"]["choices"][0]["message"]["content"] = [{"type": "text", "text": '{"answer": "A"}'}]
    log["samples"] += second
    epochs = tmp_path / "2026-11-02T10-00-00_contextcanvas_epochs.json"
    epochs.write_text(json.dumps(log))
    refused = run_cli(["report", "-w", str(ws), "--predictions", str(epochs)])
    assert refused.exit_code == 2
    assert refused.stderr.strip().splitlines()[-1] == (
        f"error: {epochs}: the log holds 2 epochs of each sample (the eval ran --epochs 2), and cfkit reads one reply "
        "per case; choose one with --epoch N (1, 2).")
    first, _ = report_json(ws, epochs, "--epoch", "1")
    native, _ = report_json(ws, files["native"])
    assert_same_report(first, native, epochs)  # epoch 1 is the log as it was
    again, _ = report_json(ws, epochs, "--epoch", "2")
    row = again["contextcanvas"][0]  # every one of the 100 two-option cases answered A (Yes); the rest absent
    assert row["yes_rate"] == pytest.approx(100 * 100 / row["n_binary"])
    assert row["yes_rate"] != first["contextcanvas"][0]["yes_rate"]
    none = run_cli(["report", "-w", str(ws), "--predictions", str(epochs), "--epoch", "3"])
    assert none.exit_code == 2 and "no sample of epoch 3; the log holds 2 epochs (1, 2); choose one with --epoch N." in none.stderr
    other = run_cli(["report", "-w", str(ws), "--predictions", str(files["lmms"]), "--epoch", "1"])
    assert other.exit_code == 2 and "--epoch chooses an epoch of an inspect_ai log" in other.stderr
    stored = run_cli(["runs", "import", str(epochs), "-w", str(ws), "--epoch", "2", "--label", "epoch-2"])
    assert stored.exit_code == 0, stored.stderr
    assert "100 replies" in stored.stderr
    run_cli(["runs", "rm", stored.stdout.strip(), "-w", str(ws)])
    # The same from Python.
    import cfkit

    api = cfkit.Workspace(ws)
    (from_python,) = api.report(predictions=[epochs], epoch=2, resamples=200).result.contextcanvas
    assert from_python.scores.yes_rate == row["yes_rate"]
    (run_id,) = api.import_results(epochs, epoch=1, label="epoch-1")
    run_cli(["runs", "rm", run_id, "-w", str(ws)])


def test_a_file_whose_targets_are_not_the_cases_golds_is_said(peer_files, tmp_path):
    # Ids mapped to the wrong cases would score every answer against another case's gold: where the file holds
    # its own targets, those that are not the case's gold are counted and said (the option texts of Yes/No
    # cases, all alike, could not tell).
    ws, files = peer_files
    lines = [json.loads(line) for line in files["lmms"].read_text().splitlines()]
    ids = [line["doc"]["id"] for line in lines]
    for line, target in zip(lines, ("B" if i.startswith("N") else "A" for i in ids)):
        line["target"] = target
        line["doc"]["id"] = "peer-" + line["doc"]["id"]
    samples = tmp_path / "lmms" / "20261102_100000_samples_contextcanvas.jsonl"
    samples.parent.mkdir()
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines))
    for results in files["lmms"].parent.glob("*_results.json"):  # the model's name, beside the samples
        (samples.parent / results.name).write_bytes(results.read_bytes())
    right, wrong = tmp_path / "ids.csv", tmp_path / "shifted.csv"
    right.write_text("".join(f"peer-{i},{i}\n" for i in ids))
    wrong.write_text("".join(f"peer-{i},{j}\n" for i, j in zip(ids, ids[1:] + ids[:1])))  # each to the next case
    for mapping, said in ((right, False), (wrong, True)):
        for command in (["report", "--predictions", str(samples)], ["runs", "import", str(samples)]):
            result = run_cli([*command, "-w", str(ws), "--map", str(mapping), "--label", "P"])
            assert result.exit_code == 0, result.stderr
            flat = " ".join(result.stderr.split())
            assert ("samples hold a target that is not their case's gold" in flat) is said, flat
            if command[0] == "report" and said:  # and the saved report says it beside its numbers
                json_report = run_cli([*command, "-w", str(ws), "--map", str(mapping), "--label", "P", "--format",
                                       "json", "--resamples", "200"])
                assert any("samples hold a target that is not their case's gold" in note
                           for note in json.loads(json_report.stdout)["notes"])
            if said:
                changes = sum(a.startswith("N") != b.startswith("N") for a, b in zip(ids, ids[1:] + ids[:1]))
                assert f"{changes} of 100 samples hold a target" in flat and "check that its ids map" in flat
            if command[0] == "runs":
                run_cli(["runs", "rm", result.stdout.strip(), "-w", str(ws)])


def test_ids_mapped_and_the_model_named(peer_files, tmp_path):
    ws, files = peer_files
    text = files["lmms"].read_text()
    renamed = tmp_path / "samples.jsonl"  # no results file beside it: no model name of its own
    renamed.write_text(text.replace('"id": "', '"id": "peer-'))
    (tmp_path / "ids.csv").write_text("peer,case\n" + "".join(f"peer-{c},{c}\n" for c in CASES))
    nameless = run_cli(["report", "-w", str(ws), "--predictions", str(renamed), "--map", str(tmp_path / "ids.csv")])
    assert nameless.exit_code == 2 and "names no model" in nameless.stderr and "--label" in nameless.stderr
    got, _ = report_json(ws, renamed, "--map", str(tmp_path / "ids.csv"), "--label", MODEL)
    native, _ = report_json(ws, files["native"])
    assert_same_report(got, native, renamed)


@pytest.mark.parametrize("name", ["bad.jsonl", "bad.json", "bad.txt"])
def test_a_broken_predictions_file_still_names_its_line(peer_files, tmp_path, name):
    ws, files = peer_files
    broken = tmp_path / name
    broken.write_text(files["native"].read_text().splitlines()[0] + "\n{not json\n")
    result = run_cli(["report", "-w", str(ws), "--predictions", str(broken)])
    assert result.exit_code == 2
    assert f"{broken}:2: not valid JSON" in result.stderr


def test_the_format_can_be_named_and_a_wrong_name_is_one_line(peer_files, tmp_path):
    ws, files = peer_files
    renamed = tmp_path / "peer.log"  # a name that tells nothing
    renamed.write_bytes(files["inspect-json"].read_bytes())
    got, _ = report_json(ws, renamed, "--predictions-format", "inspect")
    native, _ = report_json(ws, files["native"])
    assert_same_report(got, native, renamed)
    wrong = run_cli(["report", "-w", str(ws), "--predictions", str(files["native"]), "--predictions-format", "lmms"])
    assert wrong.exit_code == 2
    assert f"{files['native']}:1: an lmms-eval sample has 'doc_id' and 'resps'" in wrong.stderr


def test_binary_exports_need_an_output_and_an_existing_file_is_kept(stored, tmp_path):
    ws, run_id = stored
    result = run_cli(["runs", "export", run_id, "-w", str(ws), "--format", "parquet"])
    assert result.exit_code == 2 and "--format parquet writes a file; give --output FILE" in result.stderr
    target = tmp_path / "run.eval"
    target.write_text("mine")
    result = run_cli(["runs", "export", run_id, "-w", str(ws), "--format", "inspect", "--output", str(target)])
    assert result.exit_code == 2 and "already exists" in result.stderr and target.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.eval", "ws"]  # no temporary file left behind


DEEP = "[" * 100_000 + "]" * 100_000
HOSTILE = [
    ("log.eval", b"not a zip at all"),
    ("log.json", DEEP.encode()),
    ("log.json", b'{"eval": {"model": "m"}, "samples": [1, 2]}'),
    ("x_samples_t.jsonl", b'{"doc_id": 0, "resps": ' + DEEP.encode() + b"}\n"),
    ("x_samples_t.jsonl", b'{"doc_id": 0}\n'),
    ("m_D.xlsx", b"PK\x03\x04 broken"),
    ("m_D.tsv", b"index\tquestion\nY000\tq\n"),
    ("run.parquet", b"PAR1 broken"),
]


@pytest.mark.parametrize(("name", "content"), HOSTILE, ids=[f"{n}-{i}" for i, (n, _) in enumerate(HOSTILE)])
def test_a_hostile_results_file_is_one_line_and_stores_nothing(peer_files, tmp_path, name, content):
    ws, _ = peer_files
    path = tmp_path / name
    path.write_bytes(content)
    for args in (["report", "--predictions", str(path), "--label", "P"], ["runs", "import", str(path), "--label", "P"]):
        result = run_cli([*args, "-w", str(ws)])
        assert result.exit_code == 2, (args, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0], result.stderr
    listed = run_cli(["runs", "list", "--json", "-w", str(ws)])
    assert json.loads(listed.stdout) == []


def test_an_export_record_of_the_wrong_shape_is_one_line(stored, tmp_path):
    ws, run_id = stored
    rows = export_rows(ws, run_id)
    for change, expected in (({"case": ["N000"]}, "'case' must be text"), ({"condition": "sideways"}, "condition"),
                             ({"usage": [1]}, "'usage' must be an object"), ({"edit_id": "seven"}, "whole number"),
                             ({"colour": "red"}, "1 unknown field (colour)"),
                             ({"run_status": "finished"}, "'run_status' must be one of done, incomplete"),
                             ({"run_requests": -1}, "'run_requests' must be a count")):
        path = tmp_path / "run.jsonl"
        path.write_text("".join(json.dumps(r | (change if i == 2 else {})) + "\n" for i, r in enumerate(rows)))
        other = build_workspace(tmp_path / f"ws-{len(list(tmp_path.iterdir()))}")
        result = run_cli(["runs", "import", str(path), "-w", str(other)])
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"error: {path}:3: ") and expected in line, line


def test_an_eval_archive_that_unpacks_too_large_is_refused_unread(peer_files, tmp_path, monkeypatch):
    from cfkit.interop import inspect_log

    ws, files = peer_files
    monkeypatch.setattr(inspect_log, "MAX_MEMBER_BYTES", 1024 * 1024)
    bomb = tmp_path / "bomb.eval"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", json.dumps({"eval": {"model": "m"}}))
        archive.writestr("samples/Y000_epoch_1.json", b" " * (3 * 1024 * 1024))
    assert bomb.stat().st_size < 64 * 1024
    result = run_cli(["report", "-w", str(ws), "--predictions", str(bomb)])
    assert result.exit_code == 2
    assert "member samples/Y000_epoch_1.json unpacks to 3,145,728 bytes" in result.stderr
    # The real logs stay well under the limit.
    assert run_cli(["report", "-w", str(ws), "--predictions", str(files["inspect-eval"])]).exit_code == 0


def test_an_answer_given_twice_across_formats_names_both_files(peer_files):
    ws, files = peer_files
    result = run_cli(["report", "-w", str(ws), "--predictions", str(files["native"]),
                      "--predictions", str(files["lmms"])])
    assert result.exit_code == 2
    line = result.stderr.strip().splitlines()[-1]
    assert line == (f"error: {files['lmms']}: a second answer from model '{MODEL}' for case {CASES[0]}, condition "
                    f"image (the first is in {files['native']}). Keep one file per model; to compare two, store "
                    "each with 'cfkit runs import FILE --label NAME'.")


@pytest.mark.parametrize(("relative", "model"), [
    ("outputs/Qwen2-VL-7B_Instruct/Qwen2-VL-7B_Instruct_MMBench_DEV_EN.xlsx", "Qwen2-VL-7B_Instruct"),
    ("elsewhere/InternVL3-8B_ContextCanvas.tsv", "InternVL3-8B"),
    # The run's own folder inside outputs/{model}/ (vlmeval/smp/file.py: build_eval_id; the older T{date}_G{commit}):
    # not the file name before its last '_', which is the model and part of the dataset's name.
    ("outputs/Qwen2-VL-7B/T20260101-120000/Qwen2-VL-7B_MMBench_DEV_EN.xlsx", "Qwen2-VL-7B"),
    ("outputs/Qwen2-VL-7B/T20250101_G1a2b3c4/Qwen2-VL-7B_MMBench_DEV_EN.tsv", "Qwen2-VL-7B"),
    ("elsewhere/predictions.tsv", None),
])
def test_vlmevalkit_model_names(tmp_path, relative, model):
    from cfkit.interop.vlmevalkit import model_of

    assert model_of(tmp_path / relative)[0] == model


def test_the_peers_reading_is_compared_as_an_option(peer_files, tmp_path):
    from cfkit.dataset import load_cases
    from cfkit.interop import read_file
    from cfkit.workspace import load_workspace

    ws, files = peer_files
    w = load_workspace(ws)
    lines = [json.loads(line) for line in files["lmms"].read_text().splitlines()]
    spelled = {"A": "(A)", "B": "No"}  # a letter in brackets, an option's text: both the same reading as cfkit's
    for line in lines:
        line["filtered_resps"] = [spelled.get(line["filtered_resps"][0], line["filtered_resps"][0])]
    path = tmp_path / "x_samples_contextcanvas.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    imported = read_file(path, load_cases(w.cases_path, w.image_root), label=MODEL)
    assert (imported.compared, imported.differ) == (100, 10)


def _strip_cfkit(path: Path, fmt: str, target: Path) -> None:
    """The file as the peer's own tools see it: cfkit's record taken out."""
    if fmt == "inspect":
        log = json.loads(path.read_text())
        for sample in log["samples"]:
            del sample["metadata"]["cfkit"]
        target.write_text(json.dumps(log))
    elif fmt == "lmms":
        target.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "cfkit"}) + "\n"
                                  for line in path.read_text().splitlines()))
        (target.parent / target.name.replace("_samples_contextcanvas.jsonl", "_results.json")).write_text(
            (path.parent / path.name.replace("_samples_contextcanvas.jsonl", "_results.json")).read_text())
    else:
        book = openpyxl.load_workbook(path)
        book.active.delete_cols(book.active.max_column)  # the last column is cfkit's
        book.save(target)


@pytest.mark.parametrize(("fmt", "name"), [("inspect", "run.json"), ("lmms", "1_samples_contextcanvas.jsonl"),
                                           ("vlmevalkit", f"{MODEL}_ContextCanvas.xlsx")])
def test_what_cfkit_writes_reads_as_the_peers_own_file(peer_files, tmp_path, fmt, name):
    ws, files = peer_files
    imported = run_cli(["runs", "import", str(files["native"]), "-w", str(ws)])
    assert imported.exit_code == 0, imported.output
    run_id = imported.stdout.strip()
    try:
        written = tmp_path / "cfkit" / name
        written.parent.mkdir()
        result = run_cli(["runs", "export", run_id, "-w", str(ws), "--format", fmt, "--output", str(written)])
        assert result.exit_code == 0, result.output
        bare = tmp_path / "bare" / name
        bare.parent.mkdir()
        _strip_cfkit(written, fmt, bare)
        got, stderr = report_json(ws, bare, "--label", MODEL)
        native, _ = report_json(ws, files["native"])
        assert_same_report(got, native, bare)
        if fmt != "vlmevalkit":  # cfkit wrote its own readings as the file's extraction: they agree
            assert "0 of 100 answers differ" in stderr
    finally:
        run_cli(["runs", "rm", run_id, "-w", str(ws)])


@pytest.mark.parametrize(("fmt", "name"), [("inspect", "run.json"), ("lmms", "1_samples_contextcanvas.jsonl"),
                                           ("vlmevalkit", f"{MODEL}_ContextCanvas.xlsx")])
def test_a_failed_request_is_written_as_the_peer_writes_one(peer_files, tmp_path, fmt, name):
    # A transport failure exported to a peer's format is the peer's own record of a failure (inspect_ai: the
    # sample's error; VLMEvalKit: its failure text as the prediction; lmms-eval: the empty reply its API models
    # write), so the peer's tools, and cfkit reading the bare file, see a failed request.
    ws, files = peer_files
    lines = [json.loads(line) for line in files["native"].read_text().splitlines()]
    for line in lines[:2]:
        line.update(answer=None, parse=None, error="transport", raw=None)
    native = tmp_path / "failed.jsonl"
    native.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run_id = run_cli(["runs", "import", str(native), "-w", str(ws), "--label", "failing"]).stdout.strip()
    try:
        written = tmp_path / "cfkit" / name
        written.parent.mkdir()
        assert run_cli(["runs", "export", run_id, "-w", str(ws), "--format", fmt, "--output",
                        str(written)]).exit_code == 0
        bare = tmp_path / "bare" / name
        bare.parent.mkdir()
        _strip_cfkit(written, fmt, bare)
        got, _ = report_json(ws, bare, "--label", "failing")
        failed = sorted(m["case"] for m in got["missing"] if m["reason"] == "transport")
        assert failed == sorted(line["case"] for line in lines[:2])
    finally:
        run_cli(["runs", "rm", run_id, "-w", str(ws)])


def test_every_stored_reply_field_has_an_export_column():
    # A column added to the replies table (or the responses' usage and latency) must reach 'runs export'.
    from dataclasses import fields as dataclass_fields

    from cfkit.interop import COLUMNS
    from cfkit.store.runs import ReplyRecord

    renamed = {"run_id": "run", "case_id": "case", "pair_id": "pair"}
    stored = {renamed.get(f.name, f.name) for f in dataclass_fields(ReplyRecord)}
    assert stored <= set(COLUMNS), sorted(stored - set(COLUMNS))


def test_the_view_lists_the_cases_cfkit_reads_otherwise_than_the_peer(peer_files, tmp_path):
    ws, files = peer_files
    imported = run_cli(["runs", "import", str(files["lmms"]), "-w", str(ws)])
    assert imported.exit_code == 0, imported.output
    try:
        site = tmp_path / "site"
        assert run_cli(["view", "-w", str(ws), "--export", str(site)]).exit_code == 0
        listed = {page.name for page in site.glob("cases-peer-disagrees-*.html")}
        shown = "".join((site / name).read_text() for name in listed)
        echoed = [c for c, a, _, _ in intended() if a is None]  # the peer read A, cfkit reads no option
        assert len(echoed) == 10 and all(f"case-{c}.html" in shown for c in echoed)
        assert shown.count('href="case-') == 10
        assert "the imported file's own reading: A" in (site / f"case-{echoed[0]}.html").read_text()
    finally:
        run_cli(["runs", "rm", imported.stdout.strip(), "-w", str(ws)])


def test_a_vlmevalkit_prediction_a_local_model_failed_to_give_is_a_failed_request(peer_files, tmp_path):
    """With SKIP_ERR=1 VLMEvalKit goes on past a local model's error and writes ``Failed to obtain answer: {type}
    {error}`` as its prediction (vlmeval/inference.py, infer_data), which its own retry counts as failed: a failed
    request with those words, not a reply that names no option."""
    ws, files = peer_files
    book = openpyxl.load_workbook(files["vlmevalkit"], read_only=True)
    header, *values = [["" if v is None else str(v) for v in row]
                       for row in book.worksheets[0].iter_rows(values_only=True)]
    book.close()
    rows = [dict(zip(header, row)) for row in values]
    rows[0]["prediction"] = "Failed to obtain answer: <class 'torch.OutOfMemoryError'> CUDA out of memory."
    path = tmp_path / f"{MODEL}_ContextCanvas.tsv"  # as VLMEvalKit writes a .tsv (PRED_FORMAT=tsv): every cell quoted
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=header, delimiter="\t", quoting=csv.QUOTE_ALL)
        writer.writeheader()
        writer.writerows(rows)
    data, stderr = report_json(ws, path)
    [failed] = [m for m in data["missing"] if m["reason"] == "transport"]
    assert failed["case"] == rows[0]["index"]
    assert "1 recorded as failed request, counted" in stderr and "CUDA out of memory" in stderr, stderr
    assert data["reply_problems"] == []



def test_an_lmms_eval_sample_of_several_replies_is_refused_not_read_as_its_first(peer_files, tmp_path):
    """With ``--repeats N`` lmms-eval asks each request N times and keeps every reply in the sample's one request
    (lmms_eval/evaluator.py: ``cloned_reqs.extend([req] * req.repeats)``, logged as ``"resps": [req.resps ...]``):
    ``[["A", "B", "A"]]``. cfkit reads one reply per case, so such a file is refused in one line rather than read
    as its first replies with the others dropped."""
    ws, files = peer_files
    lines = [json.loads(line) for line in files["lmms"].read_text().splitlines()]
    for line in lines:
        reply = line["resps"][0][0]
        line["resps"] = [[reply, reply, "I cannot tell."]]
        line["filtered_resps"] = [[reply, reply, "I cannot tell."]]
    repeated = tmp_path / "lmms" / files["lmms"].name
    repeated.parent.mkdir()
    repeated.write_text("".join(json.dumps(line) + "\n" for line in lines))
    for command in (["report", "--predictions", str(repeated), "--label", "P"],
                    ["runs", "import", str(repeated), "--label", "P"]):
        result = run_cli([*command, "-w", str(ws)])
        assert result.exit_code == 2 and not result.stdout
        [line] = result.stderr.strip().splitlines()
        assert f"{repeated}:1 (doc_id 0): 'resps' holds 3 replies" in line and "--repeats 1" in line, line


def test_the_target_line_agrees_with_how_many_samples_it_names(tmp_path):
    from cfkit.interop.mapping import Imported

    one = Imported(tmp_path / "s.jsonl", "lmms", targets=9, wrong_targets=[("line 3", "B", "T003", "A")])
    assert one.target_warning().startswith("s.jsonl: 1 of 9 samples holds a target that is not its case's gold")
    two = Imported(tmp_path / "s.jsonl", "lmms", targets=9, wrong_targets=[("line 3", "B", "T003", "A")] * 2)
    assert two.target_warning().startswith("s.jsonl: 2 of 9 samples hold a target that is not their case's gold")
