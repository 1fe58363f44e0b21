"""Peers' results files read by ``cfkit report --predictions`` and ``cfkit runs import``.

The peers' files are written here by hand, field by field, from each peer's
documented layout (inspect_ai cannot be installed beside cfkit's pinned fsspec
— inspect_ai 0.3.285 needs fsspec<=2026.6.0 — so no log is written by inspect_ai itself):

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

import json
import zipfile
from pathlib import Path

import openpyxl
import pytest
from conftest import run_cli
from test_report import NO_IDS, THREE_IDS, YES_IDS, build_workspace

MODEL = "Peer-VLM"
CASES = YES_IDS[:40] + NO_IDS[:60]  # 100 two-option cases (A: Yes, B: No)
#: Reply styles and the answer a careful grader reads from each; None: no single answer.
STYLES = [
    ('{{"answer": "{a}", "reason": "the scene fits"}}', "json"),
    ("{a}. {t}", "letter"),
    ("{t}, it suits the occasion.", "word"),
    ("<think>weighing both</think>Answer: {a}", "think"),
]
AMBIGUOUS = "A. Yes\nB. No"  # echoes both options: no answer


def intended() -> list[tuple[str, str | None, str, str | None]]:
    """(case, intended answer, raw reply, the peer's own extraction) for the 100 predictions."""
    out = []
    for i, case in enumerate(CASES):
        if i % 10 == 9:
            out.append((case, None, AMBIGUOUS, "A"))  # peers that take the first letter read A here
            continue
        answer = "A" if i % 3 else "B"
        template, _ = STYLES[i % len(STYLES)]
        raw = template.format(a=answer, t="Yes" if answer == "A" else "No")
        out.append((case, answer, raw, answer))
    return out


@pytest.fixture(scope="module")
def peer_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("interop")
    ws = build_workspace(root / "ws")
    rows = intended()
    native = root / "native.jsonl"
    native.write_text("".join(json.dumps({
        "model": MODEL, "suite": "contextcanvas", "case": c, "pair": None, "condition": "image", "answer": a,
        "parse": None, "error": None if a else "ambiguous", "raw": raw, "reason": None, "confidence": None}) + "\n"
        for c, a, raw, _ in rows))
    samples = [{"id": c, "epoch": 1, "input": "Suitable?", "target": "B" if c.startswith("N") else "A",
                "choices": ["Yes", "No"], "metadata": {},
                "messages": [{"role": "user", "content": "Suitable?"}, {"role": "assistant", "content": raw}],
                "output": {"model": "peer-vlm-2026-01", "choices": [
                    {"message": {"role": "assistant", "content": [{"type": "text", "text": raw}]},
                     "stop_reason": "stop"}], "usage": {"input_tokens": 900, "output_tokens": 12}},
                "scores": {"choice": {"value": "C", "answer": peer}}}
               for c, _, raw, peer in rows]
    header = {"version": 2, "status": "success",
              "eval": {"run_id": "r1", "created": "2026-11-02T10:00:00+00:00", "task": "contextcanvas",
                       "task_id": "t1", "dataset": {"name": "contextcanvas", "samples": 100}, "model": MODEL,
                       "config": {}},
              "plan": {"name": "plan", "steps": []}, "results": {"total_samples": 100, "completed_samples": 100},
              "stats": {"started_at": "2026-11-02T10:00:00+00:00", "completed_at": "2026-11-02T10:05:00+00:00"}}
    log_json = root / "2026-11-02T10-00-00_contextcanvas_abc.json"
    log_json.write_text(json.dumps(header | {"samples": samples}))
    log_eval = root / "2026-11-02T10-00-00_contextcanvas_abc.eval"
    with zipfile.ZipFile(log_eval, "w") as archive:
        archive.writestr("header.json", json.dumps(header))
        for s in samples:
            archive.writestr(f"samples/{s['id']}_epoch_1.json", json.dumps(s))
    lmms_dir = root / "lmms" / "peer-vlm"
    lmms_dir.mkdir(parents=True)
    lmms = lmms_dir / "20261102_100000_samples_contextcanvas.jsonl"
    lmms.write_text("".join(json.dumps({
        "doc_id": i, "doc": {"id": c, "question": "Suitable?", "options": ["Yes", "No"]}, "target": "",
        "arguments": [["Suitable?", {"max_new_tokens": 64}]], "resps": [[raw]], "filtered_resps": [peer],
        "exact_match": 0.0}) + "\n" for i, (c, _, raw, peer) in enumerate(rows)))
    (lmms_dir / "20261102_100000_results.json").write_text(json.dumps({
        "results": {"contextcanvas": {"exact_match,none": 0.5}}, "model_name": MODEL,
        "config": {"model": "llava_onevision", "model_args": "pretrained=lmms-lab/peer"}}))
    xlsx = root / f"{MODEL}_ContextCanvas.xlsx"
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["index", "question", "A", "B", "answer", "category", "prediction"])
    for c, _, raw, _ in rows:
        sheet.append([c, "Suitable?", "Yes", "No", "B" if c.startswith("N") else "A", "wedding", raw])
    book.save(xlsx)
    return ws, {"native": native, "inspect-json": log_json, "inspect-eval": log_eval, "lmms": lmms,
                "vlmevalkit": xlsx}


def report_json(ws: Path, path: Path, *extra: str) -> tuple[dict, str]:
    result = run_cli(["report", "-w", str(ws), "--predictions", str(path), "--format", "json", "--resamples", "200",
                      *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


@pytest.mark.parametrize("kind", ["inspect-json", "inspect-eval", "lmms", "vlmevalkit"])
def test_a_peers_file_gives_the_native_report(peer_files, kind):
    ws, files = peer_files
    native, _ = report_json(ws, files["native"])
    got, stderr = report_json(ws, files[kind])
    assert got == native
    row = got["contextcanvas"][0]
    assert row["model"] == MODEL
    # The 201 cases the file does not hold are absent; all 100 it holds were read.
    assert sorted(m["case"] for m in got["missing"]) == sorted(set(YES_IDS[40:] + NO_IDS[60:] + THREE_IDS))
    if kind == "vlmevalkit":
        assert "records no extraction of its own" in stderr
    else:  # the ten echoed option lists: the peer read A, cfkit reads no answer
        assert "10 of 100 answers differ" in stderr


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
