"""The hf backend's batched generation (-o batch_size) and placement (-o device_map) on the tiny random LLaVA."""

from __future__ import annotations

import asyncio
import json

import pytest

from cfkit.backends import Generation, ImageData, ProbeRequest, RequestMeta, is_async, load_backend
from cfkit.errors import OptionError
from cfkit.images import png_bytes
from support.tiny_llava import CHAT_TEMPLATE
from support.tiny_llava import save_tiny_llava
from support.workspace import gradient_image, run_cli

pytest.importorskip("transformers")
pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory):
    return save_tiny_llava(tmp_path_factory.mktemp("batching") / "tiny", chat_template=CHAT_TEMPLATE, seed=1)


def requests(n: int = 10, *, max_tokens=lambda i: 6) -> list[ProbeRequest]:
    """Prompts of different lengths, some with an image and some without."""
    out = []
    for i in range(n):
        images = (ImageData(png_bytes(gradient_image(48 + 8 * i, 40, i)), "image/png"),) if i % 3 else ()
        out.append(ProbeRequest(system="Answer from the content.", user="Question: Is this fit? " + "Yes No " * (i % 4),
                                images=images, option_ids=("A", "B"), schema=None,
                                generation=Generation(max_tokens=max_tokens(i)),
                                meta=RequestMeta("contextcanvas", f"C{i:02d}", "", "image")))
    return out


async def _gather(backend, batch):
    return await asyncio.gather(*(backend.answer(r) for r in batch), return_exceptions=True)


def test_batched_answers_are_the_one_at_a_time_answers(tiny_vlm):
    batch = requests(10, max_tokens=lambda i: 4 if i % 2 else 7)  # two token limits: never in one batch
    alone = load_backend(f"hf:{tiny_vlm}", {"device": "cpu"})
    together = load_backend(f"hf:{tiny_vlm}", {"device": "cpu", "batch_size": "4"})
    assert not is_async(alone) and is_async(together)  # the runner awaits the batched one
    one_by_one = [alone.answer(r) for r in batch]
    batched = asyncio.run(_gather(together, batch))
    assert [r.raw for r in batched] == [r.raw for r in one_by_one]
    assert [r.usage for r in batched] == [r.usage for r in one_by_one]
    sizes = together._batcher.batches
    assert sum(sizes) == 10 and max(sizes) > 1 and max(sizes) <= 4
    assert [r.usage["completion_tokens"] <= (4 if i % 2 else 7) for i, r in enumerate(batched)] == [True] * 10


def test_a_request_that_cannot_be_prepared_fails_alone(tiny_vlm):
    batch = requests(4)
    broken = ProbeRequest(system="s", user="u", images=(ImageData(b"not a png", "image/png"),), option_ids=("A", "B"),
                          schema=None, generation=Generation(max_tokens=6),
                          meta=RequestMeta("contextcanvas", "BROKEN", "", "image"))
    together = load_backend(f"hf:{tiny_vlm}", {"device": "cpu", "batch_size": "5"})
    results = asyncio.run(_gather(together, [*batch[:2], broken, *batch[2:]]))
    assert isinstance(results[2], Exception) and "BROKEN" in str(results[2])
    assert all(not isinstance(r, Exception) and r.raw for i, r in enumerate(results) if i != 2)


def test_probe_run_with_batches_and_placement(tiny_vlm, tiny_ws):
    args = ["-w", str(tiny_ws), "probe", "run", "-m", f"hf:{tiny_vlm}", "-s", "contextcanvas", "--max-tokens", "5",
            "--json", "-o", "device=cpu"]
    batched = run_cli([*args, "-o", "batch_size=3"])
    summary = json.loads(batched.stdout)
    # Five tokens of a random model are usually cut off: stored whole, but not a clean run (exit 1).
    assert batched.exit_code == (1 if summary["truncated"] else 0), batched.stderr
    assert (summary["sent"], summary["errors"]) == (3, 0)
    # Batching does not change answers, so it is not part of the run's identity: the same run, nothing sent.
    again = run_cli([*args, "-o", "device_map=auto"])
    assert again.exit_code == batched.exit_code, again.stderr
    assert json.loads(again.stdout)["run_id"] == summary["run_id"] and json.loads(again.stdout)["sent"] == 0
    placed = load_backend(f"hf:{tiny_vlm}", {"device_map": "auto"})
    alone = load_backend(f"hf:{tiny_vlm}", {"device": "cpu"})
    assert [placed.answer(r).raw for r in requests(3)] == [alone.answer(r).raw for r in requests(3)]


def test_batch_options_are_checked(tiny_vlm):
    for bad in ({"batch_size": "0"}, {"batch_size": "x"}, {"device_map": "everywhere"}):
        with pytest.raises(OptionError):
            load_backend(f"hf:{tiny_vlm}", bad)
