"""The openai engine: GPT Image 2 (or another GPT image model) through ``images.edit``.

What is sent, and why:

- the source and the mask as named PNG uploads (``("image.png", bytes,
  "image/png")``) — the API rejects nameless raw bytes;
- the mask as RGBA at exactly the sent image's size, alpha 0 where the image
  may change (the API's convention; cfkit's own is 255 = edit), under 4 MB;
- a ``size`` the model accepts: for the gpt-image-2 family any ``WxH`` with both
  sides multiples of 16 and an aspect ratio between 1:3 and 3:1, for other GPT
  image models one of 1024x1024, 1536x1024, 1024x1536. The source is padded
  (edge pixels repeated, marked "keep" in the mask) to a valid aspect ratio and
  resized to a valid size; the reply is mapped back to the source's exact size;
- no ``input_fidelity`` for gpt-image-2, which rejects it.

The server and the key follow the one endpoint policy of :mod:`cfkit.endpoints`
(options ``base_url`` and ``api_key_env``, else ``OPENAI_BASE_URL``, else the
official API): ``OPENAI_API_KEY`` goes only to the official host over https, a
custom server gets only the variable named by ``api_key_env`` (a note says when
``OPENAI_API_KEY`` was withheld), and no key travels over plain http except to
loopback. The key is never recorded; the base URL is, with credentials redacted.

The SDK's own retries are off; this module retries 408, 409, 429, 5xx,
timeouts and connection errors ``max_retries`` times with exponential backoff,
and raises :class:`~cfkit.errors.EditorTransport` after that. A
``moderation_blocked`` refusal raises :class:`~cfkit.errors.EditRefused` at once; a refused key (401/403)
:class:`~cfkit.errors.EditorKeyRefused`, and an account without credit or quota (429 ``insufficient_quota``,
400 ``billing_hard_limit_reached``, :mod:`cfkit.backends.billing`) :class:`~cfkit.errors.QuotaRefused`, both at
once: no retry, and no later spec of a batch, can fare better.
"""

from __future__ import annotations

import base64
import math
import time
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from cfkit.editors import (Editor, EditorOptions, EditRequest, EditResult, EngineServer, resize_mask, resize_rgb,
                           stopped_sending)
from cfkit.endpoints import BASE_URL_ENV, Endpoint, resolve_endpoint
from cfkit.backends.billing import billing_refusal, refusal_line
from cfkit.errors import (EditRefused, EditorError, EditorKeyRefused, EditorTransport, EditorUnavailable, ImageError,
                          QuotaRefused, SpecError, UsageError)
from cfkit.hints import install_hint
from cfkit.images import decode_image, png_bytes
from cfkit.plural import plural
from cfkit.option_words import engine_words, key_refused

#: How ``cfkit edit`` sets this engine's options, for hints: ``-o openai.KEY=VALUE`` works alone and in a chain.
WORDS = engine_words("openai")

#: The API's limit for the mask upload (bytes).
MASK_MAX_BYTES = 4 * 1024 * 1024
#: The API's limit for each image upload (bytes).
IMAGE_MAX_BYTES = 50 * 1024 * 1024
#: zlib level of the uploaded PNGs: about half the CPU of Pillow's default (6) on a photograph for about a
#: tenth more bytes; an upload that would pass the API's limit is encoded again at the strongest level.
UPLOAD_PNG_LEVEL = 1
#: The longest the check before the first call waits for a connection to the server (seconds; less when the
#: engine's own ``timeout`` is shorter).
CHECK_TIMEOUT_S = 5.0
#: Sizes every GPT image model accepts; used for models without free sizing.
STANDARD_SIZES = ((1024, 1024), (1536, 1024), (1024, 1536))


@dataclass(frozen=True)
class SizePlan:
    """How a source of ``source`` size is sent and how the reply comes back.

    The source is padded at the right and bottom to ``padded`` (a valid aspect
    ratio), then resized to ``sent``. A reply is resized to ``padded`` and
    cropped to ``source``.
    """

    source: tuple[int, int]
    padded: tuple[int, int]
    sent: tuple[int, int]

    @property
    def size_param(self) -> str:
        return f"{self.sent[0]}x{self.sent[1]}"

    def image_to_send(self, image: np.ndarray) -> np.ndarray:
        pad = ((0, self.padded[1] - self.source[1]), (0, self.padded[0] - self.source[0]), (0, 0))
        return resize_rgb(np.pad(image, pad, mode="edge"), self.sent)

    def mask_to_send(self, mask: np.ndarray) -> np.ndarray:
        """cfkit mask (255 = edit) → RGBA at the sent size, alpha 0 where the image may change."""
        pad = ((0, self.padded[1] - self.source[1]), (0, self.padded[0] - self.source[0]))
        edit = resize_mask(np.pad(mask, pad, constant_values=0), self.sent) > 127
        rgba = np.full(edit.shape + (4,), 255, dtype=np.uint8)
        rgba[..., 3] = np.where(edit, 0, 255)
        return rgba

    def reply_to_source(self, image: np.ndarray) -> np.ndarray:
        return resize_rgb(image, self.padded)[: self.source[1], : self.source[0]]


def upload_png(array: np.ndarray, limit: int) -> bytes:
    """``array`` as PNG bytes for an upload: fast to encode, and as small as zlib can make it when the fast
    bytes would reach ``limit`` (the pixels are the same either way)."""
    data = png_bytes(array, compress_level=UPLOAD_PNG_LEVEL)
    return data if len(data) < limit else png_bytes(array, compress_level=9)


def flexible_sizes(model: str) -> bool:
    """Whether ``model`` takes any ``WxH`` (gpt-image-2 and its successors)."""
    return model.startswith("gpt-image-2")


def plan_size(source: tuple[int, int], model: str, *, min_pixels: int, max_pixels: int) -> SizePlan:
    """Choose the padded and sent sizes for ``source = (width, height)``."""
    width, height = source
    if not flexible_sizes(model):
        target = min(STANDARD_SIZES, key=lambda s: abs(math.log((s[0] / s[1]) / (width / height))))
        if width / height > target[0] / target[1]:
            padded = (width, max(height, round(width * target[1] / target[0])))
        else:
            padded = (max(width, round(height * target[0] / target[1])), height)
        return SizePlan(source, padded, target)
    pw, ph = width, height
    if pw > 3 * ph:
        ph = math.ceil(pw / 3)
    elif ph > 3 * pw:
        pw = math.ceil(ph / 3)
    scale = 1.0
    if pw * ph > max_pixels:
        scale = math.sqrt(max_pixels / (pw * ph))
    elif pw * ph < min_pixels:
        scale = math.sqrt(min_pixels / (pw * ph))
    sw = max(16, round(pw * scale / 16) * 16)
    sh = max(16, round(ph * scale / 16) * 16)
    # Rounding to multiples of 16 can step just outside a limit; step back in.
    for _ in range(1000):
        if sw * sh > max_pixels:
            if sw >= sh:
                sw -= 16
            else:
                sh -= 16
        elif sw * sh < min_pixels:
            if sw <= sh:
                sw += 16
            else:
                sh += 16
        elif sw > 3 * sh:
            sh += 16
        elif sh > 3 * sw:
            sw += 16
        else:
            break
    return SizePlan(source, (pw, ph), (sw, sh))


class OpenAIEditor(Editor):
    """GPT image editing through the OpenAI images API (or a compatible server).

    ``timeout`` is per attempt in seconds; ``max_retries`` counts retries after
    the first attempt; ``backoff`` is the first wait in seconds, doubled each
    retry (a ``Retry-After`` header, when sent, is honoured up to 60 s).
    Small sources are upscaled to at least ``min_pixels`` (about 0.65 MP, the
    smallest size gpt-image-2 renders) and large ones downscaled to
    ``max_pixels`` (2560x1440; the API calls larger sizes experimental).
    """

    name: ClassVar[str] = "openai"
    max_candidates: ClassVar[int] = 10  # the images API makes at most 10 images per call
    auto_rank: ClassVar[int | None] = 10  # tried first by --engine auto
    paid: ClassVar[bool] = True  # the images API bills each call

    class Options(EditorOptions):
        model: str = Field("gpt-image-2", description="image model")
        quality: Literal["low", "medium", "high", "auto"] | None = Field("high", description="rendering quality")
        output_format: Literal["png", "jpeg", "webp"] = Field("png", description="format the API returns")
        input_fidelity: Literal["low", "high"] | None = Field(None, description="how closely to keep the input")
        timeout: float = Field(180.0, gt=0, le=3600, description="seconds per attempt")
        max_retries: int = Field(3, ge=0, le=20, description="retries after the first attempt")
        backoff: float = Field(2.0, ge=0, le=600, description="first wait between retries, seconds (doubles)")
        min_pixels: int = Field(655_360, ge=1, le=100_000_000, description="smaller sources are upscaled to this")
        max_pixels: int = Field(2560 * 1440, ge=1, le=100_000_000, description="larger sources are downscaled to this")
        base_url: str | None = Field(None, description="images API server, e.g. http://localhost:8000/v1 "
                                                       "(default: $OPENAI_BASE_URL, else the official API)")
        api_key_env: str | None = Field(None, description="environment variable holding the key (default "
                                                          "OPENAI_API_KEY, for the official API only)")

    def __init__(self, options: "OpenAIEditor.Options"):
        self.options = options
        self.model = options.model
        self.quality = options.quality
        self.output_format = options.output_format
        self.input_fidelity = options.input_fidelity
        self.timeout = options.timeout
        self.max_retries = options.max_retries
        self.backoff = options.backoff
        self.min_pixels = options.min_pixels
        self.max_pixels = options.max_pixels

    def plan(self, size: tuple[int, int]) -> SizePlan:
        return plan_size(size, self.model, min_pixels=self.min_pixels, max_pixels=self.max_pixels)

    def endpoint(self) -> Endpoint:
        """Where the edit goes and which key it carries; raises OptionError for a refused configuration."""
        return resolve_endpoint(self.options.base_url, self.options.api_key_env, who="openai",
                                url_flag=WORDS.of("base_url"), key_flag=WORDS.of("api_key_env"))

    def check(self, request: EditRequest) -> None:
        """Refuse a bad base URL, or a key bound for plain http, before anything is written."""
        self.endpoint()

    def server(self) -> EngineServer | None:
        """The images API server, checked to answer before the first call; None when the call could not be
        made anyway (no key, no SDK: :meth:`edit` says so without sending)."""
        import importlib.util
        import os

        endpoint = self.endpoint()
        if endpoint.key_problem is not None or importlib.util.find_spec("openai") is None:
            return None
        fix = (f"${BASE_URL_ENV} (or -o base_url=URL)" if not self.options.base_url and os.environ.get(BASE_URL_ENV)
               else f"-o base_url=URL (or base_url in cfkit.toml's [edit.engines.{self.name}])")
        return EngineServer(endpoint.url, endpoint.shown, fix, timeout=min(CHECK_TIMEOUT_S, self.timeout))

    def describe(self, request: EditRequest) -> dict:
        """What :meth:`edit` would send, computed without sending anything (for --dry-run)."""
        return {"model": self.model, "size": self.plan(request.size).size_param, "quality": self.quality,
                "mask": "RGBA, alpha 0 where the image may change", "endpoint": self.endpoint().shown}

    def edit(self, request: EditRequest) -> EditResult:
        # 1. Can it run here? (cheap checks before importing the SDK)
        endpoint = self.endpoint()
        if endpoint.key_problem is not None:
            hint = "" if self.options.api_key_env else f" (or name another variable with {WORDS.of('api_key_env')})"
            raise EditorUnavailable(
                f"openai: {endpoint.key_env} is not set. Export your key{hint}; it is read from the environment "
                "and never saved. Or choose --engine diffusers or classical."
            )
        try:
            import openai
        except ImportError as exc:
            raise EditorUnavailable(f"openai: the 'openai' package is not installed. Run: {install_hint('openai')}.") from exc
        if not 1 <= request.n <= 10:
            raise UsageError(f"openai: -n {request.n} is out of range; the images API makes 1 to 10 images per call.")

        # 2. Build and check the uploads.
        try:
            plan = self.plan(request.size)
            image_png = upload_png(plan.image_to_send(request.image), IMAGE_MAX_BYTES)
            mask_rgba = plan.mask_to_send(request.mask)
            mask_png = upload_png(mask_rgba, MASK_MAX_BYTES)
        except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM before anything was sent
            stopped_sending(stop, abandoned=0, out=False)
            raise
        self._check_uploads(plan, image_png, mask_rgba, mask_png)
        params = self._params(request, plan, endpoint)

        # 3. Call, with retries for transient failures only.
        client = openai.OpenAI(api_key=endpoint.key or "-", base_url=endpoint.url, timeout=self.timeout,
                               max_retries=0, default_headers={"Authorization": endpoint.authorization})
        response, abandoned = self._call_with_retries(openai, client, request, plan, image_png, mask_png)

        # 4. Decode and map each reply back to the source's exact size.
        images = []
        for item in response.data or []:
            if not item.b64_json:
                raise EditorError("openai: the reply carried no b64_json image; the server may not speak the images API.")
            try:
                data = base64.b64decode(item.b64_json, validate=True)
            except ValueError as exc:
                raise EditorError("openai: the reply's b64_json is not valid base64.") from exc
            decoded = np.asarray(decode_image(data, source="openai reply", what="edited image"))
            images.append(plan.reply_to_source(decoded))
        if not images:
            raise EditorError("openai: the reply held no images.")
        usage = response.usage.model_dump(mode="json") if getattr(response, "usage", None) else None
        notes = list(endpoint.notes)
        if plan.sent != plan.source:
            notes.append(f"sent as {plan.size_param} (source {plan.source[0]}x{plan.source[1]}"
                         f"{', padded to ' + str(plan.padded[0]) + 'x' + str(plan.padded[1]) if plan.padded != plan.source else ''}"
                         "); mapped back to the source size")
        if self.input_fidelity and flexible_sizes(self.model):
            notes.append(f"input_fidelity not sent: {self.model} rejects it")
        if request.seed is not None:
            notes.append("the images API takes no seed; --seed was not used")
        return EditResult(images=tuple(images), model=self.model, params=params, seed=None, usage=usage,
                          notes=tuple(notes), abandoned=abandoned)

    def _params(self, request: EditRequest, plan: SizePlan, endpoint: Endpoint) -> dict:
        params = {"size": plan.size_param, "padded": f"{plan.padded[0]}x{plan.padded[1]}", "n": request.n,
                  "quality": self.quality, "output_format": self.output_format, "timeout_s": self.timeout,
                  "max_retries": self.max_retries}
        if self.input_fidelity and not flexible_sizes(self.model):
            params["input_fidelity"] = self.input_fidelity
        if not endpoint.official:
            params["base_url"] = endpoint.shown  # credentials redacted
        return params

    def _check_uploads(self, plan: SizePlan, image_png: bytes, mask_rgba: np.ndarray, mask_png: bytes) -> None:
        if (mask_rgba.shape[1], mask_rgba.shape[0]) != plan.sent:
            raise EditorError(f"openai: internal size mismatch, mask {mask_rgba.shape[1]}x{mask_rgba.shape[0]} "
                              f"vs image {plan.size_param}.")
        if not (mask_rgba[..., 3] == 0).any():
            raise SpecError(
                f"openai: the mask has no editable pixel at the sent size {plan.size_param}; "
                "the masked region is too small. Enlarge it in the spec's mask."
            )
        if len(mask_png) >= MASK_MAX_BYTES:
            raise ImageError(f"openai: the mask PNG is {plural(len(mask_png), 'byte', spec=',')}; the API takes under 4 MB. "
                             "Lower max_pixels or simplify the mask.")
        if len(image_png) >= IMAGE_MAX_BYTES:
            raise ImageError(f"openai: the image PNG is {plural(len(image_png), 'byte', spec=',')}; the API takes under 50 MB. "
                             "Lower max_pixels.")

    def _call_with_retries(self, openai, client, request: EditRequest, plan: SizePlan, image_png: bytes,
                           mask_png: bytes):
        kwargs = {"model": self.model, "prompt": request.prompt, "n": request.n, "size": plan.size_param,
                  "output_format": self.output_format,
                  "image": ("image.png", image_png, "image/png"), "mask": ("mask.png", mask_png, "image/png")}
        if self.quality:
            kwargs["quality"] = self.quality
        if self.input_fidelity and not flexible_sizes(self.model):
            kwargs["input_fidelity"] = self.input_fidelity
        attempts = self.max_retries + 1
        last, failure, abandoned = "no attempt made", "ConnectionError", 0
        for attempt in range(attempts):
            try:
                return client.images.edit(**kwargs), abandoned
            except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM with this attempt out, and those given up before
                stopped_sending(stop, abandoned=abandoned, out=True)
                raise
            except openai.BadRequestError as exc:
                self._refuse_billing(exc)
                if _is_moderation_block(exc):
                    raise EditRefused(f"openai refused the edit (moderation_blocked): {_api_message(exc)}",
                                      abandoned=abandoned) from exc
                raise EditorError(f"openai: request rejected (400 {exc.code or ''}): {_api_message(exc)}",
                                  abandoned=abandoned) from exc
            except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
                self._refuse_billing(exc)  # a 403 may say "billing_not_active"
                endpoint = self.endpoint()
                raise EditorKeyRefused(key_refused("openai", endpoint.shown, exc.status_code, _api_message(exc),
                                                   WORDS, sent=bool(endpoint.key or endpoint.credentials)),
                                       abandoned=abandoned) from exc
            except openai.APITimeoutError as exc:
                last = f"timed out after {self.timeout:g} s"
                failure = f"Timeout: {last}"
                abandoned += _sent(exc)
                wait = self._wait(attempt, None)
                cause = exc
            except openai.APIConnectionError as exc:
                last = f"could not connect ({exc.__cause__ or exc})"
                failure = f"ConnectionError: {last}"
                abandoned += _sent(exc)
                wait = self._wait(attempt, None)
                cause = exc
            except openai.APIStatusError as exc:
                self._refuse_billing(exc)  # 429 insufficient_quota is no rate limit: waiting does not mend it
                if exc.status_code not in (408, 409, 429) and exc.status_code < 500:
                    raise EditorError(f"openai: request failed ({exc.status_code} {exc.code or ''}): "
                                      f"{_api_message(exc)}", abandoned=abandoned) from exc
                last = failure = f"HTTP {exc.status_code}: {_api_message(exc)}"
                wait = self._wait(attempt, exc.response.headers.get("retry-after"))
                cause = exc
            if attempt + 1 < attempts:
                try:
                    time.sleep(wait)
                except KeyboardInterrupt as stop:  # between attempts: none out, those given up before counted
                    stopped_sending(stop, abandoned=abandoned, out=False)
                    raise
        given_up = f" ({abandoned} given up after the request was sent)" if abandoned else ""
        raise EditorTransport(
            f"openai: gave up after {plural(attempts, 'attempt')}{given_up}; last: {last}. Check the network and "
            "OPENAI_BASE_URL, or try again later.", failure=failure, endpoint=self.endpoint().shown, abandoned=abandoned,
        ) from cause

    def _refuse_billing(self, exc) -> None:
        """Raise :class:`QuotaRefused` when ``exc`` (an API status error) says the account has no credit or quota."""
        if billing_refusal(exc.status_code, getattr(exc, "body", None), _api_message(exc)):
            raise QuotaRefused(refusal_line("openai", self.endpoint().shown, exc.status_code, _api_message(exc),
                                            then="edit again")) from exc

    def _wait(self, attempt: int, retry_after: str | None) -> float:
        wait = self.backoff * (2 ** attempt)
        if retry_after:
            try:
                wait = max(wait, min(float(retry_after), 60.0))
            except ValueError:
                pass
        return wait


def _sent(exc) -> int:
    """1 when the attempt that failed with ``exc`` (an SDK timeout or connection error) had sent its request: a
    timeout waiting for the reply, a connection dropped once open; 0 when it never got a connection (refused, no
    such host, a connect or pool timeout). One the SDK does not place counts as sent, the side a bill is safe on."""
    # Read by class name: the SDK raises them from its HTTP client (httpx, or the httpx2 of some releases).
    names = {kind.__name__ for kind in type(exc.__cause__).__mro__} if exc.__cause__ is not None else set()
    return 0 if names & {"ConnectError", "ConnectTimeout", "PoolTimeout"} else 1


def _api_message(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return str(getattr(exc, "message", exc))


def _is_moderation_block(exc) -> bool:
    body = getattr(exc, "body", None)
    code = getattr(exc, "code", None) or (body.get("code") if isinstance(body, dict) else None)
    return code == "moderation_blocked"
