"""Probe runner throughput against a loopback Chat Completions server with a fixed 50 ms latency.

1,204 requests (301 synthetic cases x the 4 modality conditions) at concurrency 16:

* the runner's wall time against the ideal 1,204 x 0.05 / 16 s (target: within 15%);
* the same requests issued by the raw ``openai`` AsyncOpenAI client with a
  16-slot semaphore and nothing else, both through ``chat.completions.create``
  and through ``client.post`` (the call the backend makes); target: the runner
  within 10% of the faster of the two;
* a fully cached rerun of the same command (target: at least 50x faster than the first run).

The server runs in its own process (a minimal asyncio HTTP server below) so
that it does not compete with the runner for the interpreter lock. The runner's
time covers everything ``cfkit probe run`` does: rendering 1,204 prompts,
reading images, hashing, sending, parsing and committing each reply to SQLite.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CASES = 301
CONDITIONS = 4
LATENCY = 0.05
CONCURRENCY = 16


def _workspace(root: Path) -> Path:
    """301 two-option cases with distinct questions, captions and a modality subset listing them all."""
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import write_workspace

    write_workspace(root)
    cases, subset = [], []
    for i in range(1, CASES + 1):
        case_id = f"B{i:03d}"
        cases.append(json.dumps({
            "id": case_id, "images": [f"T00{1 + i % 3}.png"], "question": f"Is picture {i} suitable for use {i}?",
            "options": [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}], "gold": "A" if i % 3 else "B",
            "yes_option": "A"}))
        subset.append(case_id)
        (root / "captions" / f"{case_id}.yaml").write_text(
            f"neutral: A field with a grey block, scene {i}.\nevidence: The block covers the path.\n"
            "author: human\nreviewed: true\n")
    (root / "data" / "cases.jsonl").write_text("\n".join(cases) + "\n")
    (root / "probes" / "modality-100.txt").write_text("\n".join(subset) + "\n")
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

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", flush=True)
    await server.serve_forever()


def _start_server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(LATENCY)], stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    return proc, url


async def _raw_client(url: str, bodies: list[dict], *, post: bool = False) -> float:
    """The same request bodies through AsyncOpenAI with a semaphore: the floor the runner is compared to.

    ``post=False`` uses ``chat.completions.create``; ``post=True`` uses
    ``client.post`` with the body as is, the call the openai backend makes.
    """
    import openai
    from openai.types.chat import ChatCompletion

    client = openai.AsyncOpenAI(api_key="bench", base_url=url, max_retries=0, timeout=60)
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(body: dict) -> None:
        async with gate:
            if post:
                completion = await client.post("/chat/completions", cast_to=ChatCompletion, body=body)
            else:
                completion = await client.chat.completions.create(**body)
            assert completion.choices[0].message.content

    started = time.perf_counter()
    await asyncio.gather(*(one(b) for b in bodies))
    elapsed = time.perf_counter() - started
    await client.close()
    return elapsed


def _runner_once(ws, url: str) -> tuple[float, float]:
    """(first run, fully cached rerun) wall seconds of ``cfkit probe run`` in a fresh store."""
    from cfkit.probe import probe_suite
    from cfkit.store import open_store

    n = CASES * CONDITIONS
    if ws.db_path.exists():
        for path in ws.store_dir.glob("cfkit.db*"):
            path.unlink()
    with open_store(ws.db_path) as store:
        started = time.perf_counter()
        first = probe_suite(ws, store, "openai:bench-model", "modality", options={"base_url": url},
                            concurrency=CONCURRENCY)
        first_s = time.perf_counter() - started
        started = time.perf_counter()
        rerun = probe_suite(ws, store, "openai:bench-model", "modality", options={"base_url": url},
                            concurrency=CONCURRENCY)
        rerun_s = time.perf_counter() - started
    assert first.sent == n and first.errors == 0, first
    assert rerun.sent == 0 and rerun.kept == n, rerun
    return first_s, rerun_s


def run(repeats: int = 3) -> list[dict]:
    """Median of ``repeats`` interleaved rounds (runner, then raw client), each in a fresh store."""
    import statistics

    from cfkit.backends import load_backend
    from cfkit.probe import plan_suite
    from cfkit.workspace import load_workspace

    started = time.perf_counter()
    import openai  # noqa: F401 - imported once up front, so neither side is charged the ~1 s import

    import_s = time.perf_counter() - started
    n = CASES * CONDITIONS
    ideal = n * LATENCY / CONCURRENCY
    server, url = _start_server()
    firsts, reruns, raws, posts = [], [], [], []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ws = load_workspace(_workspace(Path(tmp) / "ws"))
            backend = load_backend("openai:bench-model", {"base_url": url})
            plan = plan_suite(ws, "modality", backend.capabilities)
            bodies = [backend._body(item.request) for item in plan.items]
            for _ in range(repeats):
                first_s, rerun_s = _runner_once(ws, url)
                firsts.append(first_s)
                reruns.append(rerun_s)
                raws.append(asyncio.run(_raw_client(url, bodies)))
                posts.append(asyncio.run(_raw_client(url, bodies, post=True)))
    finally:
        server.terminate()
        server.wait()
    first_s, rerun_s, create_s, post_s = (statistics.median(x) for x in (firsts, reruns, raws, posts))
    raw_s = min(create_s, post_s)  # compare with the faster way of using the raw client
    spread = f"median of {repeats}; runs {', '.join(f'{x:.2f}' for x in firsts)} s"
    return [
        {"name": "probe run, 1,204 requests at concurrency 16 (50 ms server)", "value": round(first_s, 3),
         "unit": "s", "target": f"≤ {ideal * 1.15:.2f} s (ideal {ideal:.2f} s + 15%)",
         "met": first_s <= ideal * 1.15,
         "note": f"{first_s / ideal:.3f}× the ideal; {spread}"
                 + ("" if first_s <= ideal * 1.15 else
                    f". Missed because the openai client alone is {post_s / ideal:.2f}× the ideal here: its "
                    "per-request CPU (HTTP stack and response models, ~3 ms) nearly fills the ideal time on one "
                    "core of this 2-core machine; the runner adds the ratio in the row below")},
        {"name": "raw AsyncOpenAI client, chat.completions.create, same requests", "value": round(create_s, 3),
         "unit": "s", "target": None, "met": None,
         "note": f"{create_s / ideal:.3f}× the ideal; runs {', '.join(f'{x:.2f}' for x in raws)} s"},
        {"name": "raw AsyncOpenAI client, client.post, same requests", "value": round(post_s, 3),
         "unit": "s", "target": None, "met": None,
         "note": f"{post_s / ideal:.3f}× the ideal; runs {', '.join(f'{x:.2f}' for x in posts)} s"},
        {"name": "probe run / faster raw client", "value": round(first_s / raw_s, 3), "unit": "×",
         "target": "≤ 1.10", "met": first_s / raw_s <= 1.10,
         "note": "the runner also plans, parses and commits each reply to SQLite"},
        {"name": "fully cached rerun", "value": round(rerun_s, 3), "unit": "s", "target": "≥ 50× faster than the first",
         "met": first_s / rerun_s >= 50, "note": f"{first_s / rerun_s:.0f}× faster than the first run"},
        {"name": "import openai (once per process, excluded above)", "value": round(import_s, 3), "unit": "s",
         "target": None, "met": None, "note": "paid by cfkit probe run only when an openai: model is used"},
    ]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        asyncio.run(_serve(float(sys.argv[2])))
    for row in run():
        print(f"{row['name']:60s} {row['value']:>9} {row['unit']:2s}  target {row['target']}  "
              f"met={row['met']}  {row['note']}")
