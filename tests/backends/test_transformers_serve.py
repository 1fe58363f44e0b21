"""The openai backend against a third-party OpenAI-compatible server: `transformers serve` on 127.0.0.1.

The server (tests/support/transformers_server.py) serves a tiny random LLaVA saved to a
temporary folder; `cfkit probe run -m openai:tiny-llava --base-url …` runs the
contextcanvas suite of a copy of examples/mini against it, as a user would run
it against vLLM or SGLang. Skipped when transformers' serving extra is missing.

The server ignores ``response_format`` (it logs a warning and answers in free
text), so the fallback taken when a server rejects it is tested against the
loopback server in test_backends_openai.py.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.transformers_server import TOKENS_PER_IMAGE, TransformersServe, save_tiny_llava, serving_missing
from support.workspace import REPO, run_cli

_missing = serving_missing()
if _missing is not None:
    pytest.skip(_missing, allow_module_level=True)
pytest.importorskip("openai")
pytest.importorskip("torch")

from cfkit.store import Store  # noqa: E402
from support.store_sql import table_rows

pytestmark = pytest.mark.timeout(240)

MODEL = "tiny-llava"
N_CASES = 7  # examples/mini's contextcanvas suite


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[TransformersServe]:
    models = tmp_path_factory.mktemp("served")
    save_tiny_llava(models / MODEL)
    with TransformersServe(models, MODEL, models / "serve.log") as server:
        yield server


def probe_args(ws: Path, server: TransformersServe, *extra: str) -> list[str]:
    return ["-w", str(ws), "probe", "run", "-m", f"openai:{MODEL}", "--base-url", server.url,
            "-s", "contextcanvas", "--json", *extra]


def stored(ws: Path) -> list[dict]:
    """Every stored reply with its cached response's raw text and usage."""
    responses = {r["cache_key"]: r for r in table_rows(ws, "responses", "cache_key, raw, usage")}
    return [{"case": r["case_id"], "raw": responses[r["cache_key"]]["raw"],
             "usage": json.loads(responses[r["cache_key"]]["usage"])}
            for r in table_rows(ws, "replies", "case_id, cache_key", order_by="case_id") if r["cache_key"] in responses]


def text_tokens_and_images(ws: Path, processor, case_id: str) -> tuple[int, int]:
    """The tokens of a case's prompt without its images, as the model's own processor counts them, and
    how many images go with it."""
    shown = run_cli(["-w", str(ws), "captions", "show", case_id, "--condition", "image", "--json"])
    assert shown.exit_code == 0, shown.stderr
    (prompt,) = json.loads(shown.stdout)
    messages = [{"role": "system", "content": [{"type": "text", "text": prompt["system"]}]},
                {"role": "user", "content": [{"type": "text", "text": prompt["user"]}]}]
    ids = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True,
                                        return_tensors="pt")["input_ids"]
    return ids.shape[-1], len(prompt["images"])


def test_a_run_stores_a_reply_for_every_case_and_every_image_reaches_the_model(served, mini_ws):
    from transformers import AutoProcessor

    received_before = served.received()
    result = run_cli(probe_args(mini_ws, served, "--max-tokens", "8"))
    summary = json.loads(result.stdout)
    # The server says every reply stopped at the limit (finish_reason "length"): stored, counted, and the run
    # is not clean (exit 1), with the line that says to raise --max-tokens.
    assert result.exit_code == 1 and summary["truncated"] == N_CASES, result.stderr
    assert f"{N_CASES} of {N_CASES} replies were cut off at the token limit (8 tokens)" in " ".join(result.stderr.split())
    assert (summary["status"], summary["total"], summary["sent"], summary["errors"]) == ("done", N_CASES, N_CASES, 0)
    assert served.received() - received_before == N_CASES  # the server's own log agrees

    replies = stored(mini_ws)
    processor = AutoProcessor.from_pretrained(served.cwd / MODEL)
    assert [r["case"] for r in replies] == [f"MX0{i}" for i in range(1, N_CASES + 1)]
    for reply in replies:
        # The generation config suppresses the special tokens: eight vocabulary words, never an empty reply.
        assert reply["usage"]["completion_tokens"] == 8 and len(reply["raw"].split()) == 8, reply
        # The images reached the model: the server's processor decoded each one and put its patch tokens
        # into the prompt, on top of the prompt's text tokens (MX04 has two images).
        text_tokens, n_images = text_tokens_and_images(mini_ws, processor, reply["case"])
        assert n_images == (2 if reply["case"] == "MX04" else 1)
        assert reply["usage"]["prompt_tokens"] == text_tokens + TOKENS_PER_IMAGE * n_images, reply

    exported = run_cli(["-w", str(mini_ws), "runs", "export", summary["run_id"]])
    assert exported.exit_code == 0, exported.stderr
    records = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [(r["model"], r["raw"]) for r in records] == [(f"openai:{MODEL}", r["raw"]) for r in replies]


def _stored_so_far(ws: Path) -> int:
    """Replies the run has committed so far (0 before its store or its tables exist); read without creating the
    store file."""
    if not (ws / ".cfkit" / "cfkit.db").exists():
        return 0
    try:
        return len(stored(ws))
    except sqlite3.OperationalError:  # the run is creating its tables
        return 0


def _wait_for(condition, what: str, server: TransformersServe, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}:\n{server.log_tail()}"
        time.sleep(0.005)


def test_a_killed_run_resumes_with_only_the_missing_requests_and_a_complete_rerun_sends_none(served, mini_ws):
    # 256 tokens a reply (about 0.3 s each here) leave a wide window to stop the run in.
    args = probe_args(mini_ws, served, "--max-tokens", "256", "-j", "1")
    answered_before = served.answered()
    errors = mini_ws.parent / "killed-run.stderr"
    with errors.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "cfkit", *args], env=os.environ | {"PYTHONPATH": str(REPO)},
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        # Two answered by the server and one of them committed by the client (it commits within BATCH_S of a
        # reply; a fast server can answer the second before that): the store is read, not inferred.
        _wait_for(lambda: (served.answered() - answered_before >= 2 and _stored_so_far(mini_ws) >= 1)
                  or proc.poll() is not None, "the server answered two requests and the run stored one", served)
        assert proc.poll() is None, f"the run ended before it could be stopped:\n{errors.read_text()}"
        # Freeze the client, let the server log and answer the request in flight, then kill the client:
        # the server's log then counts every request that reached it, and none is left running there.
        proc.send_signal(signal.SIGSTOP)
        time.sleep(0.2)  # a request sent just before the freeze gets to the server's log first
        _wait_for(lambda: served.received() == served.answered(), "the request in flight was answered", served)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    kept = len(stored(mini_ws))
    assert 1 <= kept < N_CASES

    received_before = served.received()
    resumed = run_cli(args)
    summary = json.loads(resumed.stdout)
    assert resumed.exit_code == (1 if summary["truncated"] else 0), resumed.stderr  # 256 words: cut off
    assert (summary["kept"], summary["from_cache"], summary["sent"], summary["errors"]) == (
        kept, 0, N_CASES - kept, 0)
    assert served.received() - received_before == N_CASES - kept  # only the missing ones reached the server
    assert [len(r["raw"].split()) for r in stored(mini_ws)] == [256] * N_CASES

    again = run_cli(args)
    rerun = json.loads(again.stdout)
    assert again.exit_code == (1 if rerun["truncated"] else 0), again.stderr
    assert (rerun["kept"], rerun["sent"]) == (N_CASES, 0)
    assert served.received() - received_before == N_CASES - kept  # the complete rerun sent nothing
