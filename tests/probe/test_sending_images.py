"""The images of requests being sent: read once, hashed, and (for a base64 backend) encoded from one reused buffer."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import cfkit.probe.sending_images as sending_images
from support.backend_requests import request
from support.chat_api_server import ChatServer
from cfkit.errors import ImageError
from cfkit.images import EncodedImage, ImageData
from cfkit.probe.image_refs import FileState, ImageRef
from cfkit.probe.sending_images import SendingImages
from cfkit.workspace import load_workspace


def _ref(path: Path, *, sha256: str | None = None) -> ImageRef:
    """A lazy plan's reference to ``path`` as planned now (its digest unknown unless given)."""
    st = os.stat(path)
    return ImageRef(kind="file", files=(FileState(str(path), st.st_size, st.st_mtime_ns),), mime="image/jpeg",
                    sha256=sha256, width=8, height=8)


def _sent(sending: SendingImages, ref: ImageRef):
    loaded, shas = sending.acquire_with_digests(request(images=(ref,)))
    return loaded.images[0], shas[0]


@pytest.mark.parametrize("encoded", [False, True], ids=["bytes", "base64"])
def test_files_of_any_size_in_any_order_are_sent_as_their_own_bytes(tmp_path, encoded):
    """Large, small, empty, large again: no image carries bytes of the one read before it into the same buffer."""
    sizes = [300_001, 17, 0, 1, 250_000, 300_002]
    files = []
    for i, size in enumerate(sizes):
        path = tmp_path / f"f{i}.jpg"
        path.write_bytes(os.urandom(size))
        files.append(path)
    sending = SendingImages(base64=encoded)
    for path in files:
        image, sha = _sent(sending, _ref(path))
        data = path.read_bytes()
        assert sha == hashlib.sha256(data).hexdigest()
        if encoded:
            assert isinstance(image, EncodedImage) and image.base64 == base64.b64encode(data)
        else:
            assert isinstance(image, ImageData)
        assert image.data == data and image.mime == "image/jpeg" and image.sha256 == sha
    assert [d.sha256 for d in sending.learned] == [hashlib.sha256(p.read_bytes()).hexdigest() for p in files]
    assert [d.path for d in sending.learned] == [str(p) for p in files]


@pytest.mark.parametrize("encoded", [False, True], ids=["bytes", "base64"])
def test_a_file_changed_after_planning_is_refused_when_sent(tmp_path, encoded):
    path = tmp_path / "a.jpg"
    path.write_bytes(os.urandom(1000))
    ref = _ref(path)
    st = os.stat(path)
    path.write_bytes(os.urandom(1001))  # grown
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # with its old modification time
    with pytest.raises(ImageError, match="changed after the run was planned"):
        _sent(SendingImages(base64=encoded), ref)
    path.unlink()
    with pytest.raises(ImageError, match="cannot be read any more"):
        _sent(SendingImages(base64=encoded), ref)


def test_an_image_whose_digest_the_plan_knows_is_sent_as_base64_too(tmp_path):
    path = tmp_path / "a.jpg"
    path.write_bytes(os.urandom(5000))
    known = hashlib.sha256(path.read_bytes()).hexdigest()
    image, sha = _sent(SendingImages(base64=True), _ref(path, sha256=known))
    assert sha == known and image.base64 == base64.b64encode(path.read_bytes())


def test_a_very_large_image_does_not_keep_its_buffer(tmp_path, monkeypatch):
    monkeypatch.setattr(sending_images, "KEPT_BUFFER_BYTES", 4096)
    small, large = tmp_path / "small.jpg", tmp_path / "large.jpg"
    small.write_bytes(os.urandom(1000))
    large.write_bytes(os.urandom(10_000))
    sending = SendingImages(base64=True)
    _sent(sending, _ref(small))
    assert 1000 < len(sending._buffer) <= 4096  # kept for the next image
    image, _ = _sent(sending, _ref(large))
    assert len(sending._buffer) == 0 and image.data == large.read_bytes()


def test_an_encoded_image_decodes_to_its_bytes():
    data = os.urandom(3001)
    image = EncodedImage(base64.b64encode(data), "image/png")
    assert image.data == data and image.sha256 == hashlib.sha256(data).hexdigest()


def test_a_probe_run_sends_each_image_as_its_file_bytes(tiny_ws):
    """Through the openai backend (base64) at one request in flight: images of very different sizes, read one
    after another into the same buffer, each arrive as their own file's bytes."""
    from support.chat_api_server import answer_json, completion, Scripted
    from cfkit.probe import probe_suite
    from cfkit.store import Store

    images = tiny_ws / "data" / "images"
    rng = np.random.default_rng(0)
    for name, side in (("T001.png", 300), ("T002.png", 8), ("T003.png", 120)):
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(images / name)
    files = {p.name: p.read_bytes() for p in images.glob("T00*.png")}
    ws = load_workspace(tiny_ws)
    with ChatServer(lambda body, n: Scripted(body=completion(answer_json("A")))) as server:
        with Store(ws.db_path) as store:
            summary = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url},
                                  concurrency=1)
    assert summary.sent == 3 and summary.errors == 0
    sent = [base64.b64decode(body["messages"][1]["content"][1]["image_url"]["url"].split(",", 1)[1], validate=True)
            for body in server.requests]
    assert sorted(sent) == sorted(files.values())
