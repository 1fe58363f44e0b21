"""A replica that was down when the run started is asked again while the run sends, and put back in use once it
serves the model: said once while the run goes, and in the run's notes. It used to stay out for the whole run (a
long run on two replicas ran on one for hours)."""

from __future__ import annotations

import json
import threading
import time

from support.chat_api_server import ChatServer
from support.probe_runs import many_cases, replicated, replies, scripted_answer
from support.workspace import run_cli

N = 40


def test_a_replica_down_at_start_is_put_back_in_use_when_it_comes_up(tmp_path):
    ws = many_cases(tmp_path / "ws", N)
    with ChatServer(scripted_answer) as stopped:
        port = stopped.httpd.server_address[1]
        late_url = stopped.url  # nothing listens there once this server is stopped
    late: list[ChatServer] = []
    with ChatServer(scripted_answer, latency=0.03) as a:
        def start_b_later() -> None:
            deadline = time.monotonic() + 30
            while a.count < 5 and time.monotonic() < deadline:
                time.sleep(0.005)
            late.append(ChatServer(scripted_answer, latency=0.03, port=port).__enter__())

        starter = threading.Thread(target=start_b_later, daemon=True)
        starter.start()
        try:
            # asked again every 0.1 s (30 s by default)
            result = replicated(ws, [a.url, late_url], "-j", "1", "-o", "replica_recheck=0.1")
        finally:
            starter.join(timeout=30)
            for b in late:
                b.__exit__(None, None, None)
    assert result.exit_code == 0, result.stderr
    (b,) = late
    assert b.count > 0 and a.count + b.count == N
    stored = replies(ws)
    assert len(stored) == N and all(r["error"] is None for r in stored)
    assert {r["endpoint"] for r in stored} == {a.url, late_url}
    lines = result.stderr.splitlines()
    assert sum(f"replica {late_url} is left out of this run" in line for line in lines) == 1
    assert sum("(asked again every 0.1 s)" in line for line in lines) == 1  # -o replica_recheck, as it is
    back = [line for line in lines if f"replica {late_url} answers for 'test-model' now" in line]
    assert len(back) == 1 and "it takes requests again" in back[0]
    assert back[0].startswith("note: replica ")  # good news, said as a note (it said "warning: replica ...")
    summary = json.loads(result.stdout)
    note = next(n for n in summary["notes"] if "put back in use" in n)
    assert f"replica {late_url} was left out at start and put back in use" in note
    assert f"it answered {b.count} request" in note
    shown = run_cli(["-w", str(ws), "runs", "show", summary["run_id"], "--json"])
    assert any("put back in use" in n for n in json.loads(shown.stdout)["run"]["notes"]["backend_notes"])


def test_a_replica_serving_another_model_is_not_put_back(tmp_path):
    ws = many_cases(tmp_path / "ws", 12)
    with ChatServer(scripted_answer, latency=0.03) as a, ChatServer(scripted_answer) as other:
        other.models = [{"id": "other-model", "object": "model"}]
        result = replicated(ws, [a.url, other.url], "-j", "1", "-o", "replica_recheck=0.05")
        assert other.count == 0 and a.count == 12
    assert result.exit_code == 0, result.stderr
    assert "answers for 'test-model' now" not in result.stderr
    assert not any("put back" in n for n in json.loads(result.stdout)["notes"])
