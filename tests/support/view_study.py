"""A study's workspace with every awkward thing the view's numbers must survive, built through the CLI.

The demo's four baselines on the mini cases (a modality subset of six of the
seven cases, three counterfactual pairs), then: a model behind a loopback
server whose replies fail (HTTP 500 on MX01), are cut off at the token limit
(MX02) or are not answers (MX03), in three suites, its counterfactual run
skipping the pair EX03 whose edit was rejected (the baselines' answers about
that edit go stale); a run stopped by its cost limit after one reply; a run
killed mid-way (its process gone); a run of another token limit that makes the
report leave baseline:always-yes out; and an lmms-eval file imported as a run,
three of its answers read otherwise than the peer harness did.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from support.chat_api_server import ChatServer, Scripted, answer_json, completion, user_text
from support.store_sql import table_rows
from support.workspace import REPO, run_cli

MODEL = "openai:test-model"
BUDGET = "openai:budget-model"
KILLED = "openai:killed-model"
REFUSED = "baseline:always-yes"
PEER = "peer-vlm"
FAST = ["-o", "backoff=0.01", "-o", "max_retries=1"]


def _replies(body: dict, n: int) -> Scripted:
    text, model = user_text(body), body.get("model", "test-model")
    if "matcha" in text:  # MX01 and its pair EX01: the request fails
        return Scripted(status=500, body={"error": {"message": "overloaded", "type": "server_error"}})
    if "copper-orange" in text:  # MX02, EX02: cut off at the token limit before any answer
        return Scripted(body=completion("Looking closely at the eyes, the colour", model=model, finish_reason="length"))
    if "planetarium" in text:  # MX03: no answer at all
        return Scripted(body=completion("I cannot tell.", model=model))
    found = re.search(r"^([A-Z])\. ", text, re.MULTILINE)
    return Scripted(body=completion(answer_json(found.group(1) if found else "A"), model=model))


def _cli(root: Path, *args: str) -> int:
    return run_cli(["-w", str(root), *args], env={"OPENAI_API_KEY": "sk-test"}).exit_code


def _killed_run(root: Path) -> None:
    """A probe run killed (SIGKILL) once it has stored a reply: the store still marks it running."""
    def stored() -> int:
        try:
            return sum(1 for r in table_rows(root, "replies", "run_id") if "killed-model" in r["run_id"])
        except sqlite3.Error:
            return 0

    with ChatServer(_replies, latency=0.5) as server:
        proc = subprocess.Popen([sys.executable, "-m", "cfkit", "-w", str(root), "probe", "run", "-m", KILLED, "-s",
                                 "contextcanvas", "--base-url", server.url, *FAST], env=os.environ | {
                                     "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "sk-test"},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while stored() < 1:
                assert time.monotonic() < deadline and proc.poll() is None, proc.communicate() if proc.poll() else ""
                time.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)


def _peer_file(root: Path) -> Path:
    """An lmms-eval samples file over the mini cases: every third reply lists both options, which the peer read
    as A and cfkit reads as no answer."""
    cases = [json.loads(line) for line in (root / "cases.jsonl").read_text().splitlines() if line.strip()]
    folder = root.parent / "lmms" / PEER
    folder.mkdir(parents=True)
    rows = []
    for i, case in enumerate(cases):
        raw, peer = (json.dumps({"answer": case["gold"]}), case["gold"]) if i % 3 else ("A. Yes\nB. No", "A")
        rows.append({"doc_id": i, "doc": {"id": case["id"], "question": case["question"],
                                          "options": [o["text"] for o in case["options"]]},
                     "target": "", "arguments": [[case["question"], {"max_new_tokens": 64}]], "resps": [[raw]],
                     "filtered_resps": [peer], "exact_match": 0.0})
    samples = folder / "20261102_100000_samples_contextcanvas.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "20261102_100000_results.json").write_text(json.dumps({
        "results": {"contextcanvas": {"exact_match,none": 0.5}}, "model_name": PEER,
        "config": {"model": "llava_onevision", "model_args": "pretrained=lmms-lab/peer"}}))
    return samples


def build(root: Path) -> Path:
    """The workspace at ``root`` (its parent holds the peer's file too)."""
    from cfkit.store import Store, reviews
    from cfkit.workspace import load_workspace

    assert run_cli(["demo", "--output", str(root)]).exit_code == 0
    with Store(load_workspace(root).db_path) as store:
        reviews.record(store, "EX03", 3, "reject")  # the pair has no selected edit: a new run skips it
    with ChatServer(_replies) as server:
        for suite in ("contextcanvas", "counterfactual", "modality"):
            assert _cli(root, "probe", "run", "-m", MODEL, "-s", suite, "--base-url", server.url, *FAST) == 1
        # 100 prompt tokens at 1000 USD per million: 0.10 a request; the limit stops the run early.
        assert _cli(root, "probe", "run", "-m", BUDGET, "-s", "contextcanvas", "--base-url", server.url, *FAST,
                    "--max-cost", "0.25", "-o", "price_in=1000", "-o", "price_out=0") == 1
    _killed_run(root)
    assert _cli(root, "probe", "run", "-m", REFUSED, "-s", "contextcanvas", "--max-tokens", "64") == 0
    assert _cli(root, "runs", "import", str(_peer_file(root)), "--label", PEER) == 0
    return root


def exported(folder: Path) -> tuple[Path, Path]:
    """(workspace, its exported site): :func:`build` under ``folder``, then ``cfkit view --export``."""
    root = build(folder / "ws")
    site = folder / "site"
    assert run_cli(["view", "-w", str(root), "--export", str(site)]).exit_code == 0
    return root, site
