"""The hf backend's throughput on CPU with a tiny model: batched, one request at a time, and a bare generate loop.

The model is the tiny random LLaVA of the tests (tests/support/tiny_llava.py, a
two-layer CLIP + Llama, 28-pixel images), answering 32 requests (two in
three with an image, prompts of four lengths) with 16 new tokens each:

* **bare loop** — the floor: the processor and ``model.generate`` called
  one request at a time in a plain loop, images already decoded and fitted;
* **one at a time** — the backend as a run uses it by default (``batch_size``
  1, each request in a worker thread as the runner sends it): decoding and
  fitting each image, the chat template, generate, decode;
* **batched** — ``-o batch_size=8``: the backend's batcher answering eight
  requests with one ``generate()``, 16 requests in flight as the runner keeps
  them.

Throughput is requests per second, the median of five rounds (each round
runs all three, interleaved); the ratios are taken within each round. One
torch thread (no spinning threads on a shared machine), and every
generate() in a worker thread, as in a run (torch's CPU threading differs
in the main thread and would enter the comparison). A model this small is
cheap per token, so the figures mostly show per-call overhead shared by a
batch. It measures a CPU only; nothing here is measured on a GPU.
No target: issue 30 asks for the figures.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

N = 32
BATCH = 8
NEW_TOKENS = 16
ROUNDS = 5


def _requests():
    from support.workspace import gradient_image

    from cfkit.backends import Generation, ImageData, ProbeRequest, RequestMeta
    from cfkit.images import png_bytes

    return [ProbeRequest(system="Answer from the content.", user="Question: Is this fit? " + "Yes No " * (i % 4),
                         images=(ImageData(png_bytes(gradient_image(64, 48, i)), "image/png"),) if i % 3 else (),
                         option_ids=("A", "B"), schema=None, generation=Generation(max_tokens=NEW_TOKENS),
                         meta=RequestMeta("contextcanvas", f"C{i:02d}", "", "image")) for i in range(N)]


def _bare(folder: Path, requests) -> float:
    """A plain transformers loop: one processor call and one generate() a request."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from cfkit.backends.hf_local import fit_square
    from cfkit.images import decode_image

    processor = AutoProcessor.from_pretrained(folder)
    model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()
    prepared = []
    for r in requests:
        images = [fit_square(decode_image(i.data, source="bench"), 448, "pad") for i in r.images]
        user = [{"type": "image"} for _ in images] + [{"type": "text", "text": r.user}]
        prompt = processor.apply_chat_template([{"role": "system", "content": [{"type": "text", "text": r.system}]},
                                                {"role": "user", "content": user}], add_generation_prompt=True,
                                               tokenize=False)
        prepared.append((prompt, images or None))
    def loop() -> float:
        started = time.perf_counter()
        for prompt, images in prepared:
            inputs = processor(text=prompt, images=images, return_tensors="pt")
            with torch.inference_mode():
                model.generate(**inputs, do_sample=False, max_new_tokens=NEW_TOKENS)
        return len(requests) / (time.perf_counter() - started)

    return _in_a_worker_thread(loop)


def _in_a_worker_thread(work):
    """``work()`` run in a worker thread, where the runner runs every local model's generate() (torch's CPU
    threading differs between the main thread and the others, which would otherwise enter the comparison)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(work).result()


def _backend(folder: Path, requests, batch_size: int) -> float:
    from cfkit.backends import load_backend

    backend = load_backend(f"hf:{folder}", {"device": "cpu", "dtype": "float32", "batch_size": str(batch_size)})
    backend._load()  # loading is not what is measured
    started = time.perf_counter()
    if batch_size == 1:  # as the runner sends to a local model: one request at a time, in a worker thread
        async def one_by_one() -> None:
            for r in requests:
                await asyncio.to_thread(backend.answer, r)

        asyncio.run(one_by_one())
    else:
        async def run() -> None:
            gate = asyncio.Semaphore(2 * batch_size)

            async def one(r) -> None:
                async with gate:
                    await backend.answer(r)

            await asyncio.gather(*(one(r) for r in requests))

        asyncio.run(run())
    return len(requests) / (time.perf_counter() - started)


def run() -> list[dict]:
    import torch

    from support.tiny_llava import CHAT_TEMPLATE, save_tiny_llava

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = save_tiny_llava(Path(tmp) / "tiny", chat_template=CHAT_TEMPLATE, seed=0, suppress_special=True)
        requests = _requests()
        bare, single, batched = [], [], []
        for _ in range(ROUNDS):
            bare.append(_bare(folder, requests))
            single.append(_backend(folder, requests, 1))
            batched.append(_backend(folder, requests, BATCH))
    gain = [b / s for b, s in zip(batched, single)]
    overhead = [s / f for s, f in zip(single, bare)]
    floor = [b / f for b, f in zip(batched, bare)]
    note = f"median of {ROUNDS}; {N} requests, {NEW_TOKENS} new tokens each, CPU, 1 torch thread"
    return [
        {"name": "bare transformers loop (the floor)", "value": statistics.median(bare), "unit": "req/s",
         "target": None, "met": None, "note": note},
        {"name": "hf backend, one at a time", "value": statistics.median(single), "unit": "req/s", "target": None,
         "met": None, "note": f"{note}; {statistics.median(overhead):.2f}x the floor"},
        {"name": f"hf backend, batch_size={BATCH}", "value": statistics.median(batched), "unit": "req/s",
         "target": None, "met": None, "note": f"{note}; {statistics.median(floor):.2f}x the floor"},
        {"name": "batched / one at a time", "value": statistics.median(gain), "unit": "x", "target": None,
         "met": None, "note": f"ratio within each round ({', '.join(f'{g:.2f}' for g in gain)})"},
    ]


if __name__ == "__main__":
    for row in run():
        print(row)
