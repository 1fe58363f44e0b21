"""A run's cache keys and request keys with the shared part serialised once (cfkit.probe.cache_keys): the same keys,
byte for byte, as the documented formula gives, so every response cached before still answers."""

from __future__ import annotations

import enum
import hashlib
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from cfkit.backends import Generation, ImageData, ProbeRequest, RequestMeta, load_backend
from cfkit.probe import answer_schema, plan_suite, probe_suite
from cfkit.probe import identity
from cfkit.probe.cache_keys import MAX_TEMPLATES, RunKeys
from cfkit.probe.identity import json_text
from cfkit.probe.image_refs import FileState, ImageRef
from cfkit.store import Store, responses
from cfkit.store.responses import CachedResponse
from cfkit.workspace import load_workspace
from support.chat_api_server import ChatServer
from support.probe_runs import scripted_answer
from support.workspace import aged


def formula(backend, request: ProbeRequest, images: list, rule: str | None = None) -> str:
    """The key as docs/formats.md writes it: SHA-256 of the UTF-8 JSON text (keys sorted, non-ASCII kept) of the
    backend kind, model and answer-changing options and of the request's texts, images, option ids, schema and
    generation settings; a request key adds its rule and knows images by their files."""
    material = {
        "backend": backend.kind, "model": backend.model, "identity": backend.cache_identity,
        "request": {"system": request.system, "user": request.user, "images": images,
                    "option_ids": list(request.option_ids), "schema": request.schema,
                    "generation": request.generation.record()},
    }
    if rule is not None:
        material["rule"] = rule
    text = json.dumps(material, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make(system="Answer from the material given.", user="Is it fit?", images=(), option_ids=("A", "B"),
         schema="default", generation=Generation(max_tokens=64), case_id="T001") -> ProbeRequest:
    return ProbeRequest(system=system, user=user, images=tuple(images), option_ids=tuple(option_ids),
                        schema=answer_schema(option_ids) if schema == "default" else schema, generation=generation,
                        meta=RequestMeta(suite="contextcanvas", case_id=case_id, pair_id="", condition="image"))


@pytest.fixture(scope="module")
def backend():
    return load_backend("openai:test-model", {"base_url": "http://127.0.0.1:9/v1"})


#: Texts a prompt or caption may hold: quotes, backslashes, control characters, non-ASCII, escapes' look-alikes.
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80) | st.sampled_from(
    ['"quoted" \\ back\\slash', "line\nbreak\ttab\r\x00\x1f\x7f", "café ✓ 𝔘 \u2028 \u2029", "\\u0041 not an escape",
     "</script>", ""])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(system=TEXT, user=TEXT, option_ids=st.lists(st.sampled_from("ABCDEFG"), min_size=1, max_size=5, unique=True),
       n_images=st.integers(0, 3), seed=st.none() | st.integers(-5, 2**40), top_p=st.none() | st.floats(0, 1),
       max_tokens=st.integers(1, 4096),
       mime=st.sampled_from(["image/png", "image/jpeg", "image/x-\"odd\"", "image/x-ünï\\\n"]),
       no_schema=st.booleans())
def test_spliced_keys_are_the_formula_s_keys(backend, system, user, option_ids, n_images, seed, top_p, max_tokens,
                                            mime, no_schema):
    keys = RunKeys(backend)
    generation = Generation(max_tokens=max_tokens, seed=seed, top_p=top_p)
    images = [ImageData(os.urandom(9), mime) for _ in range(n_images)]
    request = make(system, user, images, option_ids, None if no_schema else "default", generation)
    shas = [hashlib.sha256(i.data).hexdigest() for i in images]
    expected = formula(backend, request, [[i.mime, sha] for i, sha in zip(images, shas)])
    assert keys.cache_key(request, shas) == expected == identity.cache_key(backend, request, shas)
    assert keys.cache_key(request) == expected  # each image's own digest, taken from its bytes
    # A second request of the same run goes through the template the first one made.
    other = make(system, user + " again", images, option_ids, None if no_schema else "default", generation)
    assert keys.cache_key(other, shas) == formula(backend, other, [[i.mime, sha] for i, sha in zip(images, shas)])


def test_a_run_s_requests_each_get_their_own_key_through_few_templates(backend):
    """Several option sets (each its schema), settings and prompts in one run: every key is the formula's, and
    a key changes with every field the formula covers."""
    keys = RunKeys(backend)
    image = ImageData(b"\x89PNG one", "image/png")
    requests = [make(user=f"Question {i}: is it fit for use {i % 7}?", images=[image], option_ids=options,
                     generation=Generation(max_tokens=tokens))
                for i in range(60) for options in (("A", "B"), ("A", "B", "C", "D")) for tokens in (64, 512)]
    found = [keys.cache_key(r, ["f" * 64]) for r in requests]
    assert found == [formula(backend, r, [["image/png", "f" * 64]]) for r in requests]
    assert len(set(found)) == len(requests)
    assert len(keys._templates[None]) == 4  # one per (settings, schema) met
    base = make(images=[image])
    variants = [make(system="Other.", images=[image]), make(user="Other?", images=[image]),
                make(images=[ImageData(b"x", "image/jpeg")]), make(images=[image], option_ids=("B", "A")),
                make(images=[image], schema=None), make(images=[image], generation=Generation(max_tokens=65)),
                make(images=[image, image])]
    sha = "0" * 64
    assert len({keys.cache_key(r, [sha] * len(r.images)) for r in [base, *variants]}) == len(variants) + 1
    # meta is not part of a cacheable backend's key: two cases asking the same thing share the answer.
    assert keys.cache_key(make(images=[image], case_id="T002"), [sha]) == keys.cache_key(base, [sha])


def test_more_settings_than_templates_are_still_keyed_by_the_formula(backend):
    keys = RunKeys(backend)
    requests = [make(generation=Generation(max_tokens=n + 1)) for n in range(MAX_TEMPLATES + 5)]
    assert [keys.cache_key(r) for r in requests] == [formula(backend, r, []) for r in requests]
    assert len(keys._templates[None]) == MAX_TEMPLATES


def test_a_key_waits_for_an_image_s_digest_as_the_formula_does(backend):
    ref = ImageRef("file", (FileState("/data/a.png", 10, 1),), "image/png", None, 4, 4)
    request = make(images=[ref])
    assert RunKeys(backend).cache_key(request) is None is identity.cache_key(backend, request)
    assert RunKeys(backend).cache_key(request, ["a" * 64]) == formula(backend, request, [["image/png", "a" * 64]])


def test_request_keys_are_the_formula_s_over_files_by_path_size_and_mtime(backend):
    keys = RunKeys(backend)
    refs = [ImageRef("file", (FileState(f"/data/ü \"{i}\".png", 1000 + i, 1_700_000_000_000_000_000 + i),),
                     "image/png", None, 4, 4) for i in range(3)]
    sheet = ImageRef("sheet", (FileState("/d/a.png", 1, 2), FileState("/d/b.png", 3, 4)), "image/png", "c" * 64, 8, 4,
                     ("First image", "Second image"))
    bytes_image = ImageData(b"held as bytes", "image/jpeg")
    for images in ([refs[0]], refs, [sheet], [bytes_image], [refs[1], bytes_image], []):
        request = make(user=f"{len(images)} images", images=images)
        known = [i.identity() if isinstance(i, ImageRef) else [i.mime, i.sha256] for i in images]
        expected = formula(backend, request, known, rule="files by path, size and mtime")
        assert keys.request_key(request) == expected == identity.request_key(backend, request)


def test_a_backend_whose_keys_cover_meta_is_keyed_the_full_way():
    """A baseline answers by case, not by content: its keys cover each request's meta, and two cases differ."""
    replay = load_backend("baseline:always-no", {})
    assert not replay.capabilities.cacheable
    keys = RunKeys(replay)
    one, two = make(case_id="T001"), make(case_id="T002")
    assert keys.cache_key(one) == identity.cache_key(replay, one) != keys.cache_key(two)
    assert keys.request_key(two) == identity.request_key(replay, two)


def test_a_response_cached_under_the_formula_s_key_answers_the_run(tiny_ws):
    """Existing caches still answer: responses stored under keys computed by the formula (as any earlier cfkit
    stored them) answer a fresh run in a new store, whose images are read and keyed as they are sent; nothing
    is sent."""
    ws = load_workspace(aged(tiny_ws))
    with ChatServer(scripted_answer) as server:
        options = {"base_url": server.url}
        backend = load_backend("openai:test-model", options)
        plan = plan_suite(ws, "contextcanvas", backend.capabilities)  # digests of every image, read now
        with Store(ws.db_path) as store:
            with store.transaction() as tx:
                for item in plan.items:
                    shas = [image.sha256 for image in item.request.images]
                    key = formula(backend, item.request, [[i.mime, s] for i, s in zip(item.request.images, shas)])
                    responses.put(tx, CachedResponse(cache_key=key, raw='{"answer": "B", "reason": "cached", '
                                                     '"confidence": "low"}'), backend=backend.kind, model=backend.model)
            summary = probe_suite(ws, store, "openai:test-model", "contextcanvas", options=options)
        assert server.count == 0
    assert summary.from_cache == len(plan.items) == 3 and summary.sent == 0 and summary.status == "done"


class _Small(enum.IntEnum):
    THREE = 3


@pytest.mark.parametrize("value", [
    "quote \" backslash \\ newline \n line separator \u2028 café 𝔘 \x00", "", 0, -5, 2**80, None, True, False, 1.5,
    float("nan"), float("inf"), [], [[]], ["x", 1, None, True, [2.5, "y", [_Small.THREE]]], ("a tuple", 1),
    {"b": 1, "a": [1, {"d": None, "c": "e"}]}, _Small.THREE, [_Small.THREE, False], [Path("/a path")]])
def test_a_spliced_value_is_written_as_the_json_encoder_writes_it(value):
    assert json_text(value) == json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def test_a_template_is_not_used_once_what_it_was_made_from_changed_in_place(backend):
    """A schema or the backend's options changed in place after a key was made: the next key follows them."""
    keys = RunKeys(backend)
    schema = answer_schema(("A", "B"))
    request = make(schema=schema)
    assert keys.cache_key(request) == formula(backend, request, [])
    schema["properties"]["answer"]["enum"].append("C")
    assert keys.cache_key(request) == formula(backend, request, [])
    saved = dict(backend.cache_identity)
    try:
        backend.cache_identity["token_param"] = "max_completion_tokens"
        assert keys.cache_key(request) == formula(backend, request, []) == identity.cache_key(backend, request)
    finally:
        backend.cache_identity.clear()
        backend.cache_identity.update(saved)


PATHS = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60) | st.sampled_from(
    ['/data/"quoted"/x.jpg', "/data/back\\slash.png", "/données/café ✓.jpg", "/tab\there\nnewline.gif"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(paths=st.lists(PATHS, min_size=1, max_size=3), size=st.integers(0, 2**40), mtime=st.integers(0, 2**63),
       kind=st.sampled_from(["file", "png", "sheet"]), mime=st.sampled_from(["image/png", "image/jpeg", 'image/x-"q"']),
       labelled=st.booleans())
def test_request_keys_of_images_by_reference_are_the_formula_s_keys(backend, paths, size, mtime, kind, mime,
                                                                   labelled):
    """A request key writes an image held by reference as its identity, [kind, MIME type, [[path, size, mtime],
    …], labels]; written straight from the fields for one unlabelled file: the same text as the formula's, for
    any path text, any size and mtime, and for several files or labels (the general way)."""
    keys = RunKeys(backend)
    files = tuple(FileState(path, size + i, mtime) for i, path in enumerate(paths))
    labels = tuple(f"Image {i + 1}" for i in range(len(files))) if labelled else ()
    images = [ImageRef(kind, files, mime, None, 640, 480, labels), ImageRef("file", files[:1], mime, None, 1, 1)]
    request = make(images=images)
    expected = formula(backend, request, [image.identity() for image in images], rule="files by path, size and mtime")
    assert keys.request_key(request) == expected == identity.request_key(backend, request)
