"""The workload of bench_probe.py: the synthetic workspace, the loopback server and the lean floor client.

Kept apart from bench_probe.py so that the floor can run as a process of its
own (``python benchmarks/probe_workload.py --floor URL JOBS CONCURRENCY``)
without importing cfkit, and its peak memory can be compared with that of a
whole ``cfkit probe run`` process. Only the standard library is imported at
module level.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LATENCY = 0.05  # seconds the server waits before each reply
#: Width of the noise field the images are cut from; 64 horizontal offsets per row of offsets.
_OFFSETS = 64


def write_jpegs(folder: Path, count: int) -> list[str]:
    """``count`` distinct 640x640 noise JPEGs (quality 45, about 155 KB each), crops of one noise field.

    Crop ``i`` starts at row ``i // 64`` and column ``i % 64``, so no two
    images share their pixels' positions; the field grows with ``count``.
    Returns the file names, ``B0000.jpg``… (one more digit from 10,000 on).
    """
    import numpy as np
    from PIL import Image

    rows = 640 + (count + _OFFSETS - 1) // _OFFSETS
    field = np.random.default_rng(0).integers(0, 256, (rows, 640 + _OFFSETS, 3), dtype=np.uint8)
    width = 4 if count <= 10_000 else 5
    names = []
    for i in range(count):
        y, x = divmod(i, _OFFSETS)
        buffer = io.BytesIO()
        Image.fromarray(field[y:y + 640, x:x + 640]).save(buffer, "JPEG", quality=45)
        name = f"B{i:0{width}d}.jpg"
        (folder / name).write_bytes(buffer.getvalue())
        names.append(name)
    return names


def write_workspace(root: Path, count: int) -> Path:
    """A workspace of ``count`` two-option cases, each with its own image (the contextcanvas suite's requests)."""
    sys.path.insert(0, str(REPO / "tests"))
    from support.workspace import write_workspace as tiny_workspace

    tiny_workspace(root)  # cfkit.toml, folders, one spec; its three cases are replaced below
    names = write_jpegs(root / "data" / "images", count)
    cases = [json.dumps({
        "id": Path(name).stem, "images": [name], "question": f"Is picture {i} suitable for use {i}?",
        "options": [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}], "gold": "A" if i % 3 else "B",
        "yes_option": "A"}) for i, name in enumerate(names)]
    (root / "data" / "cases.jsonl").write_text("\n".join(cases) + "\n")
    return root


REPLY = json.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench-model",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": '{"answer": "A", "reason": "bench", "confidence": "low"}'}}],
    "usage": {"prompt_tokens": 100, "completion_tokens": 12, "total_tokens": 112},
}).encode()


async def serve(latency: float) -> None:
    """A minimal asyncio HTTP/1.1 server: every POST gets the same Chat Completions body after ``latency`` s.

    It is leaner than tests/support/chat_api_server.py (no thread per connection, no
    JSON parsing), so the figures measure the client side, not the server.
    """
    first: list[float] = []  # wall clock (time.time) of the first request since the last GET /first

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if head.startswith(b"GET /first"):  # the benchmark asks when the first request came, and resets
                    body = json.dumps({"first": first[0] if first else None}).encode()
                    first.clear()
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                                 + str(len(body)).encode() + b"\r\n\r\n" + body)
                    await writer.drain()
                    continue
                if not first:
                    first.append(time.time())
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                await asyncio.sleep(latency)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                             + str(len(REPLY)).encode() + b"\r\n\r\n" + REPLY)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionResetError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, limit=2 ** 20, backlog=1024)
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", flush=True)
    await server.serve_forever()


def first_request_at(url: str) -> float | None:
    """The server's wall clock (``time.time``) when the first request since the last call came; resets it."""
    import urllib.request

    root = url.rsplit("/v1", 1)[0]
    with urllib.request.urlopen(root + "/first", timeout=10) as response:
        return json.loads(response.read())["first"]


def pin_to_one_core(server_pid: int) -> set[int] | None:
    """Pin this process (and so every process it starts) to CPU 0 and the server to the other CPUs; the
    affinity this process had, to restore, or None where affinity cannot be set."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    before = os.sched_getaffinity(0)
    others = before - {0}
    if others:
        os.sched_setaffinity(server_pid, others)
    os.sched_setaffinity(0, {0})
    return before


def start_server() -> tuple[subprocess.Popen, str]:
    """The server in its own process (so it does not compete for this interpreter's lock), and its base URL."""
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(LATENCY)], stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def lean_body(system: str, user: str, image: Path, encode=base64.b64encode) -> dict:
    """The Chat Completions body for one request: the prompt and the image as a base64 data URL (``encode``:
    the standard library's encoder, or another that gives the same bytes)."""
    data = encode(image.read_bytes()).decode("ascii")
    return {"model": "bench-model", "temperature": 0, "max_tokens": 512,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": [{"type": "text", "text": user},
                                                      {"type": "image_url",
                                                       "image_url": {"url": f"data:image/jpeg;base64,{data}"}}]}]}


async def floor(url: str, jobs: list[tuple[str, str, Path]], concurrency: int, encode=base64.b64encode) -> float:
    """The lean aiohttp client: read, encode, post, decode; a semaphore and nothing else. Wall seconds.

    ``encode`` is the standard library's base64 encoder (the floor), or pybase64's (what cfkit uses where it is
    installed: the floor's like-for-like)."""
    import aiohttp
    import orjson

    headers = {"content-type": "application/json", "authorization": "Bearer bench"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        gate = asyncio.Semaphore(concurrency)

        async def one(job) -> None:
            async with gate:
                async with session.post(url + "/chat/completions", data=orjson.dumps(lean_body(*job, encode)),
                                        headers=headers) as response:
                    reply = orjson.loads(await response.read())
                assert reply["choices"][0]["message"]["content"]

        started = time.perf_counter()
        await asyncio.gather(*(one(job) for job in jobs))
        return time.perf_counter() - started


def write_jobs(path: Path, jobs: list[tuple[str, str, Path]]) -> None:
    """The floor's jobs (system prompt, user prompt, image path) as JSON, for a floor process."""
    path.write_text(json.dumps([[system, user, str(image)] for system, user, image in jobs]))


def _floor_process(url: str, jobs_file: str, concurrency: int) -> None:
    jobs = [(system, user, Path(image)) for system, user, image in json.loads(Path(jobs_file).read_text())]
    elapsed = asyncio.run(floor(url, jobs, concurrency))
    print(f"{elapsed:.3f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        asyncio.run(serve(float(sys.argv[2])))
    elif sys.argv[1:2] == ["--floor"]:
        _floor_process(sys.argv[2], sys.argv[3], int(sys.argv[4]))
