"""A verb after a count agrees with it: "1 of 3 replies was cut off", not "were"; "1 of 3 has no valid answer";
"image_size does not apply", not "do". (tests/package's scan finds a fixed verb written after a count; these are the lines a user met.)"""

from __future__ import annotations

import pytest

from support.chat_api_server import ChatServer, Scripted, completion, first_option
from support.probe_runs import FAST
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(120)


def test_one_reply_cut_off_of_three_is_said_in_the_singular(tiny_ws):
    def script(body, n):
        if n == 1:
            return Scripted(body=completion("", finish_reason="length"))
        return first_option(body, n)

    with ChatServer(script) as server:
        result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                          "--base-url", server.url, *FAST, "-j", "1"])
    said = " ".join(result.stderr.split())
    assert result.exit_code == 1, result.output
    assert "1 of 3 replies was cut off at the token limit (512 tokens); 1 of 3 has no valid answer." in said, said


def test_one_preset_option_a_backend_does_not_take_is_said_in_the_singular(tiny_ws):
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-yes", "-s", "contextcanvas",
                      "--protocol", "paper", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "protocol paper: image_size does not apply to this backend." in result.stderr, result.stderr
