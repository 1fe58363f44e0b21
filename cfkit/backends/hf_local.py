"""``hf:MODEL_ID_OR_PATH`` — a local vision-language checkpoint through transformers.

``AutoModelForImageTextToText`` and ``AutoProcessor`` with the checkpoint's own
chat template (a checkpoint without one is refused in one line when it loads,
before its weights are read); greedy decoding; device and dtype chosen automatically, or
``device_map`` to spread a large model over every visible GPU (accelerate's
placement). ``batch_size`` > 1 answers that many requests with one
``generate()`` (:mod:`cfkit.backends.hf_batching`; prompts left-padded; the
same answers as one at a time, so it is not part of the cache identity). Each
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

from cfkit.backends import Backend, BackendContext, BackendOptions, Capabilities, ProbeRequest, Reply, cache_options
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
    batch_size: int = Field(1, ge=1, le=256, description="requests answered by one generate() call (prompts "
                                                         "left-padded); -j defaults to twice this",
                            json_schema_extra=_NO_CACHE)
    device_map: Literal["auto", "balanced", "balanced_low_0", "sequential"] | None = Field(
        None, description="spread the model over every visible GPU (accelerate's placement); replaces device",
        json_schema_extra=_NO_CACHE)


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


class HFBackend(Backend):
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
        self.batch_size = options.batch_size
        if options.batch_size > 1:  # requests wait, briefly, to be answered together (cfkit.backends.hf_batching)
            from cfkit.backends.hf_batching import Batcher

            self._batcher = Batcher(self._generate, options.batch_size)
            self.answer = self._batcher.answer  # type: ignore[method-assign]  # async: the runner awaits it

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
        placement = {"device_map": self.options.device_map} if self.options.device_map else {}
        try:
            processor = AutoProcessor.from_pretrained(source, **common)
            self._check_chat_template(processor, source)  # before the weights load: a prompt could not be built
            model = AutoModelForImageTextToText.from_pretrained(source, dtype=dtype, **placement, **common)
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
        if placement:
            device = model.device  # inputs go where the first layers are; accelerate moves them on
        else:
            model.to(device)
        model.eval()
        tokenizer = getattr(processor, "tokenizer", None)
        if tokenizer is not None:
            tokenizer.padding_side = "left"  # a batch's prompts end together, where generation starts
        self._loaded = (model, processor, device)
        return self._loaded

    def _check_chat_template(self, processor, source: str) -> None:
        """Refuse a checkpoint without a chat template: transformers would raise on every request."""
        if not getattr(processor, "chat_template", None):
            raise BackendUnavailable(
                f"hf backend: '{self.name}' has no chat template (no chat_template.jinja in {source}, none in its "
                "processor or tokenizer config), so its prompts cannot be built. Use the chat (instruct) "
                f"checkpoint of the model, or save its template as {source}/chat_template.jinja.")

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
        except ValueError as exc:  # e.g. several templates, none named "default"
            raise BackendUnavailable(f"hf backend: cannot build a prompt with the chat template of '{self.name}' "
                                     f"({str(exc).splitlines()[0]}).") from exc
        except TemplateError as exc:
            # Some chat templates raise on a system turn ("System role not supported"): the system text then
            # opens the user turn, and the run records that the model saw it there.
            merged = [{"role": "user", "content": [{"type": "text", "text": request.system + "\n\n"}] + user}]
            note = (f"{self.model}: the chat template takes no system turn ({exc}); the system message was "
                    "sent at the start of the user turn")
            try:
                return processor.apply_chat_template(merged, add_generation_prompt=True, tokenize=False), (note,)
            except (TemplateError, ValueError) as again:
                raise BackendUnavailable(f"hf backend: the chat template of '{self.name}' fails on a user turn alone "
                                         f"too ({str(again).splitlines()[0]}).") from again

    def answer(self, request: ProbeRequest) -> Reply:
        result = self._generate([request])[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def _generate(self, requests: list[ProbeRequest]) -> list[Reply | BackendError]:
        """One ``generate()`` over ``requests`` (the same token limit), greedy: each one's reply, or the error
        of a request that could not be prepared (its image) or of a batch that failed."""
        import torch

        started = time.perf_counter()
        results: list[Reply | BackendError | None] = [None] * len(requests)
        with self._lock:
            model, processor, device = self._load()
            prepared = []
            for i, request in enumerate(requests):
                try:
                    images = self._images(request)
                    prompt, notes = self._prompt(processor, request, len(images))
                except BackendError as exc:
                    results[i] = exc
                    continue
                prepared.append((i, images, prompt, notes))
            if prepared:
                texts = [p[2] for p in prepared]
                images = [image for p in prepared for image in p[1]]
                cases = ", ".join(requests[p[0]].meta.case_id for p in prepared)
                try:
                    inputs = processor(text=texts if len(texts) > 1 else texts[0], images=images or None,
                                       padding=len(texts) > 1, return_tensors="pt")
                    inputs = inputs.to(device, dtype=model.dtype)  # casts only the floating tensors (pixel values)
                    with torch.inference_mode():
                        output = model.generate(**inputs, do_sample=False,
                                                max_new_tokens=requests[prepared[0][0]].generation.max_tokens)
                except (RuntimeError, ValueError) as exc:
                    failure = BackendError(f"hf backend: generation failed for case {cases} ({exc}).")
                    for p in prepared:
                        results[p[0]] = failure
                else:
                    width = int(inputs["input_ids"].shape[1])
                    mask = inputs.get("attention_mask")
                    ends = _end_ids(model)
                    for row, (i, _, _, notes) in enumerate(prepared):
                        new_tokens = _until_end(output[row, width:].tolist(), ends)
                        text = processor.decode(new_tokens, skip_special_tokens=True).strip()
                        prompt_tokens = int(mask[row].sum()) if mask is not None else width
                        limit = requests[i].generation.max_tokens
                        results[i] = Reply(raw=text, usage={"prompt_tokens": prompt_tokens,
                                                            "completion_tokens": len(new_tokens)},
                                           latency_s=time.perf_counter() - started, notes=notes,
                                           truncated=_hit_limit(new_tokens, limit, ends))
        return results  # type: ignore[return-value]


def _end_ids(model) -> set[int]:
    eos = getattr(model.generation_config, "eos_token_id", None)
    return set(eos) if isinstance(eos, (list, tuple)) else {eos} if isinstance(eos, int) else set()


def _until_end(tokens: list[int], ends: set[int]) -> list[int]:
    """A row's new tokens up to its first end token (kept); a batch pads the rows that ended early after it."""
    for n, token in enumerate(tokens):
        if token in ends:
            return tokens[:n + 1]
    return tokens


def _hit_limit(tokens: list[int], max_tokens: int, ends: set[int]) -> bool:
    """Whether generation stopped at ``max_tokens`` rather than at an end-of-sequence token (a cut reply)."""
    return len(tokens) >= max_tokens and (not tokens or tokens[-1] not in ends)
