"""Replicas: throughput against two loopback endpoints and against one, at the same concurrency at each.

Each endpoint is tests/support/chat_api_server.py in its own process, answering
every request after 50 ms; four requests are in flight at each endpoint
(``-j 4``). Two figures, each the ratio two endpoints / one taken within a
round (one endpoint, then two), the median over the rounds reported:

* **transport** — the openai backend's ``answer`` on the 300 planned
  requests of a contextcanvas suite with small images, 4 (one endpoint) or
  8 (two) at a time, as the runner keeps them: what the replica pool itself
  adds;
* **probe run** — the whole ``cfkit probe run`` (``probe_suite`` in this
  process, a fresh store each time); throughput is requests per second of
  the sending part (from the ``on_plan`` callback, when planning is done, to
  the end), so that the planning both share does not dilute the comparison.

The ideal is 2.0; issue 30 asks for at least 1.8. On a loaded machine the
client's and the servers' CPU, not the 50 ms, can bound a run: the note
gives the load average.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

CASES = 300
PER_ENDPOINT = 4
LATENCY = 0.05
ROUNDS = 3
TRANSPORT_ROUNDS = 5
TARGET = 1.8


def _server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "support" / "chat_api_server.py"), str(LATENCY)],
                            stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def _one_run(root: Path, urls: list[str]) -> float:
    """Requests per second of the sending part of one fresh probe run against ``urls``."""
    import shutil

    from cfkit.probe import probe_suite
    from cfkit.store import open_store
    from cfkit.workspace import load_workspace

    shutil.rmtree(root / ".cfkit", ignore_errors=True)
    ws = load_workspace(root)
    planned: list[float] = []
    with open_store(ws.db_path) as store:
        summary = probe_suite(ws, store, "openai:test-model", "contextcanvas",
                              options={"base_url": urls if len(urls) > 1 else urls[0]}, concurrency=PER_ENDPOINT,
                              on_plan=lambda plan: planned.append(time.perf_counter()))
    ended = time.perf_counter()
    assert summary.sent == CASES and summary.errors == 0, summary
    return CASES / (ended - planned[0])


async def _transport(urls: list[str], requests: list) -> float:
    """Requests per second of the backend's ``answer`` alone, ``-j`` at each of ``urls``."""
    import asyncio

    from cfkit.backends import load_backend

    backend = load_backend("openai:test-model", {"base_url": urls if len(urls) > 1 else urls[0]})
    if len(urls) > 1:
        backend.set_concurrency(PER_ENDPOINT)
    gate = asyncio.Semaphore(PER_ENDPOINT * len(urls))

    async def one(request) -> None:
        async with gate:
            assert (await backend.answer(request)).raw

    started = time.perf_counter()
    try:
        await asyncio.gather(*(one(r) for r in requests))
        return len(requests) / (time.perf_counter() - started)
    finally:
        await backend.aclose()


def _rows(what: str, one: list[float], two: list[float], ratios: list[float], note: str) -> list[dict]:
    ideal = PER_ENDPOINT / LATENCY
    ratio = statistics.median(ratios)
    return [
        {"name": f"{what}: one endpoint, -j {PER_ENDPOINT}", "value": statistics.median(one), "unit": "req/s",
         "target": None, "met": None, "note": f"median of {len(one)}; ideal {ideal:.0f} req/s "
                                              f"({LATENCY * 1000:.0f} ms a reply, {PER_ENDPOINT} in flight)"},
        {"name": f"{what}: two endpoints, -j {PER_ENDPOINT} each", "value": statistics.median(two), "unit": "req/s",
         "target": None, "met": None, "note": f"median of {len(two)}; ideal {2 * ideal:.0f} req/s"},
        {"name": f"{what}: two endpoints / one", "value": ratio, "unit": "x", "target": f"≥ {TARGET}",
         "met": ratio >= TARGET, "note": f"ratio within each round, median of {len(ratios)} "
                                         f"({', '.join(f'{r:.2f}' for r in ratios)}); {note}"},
    ]


def run() -> list[dict]:
    import asyncio
    import os

    from support.probe_runs import many_cases

    from cfkit.backends import Capabilities
    from cfkit.probe import plan_suite
    from cfkit.workspace import load_workspace

    servers = [_server(), _server()]
    rows: list[dict] = []
    try:
        urls = [url for _, url in servers]
        with tempfile.TemporaryDirectory() as tmp:
            root = many_cases(Path(tmp) / "ws", CASES)
            plan = plan_suite(load_workspace(root), "contextcanvas", Capabilities(True, True, True, True))
            requests = [item.request for item in plan.items]
            one, two, ratios = [], [], []
            for _ in range(TRANSPORT_ROUNDS):
                one.append(asyncio.run(_transport(urls[:1], requests)))
                two.append(asyncio.run(_transport(urls, requests)))
                ratios.append(two[-1] / one[-1])
            rows += _rows("transport", one, two, ratios, f"{CASES} requests, the backend's answer alone")
            one, two, ratios = [], [], []
            for _ in range(ROUNDS):
                one.append(_one_run(root, urls[:1]))
                two.append(_one_run(root, urls))
                ratios.append(two[-1] / one[-1])
            load = os.getloadavg()[0]
            rows += _rows("probe run", one, two, ratios, f"{CASES} requests, whole probe run after planning; "
                                                         f"load average {load:.1f} on {os.cpu_count()} CPUs")
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait(timeout=10)
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
