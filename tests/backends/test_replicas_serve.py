"""Replicas against two real servers: two `transformers serve` processes serving the same tiny model, one killed
mid-run; the run ends complete with every request answered once (tests/support/transformers_server.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest

from support.probe_runs import many_cases
from support.transformers_server import TransformersServe, save_tiny_llava, serving_missing
from support.workspace import run_cli

_missing = serving_missing()
if _missing is not None:
    pytest.skip(_missing, allow_module_level=True)
pytest.importorskip("torch")

from cfkit.store import Store  # noqa: E402
from support.store_sql import table_rows

pytestmark = pytest.mark.timeout(300)

MODEL = "tiny-llava"
N = 16


@pytest.fixture(scope="module")
def two_servers(tmp_path_factory) -> Iterator[tuple[TransformersServe, TransformersServe]]:
    models = tmp_path_factory.mktemp("replicas")
    save_tiny_llava(models / MODEL)
    with TransformersServe(models, MODEL, models / "a.log") as a, TransformersServe(models, MODEL, models / "b.log") as b:
        yield a, b


def endpoints(ws) -> list[str | None]:
    return [r["endpoint"] for r in table_rows(ws, "replies", "endpoint, error") if r["error"] != "transport"]


def test_one_replica_killed_mid_run_the_other_answers_the_rest_once(two_servers, tmp_path):
    a, b = two_servers
    ws = many_cases(tmp_path / "ws", N)
    killed_at: list[int] = []

    def kill_a_after_two_answers() -> None:
        deadline = time.monotonic() + 120
        while a.answered() < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        a.proc.kill()  # SIGKILL: no goodbye, the requests it holds are cut off
        a.proc.wait(timeout=30)
        killed_at.append(b.answered())

    killer = threading.Thread(target=kill_a_after_two_answers, daemon=True)
    killer.start()
    result = run_cli(["-w", str(ws), "probe", "run", "-m", f"openai:{MODEL}", "-s", "contextcanvas", "--json",
                      "--base-url", a.url, "--base-url", b.url, "-j", "1", "--max-tokens", "128",
                      "-o", "backoff=0.05"])
    killer.join(timeout=60)
    summary = json.loads(result.stdout)
    # The tiny random model often talks until the token limit: such a run is stored whole but not clean (exit 1).
    assert result.exit_code == (1 if summary["truncated"] else 0), result.stderr
    assert (summary["total"], summary["errors"]) == (N, 0)
    assert killed_at and killed_at[0] < N  # the replica died while requests were still to be answered
    answered_by = endpoints(ws)
    assert len(answered_by) == N
    # Every request answered once: each has one stored reply naming the server whose answer it is; every answer
    # the surviving server logged is stored, and the killed one's logged answers are stored but for at most the
    # one it held when it died (its log line comes when the response starts, so the kill can cut the body off,
    # and that request was answered again by the other server).
    assert answered_by.count(b.url) == b.answered() > killed_at[0]
    assert 1 <= answered_by.count(a.url) <= a.answered() <= answered_by.count(a.url) + 1
    assert answered_by.count(a.url) + answered_by.count(b.url) == N
