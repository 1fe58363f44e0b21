"""Probe throughput and memory against a loopback Chat Completions server with a fixed 50 ms latency.

The workload of issue 17 (built by probe_workload.py): 1,204 requests (the
contextcanvas suite of 1,204 synthetic cases), each carrying its own 640x640
JPEG of about 155 KB (about 207 KB as base64), at 16, 64 and 128 requests in
flight. Measured in one run, interleaved, in rounds (five at 16 and 64, three
at 128, to keep the whole benchmark within a few minutes):

* **floor** — a lean aiohttp client: for each request it reads the image
  file, base64-encodes it, builds the JSON body with orjson, posts it over a
  kept-alive connection and decodes the reply; nothing else;
* **floor, pybase64** — the same client with pybase64's encoder, as cfkit
  encodes images where pybase64 is installed (the ``openai`` extra brings it):
  the like-for-like floor of cfkit's own overhead (the standard library's
  encoder took about 670 us of CPU of an image here, pybase64's about 25);
* **transport** — the openai backend as cfkit uses it
  (``OpenAIBackend.answer`` on the planned requests, the runner's semaphore
  and nothing else): body building, sending, retries bookkeeping, reply
  reading;
* **probe run** — the whole ``cfkit probe run`` (``probe_suite``, in this
  process) in a fresh store: planning (each image's header and end checked,
  none read whole: the run's id knows files by path, size and mtime),
  sending (each image read and hashed as its request goes), parsing, committing;
  the planning time is taken from the ``on_plan`` callback and reported;
* for comparison, the same lean client on **httpx2** (the HTTP client the
  openai SDK is built on), and the **openai SDK** (``AsyncOpenAI.post``, what
  the backend used before);
* a fully cached rerun of the probe run at 16 (same process).

The run sends while it plans (issue 34): before the first request it checks
each image's header and end only; each image is read once, when its request
is sent, and hashed then.

Each figure is given as a ratio to the ideal (1,204 x 0.05 / concurrency s)
and to the floor; the ratio to the floor is taken within each round, then
the median over rounds, so a change in the machine's load between rounds
does not enter it. The server runs in its own process so that it does not
compete for the interpreter lock.

Then whole processes (probe_processes.py): ``python -m cfkit probe run`` as
a user runs it, first in a fresh store and then the identical command again
(the fully cached rerun), and the peak RSS of a whole run (``ru_maxrss`` of
the child, from ``os.wait4``) at 1,204 and at 12,040 requests, in three
rounds (the ratio taken within each), with the floor's peak RSS as a process
of its own for reference; and the time to first request of each as a whole
process (the server's clock at the first request it gets minus the launch of
the process), cfkit against the floor.

``run(one_core=True)`` (``bench_probe_one_core.py``) measures the same on one
core, as ``taskset -c 0`` would: this process and every client process it
starts are pinned to CPU 0 (the server to the others), with fewer rounds and
without the comparison clients and the memory runs, so that fixed costs cannot
hide behind a second core.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from probe_processes import process_rows  # noqa: E402
from probe_workload import LATENCY, floor, lean_body, pin_to_one_core, start_server, write_workspace  # noqa: E402

CASES = 1204
CONCURRENCIES = (16, 64, 128)
#: Rounds per concurrency; 128 (no target) gets fewer.
ROUNDS = {16: 5, 64: 5, 128: 3}
#: Targets of issue 34 for the whole probe run, as ratios to the floor (128: reported without one).
TARGETS = {16: 1.10, 64: 1.15}
#: The one-core variant: fewer concurrencies and rounds, the floor, the transport and the probe run only.
ONE_CORE_ROUNDS = {16: 3, 64: 3}
ONE_CORE_CLIENTS = ("floor", "floor, pybase64", "transport", "probe run")
#: Every client of the full run, in the order each round runs them.
CLIENTS = ("floor", "floor, pybase64", "transport", "probe run", "httpx2", "openai SDK")


async def _httpx2(url: str, jobs: list[tuple[str, str, Path]], concurrency: int) -> float:
    """The same lean client on httpx2."""
    import httpx2
    import orjson

    headers = {"content-type": "application/json", "authorization": "Bearer bench"}
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx2.AsyncClient(limits=limits, timeout=60) as client:
        gate = asyncio.Semaphore(concurrency)

        async def one(job) -> None:
            async with gate:
                response = await client.post(url + "/chat/completions", content=orjson.dumps(lean_body(*job)),
                                             headers=headers)
                assert orjson.loads(response.content)["choices"][0]["message"]["content"]

        started = time.perf_counter()
        await asyncio.gather(*(one(job) for job in jobs))
        return time.perf_counter() - started


async def _sdk(url: str, jobs: list[tuple[str, str, Path]], concurrency: int) -> float:
    """The openai SDK as the backend used it before: ``client.post`` cast to ChatCompletion models."""
    import openai
    from openai.types.chat import ChatCompletion

    client = openai.AsyncOpenAI(api_key="bench", base_url=url, max_retries=0, timeout=60)
    gate = asyncio.Semaphore(concurrency)

    async def one(job) -> None:
        async with gate:
            completion = await client.post("/chat/completions", cast_to=ChatCompletion, body=lean_body(*job))
            assert completion.choices[0].message.content

    started = time.perf_counter()
    await asyncio.gather(*(one(job) for job in jobs))
    elapsed = time.perf_counter() - started
    await client.close()
    return elapsed


async def _transport(backend, requests: list, concurrency: int) -> float:
    """The openai backend's ``answer`` on the planned requests, ``concurrency`` at a time."""
    gate = asyncio.Semaphore(concurrency)

    async def one(request) -> None:
        async with gate:
            reply = await backend.answer(request)
            assert reply.raw

    started = time.perf_counter()
    try:
        await asyncio.gather(*(one(r) for r in requests))
        return time.perf_counter() - started
    finally:
        await backend.aclose()


def _probe_run(ws, url: str, concurrency: int, *, rerun: bool = False) -> tuple[float, float, float | None]:
    """(first run, its planning, fully cached rerun or None) wall seconds of ``probe_suite`` in a fresh store."""
    from cfkit.probe import probe_suite
    from cfkit.store import open_store

    for path in ws.store_dir.glob("cfkit.db*"):
        path.unlink()
    planned_at = []
    with open_store(ws.db_path) as store:
        started = time.perf_counter()
        first = probe_suite(ws, store, "openai:bench-model", "contextcanvas", options={"base_url": url},
                            concurrency=concurrency, on_plan=lambda plan: planned_at.append(time.perf_counter()))
        first_s = time.perf_counter() - started
        assert first.sent == CASES and first.errors == 0, first
        plan_s = planned_at[0] - started
        if not rerun:
            return first_s, plan_s, None
        started = time.perf_counter()
        again = probe_suite(ws, store, "openai:bench-model", "contextcanvas", options={"base_url": url},
                            concurrency=concurrency)
        rerun_s = time.perf_counter() - started
        assert again.sent == 0 and again.kept == CASES, again
    return first_s, plan_s, rerun_s


def run(one_core: bool = False) -> list[dict]:
    import os

    from cfkit.backends import load_backend
    from cfkit.probe import plan_suite
    from cfkit.workspace import load_workspace

    started = time.perf_counter()
    import aiohttp  # noqa: F401 - imported once up front, so no row is charged an import
    import httpx2  # noqa: F401
    import openai  # noqa: F401
    import orjson  # noqa: F401
    import pybase64

    import_s = time.perf_counter() - started
    server, url = start_server()
    rounds = ONE_CORE_ROUNDS if one_core else ROUNDS
    clients = ONE_CORE_CLIENTS if one_core else CLIENTS
    affinity = pin_to_one_core(server.pid) if one_core else None
    if one_core and affinity is None:
        raise RuntimeError("the one-core variant needs os.sched_setaffinity (Linux)")
    times: dict[tuple[str, int], list[float]] = {}
    plans: dict[int, list[float]] = {}
    reruns: list[float] = []
    loads: list[float] = []  # the load average after each probe run
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ws = load_workspace(write_workspace(Path(tmp) / "ws", CASES))
            backend = load_backend("openai:bench-model", {"base_url": url})
            plan = plan_suite(ws, "contextcanvas", backend.capabilities)
            requests = [item.request for item in plan.items]
            jobs = [(item.request.system, item.request.user, ws.image_root / item.case.images[0])
                    for item in plan.items]
            assert len(jobs) == CASES
            mean_b64 = statistics.mean(len(r.images[0].data) for r in requests) * 4 / 3
            for round_ in range(max(rounds.values())):
                for concurrency in (c for c in rounds if round_ < rounds[c]):
                    def put(name: str, seconds: float) -> None:
                        times.setdefault((name, concurrency), []).append(seconds)

                    put("floor", asyncio.run(floor(url, jobs, concurrency)))
                    put("floor, pybase64", asyncio.run(floor(url, jobs, concurrency, pybase64.b64encode)))
                    put("transport", asyncio.run(_transport(load_backend("openai:bench-model", {"base_url": url}),
                                                            requests, concurrency)))
                    first_s, plan_s, rerun_s = _probe_run(ws, url, concurrency,
                                                          rerun=concurrency == CONCURRENCIES[0])
                    put("probe run", first_s)
                    loads.append(os.getloadavg()[0])
                    plans.setdefault(concurrency, []).append(plan_s)
                    if rerun_s is not None:
                        reruns.append(rerun_s)
                    if "httpx2" in clients:
                        put("httpx2", asyncio.run(_httpx2(url, jobs, concurrency)))
                        put("openai SDK", asyncio.run(_sdk(url, jobs, concurrency)))
            rows = _rows(times, plans, reruns, mean_b64, import_s, tuple(rounds), clients, loads)
            rows += process_rows(url, Path(tmp), ws.root, jobs, memory=not one_core)
    finally:
        if affinity is not None:
            os.sched_setaffinity(0, affinity)
        server.terminate()
        server.wait()
    if one_core:
        for row in rows:
            row["name"] = f"one core: {row['name']}"
            row["note"] = f"{row['note']}; this process and its clients on CPU 0 alone, the server on the others"
    return rows


def _rows(times, plans, reruns, mean_b64, import_s, concurrencies=CONCURRENCIES, clients=CLIENTS,
          loads=()) -> list[dict]:
    """One row per client and concurrency. Ratios to the floor are taken within each round (the clients of
    a round run back to back), then the median over rounds, so a change in the machine's load between
    rounds does not enter them."""
    import os

    rows = []
    what = {"floor": "lean aiohttp client (the floor)",
            "floor, pybase64": "the lean client with pybase64's base64 encoder (as cfkit encodes)",
            "transport": "openai backend transport alone",
            "probe run": "probe run", "httpx2": "the lean client on httpx2",
            "openai SDK": "openai SDK AsyncOpenAI.post (the previous transport)"}
    for concurrency in concurrencies:
        ideal = CASES * LATENCY / concurrency
        floors = times[("floor", concurrency)]
        for name, label in ((n, what[n]) for n in clients):
            own = times[(name, concurrency)]
            seconds = statistics.median(own)
            ratio = statistics.median(t / f for t, f in zip(own, floors))
            target = TARGETS.get(concurrency) if name == "probe run" else None
            note = (f"{seconds / ideal:.2f}× the ideal ({ideal:.2f} s), {ratio:.2f}× the floor (median of "
                    f"{len(own)} rounds' ratios); runs {', '.join(f'{x:.2f}' for x in own)} s")
            if name == "probe run":
                alike = statistics.median(t / f for t, f in zip(own, times[("floor, pybase64", concurrency)]))
                note += f"; {alike:.2f}× the lean client with pybase64's encoder (cfkit's own overhead)"
                planning = plans[concurrency]
                sending = statistics.median((t - p) / f for t, p, f in zip(own, planning, floors))
                note += (f". Planning (checking the cases, and each image's header and end: the run's id knows "
                         f"images by path, size and mtime, and each is read whole only when sent) took "
                         f"{statistics.median(planning):.2f} s of it; the rest alone is {sending:.2f}× the floor")
                if loads:
                    note += f"; load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs"
            rows.append({
                "name": f"{label}, 1,204 requests at concurrency {concurrency}", "value": round(seconds, 3),
                "unit": "s", "target": f"≤ {target:.2f}× the floor" if target else None,
                "met": ratio <= target if target else None, "note": note,
            })
    first = statistics.median(times[("probe run", concurrencies[0])])
    rerun = statistics.median(reruns)
    rows.append({"name": f"fully cached rerun of the probe run at concurrency {CONCURRENCIES[0]} (same process)",
                 "value": round(rerun, 3), "unit": "s", "target": None, "met": None,
                 "note": f"{first / rerun:.0f}× faster than the first run in the same process"})
    rows.append({"name": "import aiohttp, orjson, pybase64, httpx2 and openai (once, excluded above)", "value": round(import_s, 3),
                 "unit": "s", "target": None, "met": None,
                 "note": f"images average {mean_b64 / 1000:.0f} KB as base64"
                         + ("; already imported by a benchmark run before in this process" if import_s < 0.001 else "")})
    return rows


if __name__ == "__main__":
    for row in run():
        print(f"{row['name']:75s} {row['value']:>8} {row['unit']:2s}  target {row['target']}  "
              f"met={row['met']}  {row['note']}")
