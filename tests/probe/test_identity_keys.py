"""Cache keys and request keys (cfkit.probe.identity) are the SHA-256 of one JSON document: the material built
as a dict and encoded with sorted keys. These tests write that document independently, for real plans and random
requests, so stored run ids and cache keys stay what they were."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, replace

import pytest

from cfkit.backends import Generation, ImageData, ProbeRequest, RequestMeta, load_backend
from cfkit.probe import answer_schema, plan_suite
from cfkit.probe.identity import cache_key, request_key
from cfkit.probe.image_refs import Digests
from cfkit.store import open_store
from cfkit.workspace import load_workspace
from support.probe_runs import many_cases


def _written(backend, request: ProbeRequest, images: list, rule: str | None = None) -> str:
    """The key as the material is plainly built and encoded (cfkit's rule before the parts were written
    directly)."""
    material = {"backend": backend.kind, "model": backend.model, "identity": backend.cache_identity,
                "request": replace(request, images=()).fingerprint() | {"images": images}}
    if rule is not None:
        material["rule"] = rule
    if not backend.capabilities.cacheable:
        material["meta"] = asdict(request.meta)
    blob = json.dumps(material, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _request_written(backend, request: ProbeRequest) -> str:
    images = [image.identity() if hasattr(image, "identity") else [image.mime, image.sha256]
              for image in request.images]
    return _written(backend, request, images, rule="files by path, size and mtime")


BACKENDS = [("openai:m", {"base_url": "http://127.0.0.1:9/v1"}),
            ("openai:m", {"base_url": "http://127.0.0.1:9/v1", "detail": "high", "json_schema": "off",
                          "token_param": "max_completion_tokens", "price_in": 1.25, "price_out": 10}),
            ("openai:ünïcode/model", {"base_url": "http://127.0.0.1:9/v1", "detail": "low"}),
            ("baseline:always-no", {}),  # not cacheable: its keys cover the request's meta
            ("baseline:random", {"seed": 11})]


@pytest.mark.parametrize("model,options", BACKENDS)
def test_a_plan_s_keys_are_the_plainly_built_document_s(tmp_path, model, options):
    ws = load_workspace(many_cases(tmp_path / "ws", 7))
    backend = load_backend(model, options)
    with open_store(ws.db_path) as store:
        for lazy in (True, False):  # images known by path, size and mtime only; and hashed
            plan = plan_suite(ws, "contextcanvas", backend.capabilities, store=store,
                              digests=Digests(store, lazy=lazy))
            for item in plan.items:
                request = item.request
                assert request_key(backend, request) == _request_written(backend, request)
                known = [image.sha256 for image in request.images]
                expected = (_written(backend, request, [[i.mime, i.sha256] for i in request.images])
                            if all(known) else None)
                assert cache_key(backend, request) == expected
                sent = ["ab" * 32 for _ in request.images]  # the digests of the bytes read to send it
                assert cache_key(backend, request, sent) == _written(
                    backend, request, [[i.mime, s] for i, s in zip(request.images, sent)])


TEXTS = ["", "plain", "Ünïcödé — “quotes” and 'apostrophes'", 'a "quoted" \\ backslash', "tab\tnew\nline\r",
         "\u2028 line separator \u2029", "\x00\x01\x1f control", "emoji 🙂 and CJK 漢字", "{\"looks\": [\"like json\"]}"]


@pytest.mark.parametrize("seed", range(40))
def test_keys_of_any_request_are_the_plainly_built_document_s(seed):
    rng = random.Random(seed)
    backend = load_backend(*rng.choice(BACKENDS))
    system = rng.choice(TEXTS) * rng.randint(1, 3)
    schemas = [None, answer_schema(("A", "B")), answer_schema(("A", "B", "C", "D")),
               {"type": "object", "nested": {"z": [1, 2.5, None, True], "a": "é"}}]
    for _ in range(20):
        option_ids = tuple(rng.sample(["A", "B", "C", "D", "É"], rng.randint(1, 5)))
        generation = Generation(temperature=rng.choice([0.0, 0.7, None]), max_tokens=rng.choice([1, 512]),
                                seed=rng.choice([None, 0, 7]), top_p=rng.choice([None, 0.9]),
                                extra_body=rng.choice([None, '{"x": 1}']))
        images = tuple(ImageData(bytes([rng.randrange(256) for _ in range(8)]), rng.choice(["image/png", "image/jpeg"]))
                       for _ in range(rng.randint(0, 2)))
        request = ProbeRequest(system=system, user=rng.choice(TEXTS) + str(rng.random()), images=images,
                               option_ids=option_ids, schema=rng.choice(schemas), generation=generation,
                               meta=RequestMeta(suite="modality", case_id=rng.choice(TEXTS), pair_id="p",
                                                condition="text", yes_option=rng.choice([None, "A"])))
        assert request_key(backend, request) == _request_written(backend, request)
        assert cache_key(backend, request) == _written(backend, request, [[i.mime, i.sha256] for i in request.images])


@pytest.mark.parametrize("root", ["/data/images", "/", "relative/images", "/data/images/"])
def test_the_inputs_digest_names_each_image_as_its_path_would(root, tmp_path):
    """The inputs digest joins image names as text where that gives str(root / name); every name the case rules
    allow (./, a doubled slash, a trailing slash, a dot file, a sub-folder) is named as the Path names it, once
    per file, in the cases' order."""
    from pathlib import Path

    from cfkit.cases import CaseSet, plain_case
    from cfkit.probe.identity import image_texts

    names = [["a.jpg"], ["./b.jpg", "sub/c.png"], ["sub//d.jpg"], [".e.jpg"], ["f/"], ["a.jpg", "g/./h.jpg"],
             ["sub/.x/i.jpg"], ["j..k.jpg"]]
    cases = [plain_case({"id": f"C{i}", "images": images, "question": "Q?", "gold": "A",
                         "options": [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}]})
             for i, images in enumerate(names)]
    assert all(case is not None for case in cases)
    case_set = CaseSet(cases, tmp_path / "cases.jsonl", Path(root))
    ids = [case.id for case in cases]
    expected = list(dict.fromkeys(str(p) for case in cases for p in case_set.image_paths(case)))
    assert image_texts(case_set, ids) == expected
    assert image_texts(case_set, ids[::-1]) == list(dict.fromkeys(
        str(p) for case in cases[::-1] for p in case_set.image_paths(case)))


@pytest.mark.parametrize("model,options", BACKENDS)
@pytest.mark.parametrize("suite", ["contextcanvas", "swap"])
def test_a_run_s_id_is_the_digest_of_every_request_written_as_one_sorted_document(tmp_path, model, options, suite):
    """run_identity writes each request's key into the run's digest as it goes; the digest is the one of the whole
    document (place, request key, edit and shown file of every request, sorted by place), built here as a whole."""
    from cfkit.probe.identity import run_id_for, run_settings, settings_sha256
    from cfkit.probe.runner import run_identity

    ws = load_workspace(many_cases(tmp_path / "ws", 7))
    backend = load_backend(model, options)
    plan = plan_suite(ws, suite, backend.capabilities, digests=Digests(None, lazy=True))
    assert len(plan.items) >= 7
    document = sorted([list(item.key), _request_written(backend, item.request),
                       [item.edit_id, [item.image_file.path, item.image_file.size, item.image_file.mtime_ns]]]
                      for item in plan.items)
    digest = hashlib.sha256(json.dumps(document, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()
    run_id, _, recorded = run_identity(backend, plan)
    assert recorded.requests_sha256 == digest
    settings = settings_sha256(run_settings(backend, plan.generation))
    assert run_id == run_id_for(backend, suite, settings, digest)


def test_a_place_asked_twice_counts_once_with_its_last_request(tmp_path):
    """Where a plan holds one place twice, the run's digest takes that place once, with the request that comes
    last (as a map by place would keep it)."""
    from dataclasses import replace

    from cfkit.probe.runner import run_identity

    ws = load_workspace(many_cases(tmp_path / "ws", 5))
    backend = load_backend(*BACKENDS[0])
    plan = plan_suite(ws, "contextcanvas", backend.capabilities, digests=Digests(None, lazy=True))
    again = replace(plan.items[1], request=replace(plan.items[1].request, user="Asked again, in other words."))
    twice = replace(plan, items=[*plan.items[:3], again, *plan.items[3:]])
    last = {item.key: item for item in twice.items}
    document = sorted([list(item.key), _request_written(backend, item.request),
                       [item.edit_id, [item.image_file.path, item.image_file.size, item.image_file.mtime_ns]]]
                      for item in last.values())
    digest = hashlib.sha256(json.dumps(document, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()
    assert run_identity(backend, twice)[2].requests_sha256 == digest
    assert digest != run_identity(backend, plan)[2].requests_sha256  # the second asking is the one counted


def test_the_run_digest_s_json_writing_is_json_dumps_for_every_shape_it_meets():
    """identity.json_text (the writer of the run digest and of the cache keys' spliced fields) writes plain values
    itself; the text must be json.dumps' own (run ids and cache keys depend on it)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from cfkit.probe.identity import json_text

    plain = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(),
                      st.dictionaries(st.text(max_size=3), st.integers(), max_size=3), st.tuples(st.integers()))
    values = st.recursive(plain, lambda inner: st.lists(inner, max_size=4), max_leaves=12)

    @settings(max_examples=400, deadline=None)
    @given(values)
    def agrees(value):
        assert json_text(value) == json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)

    agrees()
    assert json_text([["c", "p", "image"], "k", [None, ["/a/é\u2028.png", 3, 10**20]]]) == json.dumps(
        [["c", "p", "image"], "k", [None, ["/a/é\u2028.png", 3, 10**20]]], ensure_ascii=False)


def test_each_place_of_the_run_digest_is_written_as_json_dumps_writes_it():
    """The run digest writes a plan's usual place ([case, pair, condition], key, [edit id, file]) in one step; the
    text must be json.dumps' own for every value of that shape and for any other shape (the general writer)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from cfkit.probe.identity import _place_text

    text = st.text()
    anything = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), text)
    files = st.one_of(st.none(), st.lists(st.one_of(text, st.integers()), min_size=3, max_size=3),
                      st.tuples(text, st.integers(), st.integers()).map(list), anything)
    places = st.one_of(st.tuples(text, text, text), st.tuples(text, anything, text), st.lists(text, max_size=3))
    shown = st.one_of(st.tuples(st.one_of(st.none(), st.integers(), st.booleans()), files), st.tuples(anything))

    @settings(max_examples=500, deadline=None)
    @given(places, st.one_of(text, anything), shown)
    def agrees(place, key, about):
        expected = json.dumps([list(place), key, list(about)], sort_keys=True, ensure_ascii=False, default=str)
        assert _place_text(place, key, about) == expected

    agrees()
    usual = (("c\u2028é", "", "image"), "k" * 64, (None, ["/a/\"b\".png", 3, 10**20]))
    assert _place_text(*usual) == json.dumps([list(usual[0]), usual[1], list(usual[2])], ensure_ascii=False)
    assert _place_text(("c", "p", "edit"), "k", (7, None)) == '[["c", "p", "edit"], "k", [7, null]]'
