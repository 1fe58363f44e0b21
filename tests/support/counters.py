"""Counters of image decodes, store opens and cases-file reads, to show that each file of an edit is read once."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

import cfkit.images
import cfkit.store


@pytest.fixture
def counted(monkeypatch):
    """Every image decode (by the file it came from) and every store connection, while the test runs."""
    from PIL import Image

    decodes: collections.Counter[str] = collections.Counter()
    opens: list[Path] = []
    decode_image, pil_open, store_init = cfkit.images.decode_image, Image.open, cfkit.store.Store.__init__

    def counting_decode(data, *, source="<bytes>", what="image"):
        decodes[Path(source).name] += 1
        return decode_image(data, source=source, what=what)

    def counting_open(fp, *args, **kwargs):
        if isinstance(fp, (str, Path)):  # cfkit.images decodes from bytes, counted above
            decodes[Path(fp).name] += 1
        return pil_open(fp, *args, **kwargs)

    def counting_init(self, path, **kwargs):
        opens.append(Path(path))
        store_init(self, path, **kwargs)

    monkeypatch.setattr(cfkit.images, "decode_image", counting_decode)
    monkeypatch.setattr(Image, "open", counting_open)
    monkeypatch.setattr(cfkit.store.Store, "__init__", counting_init)
    return decodes, opens


@pytest.fixture
def cases_reads(monkeypatch) -> list[Path]:
    """Every read of a cases file (by its path), while the test runs."""
    import cfkit.dataset

    loads: list[Path] = []
    load_cases = cfkit.dataset.load_cases

    def counting_load(path, *args, **kwargs):
        loads.append(Path(path))
        return load_cases(path, *args, **kwargs)

    monkeypatch.setattr(cfkit.dataset, "load_cases", counting_load)
    return loads
