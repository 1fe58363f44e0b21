"""No escape sequence from data reaches a real terminal.

Hostile text is planted where a study's data comes from (a case question, a
spec's title, a caption, a model's name and reply, a run's error) and each
command that shows it is run under a pseudo-terminal, where Rich styles its
output. What the terminal receives may hold Rich's own colour codes (SGR,
``ESC [ … m``) and nothing else: no OSC (window titles, hyperlinks), no
cursor movement or screen clearing, and no SGR that came from the data.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import sys
import time
from pathlib import Path

import pytest

from support.workspace import run_cli, write_workspace

# A window title, a screen clear, a colour, a bell and a CSI written as its one-byte C1 form.
HOSTILE = "x\x1b]0;PWNED\x07 \x1b[2J\x1b[31mred\x9b5n\x07"
SGR = re.compile(rb"\x1b\[[0-9;]*m")


def _in_a_terminal(args: list[str], cwd: Path) -> tuple[int, bytes]:
    """Run ``cfkit ARGS`` with a pseudo-terminal as stdin, stdout and stderr; its exit status and all it wrote."""
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(cwd)
        os.environ.update({"COLUMNS": "160", "LINES": "50", "TERM": "xterm-256color"})
        os.environ.pop("NO_COLOR", None)
        os.execvp(sys.executable, [sys.executable, "-m", "cfkit", *args])
    output, deadline = b"", time.monotonic() + 120
    while time.monotonic() < deadline:
        if not select.select([fd], [], [], 1)[0]:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), output


@pytest.fixture(scope="module")
def hostile_ws(tmp_path_factory) -> Path:
    ws = write_workspace(tmp_path_factory.mktemp("hostile") / "ws")
    cases_file = ws / "data" / "cases.jsonl"
    cases = [json.loads(line) for line in cases_file.read_text().splitlines()]
    cases[0]["question"] = f"Is this {HOSTILE} suitable for a poster?"
    cases_file.write_text("".join(json.dumps(c) + "\n" for c in cases))
    spec = ws / "interventions" / "TX01.yaml"
    spec.write_text(spec.read_text().replace("title: Test edit", f"title: {json.dumps('Test ' + HOSTILE)}"))
    (ws / "captions" / "T001.yaml").write_text(
        f"neutral: {json.dumps('A field ' + HOSTILE)}\nevidence: Grey.\nauthor: human\nreviewed: true\n")
    assert run_cli(["edit", "TX01", "--engine", "classical", "-w", str(ws)]).exit_code == 0
    model = f"m{HOSTILE}"
    predictions = ws / "predictions.jsonl"
    predictions.write_text(json.dumps({"model": model, "suite": "contextcanvas", "case": "T001",
                                       "condition": "image", "answer": "B", "raw": f"B {HOSTILE}"}) + "\n")
    replayed = ws / "replies \x1b]0;PWNED\x07.jsonl"  # a file name is data too
    replayed.write_text(predictions.read_text())
    run = run_cli(["probe", "run", "-m", f"replay:{replayed}", "-s", "contextcanvas", "-w", str(ws)])
    assert run.exit_code != 0 or "T002" in run.output  # two cases have no prediction: recorded as failures
    return ws


@pytest.mark.parametrize("args", [
    ["report", "--predictions", "predictions.jsonl", "--resamples", "50"],
    ["runs", "show", "contextcanvas-m"],  # the replayed run is labelled by the model its file names
    ["review", "TX01", "--show"],
    ["captions", "show", "T001"],
    ["specs", "show", "TX01"],
    ["specs", "list"],
    ["runs", "show", f"no{HOSTILE}"],  # an error line repeating what was typed
], ids=["report", "runs-show", "review-show", "captions-show", "specs-show", "specs-list", "error-line"])
def test_no_escape_from_data_reaches_the_terminal(hostile_ws: Path, args: list[str]):
    status, output = _in_a_terminal(args, hostile_ws)
    assert b"\x1b[" in output or status != 0  # Rich did style its output: this is a terminal
    assert b"PWNED" in output or b"x\xe2\x90\x9b" in output, output[-2000:]  # the data was shown ...
    assert b"\xe2\x90\x9b]0;PWNED" in output, output[-2000:]  # ... as ␛]0;PWNED, visibly
    left = SGR.sub(b"", output)
    assert b"\x1b" not in left and b"\x07" not in left and "\x9b".encode() not in left, left[-2000:]
    assert b"\x1b[31mred" not in output  # no colour code from the data, either
