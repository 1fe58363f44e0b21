"""Probe throughput against a loopback Chat Completions server with a fixed 50 ms latency.

The workload of issue 17: 1,204 requests (the contextcanvas suite of 1,204
synthetic cases), each carrying its own 640x640 JPEG of about 155 KB (about
207 KB as base64), at 16 and at 64 requests in flight. Measured in one run,
interleaved, in five rounds:

* **floor** — a lean aiohttp client: for each request it reads the image
  file, base64-encodes it, builds the JSON body with orjson, posts it over a
  kept-alive connection and decodes the reply; nothing else;
* **transport** — the openai backend as cfkit uses it
  (``OpenAIBackend.answer`` on the planned requests, the runner's semaphore
  and nothing else): body building, sending, retries bookkeeping, reply
  reading;
* **probe run** — the whole ``cfkit probe run`` in a fresh store: planning
  (reading, hashing the images), sending, parsing, committing each reply;
* for comparison, the same lean client on **httpx2** (the HTTP client the
  openai SDK is built on), and the **openai SDK** (``AsyncOpenAI.post``, what
  the backend used before);
* a fully cached rerun of the probe run at 16 (same process).

Each figure is given as a ratio to the ideal (1,204 x 0.05 / concurrency s)
and to the floor; the ratio to the floor is taken within each round, then
the median over rounds, so a change in the machine's load between rounds
does not enter it. The server runs in its own process (a minimal asyncio
HTTP server below) so that it does not compete for the interpreter lock.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CASES = 1204
LATENCY = 0.05
CONCURRENCIES = (16, 64)
REPEATS = 5
#: Targets of issue 17 for the whole probe run, as ratios to the floor.
TARGETS = {16: 1.10, 64: 1.25}


def _jpegs(folder: Path) -> None:
    """1,204 distinct 640x640 noise JPEGs (quality 45, about 155 KB each): crops of one noise field."""
    import numpy as np
    from PIL import Image

    field = np.random.default_rng(0).integers(0, 256, (704, 704, 3), dtype=np.uint8)
    for i in range(CASES):
        y, x = divmod(i, 64)
        buffer = io.BytesIO()
        Image.fromarray(field[y:y + 640, x:x + 640]).save(buffer, "JPEG", quality=45)
        (folder / f"B{i:04d}.jpg").write_bytes(buffer.getvalue())


def _workspace(root: Path) -> Path:
    """1,204 two-option cases, each with its own image."""
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import write_workspace

    write_workspace(root)
    _jpegs(root / "data" / "images")
    cases = [json.dumps({
        "id": f"B{i:04d}", "images": [f"B{i:04d}.jpg"], "question": f"Is picture {i} suitable for use {i}?",
        "options": [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}], "gold": "A" if i % 3 else "B",
        "yes_option": "A"}) for i in range(CASES)]
    (root / "data" / "cases.jsonl").write_text("\n".join(cases) + "\n")
    return root


_REPLY = json.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench-model",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": '{"answer": "A", "reason": "bench", "confidence": "low"}'}}],
    "usage": {"prompt_tokens": 100, "completion_tokens": 12, "total_tokens": 112},
}).encode()


async def _serve(latency: float) -> None:
    """A minimal asyncio HTTP/1.1 server: every POST gets the same Chat Completions body after ``latency`` s.

    It is leaner than tests/chat_api_server.py (no thread per connection, no
    JSON parsing), so the figures measure the client side, not the server.
    """
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                await asyncio.sleep(latency)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                             + str(len(_REPLY)).encode() + b"\r\n\r\n" + _REPLY)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionResetError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, limit=2 ** 20)
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", flush=True)
    await server.serve_forever()


def _start_server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(LATENCY)], stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    return proc, url


def _lean_body(system: str, user: str, image: Path) -> dict:
    data = base64.b64encode(image.read_bytes()).decode("ascii")
    return {"model": "bench-model", "temperature": 0, "max_tokens": 512,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": [{"type": "text", "text": user},
                                                      {"type": "image_url",
                                                       "image_url": {"url": f"data:image/jpeg;base64,{data}"}}]}]}


async def _floor(url: str, jobs: list[tuple[str, str, Path]], concurrency: int) -> float:
    """The lean aiohttp client: read, encode, post, decode; a semaphore and nothing else."""
    import aiohttp
    import orjson

    headers = {"content-type": "application/json", "authorization": "Bearer bench"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        gate = asyncio.Semaphore(concurrency)

        async def one(job) -> None:
            async with gate:
                async with session.post(url + "/chat/completions", data=orjson.dumps(_lean_body(*job)),
                                        headers=headers) as response:
                    reply = orjson.loads(await response.read())
                assert reply["choices"][0]["message"]["content"]

        started = time.perf_counter()
        await asyncio.gather(*(one(job) for job in jobs))
        return time.perf_counter() - started


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
                response = await client.post(url + "/chat/completions", content=orjson.dumps(_lean_body(*job)),
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
            completion = await client.post("/chat/completions", cast_to=ChatCompletion, body=_lean_body(*job))
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


def _probe_run(ws, url: str, concurrency: int, *, rerun: bool = False) -> tuple[float, float | None]:
    """(first run, fully cached rerun or None) wall seconds of ``cfkit probe run`` in a fresh store."""
    from cfkit.probe import probe_suite
    from cfkit.store import open_store

    for path in ws.store_dir.glob("cfkit.db*"):
        path.unlink()
    with open_store(ws.db_path) as store:
        started = time.perf_counter()
        first = probe_suite(ws, store, "openai:bench-model", "contextcanvas", options={"base_url": url},
                            concurrency=concurrency)
        first_s = time.perf_counter() - started
        assert first.sent == CASES and first.errors == 0, first
        if not rerun:
            return first_s, None
        started = time.perf_counter()
        again = probe_suite(ws, store, "openai:bench-model", "contextcanvas", options={"base_url": url},
                            concurrency=concurrency)
        rerun_s = time.perf_counter() - started
        assert again.sent == 0 and again.kept == CASES, again
    return first_s, rerun_s


def run(repeats: int = REPEATS) -> list[dict]:
    from cfkit.backends import load_backend
    from cfkit.probe import plan_suite
    from cfkit.workspace import load_workspace

    started = time.perf_counter()
    import aiohttp  # noqa: F401 - imported once up front, so no row is charged an import
    import httpx2  # noqa: F401
    import openai  # noqa: F401
    import orjson  # noqa: F401

    import_s = time.perf_counter() - started
    server, url = _start_server()
    times: dict[tuple[str, int], list[float]] = {}
    reruns: list[float] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ws = load_workspace(_workspace(Path(tmp) / "ws"))
            backend = load_backend("openai:bench-model", {"base_url": url})
            plan = plan_suite(ws, "contextcanvas", backend.capabilities)
            requests = [item.request for item in plan.items]
            jobs = [(item.request.system, item.request.user, ws.image_root / item.case.images[0])
                    for item in plan.items]
            assert len(jobs) == CASES
            mean_b64 = statistics.mean(len(r.images[0].data) for r in requests) * 4 / 3
            for _ in range(repeats):
                for concurrency in CONCURRENCIES:
                    def put(name: str, seconds: float) -> None:
                        times.setdefault((name, concurrency), []).append(seconds)

                    put("floor", asyncio.run(_floor(url, jobs, concurrency)))
                    put("transport", asyncio.run(_transport(load_backend("openai:bench-model", {"base_url": url}),
                                                            requests, concurrency)))
                    first_s, rerun_s = _probe_run(ws, url, concurrency, rerun=concurrency == CONCURRENCIES[0])
                    put("probe run", first_s)
                    if rerun_s is not None:
                        reruns.append(rerun_s)
                    put("httpx2", asyncio.run(_httpx2(url, jobs, concurrency)))
                    put("openai SDK", asyncio.run(_sdk(url, jobs, concurrency)))
    finally:
        server.terminate()
        server.wait()
    return _rows(times, reruns, repeats, mean_b64, import_s)


def _rows(times, reruns, repeats, mean_b64, import_s) -> list[dict]:
    """One row per client and concurrency. Ratios to the floor are taken within each round (the clients of
    a round run back to back), then the median over rounds, so a change in the machine's load between
    rounds does not enter them."""
    rows = []
    what = {"floor": "lean aiohttp client (the floor)", "transport": "openai backend transport alone",
            "probe run": "probe run", "httpx2": "the lean client on httpx2",
            "openai SDK": "openai SDK AsyncOpenAI.post (the previous transport)"}
    for concurrency in CONCURRENCIES:
        ideal = CASES * LATENCY / concurrency
        floors = times[("floor", concurrency)]
        for name, label in what.items():
            own = times[(name, concurrency)]
            seconds = statistics.median(own)
            ratio = statistics.median(t / f for t, f in zip(own, floors))
            target = TARGETS[concurrency] if name == "probe run" else None
            rows.append({
                "name": f"{label}, 1,204 requests at concurrency {concurrency}", "value": round(seconds, 3),
                "unit": "s", "target": f"≤ {target:.2f}× the floor" if target else None,
                "met": ratio <= target if target else None,
                "note": f"{seconds / ideal:.2f}× the ideal ({ideal:.2f} s), {ratio:.2f}× the floor (median of "
                        f"{repeats} rounds' ratios); runs {', '.join(f'{x:.2f}' for x in own)} s",
            })
    first = statistics.median(times[("probe run", CONCURRENCIES[0])])
    rerun = statistics.median(reruns)
    rows.append({"name": f"fully cached rerun of the probe run at concurrency {CONCURRENCIES[0]}",
                 "value": round(rerun, 3), "unit": "s", "target": None, "met": None,
                 "note": f"{first / rerun:.0f}× faster than the first run (same process)"})
    rows.append({"name": "import aiohttp, orjson, httpx2 and openai (once, excluded above)", "value": round(import_s, 3),
                 "unit": "s", "target": None, "met": None,
                 "note": f"images average {mean_b64 / 1000:.0f} KB as base64"})
    return rows


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        asyncio.run(_serve(float(sys.argv[2])))
    for row in run():
        print(f"{row['name']:75s} {row['value']:>8} {row['unit']:2s}  target {row['target']}  "
              f"met={row['met']}  {row['note']}")
