"""Probe runs against the scripted Chat Completions server: cases, scripted answers, a run through
the CLI, its report."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from PIL import Image

from cfkit.store import Store, now, reviews
from support.chat_api_server import ChatServer, Scripted, answer_json, completion, user_text
from support.store_sql import insert_rows, table_rows
from support.workspace import REPO, gradient_image, run_cli, write_workspace


FAST = ["-o", "backoff=0.01", "-o", "max_retries=2"]


# The scripted model: T001 (gold B, "No") answered A, T002 (gold A) answered A, T003 (gold C) answered C.
SCRIPTED = {"spring fair poster": "A", "winter card": "A", "Which event": "C"}


def scripted_answer(body, n) -> Scripted:
    """The scripted model's reply, named as the model asked (a server that serves the name it is asked for)."""
    text, model = user_text(body), body.get("model", "test-model")
    for needle, answer in SCRIPTED.items():
        if needle in text:
            return Scripted(body=completion(answer_json(answer), model=model))
    found = re.search(r"Is picture (\d+)", text)
    if found:  # the synthetic many-case workspace: odd pictures A, even B
        return Scripted(body=completion(answer_json("A" if int(found.group(1)) % 2 else "B"), model=model))
    return Scripted(body=completion("no idea", model=model))


def openai_run(ws: Path, url: str, suite: str = "contextcanvas", *extra: str, model: str = "openai:test-model"):
    return run_cli(["-w", str(ws), "probe", "run", "-m", model, "-s", suite, "--base-url", url, *FAST, *extra])


def report(ws: Path, *extra: str) -> dict:
    result = run_cli(["-w", str(ws), "report", "--format", "json", "--resamples", "200", *extra])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def answering_as(model=None, fingerprint=None, every=1):
    """A script that says every ``every``-th reply came from ``model`` (and build ``fingerprint``)."""
    def script(body, n):
        reply = scripted_answer(body, n)
        if n % every == 0:
            reply.body["model"] = model or reply.body["model"]
            if fingerprint:
                reply.body["system_fingerprint"] = fingerprint
        return reply
    return script


def reported_notes(ws):
    for spec in (ws / "interventions").glob("*.yaml"):  # of the cases many_cases replaced
        spec.unlink()
    return report(ws)["notes"]


def replies(ws: Path, run_id: str | None = None) -> list[dict]:
    return [r for r in table_rows(ws, "replies", order_by="case_id, condition") if run_id in (None, r["run_id"])]


def replicated(ws: Path, urls: list[str], *extra: str):
    """``probe run`` of openai:test-model over the contextcanvas suite with one ``--base-url`` per URL (a replica
    set), fast retries, ``--json``."""
    flags = [a for url in urls for a in ("--base-url", url)]
    return run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas", *flags, *FAST,
                    "--json", *extra])


def many_cases(root: Path, n: int) -> Path:
    """A workspace with n distinct two-option cases (odd ones gold A)."""
    write_workspace(root)
    image = root / "data" / "images" / "T001.png"
    lines = []
    for i in range(1, n + 1):
        lines.append(json.dumps({
            "id": f"M{i:03d}", "images": [image.name], "question": f"Is picture {i} suitable for event {i}?",
            "options": [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}], "gold": "A" if i % 3 else "B",
            "yes_option": "A"}))
    (root / "data" / "cases.jsonl").write_text("\n".join(lines) + "\n")
    return root


def add_modality(root: Path, ids=("T001", "T002")) -> None:
    (root / "probes" / "modality-100.txt").write_text("".join(f"{i}\n" for i in ids))
    for case_id in ids:
        (root / "captions" / f"{case_id}.yaml").write_text(
            f"neutral: A painted scene with a grey block in a field ({case_id}).\n"
            "evidence: The grey block sits in the middle of the path.\nauthor: human\nreviewed: true\n")


def _incomplete_runs(ws: Path, tmp_path: Path) -> dict[str, Any]:
    """A dead endpoint, a budget stop and a replay gap, each run through the CLI: name -> (result, summary)."""
    from support.hostile_http_server import HostileServer, hang_up

    with HostileServer(lambda body: hang_up) as broken:  # listening (nothing would be sent to a dead port at all)
        results = {"dead": openai_run(ws, broken.url, "contextcanvas", "--json", model="openai:dead-model")}
    with ChatServer(scripted_answer) as server:
        # 100 prompt tokens at 1000 USD per million: 0.10 USD a request; 0.15 lets one through.
        results["budget"] = openai_run(ws, server.url, "contextcanvas", "--json", "--max-cost", "0.15",
                                       "-o", "price_in=1000", "-o", "price_out=0", model="openai:budget-model")
    partial = tmp_path / "partial.jsonl"
    partial.write_text(json.dumps({"model": "m", "suite": "contextcanvas", "case": "T003", "condition": "image",
                                   "answer": "C", "parse": "json"}) + "\n")
    results["replay"] = run_cli(["-w", str(ws), "probe", "run", "-m", f"replay:{partial}", "-s", "contextcanvas",
                                 "--json"])
    return {name: (result, json.loads(result.stdout)) for name, result in results.items()}


def _cli_process(ws: Path, url: str, *extra: str) -> subprocess.Popen:
    env = os.environ | {"PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "cfkit", "-w", str(ws), "probe", "run", "-m", "openai:test-model",
         "-s", "contextcanvas", "--base-url", url, *FAST, *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_as_in_a_terminal)


def _as_in_a_terminal() -> None:
    """Ctrl-C reaches the process as at a terminal: a shell starts background jobs with SIGINT ignored, and
    a test suite started that way would hand the ignoring on to every child (Python keeps an ignored SIGINT)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _accepted_edit(ws_root: Path, spec_id: str = "TX01", edit_id: int = 1) -> Path:
    """Record an accepted edit the way the editors task stores one (files under edits/, rows in the store)."""
    edited = gradient_image(96, 64, 8 + edit_id)
    path = ws_root / ".cfkit" / "edits" / spec_id / f"{edit_id}-composite.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(edited).save(path)
    Image.fromarray(edited).save(path.with_name(f"{edit_id}-raw.png"))
    with Store(ws_root / ".cfkit" / "cfkit.db") as store:
        insert_rows(store.path, "edits", [{"id": edit_id, "spec_id": spec_id, "engine": "file", "status": "ok",
                                           "raw_path": f"edits/{spec_id}/{edit_id}-raw.png",
                                           "composite_path": f"edits/{spec_id}/{edit_id}-composite.png",
                                           "started_at": now()}])
        reviews.record(store, spec_id, edit_id, "accept")
    return path
