"""The Chat Completions wire format's image encoding: the same base64 bytes with pybase64 or without it."""

from __future__ import annotations

import base64
import binascii
import builtins
import json
import os

import pytest

import cfkit.backends.openai_wire as wire
from cfkit.images import ImageData

#: Lengths around each remainder of 3 (padding of 0, 1 and 2 characters), and one the size of a sent photo.
LENGTHS = [0, 1, 2, 3, 4, 5, 6, 57, 58, 59, 76, 77, 1023, 1024, 1025, 155_001, 207_000]


@pytest.fixture
def standard_only(monkeypatch):
    """cfkit as it runs where pybase64 is not installed: its import fails."""
    real_import = builtins.__import__

    def no_pybase64(name, *args, **kwargs):
        if name == "pybase64":
            raise ImportError("No module named 'pybase64'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pybase64)
    monkeypatch.setattr(wire, "_encoder", None)
    yield
    monkeypatch.setattr(wire, "_encoder", None)  # the next caller finds the encoder this machine has


@pytest.mark.parametrize("length", LENGTHS)
def test_the_encoder_in_use_gives_the_standard_base64_bytes(length):
    data = os.urandom(length)
    encoded = wire.b64encode(data)
    assert encoded == base64.b64encode(data)
    assert binascii.a2b_base64(encoded) == data and b"\n" not in encoded


def test_pybase64_is_used_where_installed():
    pybase64 = pytest.importorskip("pybase64")
    wire.b64encode(b"x")
    assert wire._encoder is pybase64.b64encode


@pytest.mark.parametrize("length", [0, 1, 2, 3, 155_001])
def test_without_pybase64_the_standard_library_encodes_the_same_bytes(standard_only, length):
    data = os.urandom(length)
    assert wire.b64encode(data) == base64.b64encode(data)
    assert wire._encoder is base64.b64encode


def test_an_encoded_body_is_the_json_of_the_body_with_each_image_as_a_data_url():
    """Two images in one body: each slot holds its own image's data URL, the rest of the body is untouched."""
    import orjson

    first, second = ImageData(os.urandom(3001), "image/jpeg"), ImageData(os.urandom(4000), "image/png")
    body = {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "Which is brighter?"},
        {"type": "image_url", "image_url": {"url": wire.slot(0).decode()}},
        {"type": "image_url", "image_url": {"url": wire.slot(1).decode()}}]}], "max_tokens": 16}
    sent = json.loads(wire.encoded_body(orjson.dumps(body), [first, second]))
    urls = [part["image_url"]["url"] for part in sent["messages"][0]["content"][1:]]
    assert urls == [f"data:image/jpeg;base64,{base64.b64encode(first.data).decode()}",
                    f"data:image/png;base64,{base64.b64encode(second.data).decode()}"]
    assert sent["messages"][0]["content"][0]["text"] == "Which is brighter?" and sent["max_tokens"] == 16
