"""A request the provider refused for its length, as inspect_ai records it, is a failed request (no reply was
produced), not a reply cut off.

inspect_ai turns a provider's refusal of a request too long for the model's context (OpenAI's
``context_length_exceeded``, Anthropic's "prompt is too long") into an output, not a sample error: its provider
modules return ``ModelOutput.from_content(..., stop_reason="model_length", error=...)`` (src/inspect_ai/model/
_providers/, handle_bad_request), so the sample completes with no usage and no completion, or with the provider's
words as its content and in ``output.error``. A reply the model wrote and the token limit cut keeps its text and is
cut off (tests/interop/test_interop_inspect.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.report_workspace import build_workspace
from support.workspace import run_cli

DATA = Path(__file__).resolve().parents[1] / "data" / "inspect"
SAID = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens."


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return build_workspace(tmp_path_factory.mktemp("refused-request") / "ws")


def _refused_log(tmp_path: Path, style: str) -> tuple[Path, str]:
    """The inspect_ai 0.3.285 log with its first sample's request refused for its length, as
    ``ModelOutput.from_content`` makes it (no usage): ``empty`` (no completion), ``words`` (the provider's words as
    the content: openai_handle_bad_request), ``error`` (the words also in ``output.error``)."""
    log = json.loads((DATA / "contextcanvas.json").read_text())
    sample = log["samples"][0]
    content = "" if style == "empty" else SAID
    sample["output"] = {"model": "mockllm/model", "completion": content,
                        "choices": [{"message": {"role": "assistant", "content": content, "source": "generate"},
                                     "stop_reason": "model_length"}]}
    if style == "error":
        sample["output"]["error"] = f"context_length_exceeded: {SAID}"
    path = tmp_path / f"refused-{style}.json"
    path.write_text(json.dumps(log))
    return path, sample["id"]


@pytest.mark.parametrize("style", ["empty", "words", "error"])
def test_a_request_refused_for_its_length_is_a_failed_request_not_a_cut_off_reply(ws, tmp_path, style):
    path, case = _refused_log(tmp_path, style)
    result = run_cli(["report", "-w", str(ws), "--predictions", str(path), "--format", "json", "--resamples", "200"])
    assert result.exit_code == 0, result.output
    got, stderr = json.loads(result.stdout), " ".join(result.stderr.split())
    [missing] = [m for m in got["missing"] if m["case"] == case]
    assert missing["reason"] == "transport", missing  # counted wrong as a request that got no reply
    assert not any(p["truncated"] for p in got["reply_problems"]), got["reply_problems"]  # not "cut off"
    why = "the provider refused the request for its length before the model replied"
    assert f"1 recorded as failed request, counted wrong (first: {path}, sample '{case}' (#1): {why}" in stderr, stderr
    if style == "error":
        assert f"context_length_exceeded: {SAID[:40]}" in stderr
    if style == "words":
        assert SAID[:40] in stderr  # the provider's words, as inspect_ai kept them in the content
    # Stored by runs import as a failed request, its reason kept as the reply's detail.
    imported = run_cli(["-w", str(ws), "runs", "import", str(path), "--label", f"refused-{style}"])
    assert imported.exit_code == 0, imported.output
    shown = json.loads(run_cli(["-w", str(ws), "runs", "show", imported.stdout.split()[0], "--json"]).stdout)
    [failure] = [f for f in shown["failures"] if f["case"] == case]
    assert failure["error"] == "transport" and why in failure["detail"], failure
    assert shown["run"]["n_errors"] == 1


def test_a_reply_the_context_window_cut_stays_cut_off(ws, tmp_path):
    """Text and usage present, stop_reason model_length, no error: the model wrote a reply that the window cut."""
    log = json.loads((DATA / "contextcanvas.json").read_text())
    log["samples"][0]["output"]["choices"][0]["stop_reason"] = "model_length"
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(log))
    result = run_cli(["report", "-w", str(ws), "--predictions", str(path), "--format", "json", "--resamples", "200"])
    got = json.loads(result.stdout)
    assert [p["truncated"] for p in got["reply_problems"]] == [1]
    assert not [m for m in got["missing"] if m["reason"] == "transport"]
