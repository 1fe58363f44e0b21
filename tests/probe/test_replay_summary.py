"""A replay run's summary says its replies were read from the file, not sent: nothing went over a network.

The text line names the file where a live run says "sent"; the JSON summary keeps
``sent`` (the count, for scripts) and adds ``replayed_from``, the file's path, which
is null for a run that did send.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.workspace import run_cli


def _peer_file(path: Path) -> Path:
    lines = [json.dumps({"model": "peer:vlm-7b", "suite": "contextcanvas", "case": case, "condition": "image",
                         "raw": '{"answer": "A"}', "answer": "A", "parse": "json"}) + "\n"
             for case in ("T001", "T002", "T003")]
    path.write_text("".join(lines))
    return path


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_summary_line_says_read_from_the_file_and_never_sent(tiny_ws, tmp_path):
    peer = _peer_file(tmp_path / "peer.jsonl")

    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", f"replay:{peer}", "-s", "contextcanvas"])

    assert result.exit_code == 0, result.stderr
    said = _flat(result.stderr)
    assert f"0 from cache, 3 read from {peer} (0 failed)" in said, said
    assert " sent" not in said, said


def test_the_json_summary_keeps_sent_and_names_the_file(tiny_ws, tmp_path):
    peer = _peer_file(tmp_path / "peer.jsonl")

    replayed = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", f"replay:{peer}", "-s", "contextcanvas", "--json"])
    live = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-yes", "-s", "contextcanvas", "--json"])

    assert replayed.exit_code == 0 and live.exit_code == 0, replayed.stderr + live.stderr
    summary = json.loads(replayed.stdout)
    assert summary["sent"] == 3 and summary["replayed_from"] == str(peer)
    baseline = json.loads(live.stdout)
    assert baseline["sent"] == 3 and baseline["replayed_from"] is None
    assert " sent (0 failed)" in _flat(run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-no",
                                                "-s", "contextcanvas"]).stderr)
