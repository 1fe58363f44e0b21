"""Peer harnesses' files (lmms-eval, VLMEvalKit, inspect) written for tests, and a run stored to export."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import openpyxl

from support.report_workspace import NO_IDS, YES_IDS, build_workspace


MODEL = "Peer-VLM"


CASES = YES_IDS[:40] + NO_IDS[:60]  # 100 two-option cases (A: Yes, B: No)


#: Reply styles and the answer a careful grader reads from each; None: no single answer.
STYLES = [
    ('{{"answer": "{a}", "reason": "the scene fits"}}', "json"),
    ("{a}. {t}", "letter"),
    ("{t}, judging by the whole picture.", "word"),  # (not "it suits": "No, it suits" contradicts itself)
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


def write_peer_files(root: Path) -> tuple[Path, dict[str, Path]]:
    """The paper workspace in ROOT/ws and the same 100 predictions as cfkit's, inspect_ai's, lmms-eval's and
    VLMEvalKit's files."""
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


def store_run(ws: Path) -> str:
    """A real store holding one counterfactual run whose replies use every stored field."""
    from cfkit.store import Store, responses, runs
    from cfkit.store.responses import CachedResponse
    from cfkit.store.runs import ReplyFields, ReplyProvenance

    run_id = "counterfactual-openai-gpt-5.5-1a2b3c4d"
    with Store(ws / ".cfkit" / "cfkit.db") if False else Store(_db(ws)) as store:
        runs.open_run(store, run_id, model="openai:gpt-5.5", suite="counterfactual", options={"options": {}},
                      cfkit_version="0.1.0", templates_sha256="t" * 64, n_requests=6, notes={})
        with store.transaction() as tx:
            for i in range(3):
                pair = f"CF{i + 1:02d}"
                case = NO_IDS[i]
                for condition in ("original", "edit"):
                    key = f"{i:02d}{condition[0]}" + "0" * 61
                    edit = condition == "edit"
                    answer = None if (i, condition) == (2, "edit") else ("A" if edit else "B")
                    responses.put(tx, CachedResponse(
                        cache_key=key, raw=f'{{"answer": "{answer}"}}', latency_s=1.25 + i,
                        usage={"prompt_tokens": 1000 + i, "completion_tokens": 40, "total_tokens": 1040 + i,
                               "completion_tokens_details": {"reasoning_tokens": 30}},
                        cost_usd=0.0012, server_model="gpt-5.5-2026-08-01", system_fingerprint="fp_9b1"),
                        backend="openai", model="openai:gpt-5.5")
                    fields = ReplyFields(answer=answer, parse=None if answer is None else "json",
                                         error="transport" if answer is None else None,
                                         reason="the sign says funeral" if answer else None,
                                         confidence="high" if answer else None,
                                         detail="HTTP 500 after 3 tries" if answer is None else None,
                                         reasoning="I look at the sign, then at the clothes." if edit else None,
                                         parser=None if answer is None else "3")
                    runs.write_reply(tx, run_id, (case, pair, condition), cache_key=key,
                                     raw=None if answer is None else f'{{"answer": "{answer}"}}', fields=fields,
                                     cost_usd=0.0012 if answer else None,
                                     provenance=ReplyProvenance(edit_id=7 + i if edit else None,
                                                                image_sha256=f"{i:x}" * 64 if edit else None,
                                                                server_model="gpt-5.5-2026-08-01",
                                                                system_fingerprint="fp_9b1",
                                                                truncated=(i, condition) == (0, "original"),
                                                                endpoint=f"http://gpu{i % 2 + 1}:8000/v1"),
                                     raw_chars=12_000 if (i, condition) == (1, "original") else None)
        runs.finish_run(store, run_id, status="done", n_done=5, n_errors=1, notes={})
    return run_id


def _db(ws: Path) -> Path:
    from cfkit.workspace import load_workspace

    return load_workspace(ws).db_path
