"""The README's worked study example (section 6a), run as a user pastes it: the demo workspace, the tiny random
LLaVA saved from the test helpers, a real `transformers serve` on 127.0.0.1, then `study new / validate / run /
status / report`. Only the port is changed (a free one), and the server is stopped by its PID at the end."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.transformers_server import free_port, serving_missing
from support.workspace import REPO

_missing = serving_missing()
if _missing:
    pytest.skip(_missing, allow_module_level=True)


def _study_block() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("### 6a."):]
    found = re.search(r"```bash\n(.*?)```", section, re.S)
    assert found, "README section 6a has no bash block"
    return found.group(1)


def test_the_readme_study_example_runs_as_written(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.skip("the example waits for the server with curl, which is not installed")
    block = _study_block()
    assert block.count("--device cpu &") == 1, "the example should start one server in the background"
    port = str(free_port())
    script = (block.replace("8000", port)
              .replace("--device cpu &", "--device cpu > serve.log 2>&1 & echo $! > ../server.pid"))
    (tmp_path / "tests").symlink_to(REPO / "tests")  # '../tests' from the demo folder, as in a checkout
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "COLUMNS": "120"}
    env.pop("CFKIT_WORKSPACE", None)
    proc = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=240)
    finally:
        pid_file = tmp_path / "server.pid"
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
            except ProcessLookupError:
                pass
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, out[-3000:]  # the last command, the report, ends cleanly
    # validate reached the server: every run is checked, the baselines' swap and the served model's four to send
    assert re.search(r"tiny  modality: 24 requests, 24 to send\ntiny  swap: 10 requests, 10 to send\n"
                     r"study 'study': 12 runs, 67 requests to send\.", out), out[-3000:]
    # The random model's replies are cut off every time: run says so and names the runs, as the README says.
    assert "4 runs complete but not clean" in out
    assert out.count("replies were cut off at the token limit") >= 4
    assert re.search(r"tiny\s+swap\s+done\s+10/10", out)  # status, and (counterfactual: found by its plan) why
    assert re.search(r"tiny\s+counterfactual\s+done\s+6/6 .*\(complete but not clean: 6 of 6 replies cut off", out)
    assert "| openai:tiny-llava (not clean) | 7 | 0.00 |" in out  # its report row, marked, its answers under Inv.
    assert {p.name for p in (tmp_path / "demo" / "figures").glob("*.png")} == {
        "ncu.png", "modality.png", "contextcanvas.png"}
