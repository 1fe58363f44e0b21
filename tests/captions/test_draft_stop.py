"""Drafting stopped part-way (a key refused, a quota spent, Ctrl-C or SIGTERM while a request hangs) keeps every
draft written, says each case's fate, what this invocation spent (the request in flight at the signal counted as
an attempt a provider may bill) and exits with the stop's status. Before, the error line came alone: no word of the
drafts already written, of the cases not asked, or of what was spent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.caption_workspace import make_caption_ws
from support.chat_api_server import ChatServer, Scripted, completion, error_body
from support.workspace import run_cli

#: 100 prompt and 20 completion tokens a reply (the loopback server's usage) at $1,000 a million: $0.12 a reply.
PRICES = ("-o", "price_in=1000", "-o", "price_out=1000")
KEY = {"OPENAI_API_KEY": "sk-x"}
REPO = Path(__file__).resolve().parents[2]
CASES = ("T001", "T002", "T003", "T004")


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    """The caption workspace with no captions: each of its four cases is drafted."""
    ws = make_caption_ws(tmp_path / "cws")
    for path in (ws / "captions").glob("*.yaml"):
        path.unlink()
    return ws


def _drafts(ws: Path) -> list[str]:
    return sorted(p.stem for p in (ws / "captions").glob("*.yaml"))


def _said(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(("status", "body", "words"), [
    (401, error_body("Incorrect API key provided", kind="invalid_api_key"),
     "wants a key (HTTP 401: Incorrect API key provided), and none was sent to it; name the variable holding its "
     "key with -o api_key_env=NAME."),  # $OPENAI_API_KEY is not sent here; captions draft takes -o, not --api-key-env
    (429, error_body("You exceeded your current quota, please check your plan and billing details.",
                     kind="insufficient_quota"), "refused the request for quota or billing (HTTP 429"),
])
def test_draft_stopped_by_the_provider_keeps_the_drafts_and_says_what_it_spent(bare, status, body, words):
    def script(request: dict, n: int) -> Scripted:  # two drafts, then every request refused
        if n <= 2:
            return Scripted(body=completion("A plain grey picture of a wall.", model=request["model"]))
        return Scripted(status=status, body=body)

    with ChatServer(script) as server:
        stopped = run_cli(["-w", str(bare), "captions", "draft", "--model", "openai:tiny-vlm", "-o",
                           f"base_url={server.url}", "-o", "max_retries=2", "-o", "backoff=0.01", *PRICES,
                           *CASES], env=KEY)
        assert server.count == 3  # the refusal is not retried, and nothing is asked after it
    assert stopped.exit_code == 2, stopped.stderr
    assert _drafts(bare) == ["T001", "T002"]  # what was paid for is kept
    assert "T001: drafted" in stopped.stdout and "T002: drafted" in stopped.stdout
    assert "T003: not drafted: not asked (the drafting stopped)." in stopped.stdout
    assert "T004: not drafted: not asked (the drafting stopped)." in stopped.stdout
    text = _said(stopped.stderr)
    assert "2 drafted, 0 kept, 0 failed, 2 not asked (the drafting stopped); 2 replies, cost $0.24." in text
    assert text.count("error:") == 1 and words in text.split("error:")[1] and "Traceback" not in text


def _as_in_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(("stop", "status"), [("SIGINT", 130), ("SIGTERM", 143)])  # Ctrl-C, and a job scheduler
def test_draft_interrupted_keeps_the_drafts_and_counts_the_request_in_flight(bare, stop, status):
    def script(request: dict, n: int) -> Scripted:  # the third request hangs until the signal comes
        return Scripted(body=completion("A plain grey picture of a wall.", model=request["model"]),
                        delay=20.0 if n == 3 else 0.0)

    with ChatServer(script) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cfkit", "-w", str(bare), "captions", "draft", "--model", "openai:tiny-vlm",
             "-o", f"base_url={server.url}", *PRICES, *CASES],
            env=os.environ | {"PYTHONPATH": str(REPO), **KEY}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, preexec_fn=_as_in_a_terminal)
        deadline = time.monotonic() + 60
        while server.count < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # the third request is in flight
        assert proc.poll() is None, "the drafting ended before it could be stopped"
        proc.send_signal(getattr(signal, stop))
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == status, stderr
    assert _drafts(bare) == ["T001", "T002"]
    assert "T003: not drafted: not asked (the drafting stopped)." in stdout
    text = _said(stderr)
    # The request in flight was sent: a provider may bill it, as an abandoned attempt.
    assert ("2 drafted, 0 kept, 0 failed, 2 not asked (the drafting stopped); 2 replies, cost $0.24; 1 abandoned "
            "attempt may be billed on top: up to ~$0.12.") in text
    assert text.endswith("interrupted; everything saved before the interruption is kept. Run the command again to "
                         "resume.") and "Traceback" not in text


def test_a_draft_cut_off_at_the_token_limit_names_an_option_captions_draft_takes(bare):
    """A reasoning model may spend a draft's whole token limit: the line says to raise --max-tokens, which
    captions draft takes, and a draft asked again with more room is written."""
    from cfkit.cli.captions import draft
    from cfkit.drafts import DRAFT_MAX_TOKENS

    assert {p.name: p.default for p in draft.params}["max_tokens"] == DRAFT_MAX_TOKENS  # one default, said twice
    asked = []

    def script(request: dict, n: int) -> Scripted:  # cut off below 64 tokens, a whole draft with room
        asked.append(request["max_tokens"])
        if request["max_tokens"] < 64:
            return Scripted(body=completion("Thinking about the wall", model=request["model"], finish_reason="length"))
        return Scripted(body=completion("A plain grey picture of a wall.", model=request["model"]))

    with ChatServer(script) as server:
        args = ["-w", str(bare), "captions", "draft", "--model", "openai:tiny-vlm", "-o", f"base_url={server.url}",
                "T001"]
        short = run_cli([*args, "--max-tokens", "16"], env=KEY)
        assert short.exit_code == 1 and _drafts(bare) == []  # a cut-off draft is not saved
        assert "raise --max-tokens (now 16) and run again" in _said(short.stdout + short.stderr)
        roomy = run_cli([*args, "--max-tokens", "128"], env=KEY)
    assert roomy.exit_code == 0, roomy.output
    assert _drafts(bare) == ["T001"] and asked == [16, 128]
