"""Example cfkit plug-ins: a keyword backend and a blur editor.

Both follow cfkit's one-method seams: ``Backend.answer(request) -> Reply`` and
``Editor.edit(request) -> EditResult``. Registration is in pyproject.toml.
"""

from __future__ import annotations

import json
import re
from typing import ClassVar

import numpy as np
from PIL import Image, ImageFilter
from pydantic import Field

from cfkit.backends import BackendContext, BackendOptions, Capabilities, ProbeRequest, Reply
from cfkit.editors import EditorOptions, EditRequest, EditResult
from cfkit.errors import InputError


class KeywordOptions(BackendOptions):
    words: str = Field("", description="comma-separated keywords that mean Yes")


class KeywordBackend:
    """Answers Yes when any keyword occurs in the request's text, else No."""

    kind: ClassVar[str] = "keyword"
    capabilities: ClassVar[Capabilities] = Capabilities(
        images=False, multi_image=False, json_schema=False, remote=False, cacheable=True
    )
    Options: ClassVar[type[KeywordOptions]] = KeywordOptions

    def __init__(self, name: str, options: KeywordOptions, context: BackendContext | None = None):
        self.words = [w.strip().lower() for w in (options.words or name).split(",") if w.strip()]
        if not self.words:
            raise InputError("keyword backend: give keywords with -o words=a,b or as the model name.")
        self.model = f"{self.kind}:{name}"
        self.priced = False
        self.cache_identity = {"words": self.words}

    def answer(self, request: ProbeRequest) -> Reply:
        text = request.user.lower()
        hit = [w for w in self.words if re.search(rf"\b{re.escape(w)}\b", text)]
        yes = request.meta.yes_option
        if yes is None:  # not a Yes/No question: decline rather than guess
            return Reply(raw="I cannot answer this question from keywords.", refused=True)
        no = next(o for o in request.option_ids if o != yes)
        answer = yes if hit else no
        reason = f"found {', '.join(hit)}" if hit else "no keyword found"
        return Reply(raw=json.dumps({"answer": answer, "reason": reason, "confidence": "low"}))


class BlurOptions(EditorOptions):
    radius: float = Field(8.0, gt=0, le=200, description="Gaussian blur radius in pixels")


class BlurEditor:
    """Blurs the masked region with a Gaussian of the given radius (``-o radius=12``)."""

    name: ClassVar[str] = "blur"
    Options: ClassVar[type[BlurOptions]] = BlurOptions
    max_candidates: ClassVar[int] = 1  # deterministic
    auto_rank: ClassVar[int | None] = None  # never tried by --engine auto

    def __init__(self, options: BlurOptions):
        self.radius = options.radius
        self.model = None

    def edit(self, request: EditRequest) -> EditResult:
        blurred = np.asarray(Image.fromarray(request.image).filter(ImageFilter.GaussianBlur(self.radius)))
        inside = (request.mask > 127)[..., None]
        out = np.where(inside, blurred, request.image).astype(np.uint8)
        return EditResult(images=(out,), model=None, params={"radius": self.radius})
