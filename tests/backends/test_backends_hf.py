"""The hf backend end to end on a tiny randomly initialised LLaVA built here from a config (no hub access)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from cfkit.backends import Generation, ImageData, ProbeRequest, RequestMeta, load_backend
from cfkit.backends.hf_local import fit_square
from cfkit.errors import BackendUnavailable
from cfkit.images import png_bytes
from support.tiny_llava import save_tiny_llava
from support.tiny_llava import CHAT_TEMPLATE
from support.workspace import REPO, aged, gradient_image, run_cli

pytest.importorskip("transformers", reason="the hf extra is not installed: pip install 'cfkit-probes[hf]'")
pytest.importorskip("torch", reason="the hf extra is not installed: pip install 'cfkit-probes[hf]'")


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory) -> Path:
    """A two-layer LLaVA (CLIP vision tower + Llama text model) with a word-level tokenizer, saved locally."""
    return build_tiny_vlm(tmp_path_factory.mktemp("tiny-llava"), seed=0)


def build_tiny_vlm(folder: Path, seed: int) -> Path:
    """The tiny LLaVA of :func:`tiny_vlm`, its weights drawn with ``seed``, saved in ``folder``."""
    return save_tiny_llava(folder, chat_template=CHAT_TEMPLATE, seed=seed)


def request(images: tuple[ImageData, ...]) -> ProbeRequest:
    return ProbeRequest(
        system="Answer from the supplied content only.", user="Question: Is this fit? Options: A Yes B No",
        images=images, option_ids=("A", "B"), schema=None, generation=Generation(max_tokens=6),
        meta=RequestMeta(suite="contextcanvas", case_id="T001", pair_id="", condition="image", yes_option="A"),
    )


def test_answers_greedily_from_a_local_folder(tiny_vlm):
    backend = load_backend(f"hf:{tiny_vlm}", {"device": "cpu", "image_size": "64"})
    image = ImageData(png_bytes(gradient_image(96, 64)), "image/png")
    first = backend.answer(request((image,)))
    second = backend.answer(request((image,)))
    assert first.raw == second.raw  # greedy decoding is deterministic
    assert 1 <= first.usage["completion_tokens"] <= 6
    # The image reached the model: its placeholder became 2 x 2 = 4 patch tokens (the class token is dropped).
    text_only = backend.answer(request(()))
    assert first.usage["prompt_tokens"] - text_only.usage["prompt_tokens"] == 4
    assert first.latency_s > 0 and first.cost_usd is None


def test_bfloat16_weights_get_bfloat16_pixels(tiny_vlm):
    # The dtype auto picks on a GPU: a bfloat16 model answers with the float32 pixels the processor makes.
    backend = load_backend(f"hf:{tiny_vlm}", {"device": "cpu", "dtype": "bfloat16"})
    reply = backend.answer(request((ImageData(png_bytes(gradient_image(64, 64)), "image/png"),)))
    assert reply.usage["completion_tokens"] >= 1
    model, _, _ = backend._load()
    assert str(model.dtype) == "torch.bfloat16"


def test_probe_run_end_to_end_and_a_cached_rerun_does_not_load_the_model(tiny_vlm, tiny_ws, monkeypatch):
    args = ["-w", str(tiny_ws), "probe", "run", "-m", f"hf:{tiny_vlm}", "-s", "contextcanvas", "--max-tokens", "8",
            "--json"]
    first = run_cli(args)
    summary = json.loads(first.stdout)
    assert (summary["total"], summary["sent"], summary["errors"]) == (3, 3, 0)
    # A random model rarely ends within 8 tokens: replies cut off at the limit make the run not clean (exit 1).
    assert first.exit_code == (1 if summary["truncated"] else 0), first.stderr
    assert (summary["truncated"] > 0) == ("cut off at the token limit (8 tokens)" in " ".join(first.stderr.split()))
    from cfkit.backends.hf_local import HFBackend

    def no_loading(self):
        raise AssertionError("a cached rerun loaded the model")

    monkeypatch.setattr(HFBackend, "_load", no_loading)
    again = json.loads(run_cli(args).stdout)
    assert (again["kept"], again["sent"]) == (3, 0)
    exported = run_cli(["-w", str(tiny_ws), "runs", "export", summary["run_id"]]).stdout.splitlines()
    records = [json.loads(line) for line in exported]
    assert [r["model"] for r in records] == [f"hf:{tiny_vlm}"] * 3
    # A random model's words rarely name an option; whatever came back is stored, parsed or not.
    assert all(r["raw"] is not None and (r["answer"] is None) == (r["error"] is not None) for r in records)


def test_missing_weights_give_backend_unavailable_at_construction(tiny_vlm, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # offline or not, nothing is looked up on the hub
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(BackendUnavailable, match=r"'nobody/no-such-vlm' is not in the local Hugging Face cache .*"
                                                 r"Fetch it first: hf download nobody/no-such-vlm"):
        load_backend("hf:nobody/no-such-vlm", {"device": "cpu"})
    with pytest.raises(BackendUnavailable, match="--revision v2"):
        load_backend("hf:nobody/no-such-vlm", {"revision": "v2"})
    with pytest.raises(BackendUnavailable, match="folder .* does not exist"):
        load_backend(f"hf:{tmp_path / 'nowhere'}")
    empty = tmp_path / "empty-model"
    empty.mkdir()
    with pytest.raises(BackendUnavailable, match="has no config.json"):
        load_backend(f"hf:{empty}", {"device": "cpu"})
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    for path in tiny_vlm.iterdir():
        if not path.name.endswith(".safetensors"):
            (no_weights / path.name).write_bytes(path.read_bytes())
    with pytest.raises(BackendUnavailable, match="has a config.json but no weight files"):
        load_backend(f"hf:{no_weights}", {"device": "cpu"})


def test_missing_weights_through_the_cli_is_one_line_and_records_no_run(tiny_ws, tmp_path):
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", f"hf:{tmp_path / 'nothing'}", "-s", "contextcanvas"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: hf backend: folder") and result.stderr.count("\n") == 1
    listed = json.loads(run_cli(["-w", str(tiny_ws), "runs", "list", "--json"]).stdout)
    assert listed == []


@pytest.mark.parametrize("batch_size", ["1", "2"])
def test_a_checkpoint_without_a_chat_template_is_one_line_and_exit_2(tiny_ws, tmp_path, batch_size):
    # Before, every request raised transformers' ValueError and the run ended in a traceback.
    bare = save_tiny_llava(tmp_path / "bare", chat_template=None, seed=0)
    args = ["-w", str(tiny_ws), "probe", "run", "-m", f"hf:{bare}", "-s", "contextcanvas", "--max-tokens", "3",
            "-o", "device=cpu", "-o", f"batch_size={batch_size}"]
    result = run_cli(args)
    assert result.exit_code == 2 and "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and f"'{bare}' has no chat template" in lines[0] and "chat_template.jinja" in lines[0]
    # The template saved as the line says: the folder's files changed, so it is a new run, and it answers.
    (bare / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    fixed = run_cli([*args, "--json"])
    assert json.loads(fixed.stdout)["sent"] == 3 and json.loads(fixed.stdout)["errors"] == 0, fixed.stderr


def test_an_uncached_hub_model_fails_within_seconds_with_no_hub_retries(tiny_ws, tmp_path):
    # A fresh process without HF_HUB_OFFLINE: before, transformers spent minutes retrying the hub here.
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["HF_HOME"] = str(tmp_path / "hf-home")
    env["PYTHONPATH"] = str(REPO)
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "cfkit", "-w", str(tiny_ws), "probe", "run",
                             "-m", "hf:some/uncached-model", "-s", "contextcanvas"],
                            capture_output=True, text=True, env=env, timeout=120)
    elapsed = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    assert elapsed < 20, f"took {elapsed:.1f} s"
    assert "Retrying" not in result.stderr and "huggingface.co" not in result.stderr
    assert "'some/uncached-model' is not in the local Hugging Face cache" in result.stderr
    assert "hf download some/uncached-model" in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    listed = run_cli(["-w", str(tiny_ws), "runs", "list", "--json"])
    assert json.loads(listed.stdout) == []


def hub_cache(cache: Path, repo_id: str, folder: Path, commit: str) -> None:
    """Put ``folder`` into a Hugging Face cache as ``repo_id`` at ``commit`` (blobs, snapshot links, refs/main)."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    for path in folder.iterdir():
        data = path.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = repo / "snapshots" / commit / path.name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)


def test_a_hub_id_runs_from_the_local_cache_and_new_weights_under_its_name_are_asked_again(
        tiny_vlm, tiny_ws, tmp_path, monkeypatch):
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    hub_cache(cache, "org/tiny-vlm", tiny_vlm, "a" * 40)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    args = ["-w", str(tiny_ws), "probe", "run", "-m", "hf:org/tiny-vlm", "-s", "contextcanvas", "--max-tokens",
            "4", "--json", "-o", "device=cpu"]
    first = json.loads(run_cli(args).stdout)
    assert first["sent"] == 3
    run = json.loads(run_cli(["-w", str(tiny_ws), "runs", "show", first["run_id"], "--json"]).stdout)["run"]
    identity = run["options"]["identity"]
    weights = next(p for p in tiny_vlm.iterdir() if p.name.endswith(".safetensors"))
    assert identity["revision"] == "a" * 40
    assert identity["weights_sha256"] == {weights.name: hashlib.sha256(weights.read_bytes()).hexdigest()}
    # Same name, new weights (a new commit on main): a new run, every question asked again, nothing reused.
    hub_cache(cache, "org/tiny-vlm", build_tiny_vlm(tmp_path / "retrained", seed=1), "b" * 40)
    second = json.loads(run_cli(args).stdout)
    assert second["run_id"] != first["run_id"] and (second["sent"], second["from_cache"]) == (3, 0)
    assert json.loads(run_cli(args).stdout)["sent"] == 0  # and that run is then complete


def test_folder_hashes_are_remembered_by_size_and_time(tiny_vlm, tmp_path, monkeypatch):
    from cfkit.backends import hf_snapshot

    folder = tmp_path / "model"
    folder.mkdir()
    for path in tiny_vlm.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    aged(folder)  # written long before the run, as a user's checkpoint is (see the racy test below)
    memo = tmp_path / "store"
    memo.mkdir()
    first = hf_snapshot.find_snapshot(str(folder), memo_dir=memo)
    assert first.files["config.json"] == hashlib.sha256((folder / "config.json").read_bytes()).hexdigest()

    def no_reading(path):
        raise AssertionError(f"{path} was hashed again")

    monkeypatch.setattr(hf_snapshot, "_sha256", no_reading)
    assert hf_snapshot.find_snapshot(str(folder), memo_dir=memo) == first
    monkeypatch.undo()
    (folder / "config.json").write_text((folder / "config.json").read_text() + "\n")
    changed = hf_snapshot.find_snapshot(str(folder), memo_dir=memo)
    assert changed.files["config.json"] != first.files["config.json"]
    assert changed.identity()["files_sha256"] != first.identity()["files_sha256"]


def test_a_file_rewritten_within_a_clock_tick_of_its_hash_is_hashed_again(tiny_vlm, tmp_path):
    # New weights of the same size saved within one tick of the filesystem's clock keep the file's mtime: a
    # remembered hash taken that close to the mtime must not stand for them (else the new checkpoint would get
    # the old identity, and the old checkpoint's cached replies).
    from cfkit.backends import hf_snapshot

    folder = tmp_path / "model"
    folder.mkdir()
    for path in tiny_vlm.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    weights = next(p for p in folder.iterdir() if p.name.endswith(".safetensors"))
    tick = time.time_ns() + 10**9 + 12345  # an mtime the hash cannot be a clock tick after
    os.utime(weights, ns=(tick, tick))
    memo = tmp_path / "store"
    memo.mkdir()
    first = hf_snapshot.find_snapshot(str(folder), memo_dir=memo)
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # the same size, other bytes
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(tick, tick))  # ... and the same mtime
    second = hf_snapshot.find_snapshot(str(folder), memo_dir=memo)
    assert second.weights[weights.name] == hashlib.sha256(bytes(data)).hexdigest() != first.weights[weights.name]
    assert second.identity() != first.identity()


def test_fit_square_pads_keeping_aspect_or_resizes():
    wide = Image.new("RGB", (200, 100), (255, 0, 0))
    padded = fit_square(wide, 448, "pad")
    assert padded.size == (448, 448)
    assert padded.getpixel((224, 224)) == (255, 0, 0)  # the image, centred
    assert padded.getpixel((224, 10)) == (0, 0, 0)  # padding above it (448 x 224 band in the middle)
    assert padded.getpixel((224, 448 - 113)) == (255, 0, 0) and padded.getpixel((224, 448 - 111)) == (0, 0, 0)
    stretched = fit_square(wide, 448, "resize")
    assert stretched.size == (448, 448) and stretched.getpixel((224, 10)) == (255, 0, 0)


def test_options_are_checked():
    from cfkit.errors import InputError

    with pytest.raises(InputError, match="-o image_fit=crop"):
        load_backend("hf:x", {"image_fit": "crop"})
    with pytest.raises(InputError, match="no option 'max_new_tokens'"):
        load_backend("hf:x", {"max_new_tokens": "5"})


def test_the_paper_protocol_on_a_local_model_decodes_256_tokens_at_448_pixels(tiny_vlm, tiny_ws):
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", f"hf:{tiny_vlm}", "-s", "contextcanvas", "--limit",
                      "1", "--protocol", "paper", "-o", "device=cpu", "--json"])
    run_id = json.loads(result.stdout)["run_id"]
    assert result.exit_code == (1 if json.loads(result.stdout)["truncated"] else 0), result.stderr  # a random model
    run = json.loads(run_cli(["-w", str(tiny_ws), "runs", "show", run_id, "--json"]).stdout)["run"]
    assert run["settings"]["generation"] == {"temperature": 0.0, "max_tokens": 256}
    assert run["options"]["options"]["image_size"] == 448 and run["protocol"] == "paper"
    assert run["notes"]["protocol"]["not_applicable"] == []  # the local preset's one option, image_size, applies
    conflict = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", f"hf:{tiny_vlm}", "-s", "contextcanvas",
                        "--protocol", "paper", "--max-tokens", "64"])
    assert conflict.exit_code == 2 and "sets --max-tokens 256" in conflict.stderr
