"""The file engine: import an edit made elsewhere (``cfkit edit CF18 --engine file --input edited.png``).

The imported image is treated like any engine's raw output: it must have the
source's size, or the same aspect ratio (then it is resized and a note says
so); any other shape is refused.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import ClassVar

import numpy as np
from pydantic import Field

from cfkit.editors import Editor, EditorOptions, EditRequest, EditResult, resize_rgb
from cfkit.errors import ImageError, OptionError
from cfkit.images import open_image

#: Largest relative difference of aspect ratios accepted for a resized import.
ASPECT_TOLERANCE = 0.01


class FileEditor(Editor):
    """Reads the ``input`` image and aligns it to the source image."""

    name: ClassVar[str] = "file"
    max_candidates: ClassVar[int] = 1  # one file, one image
    auto_rank: ClassVar[int | None] = None

    class Options(EditorOptions):
        input: Path | None = Field(None, description="the edited image made elsewhere (--input sets it)")

    def __init__(self, options: "FileEditor.Options"):
        self.options = options
        self.model = None

    def describe(self, request: EditRequest) -> dict:
        """The file :meth:`edit` would import (for --dry-run)."""
        return {} if self.options.input is None else {"input": str(self.options.input)}

    def check(self, request: EditRequest) -> None:
        """The input must be given and be a readable image, before anything is written."""
        if self.options.input is None:
            raise OptionError("the file engine imports an edit made elsewhere; give the image with --input PATH.")
        open_image(self.options.input, what="--input")

    def edit(self, request: EditRequest) -> EditResult:
        self.check(request)
        path = self.options.input
        image = np.asarray(open_image(path, what="--input"))
        width, height = request.size
        got = (image.shape[1], image.shape[0])
        notes: tuple[str, ...] = ()
        if got != (width, height):
            if abs((got[0] / got[1]) / (width / height) - 1.0) > ASPECT_TOLERANCE:
                raise ImageError(
                    f"--input {path} is {got[0]}x{got[1]} but the source image is {width}x{height} "
                    "(another aspect ratio). Export the edit at the source's size."
                )
            image = resize_rgb(image, (width, height))
            notes = (f"--input resized from {got[0]}x{got[1]} to {width}x{height}",)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        return EditResult(images=(image,), model=None,
                          params={"input": path.name, "input_sha256": digest, "input_size": f"{got[0]}x{got[1]}"},
                          notes=notes)
