"""What a user sees on the demo stays byte-for-byte the same across refactors.

The demo, then the edit → check → review corridor on its workspace, run through the CLI;
the transcript (stdout and stderr of every command, with its exit status) is compared with
``tests/golden/demo-transcript.txt``, captured before the architecture work of issue 28.
Only what differs from run to run is normalised: the temporary folders, the seconds a step
took and the time stamps in file names and records.

To record a new transcript after an intended change of output:
``CFKIT_WRITE_GOLDEN=1 .venv/bin/python -m pytest tests/cli/test_demo_golden.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from support.workspace import run_cli

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "demo-transcript.txt"

#: The commands after the demo, each run in its workspace (``-w`` is added).
CORRIDOR: tuple[tuple[str, ...], ...] = (
    ("specs", "list"),
    ("edits", "list"),
    ("check", "EX01"),
    ("check", "--all"),
    ("edit", "EX02", "--engine", "classical"),
    ("edit", "EX03", "--engine", "classical", "--candidates", "2"),
    ("edits", "list", "EX03"),
    ("review", "EX01", "--show", "--color", "never"),
    ("review", "EX03", "--show", "--zoom", "--color", "never"),
    ("review", "EX01", "--json"),
    ("review", "EX02", "--accept"),
    ("review", "EX03", "--reject", "--note", "the rim changed"),
    ("review", "--pending", "--yes"),
    ("specs", "list"),
    ("check", "EX09"),
    ("report",),
)


def _normalise(text: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        text = text.replace(old, new)
    text = re.sub(r"\d{8}-\d{6}", "<STAMP>", text)  # sheet and view file names
    # run ids (the report's "Runs read"): their hash covers each image file's modification time
    text = re.sub(r"\b((?:contextcanvas|counterfactual|modality|swap)-[A-Za-z0-9._-]+?)-[0-9a-f]{8}\b", r"\1-<HASH>", text)
    text = re.sub(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?", "<TIME>", text)
    text = re.sub(r"\b\d\d-\d\d \d\d:\d\d\b", "<MM-DD HH:MM>", text)  # edits list's 'finished'
    text = re.sub(r"\(\d+\.\d s\)", "(<SECONDS>)", text)
    text = re.sub(r"Finished in \d+\.\d s", "Finished in <SECONDS>", text)
    text = re.sub(r"in \d+\.\d+ ?s\b", "in <SECONDS>", text)
    return text


def transcript(tmp_path: Path) -> str:
    """Every command's exit status, stdout and stderr, normalised."""
    cache = tmp_path / "cache"
    ws = tmp_path / "ws"
    env = {
        "COLUMNS": "100",
        "LINES": "40",
        "XDG_CACHE_HOME": str(cache),
        "CFKIT_WEIGHTS_DIR": str(cache / "cfkit" / "weights"),
        "TORCH_HOME": str(cache / "torch"),
        "CFKIT_LPIPS_BACKBONE": None,
        "NO_COLOR": "1",
    }
    replacements = {str(ws): "<WS>", str(cache): "<CACHE>", str(tmp_path): "<TMP>"}
    parts = []
    commands = [("demo", "--output", str(ws))] + [("-w", str(ws), *c) for c in CORRIDOR]
    for args in commands:
        result = run_cli(list(args), env=env)
        shown = ["-w", "<WS>", *args[2:]] if args[0] == "-w" else ["demo", "--output", "<WS>"]
        parts.append(f"$ cfkit {' '.join(shown)}\n[exit {result.exit_code}]\n")
        parts.append("--- stdout\n" + result.stdout)
        parts.append("--- stderr\n" + result.stderr)
    return _normalise("".join(parts), replacements)


def test_the_demo_and_the_edit_corridor_print_what_they_printed_before():
    # Tables wrap by the length of the paths they show, so the folder's name has a fixed length.
    tmp_path = Path(tempfile.mkdtemp(prefix="cfkit-golden-", dir="/tmp"))
    try:
        seen = transcript(tmp_path)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)
    if os.environ.get("CFKIT_WRITE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(seen, encoding="utf-8")
    expected = GOLDEN.read_text(encoding="utf-8")
    assert seen == expected
