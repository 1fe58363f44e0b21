"""The diffusers engine: a local inpainting pipeline, the fallback when the API cannot run.

The pipeline is chosen by model id: FLUX Fill models (``…FLUX…Fill…``, or a
local folder whose ``model_index.json`` names ``FluxFillPipeline``) are built
with ``FluxFillPipeline``; everything else (SD 1.x/2.x, SDXL inpainting) with
``AutoPipelineForInpainting``. A local folder works as a model id.

Weights are only ever read from the local Hugging Face cache or a local folder
(``local_files_only=True``): a multi-gigabyte download should be a deliberate
step, so missing weights end with a message naming the model and the command
that fetches it. Device and dtype are chosen automatically (cuda → float16,
bfloat16 for FLUX; mps → float16; cpu → float32). The source is resized so its
longer side is ``resolution`` (default 512 for SD, 1024 for SDXL and FLUX),
both sides rounded to the pipeline's multiple, and the output is resized back
to the source's exact size. Candidate ``i`` uses seed ``seed + i``; without a
seed one is drawn at random and recorded.
"""

from __future__ import annotations

import json
import secrets
import warnings
from dataclasses import dataclass
from typing import ClassVar, Literal
from pathlib import Path

import numpy as np
from pydantic import Field

from cfkit.editors import Editor, EditorOptions, EditRequest, EditResult, resize_mask, resize_rgb
from cfkit.errors import EditorError, EditorUnavailable, EditRefused
from cfkit.hints import download_hint, install_hint


@dataclass(frozen=True)
class Family:
    """What a model id implies for building and sizing its pipeline."""

    name: str  # "sd", "sdxl" or "flux-fill"
    resolution: int
    multiple: int
    guidance: float


FAMILIES = {
    "sd": Family("sd", 512, 8, 7.5),
    "sdxl": Family("sdxl", 1024, 8, 7.5),
    "flux-fill": Family("flux-fill", 1024, 16, 30.0),
}


def model_family(model: str) -> Family:
    """Guess the family from a local folder's ``model_index.json``, else from the id's wording."""
    index = Path(model).expanduser() / "model_index.json"
    if index.is_file():
        try:
            found = json.loads(index.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            found = {}
        class_name = str(found.get("_class_name", "")) if isinstance(found, dict) else ""
        if class_name.startswith("Flux"):
            return FAMILIES["flux-fill"]
        if "XL" in class_name:
            return FAMILIES["sdxl"]
        return FAMILIES["sd"]
    lowered = model.lower()
    if "flux" in lowered and "fill" in lowered:
        return FAMILIES["flux-fill"]
    if "xl" in lowered:
        return FAMILIES["sdxl"]
    return FAMILIES["sd"]


def pipeline_size(source: tuple[int, int], resolution: int, multiple: int) -> tuple[int, int]:
    """``(width, height)`` with the longer side near ``resolution``, both multiples of ``multiple``."""
    width, height = source
    scale = resolution / max(width, height)
    return (max(multiple, round(width * scale / multiple) * multiple),
            max(multiple, round(height * scale / multiple) * multiple))


def fetch_hint(model: str) -> str:
    return (f"Fetch it on a machine with network: '{download_hint(model)}' (then copy the cache), "
            "or pass -o model=FOLDER (or set model under [edit.engines.diffusers] in cfkit.toml) for a local pipeline folder.")


class DiffusersEditor(Editor):
    """Local inpainting with a diffusers pipeline.

    ``steps`` is the number of denoising steps, ``guidance`` the classifier-free
    guidance scale (default per family), ``strength`` how far the masked region
    is re-noised (1 = fully), ``resolution`` the longer side the pipeline works
    at, ``device`` "auto", "cuda", "mps" or "cpu".
    """

    name: ClassVar[str] = "diffusers"
    max_candidates: ClassVar[int] = 16
    auto_rank: ClassVar[int | None] = 20  # tried after openai by --engine auto

    class Options(EditorOptions):
        model: str = Field("stable-diffusion-v1-5/stable-diffusion-inpainting",
                           description="hub id (from the local cache) or a local pipeline folder")
        steps: int = Field(30, ge=1, le=1000, description="denoising steps")
        guidance: float | None = Field(None, ge=0, le=100, description="guidance scale (default per family)")
        strength: float = Field(1.0, gt=0, le=1, description="how far the masked region is re-noised")
        resolution: int | None = Field(None, ge=64, le=4096, description="longer side the pipeline works at")
        device: Literal["auto", "cuda", "mps", "cpu"] = Field("auto", description="where the pipeline runs")
        negative_prompt: str | None = Field(None, description="what the pipeline should avoid")

    def __init__(self, options: "DiffusersEditor.Options"):
        self.options = options
        self.model = options.model
        self.family = model_family(options.model)
        self.steps = options.steps
        self.guidance = self.family.guidance if options.guidance is None else options.guidance
        self.strength = options.strength
        self.resolution = options.resolution or self.family.resolution
        self.device = options.device
        self.negative_prompt = options.negative_prompt
        self._pipeline = None

    def size_for(self, source: tuple[int, int]) -> tuple[int, int]:
        return pipeline_size(source, self.resolution, self.family.multiple)

    def describe(self, request: EditRequest) -> dict:
        """What :meth:`edit` would run, computed without loading anything (for --dry-run)."""
        width, height = self.size_for(request.size)
        return {"model": self.model, "size": f"{width}x{height}", "steps": self.steps, "guidance": self.guidance,
                "strength": self.strength}

    def edit(self, request: EditRequest) -> EditResult:
        # 1. Can it run here? Weights first: that check needs no torch import.
        self._check_weights_present()
        pipe, torch, device, dtype = self._load()

        # 2. Prepare inputs at a size the pipeline accepts.
        width, height = self.size_for(request.size)
        from PIL import Image

        image = Image.fromarray(resize_rgb(request.image, (width, height)))
        mask = Image.fromarray(np.where(resize_mask(request.mask, (width, height)) > 127, 255, 0).astype(np.uint8))
        # Without --seed, draw one: repeated calls then give new candidates, and the
        # recorded seed still reproduces each of them.
        seed = secrets.randbelow(2**31) if request.seed is None else request.seed
        # On mps, seed a cpu generator: the portable choice diffusers' reproducibility guide suggests.
        gen_device = "cpu" if device == "mps" else device

        # 3. Run one candidate per call: batching changes the arithmetic slightly, and
        #    candidate i should be reproducible from its own recorded seed alone.
        call = {"prompt": request.prompt, "image": image, "mask_image": mask, "height": height, "width": width,
                "num_inference_steps": self.steps, "guidance_scale": self.guidance, "strength": self.strength,
                "output_type": "np"}
        if self.negative_prompt and self.family.name != "flux-fill":
            call["negative_prompt"] = self.negative_prompt
        outputs = []
        for i in range(request.n):
            generator = torch.Generator(device=gen_device).manual_seed(seed + i)
            try:
                with torch.inference_mode():
                    output = pipe(**call, generator=generator)
            except torch.cuda.OutOfMemoryError as exc:
                raise EditorError(f"diffusers: out of GPU memory at {width}x{height}; lower 'resolution' "
                                  "or free the GPU.") from exc
            except (RuntimeError, ValueError) as exc:
                raise EditorError(f"diffusers: the pipeline failed ({type(exc).__name__}: {exc}).") from exc
            # SD checkpoints ship a safety checker that blacks out what it flags: that is a refusal.
            if any(getattr(output, "nsfw_content_detected", None) or ()):
                raise EditRefused(f"diffusers: the pipeline's safety checker blanked candidate {i} (seed {seed + i}).")
            outputs.append(np.asarray(output.images)[0])

        # 4. Back to uint8 at the source's exact size.
        images = tuple(resize_rgb(np.clip(np.rint(arr * 255.0), 0, 255).astype(np.uint8), request.size)
                       for arr in outputs)
        params = {"pipeline": type(pipe).__name__, "family": self.family.name, "steps": self.steps,
                  "guidance": self.guidance, "strength": self.strength, "height": height, "width": width,
                  "device": device, "dtype": str(dtype).removeprefix("torch."),
                  "seeds": [seed + i for i in range(request.n)]}
        if "negative_prompt" in call:
            params["negative_prompt"] = self.negative_prompt
        notes = ()
        if (width, height) != request.size:
            notes = (f"ran at {width}x{height} (source {request.size[0]}x{request.size[1]}); mapped back to the source size",)
        return EditResult(images=images, model=self.model, params=params, seed=seed, notes=notes)

    # ── loading ──────────────────────────────────────────────────────────────

    def _check_weights_present(self) -> None:
        if Path(self.model).expanduser().is_dir():
            return
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError as exc:
            raise EditorUnavailable("diffusers: the 'diffusers' extra is not installed. "
                                    f"Run: {install_hint('diffusers')}.") from exc
        try:
            found = try_to_load_from_cache(self.model, "model_index.json")
        except ValueError as exc:  # not a valid repo id
            raise EditorUnavailable(f"diffusers: model '{self.model}' is neither a local folder nor a "
                                    f"Hugging Face model id ({exc}). Fix the diffusers model (-o model=… or [edit.engines.diffusers] model).") from exc
        if not isinstance(found, str):
            raise EditorUnavailable(f"diffusers: model '{self.model}' is not in the local Hugging Face cache "
                                    f"and cfkit never downloads weights implicitly. {fetch_hint(self.model)}")

    def _load(self):
        try:
            import torch
            import diffusers
        except ImportError as exc:
            raise EditorUnavailable("diffusers: torch and diffusers are not installed. "
                                    f"Run: {install_hint('diffusers')}.") from exc
        device = self._device(torch)
        if device == "cpu":
            dtype = torch.float32
        elif self.family.name == "flux-fill" and device == "cuda":
            dtype = torch.bfloat16
        else:
            dtype = torch.float16
        if self._pipeline is None:
            cls = diffusers.FluxFillPipeline if self.family.name == "flux-fill" else diffusers.AutoPipelineForInpainting
            local = Path(self.model).expanduser()
            try:
                with warnings.catch_warnings():
                    # Newer diffusers rename torch_dtype to dtype; the old name works in every supported version.
                    warnings.filterwarnings("ignore", message=".*torch_dtype.*", category=FutureWarning)
                    pipe = cls.from_pretrained(str(local) if local.is_dir() else self.model, torch_dtype=dtype,
                                               local_files_only=True)
            except Exception as exc:  # a missing file, a malformed index or config: diffusers raises many types
                raise EditorUnavailable(f"diffusers: cannot load model '{self.model}' from local files "
                                        f"({str(exc).splitlines()[0][:200]}). {fetch_hint(self.model)}") from exc
            pipe.set_progress_bar_config(disable=True)
            self._pipeline = pipe.to(device)
        return self._pipeline, torch, device, dtype

    def _device(self, torch) -> str:
        if self.device != "auto":
            if self.device == "cuda" and not torch.cuda.is_available():
                raise EditorUnavailable("diffusers: device 'cuda' was asked for but no CUDA GPU is visible.")
            return self.device
        if torch.cuda.is_available():
            return "cuda"
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return "mps"
        return "cpu"
