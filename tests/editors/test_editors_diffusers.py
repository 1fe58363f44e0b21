"""The diffusers engine end to end on a tiny randomly initialised inpainting pipeline.

The pipeline is built from configs here (a UNet with 9 input channels, a small
VAE, a 2-layer CLIP text encoder, a CLIP tokenizer from vocab/merges files
written here) and saved to a folder, which the engine loads as its model with
``local_files_only=True``. Nothing touches the hub (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cfkit.composite import composite_region
from cfkit.edit import make_edit
from cfkit.editors import EditRequest
from cfkit.editors.diffusers_inpaint import DiffusersEditor, model_family, pipeline_size
from cfkit.errors import EditorUnavailable, EditRefused
from cfkit.workspace import load_workspace
from support.images_api_server import ImagesAPI, serve
from support.store_sql import table_rows
from support.workspace import gradient_image

torch = pytest.importorskip("torch", reason="the diffusers extra is not installed: pip install 'cfkit-probes[diffusers]'")
pytest.importorskip("diffusers", reason="the diffusers extra is not installed: pip install 'cfkit-probes[diffusers]'")


def _write_tokenizer(folder: Path) -> None:
    """A byte-level BPE vocabulary of single letters: enough to tokenize English prompts."""
    folder.mkdir(parents=True)
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for code in range(ord("a"), ord("z") + 1):
        vocab[chr(code)] = len(vocab)
        vocab[chr(code) + "</w>"] = len(vocab)
    vocab["."] = len(vocab)
    vocab[".</w>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")


@pytest.fixture(scope="module")
def tiny_pipeline(tmp_path_factory) -> Path:
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionInpaintPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    root = tmp_path_factory.mktemp("tiny-inpaint")
    _write_tokenizer(root / "tok")
    tokenizer = CLIPTokenizer.from_pretrained(str(root / "tok"), model_max_length=77)
    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        block_out_channels=(8, 16), layers_per_block=1, norm_num_groups=4, sample_size=16, in_channels=9,
        out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=16, attention_head_dim=2)
    vae = AutoencoderKL(
        block_out_channels=[8, 16], norm_num_groups=4, in_channels=3, out_channels=3,
        down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2,
        latent_channels=4, sample_size=32)
    text_encoder = CLIPTextModel(CLIPTextConfig(
        bos_token_id=0, eos_token_id=1, pad_token_id=1, hidden_size=16, intermediate_size=32,
        num_attention_heads=2, num_hidden_layers=2, vocab_size=len(tokenizer), max_position_embeddings=77))
    pipe = StableDiffusionInpaintPipeline(
        vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet,
        scheduler=DDIMScheduler(steps_offset=1), safety_checker=None, feature_extractor=None,
        requires_safety_checker=False)
    folder = root / "pipeline"
    pipe.save_pretrained(folder)
    return folder


def _request(seed=3, n=1) -> EditRequest:
    mask = np.zeros((64, 96), np.uint8)
    mask[16:32, 24:48] = 255
    return EditRequest(spec_id="TX01", prompt="make the block green.", image=gradient_image(96, 64, 0), mask=mask,
                       n=n, seed=seed)


def test_family_and_working_size():
    assert model_family("black-forest-labs/FLUX.1-Fill-dev").name == "flux-fill"
    assert model_family("diffusers/stable-diffusion-xl-1.0-inpainting-0.1").name == "sdxl"
    assert model_family("stable-diffusion-v1-5/stable-diffusion-inpainting").name == "sd"
    assert pipeline_size((96, 64), 512, 8) == (512, 344)
    assert pipeline_size((1000, 333), 1024, 16) == (1024, 336)


def test_local_folder_is_read_by_its_model_index(tiny_pipeline):
    assert model_family(str(tiny_pipeline)).name == "sd"


def test_output_is_at_the_source_size_and_seeded(tiny_pipeline):
    editor = DiffusersEditor(DiffusersEditor.Options(model=str(tiny_pipeline), steps=2, resolution=64))
    first = editor.edit(_request(seed=3, n=2))
    again = editor.edit(_request(seed=3, n=1))
    other = editor.edit(_request(seed=4, n=1))
    assert [im.shape for im in first.images] == [(64, 96, 3), (64, 96, 3)]
    assert first.images[0].dtype == np.uint8
    assert first.params["height"] == 40 and first.params["width"] == 64  # always passed, multiples of 8
    assert first.params["device"] == "cpu" and first.params["dtype"] == "float32"
    assert first.params["seeds"] == [3, 4]
    assert np.array_equal(first.images[0], again.images[0])  # same seed, same image
    assert np.array_equal(first.images[1], other.images[0])  # candidate 1 used seed 3 + 1
    assert not np.array_equal(first.images[0], other.images[0])
    unseeded = [editor.edit(_request(seed=None)) for _ in range(2)]
    assert unseeded[0].seed != unseeded[1].seed  # drawn, recorded, and reproducing:
    assert np.array_equal(editor.edit(_request(seed=unseeded[0].seed)).images[0], unseeded[0].images[0])


def test_missing_weights_name_the_model_and_how_to_fetch_them():
    editor = DiffusersEditor(DiffusersEditor.Options(model="cfkit-tests/absent-inpainting-model"))
    with pytest.raises(EditorUnavailable, match=r"'hf download cfkit-tests/absent-inpainting-model'"):
        editor.edit(_request())


@pytest.mark.parametrize("index", [
    {"_class_name": "StableDiffusionInpaintPipeline", "unet": ["diffusers", "UNet2DConditionModel"]},
    {"_class_name": "StableDiffusionInpaintPipeline", "_diffusers_version": "0.42.1",
     "unet": ["diffusers", "UNet2DConditionModel"]},
], ids=["malformed-index", "missing-weights"])
def test_a_broken_local_pipeline_is_a_clear_unavailable(tmp_path, index):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "model_index.json").write_text(json.dumps(index))
    with pytest.raises(EditorUnavailable, match=r"cannot load model '.*broken' from local files"):
        DiffusersEditor(DiffusersEditor.Options(model=str(folder))).edit(_request())


def test_missing_diffusers_package_is_unavailable(tiny_pipeline, monkeypatch):
    monkeypatch.setitem(sys.modules, "diffusers", None)  # makes `import diffusers` raise ImportError
    with pytest.raises(EditorUnavailable, match=r"pip install 'cfkit-probes\[diffusers\]'"):
        DiffusersEditor(DiffusersEditor.Options(model=str(tiny_pipeline))).edit(_request())


def test_cfkit_edit_with_diffusers_composite_keeps_the_source_outside_the_dilated_mask(tiny_pipeline, tiny_ws):
    ws = load_workspace(tiny_ws)
    outcome = make_edit(ws, "TX01", engine="diffusers", seed=11,
                        options={"diffusers": {"model": str(tiny_pipeline), "steps": 2, "resolution": 64}})
    record = outcome.records[0]
    source = np.asarray(Image.open(tiny_ws / "data" / "images" / "T001.png"))
    mask = np.asarray(Image.open(tiny_ws / "interventions" / "masks" / "TX01.png"))
    raw = np.asarray(Image.open(record.raw_path))
    comp = np.asarray(Image.open(record.composite_path))
    assert raw.shape == comp.shape == source.shape
    region = composite_region(mask)
    assert np.array_equal(comp[~region], source[~region])  # exactly the source outside
    assert np.array_equal(comp[mask > 0], raw[mask > 0])  # the edit itself, untouched, inside
    assert not np.array_equal(raw[~region], source[~region])  # the raw output did change things outside
    assert record.engine == "diffusers" and record.seed == 11 and record.model == str(tiny_pipeline)
    assert record.params["steps"] == 2 and record.params["pipeline"] == "StableDiffusionInpaintPipeline"


@pytest.fixture(scope="module")
def flagging_pipeline(tiny_pipeline, tmp_path_factory) -> Path:
    """The tiny pipeline plus a tiny safety checker whose thresholds flag every image."""
    from diffusers import StableDiffusionInpaintPipeline
    from diffusers.pipelines.stable_diffusion.safety_checker import StableDiffusionSafetyChecker
    from transformers import CLIPConfig, CLIPImageProcessor

    pipe = StableDiffusionInpaintPipeline.from_pretrained(str(tiny_pipeline), local_files_only=True)
    config = CLIPConfig(
        text_config={"hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2, "num_hidden_layers": 1,
                     "vocab_size": 60},
        vision_config={"hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2, "num_hidden_layers": 1,
                       "image_size": 32, "patch_size": 8},
        projection_dim=8)
    checker = StableDiffusionSafetyChecker(config)
    with torch.no_grad():
        checker.concept_embeds_weights.fill_(-10.0)  # every image scores above every threshold
    extractor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    pipe.register_modules(safety_checker=checker, feature_extractor=extractor)
    pipe.register_to_config(requires_safety_checker=True)
    folder = tmp_path_factory.mktemp("flagging") / "pipeline"
    pipe.save_pretrained(folder)
    return folder


def test_a_safety_checker_blackout_is_recorded_as_a_refusal(flagging_pipeline, tiny_ws):
    ws = load_workspace(tiny_ws)
    with pytest.raises(EditRefused, match="safety checker blanked candidate 0"):
        make_edit(ws, "TX01", engine="diffusers", seed=5,
                  options={"diffusers": {"model": str(flagging_pipeline), "steps": 1, "resolution": 64}})
    rows = [tuple(r.values()) for r in table_rows(ws.db_path, "edits", "engine, status, raw_path")]
    assert rows == [("diffusers", "refused", None)]
    assert not ws.edits_dir.exists()


def test_auto_falls_back_to_diffusers_when_the_api_stays_unreachable(tiny_pipeline, tiny_ws, monkeypatch):
    api = ImagesAPI(script=[(503, {"error": {"message": "overloaded"}})] * 2)
    url, server = serve(api)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    try:
        outcome = make_edit(load_workspace(tiny_ws), "TX01", engine="auto", seed=1, options={
            "openai": {"backoff": 0, "max_retries": 1},
            "diffusers": {"model": str(tiny_pipeline), "steps": 1, "resolution": 64}})
    finally:
        server.shutdown()
        server.server_close()
    assert len(api.requests) == 2
    assert [(a.engine, a.outcome) for a in outcome.attempts] == [("openai", "unreachable"), ("diffusers", "used")]
    engine, fallback = table_rows(tiny_ws, "edits", "engine, fallback")[0].values()
    assert engine == "diffusers"
    assert fallback.startswith("openai unreachable: openai: gave up after 2 attempts; last: HTTP 503")
