"""``hf:MODEL_ID_OR_PATH`` — a local vision-language checkpoint through transformers.

``AutoModelForImageTextToText`` and ``AutoProcessor`` with the checkpoint's own
chat template; greedy decoding; device and dtype chosen automatically. Each
image is converted to RGB and fitted to a square (``image_size``, 448 by
default) by padding or resizing before the processor sees it.

Nothing is downloaded: at construction the checkpoint is found on this
machine — a folder as given, a hub id in the local Hugging Face cache only
(:mod:`cfkit.backends.hf_snapshot`) — and a model that is not here fails within
moments with the command that fetches it, before a run is opened. Its
snapshot commit and file hashes are part of the cache identity and are
recorded with the run. The model itself is loaded (always with
``local_files_only``) on the first request, so a fully cached rerun never
loads it.
"""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar, Literal

from pydantic import Field

from cfkit.backends import BackendContext, BackendOptions, Capabilities, ProbeRequest, Reply, cache_options
from cfkit.backends.hf_snapshot import find_snapshot
from cfkit.errors import BackendError, BackendUnavailable, ImageError
from cfkit.hints import install_hint

_NO_CACHE = {"cache": False}


class HFOptions(BackendOptions):
    device: str = Field("auto", description="auto, cpu, cuda, cuda:N or mps", json_schema_extra=_NO_CACHE)
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="auto: bfloat16 on a GPU that supports it, else float32")
    image_size: int = Field(448, ge=16, le=4096, description="side of the square each image is fitted to")
    image_fit: Literal["pad", "resize"] = Field("pad", description="pad: keep the aspect ratio and pad; "
                                                                  "resize: stretch to the square")
    revision: str | None = Field(None, description="hub revision (branch, tag or commit)")
    trust_remote_code: bool = Field(False, description="allow the checkpoint's own Python code to run")


def fit_square(image, size: int, mode: str):
    """Fit a PIL RGB image into a ``size`` x ``size`` square: pad (centred, black) or resize."""
    from PIL import Image

    if mode == "resize":
        return image.resize((size, size), Image.Resampling.BICUBIC)
    scale = size / max(image.size)
    width, height = max(1, round(image.width * scale)), max(1, round(image.height * scale))
    canvas = Image.new("RGB", (size, size), (0, 0, 0))
    canvas.paste(image.resize((width, height), Image.Resampling.BICUBIC), ((size - width) // 2, (size - height) // 2))
    return canvas


class HFBackend:
    """A transformers image-text-to-text model on this machine."""

    kind: ClassVar[str] = "hf"
    capabilities: ClassVar[Capabilities] = Capabilities(images=True, multi_image=False, json_schema=False,
                                                        remote=False)
    Options: ClassVar[type[HFOptions]] = HFOptions
    requires: ClassVar[tuple[str, ...]] = ("transformers", "torch")
    extra: ClassVar[str] = "hf"
    controls: ClassVar[tuple[str, ...]] = ("max_completion_tokens",)  # decoding is greedy; the limit is --max-tokens

    def __init__(self, name: str, options: HFOptions, context: BackendContext | None = None):
        context = context or BackendContext()
        self.name = name
        self.model = f"{self.kind}:{name}"
        self.options = options
        self.priced = False
        # Where the weights are, and what they are: fails now, offline-safe, when they are not on this machine.
        self.snapshot = find_snapshot(name, options.revision, memo_dir=context.store_dir)
        self.cache_identity = cache_options(options) | self.snapshot.identity()
        self.endpoint = None  # a local model; its files are identified by the snapshot above
        self._loaded: tuple[Any, Any, Any] | None = None  # (model, processor, device)
        self._lock = threading.Lock()  # one generate() at a time, whatever the runner's concurrency

    # -- loading -------------------------------------------------------------

    def _device_and_dtype(self, torch):
        device = self.options.device
        if device == "auto":
            if torch.cuda.is_available():
                device = "cuda"
            elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
                device = "mps"
            else:
                device = "cpu"
        dtype = self.options.dtype
        if dtype == "auto":
            use_bf16 = device.startswith("cuda") and torch.cuda.is_bf16_supported()
            dtype = "bfloat16" if use_bf16 else "float32"
        return device, getattr(torch, dtype)

    def _load(self):
        if self._loaded is not None:
            return self._loaded
        try:
            import torch
            from transformers import AutoModelForImageTextToText, AutoProcessor
        except ImportError as exc:
            raise BackendUnavailable(
                f"hf backend: transformers or torch is not installed ({exc.name}). Run: {install_hint('hf')}"
            ) from exc
        source = str(self.snapshot.folder)
        device, dtype = self._device_and_dtype(torch)
        # The snapshot folder was found at construction: nothing is fetched, whatever HF_HUB_OFFLINE says.
        common = {"local_files_only": True, "trust_remote_code": self.options.trust_remote_code}
        try:
            processor = AutoProcessor.from_pretrained(source, **common)
            model = AutoModelForImageTextToText.from_pretrained(source, dtype=dtype, **common)
        except OSError as exc:
            raise BackendUnavailable(
                f"hf backend: cannot load '{self.name}' from {source} ({str(exc).splitlines()[0]}). "
                "Fetch the complete checkpoint again, or pass a local folder: hf:/path/to/model."
            ) from exc
        except ValueError as exc:
            raise BackendUnavailable(
                f"hf backend: '{self.name}' is not an image-text-to-text model transformers can load "
                f"({str(exc).splitlines()[0]}). Choose a vision-language checkpoint."
            ) from exc
        model.to(device)
        model.eval()
        self._loaded = (model, processor, device)
        return self._loaded

    # -- one request -----------------------------------------------------------

    def _images(self, request: ProbeRequest) -> list:
        from cfkit.images import decode_image

        images = []
        for n, image in enumerate(request.images, start=1):
            try:
                decoded = decode_image(image.data, source=f"image {n} of case {request.meta.case_id}")
            except ImageError as exc:
                raise BackendError(str(exc)) from exc
            images.append(fit_square(decoded, self.options.image_size, self.options.image_fit))
        return images

    def _prompt(self, processor, request: ProbeRequest, n_images: int) -> tuple[str, tuple[str, ...]]:
        """The rendered chat prompt, and a note when the system message had to move into the user turn."""
        from jinja2.exceptions import TemplateError

        user = [{"type": "image"} for _ in range(n_images)] + [{"type": "text", "text": request.user}]
        with_system = [{"role": "system", "content": [{"type": "text", "text": request.system}]},
                       {"role": "user", "content": user}]
        try:
            return processor.apply_chat_template(with_system, add_generation_prompt=True, tokenize=False), ()
        except TemplateError as exc:
            # Some chat templates raise on a system turn ("System role not supported"): the system text then
            # opens the user turn, and the run records that the model saw it there.
            merged = [{"role": "user", "content": [{"type": "text", "text": request.system + "\n\n"}] + user}]
            note = (f"{self.model}: the chat template takes no system turn ({exc}); the system message was "
                    "sent at the start of the user turn")
            return processor.apply_chat_template(merged, add_generation_prompt=True, tokenize=False), (note,)

    def answer(self, request: ProbeRequest) -> Reply:
        import torch

        started = time.perf_counter()
        with self._lock:
            model, processor, device = self._load()
            images = self._images(request)
            prompt, notes = self._prompt(processor, request, len(images))
            try:
                inputs = processor(text=prompt, images=images or None, return_tensors="pt")
                inputs = inputs.to(device, dtype=model.dtype)  # casts only the floating tensors (pixel values)
                with torch.inference_mode():
                    output = model.generate(**inputs, do_sample=False, max_new_tokens=request.generation.max_tokens)
            except (RuntimeError, ValueError) as exc:
                raise BackendError(f"hf backend: generation failed for case {request.meta.case_id} ({exc}).") from exc
            prompt_tokens = int(inputs["input_ids"].shape[1])
            new_tokens = output[0, prompt_tokens:]
            text = processor.decode(new_tokens, skip_special_tokens=True).strip()
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": int(new_tokens.shape[0])}
        return Reply(raw=text, usage=usage, latency_s=time.perf_counter() - started, notes=notes)
