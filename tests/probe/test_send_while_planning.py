"""Send while planning: a run's id is known from each image file's path, size and mtime before any image is
read; each request's cache key and recorded image digest come from the bytes read to send it (one read per
image). Real stores, a real Chat Completions server on 127.0.0.1, real PNG files."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image

from cfkit.backends import load_backend
from cfkit.images import png_bytes, read_header
from cfkit.probe import cache_key, plan_suite, probe_suite, run_probe
from cfkit.probe import image_refs, sending_images
from cfkit.probe.header_checks import HEAD_BYTES, quick_header
from cfkit.probe.image_refs import Digests, ImageRef
from cfkit.probe.runner import run_identity
from cfkit.probe.sharing import SharedQueue
from cfkit.store import Store, runs
from cfkit.store.runs import ReplyFields
from cfkit.workspace import load_workspace
from support.chat_api_server import ChatServer
from support.counting_backend import Counting
from support.probe_runs import scripted_answer
from support.store_sql import table_rows, update_rows
from support.workspace import aged, gradient_image

HOUR_AGO = time.time() - 3600


@pytest.fixture
def ws(tiny_ws):
    return load_workspace(aged(tiny_ws, HOUR_AGO))


@pytest.fixture
def reads(monkeypatch) -> Counter:
    """Whole reads of image files, by name: hashed while planning, or read to be sent (as bytes, or into the
    buffer of a backend that sends base64)."""
    seen: Counter = Counter()
    hashed, sent, into = image_refs._read_hashed, image_refs._read_unchanged, sending_images._read_unchanged_into

    def hashing(path):
        seen[path.name] += 1
        return hashed(path)

    def sending(state):
        seen[Path(state.path).name] += 1
        return sent(state)

    def sending_into(state, buffer):
        seen[Path(state.path).name] += 1
        return into(state, buffer)

    monkeypatch.setattr(image_refs, "_read_hashed", hashing)
    monkeypatch.setattr(image_refs, "_read_unchanged", sending)
    monkeypatch.setattr(sending_images, "_read_unchanged_into", sending_into)
    return seen


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_lazy_plan_reads_no_image_whole_and_a_run_reads_each_once_keyed_as_a_full_plan_keys_it(ws, reads):
    with ChatServer(scripted_answer) as server, Store(ws.db_path) as store:
        backend = load_backend("openai:test-model", {"base_url": server.url})
        lazy = plan_suite(ws, "contextcanvas", backend.capabilities, store=store, lazy=True)
        assert reads == Counter()  # headers and end markers only
        refs = [item.request.images[0] for item in lazy.items]
        assert all(isinstance(r, ImageRef) and r.sha256 is None for r in refs)
        assert {i.image_sha256 for i in lazy.items} == {None}
        # The run id is known before any image is read, and is the one a fully hashed plan gets.
        full = plan_suite(ws, "contextcanvas", backend.capabilities, digests=Digests(None))
        assert run_identity(backend, lazy)[0] == run_identity(backend, full)[0]
        reads.clear()

        summary = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
        assert summary.sent == 3 and summary.status == "done"
        assert reads == Counter({"T001.png": 1, "T002.png": 1, "T003.png": 1})  # one read per image
        stored = {r.case_id: r for r in runs.replies(store, summary.run_id)}
        for item in full.items:
            path = ws.image_root / item.case.images[0]
            assert stored[item.case.id].cache_key == cache_key(backend, item.request)
            assert stored[item.case.id].image_sha256 == _sha(path) == item.image_sha256
        # What was read to send is remembered: the next plan knows every file without reading it.
        assert {Path(r["path"]).name: r["sha256"] for r in table_rows(store.path, "file_digests")} == {
            name: _sha(ws.image_root / name) for name in ("T001.png", "T002.png", "T003.png")}
        reads.clear()
        known = plan_suite(ws, "contextcanvas", backend.capabilities, store=store, lazy=True)
        assert reads == Counter() and [i.request.images[0].sha256 for i in known.items] == [
            i.request.images[0].sha256 for i in full.items]


def test_an_answer_in_the_response_cache_is_found_once_the_image_is_read_and_nothing_is_sent(ws, reads):
    with ChatServer(scripted_answer) as server, Store(ws.db_path) as store:
        first = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
        assert server.count == 3
        # The same images under new mtimes: a new run id (the id knows files by path, size and mtime) …
        for name in ("T001.png", "T002.png", "T003.png"):
            os.utime(ws.image_root / name, (HOUR_AGO + 30, HOUR_AGO + 30))
        reads.clear()
        again = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
    # … whose every request the cache answers from the bytes read, one read each, nothing sent again.
    assert again.run_id != first.run_id and (again.sent, again.from_cache, again.status) == (0, 3, "done")
    assert server.count == 3 and set(reads.values()) == {1}


def test_with_the_server_gone_the_response_cache_still_answers_requests_keyed_only_when_read(ws, reads):
    """Images this store has no trusted digest of (here: new mtimes, so a new run) are keyed from their bytes
    as they are sent. With the server gone a rerun still reads them and answers what the cache holds."""
    with ChatServer(scripted_answer) as server, Store(ws.db_path) as store:
        first = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
    for name in ("T001.png", "T002.png", "T003.png"):
        os.utime(ws.image_root / name, (HOUR_AGO + 30, HOUR_AGO + 30))
    reads.clear()
    with Store(ws.db_path) as store:  # the same address, nothing listening there now
        again = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
        stored = {r.case_id: r.cache_key for r in runs.replies(store, again.run_id)}
        assert stored == {r.case_id: r.cache_key for r in runs.replies(store, first.run_id)}
    assert again.run_id != first.run_id and (again.sent, again.from_cache, again.status) == (0, 3, "done")
    assert again.stopped is None and set(reads.values()) == {1}


def test_with_the_server_gone_a_request_the_cache_cannot_answer_stops_the_run_with_the_reason(ws, reads):
    with ChatServer(scripted_answer) as server, Store(ws.db_path) as store:
        probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
    for name in ("T001.png", "T002.png", "T003.png"):
        os.utime(ws.image_root / name, (HOUR_AGO + 30, HOUR_AGO + 30))
    changed = ws.image_root / "T002.png"
    Image.fromarray(gradient_image(seed=99)).save(changed)  # new content: no answer for it anywhere
    os.utime(changed, (HOUR_AGO + 30, HOUR_AGO + 30))
    with Store(ws.db_path) as store:
        again = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
    assert (again.sent, again.from_cache, again.not_sent) == (0, 2, 1) and again.status != "done"
    assert "nothing is listening" in again.stopped


def test_with_the_server_gone_the_cache_pass_gives_the_loop_back_between_requests(ws, monkeypatch):
    """In a study the other runs share the event loop: between two images read for the cache, it runs them."""
    from cfkit.probe.runner import send_plan

    with ChatServer(scripted_answer) as server, Store(ws.db_path) as store:
        probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
    for name in ("T001.png", "T002.png", "T003.png"):
        os.utime(ws.image_root / name, (HOUR_AGO + 30, HOUR_AGO + 30))
    ticks, at_read = [0], []
    for module, name in ((image_refs, "_read_unchanged"), (sending_images, "_read_unchanged_into")):
        def reading(*args, _read=getattr(module, name)):
            at_read.append(ticks[0])
            return _read(*args)
        monkeypatch.setattr(module, name, reading)

    async def alongside(store, backend, plan):
        async def ticker():
            while True:
                ticks[0] += 1
                await asyncio.sleep(0)
        other = asyncio.create_task(ticker())
        try:
            return await send_plan(store, backend, plan, concurrency=4)
        finally:
            other.cancel()

    with Store(ws.db_path) as store:
        backend = load_backend("openai:test-model", {"base_url": server.url})
        plan = plan_suite(ws, "contextcanvas", backend.capabilities, store=store, lazy=True)
        summary = asyncio.run(alongside(store, backend, plan))
    assert summary.from_cache == 3 and len(at_read) == 3
    assert at_read[0] < at_read[1] < at_read[2]  # the other task ran between each two reads


def test_with_the_server_gone_a_resumed_run_stops_after_a_bounded_look_in_the_cache(ws, reads):
    """A run whose first part was answered and whose rest never was: with the server gone, the cache is asked
    for the unsent requests (their images read) only until CACHE_ALONE_MISSES in a row find nothing, so the
    line saying the server is not there is not held up by reading every image."""
    from cfkit.probe.selection import Selection
    from cfkit.probe.sending import CACHE_ALONE_MISSES

    n = CACHE_ALONE_MISSES + 40
    images, lines = ws.image_root, []
    for i in range(n):
        Image.fromarray(gradient_image(16, 16, seed=10 + i)).save(images / f"M{i:03d}.png")
        lines.append(json.dumps({"id": f"M{i:03d}", "images": [f"M{i:03d}.png"], "question": f"Suitable for {i}?",
                                 "options": [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}], "gold": "A",
                                 "yes_option": "A"}) + "\n")
    ws.cases_path.write_text("".join(lines))
    aged(ws.root, HOUR_AGO)
    with ChatServer(scripted_answer) as server, Store(ws.db_path) as store:
        part = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url},
                           selection=Selection(limit=10))
        assert part.sent == 10
    reads.clear()
    with Store(ws.db_path) as store:
        rest = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
    # The ten asked before are answered from the cache by their known keys, none of them read again.
    assert (rest.sent, rest.from_cache, rest.not_sent) == (0, 10, n - 10) and "nothing is listening" in rest.stopped
    assert sum(reads.values()) == CACHE_ALONE_MISSES < n - 10


def test_a_run_stored_before_ids_knew_files_by_stat_is_not_sent_again(ws):
    """A store written by the cfkit before this rule has its runs under other ids. A finished one is still
    found by its inputs manifest (stat alone); an unfinished one is continued under the new id with every
    stored answer taken from the response cache: nothing already answered is sent again."""
    with ChatServer(scripted_answer) as server:
        with Store(ws.db_path) as store:
            done = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
        old_id = "contextcanvas-test-model-0ld1d000"
        update_rows(ws.db_path, "runs", {"id": old_id}, {"id": done.run_id})
        update_rows(ws.db_path, "replies", {"run_id": old_id}, {"run_id": done.run_id})
        with Store(ws.db_path) as store:
            rerun = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
            assert (rerun.run_id, rerun.sent, rerun.kept) == (old_id, 0, 3)
        # The same run cut short and never finished, as the earlier cfkit recorded it:
        with Store(ws.db_path) as store:
            notes = runs.get_run(store, old_id).notes
        assert notes.pop("run_id_rule") == "images by path, size and mtime"
        update_rows(ws.db_path, "runs", {"status": "interrupted", "inputs_sha256": None, "inputs_manifest": None,
                                         "notes": json.dumps(notes)}, {"id": old_id})
        with Store(ws.db_path) as store:
            resumed = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
        assert resumed.run_id == done.run_id != old_id
        assert (resumed.sent, resumed.from_cache, resumed.status) == (0, 3, "done") and server.count == 3
        # The run says so, once: the earlier run's id, and that nothing it had answered was sent again.
        [said] = [n for n in resumed.notes if old_id in n]
        assert "earlier cfkit" in said and "not sent again" in said
        with Store(ws.db_path) as store:
            again = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
        assert again.run_id == done.run_id and not [n for n in again.notes if old_id in n]


def test_an_image_rewritten_with_its_size_and_mtime_kept_stays_in_its_run_but_is_keyed_by_the_bytes_sent(ws):
    """What the run id promises: a file with the same path, size and mtime is taken to be the same file (as the
    digest cache takes it). A rewrite that keeps both is not a new run, yet no reply is stored under the other
    bytes' key: the key and the recorded digest are those of the bytes read to send."""
    path = ws.image_root / "T002.png"
    size = 4096
    before, after = (png_bytes(gradient_image(24, 16, seed)) for seed in (3, 8))
    assert before != after and max(len(before), len(after)) < size
    path.write_bytes(before + b"\0" * (size - len(before)))  # data after the image's end: still a valid PNG
    os.utime(path, ns=(10**18, 10**18))
    backend = Counting()
    with Store(ws.db_path) as store:
        plan = plan_suite(ws, "contextcanvas", backend.capabilities, store=store, lazy=True)
        planned_id = run_identity(backend, plan)[0]
        path.write_bytes(after + b"\0" * (size - len(after)))
        os.utime(path, ns=(10**18, 10**18))
        summary = run_probe(store, backend, plan, concurrency=2)
        assert summary.run_id == planned_id and summary.status == "done"
        stored = {r.case_id: r for r in runs.replies(store, summary.run_id)}
        full = plan_suite(ws, "contextcanvas", backend.capabilities, digests=Digests(None))
        assert stored["T002"].image_sha256 == _sha(path)
        assert stored["T002"].cache_key == cache_key(backend, full.items[1].request)


@pytest.mark.parametrize("change, words", [
    (lambda path: path.unlink(), "cannot be read any more"),
    (lambda path: path.write_bytes(png_bytes(gradient_image(96, 64, 6))), "changed after the run was planned"),
])
def test_an_image_that_fails_when_read_to_send_fails_its_request_alone_with_one_clear_line(ws, change, words):
    backend = Counting()
    with Store(ws.db_path) as store:
        plan = plan_suite(ws, "contextcanvas", backend.capabilities, store=store, lazy=True)
        change(ws.image_root / "T002.png")
        summary = run_probe(store, backend, plan, concurrency=2)
        assert sorted(backend.calls) == ["T001", "T003"] and summary.status == "incomplete"
        [failed] = [r for r in runs.replies(store, summary.run_id) if r.error == "transport"]
    assert failed.case_id == "T002" and words in failed.detail and "T002.png" in failed.detail
    assert "\n" not in failed.detail


def test_two_processes_on_a_lazy_plan_share_requests_by_the_early_identity(ws):
    """Leases and the settled check work before cache keys are known: a request another process answered (with
    the key of the bytes it read) is settled for this one, whose key for it is still unknown."""
    backend = Counting()
    with Store(ws.db_path) as store:
        plan = plan_suite(ws, "contextcanvas", backend.capabilities, store=store, lazy=True)
        run_id, keys, _ = run_identity(backend, plan)
        assert set(keys.values()) == {None}
        runs.open_run(store, run_id, model="counting:test", suite="contextcanvas", options={}, cfkit_version="0",
                      templates_sha256="", n_requests=len(plan.items), notes={})
        first = SharedQueue(store, run_id, list(plan.items), dict(keys), claim=1)
        other = SharedQueue(store, run_id, list(plan.items), dict(keys), claim=3)
        taken = asyncio.run(first.next())
        fields = ReplyFields(answer="A", parse="json", error=None, reason=None, confidence=None, detail=None)
        with store.transaction() as tx:
            runs.write_reply(tx, run_id, taken.key, cache_key="f" * 64, raw="A", fields=fields)

        async def drain(queue):
            return [item.case.id for item in [await queue.next() for _ in range(2)]] + [await queue.next()]

        assert asyncio.run(asyncio.wait_for(drain(other), 10)) == ["T002", "T003", None]
        assert other.elsewhere == 1 and taken.case.id == "T001"


@pytest.mark.parametrize("fmt, options", [
    ("JPEG", {}), ("JPEG", {"progressive": True}), ("JPEG", {"exif": b"Exif\0\0" + b"\0" * 60_000}),
    ("PNG", {}), ("GIF", {}), ("WEBP", {}), ("BMP", {}), ("TIFF", {}),
])
@pytest.mark.parametrize("size", [(1, 1), (97, 13), (640, 480), (3, 2000)])
def test_the_quick_header_reads_what_pillow_reads_or_leaves_it_to_pillow(fmt, options, size):
    buffer = io.BytesIO()
    Image.fromarray(gradient_image(*size, 2)).save(buffer, fmt, **options)
    data = buffer.getvalue()
    quick = quick_header(data[:HEAD_BYTES])
    assert quick is None or quick == read_header(data, source="x")
    if fmt in ("PNG", "GIF") or (fmt == "JPEG" and "exif" not in options):
        assert quick is not None  # the common types are read without Pillow


def test_cache_keys_are_those_stores_already_hold(ws):
    """The cache key's formula did not change with the run id's rule: an existing response cache still answers.
    Computed here independently, as cfkit computed it before: SHA-256 over the JSON of backend kind, model,
    answer-changing options and the request's fingerprint (its images as MIME type and SHA-256 of the bytes)."""
    backend = Counting()
    full = plan_suite(ws, "contextcanvas", backend.capabilities, digests=Digests(None))
    for item in full.items:
        material = {"backend": backend.kind, "model": backend.model, "identity": backend.cache_identity,
                    "request": item.request.fingerprint()}
        expected = hashlib.sha256(json.dumps(material, sort_keys=True, ensure_ascii=False,
                                             default=str).encode("utf-8")).hexdigest()
        assert cache_key(backend, item.request) == expected
        path = ws.image_root / item.case.images[0]
        assert item.request.fingerprint()["images"] == [["image/png", _sha(path)]]


def test_a_first_run_stats_each_image_once_before_sending_and_its_plan_holds_the_manifest_s_entries(ws, monkeypatch):
    """The path to the first request stats each image file once: the inputs digest's stat serves the plan's header
    checks, and the plan's record of each file is the manifest's entry itself (its text and numbers held once for
    the whole run), not a copy beside it."""
    from cfkit.probe.job import prepare_probe

    images = {str(p) for p in (ws.root / "data" / "images").iterdir()}
    stats: Counter = Counter()
    real_stat = os.stat

    def counted(path, *args, **kwargs):
        if str(path) in images:
            stats[str(path)] += 1
        return real_stat(path, *args, **kwargs)

    with ChatServer(scripted_answer) as server, Store(ws.db_path) as store:
        job = prepare_probe(ws, "openai:test-model", "contextcanvas", options={"base_url": server.url})
        monkeypatch.setattr(os, "stat", counted)
        planned = job.planned(store, lazy=True)
        monkeypatch.setattr(os, "stat", real_stat)
        shown = {item.image_file.path for item in planned.plan.items}
        assert shown and shown <= images
        assert {path: stats[path] for path in shown} == {path: 1 for path in shown}
        manifest = {entry[0]: entry for entry in planned.inputs.manifest["files"]}
        for item in planned.plan.items:
            entry, state = manifest[item.image_file.path], item.image_file
            assert entry == [state.path, state.size, state.mtime_ns]
            assert state.path is entry[0] and state.size is entry[1] and state.mtime_ns is entry[2]
            assert item.request.images[0].files[0] is state
        summary = job.run(store)
    assert summary.status == "done" and summary.sent == len(planned.plan.items)


def test_each_request_s_place_is_one_tuple_that_the_run_s_maps_share(ws):
    """A plan of 12,000 requests holds one (case, pair, condition) tuple per request: the maps by place that a run
    keeps while it sends (cache keys among them) hold the item's own tuple, not one built for each map."""
    backend = load_backend("openai:test-model", {"base_url": "http://127.0.0.1:9/v1"})
    plan = plan_suite(ws, "contextcanvas", backend.capabilities, lazy=True)
    _, keys, _ = run_identity(backend, plan)
    held = {key: key for key in keys}
    for item in plan.items:
        assert item.key == (item.case.id, item.pair_id, item.condition)
        assert item.key is item.key and held[item.key] is item.key


def test_digests_learned_while_sending_are_stored_as_the_run_goes_each_file_once(ws, monkeypatch):
    """A large first run does not hold every file's digest until it ends: they are stored in batches as it sends
    (here batches of one), and the table ends with each file's digest of its bytes."""
    from cfkit.probe import sending
    from cfkit.store import digests as digest_table

    batches: list[tuple[list[str], int]] = []  # (files stored, requests the server had then)
    remember = digest_table.remember

    def recording(store, learned):
        batches.append(([Path(d.path).name for d in learned], server.count))
        remember(store, learned)

    monkeypatch.setattr(sending, "LEARNED_BATCH", 1)
    monkeypatch.setattr(sending.digest_table, "remember", recording)
    with ChatServer(scripted_answer) as server, Store(ws.db_path) as store:
        summary = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url},
                              concurrency=1)
        assert summary.sent == 3 and summary.status == "done"
        assert batches[0][0] == ["T001.png"] and batches[0][1] < 2  # stored before the second request went out
        assert sorted(name for names, _ in batches for name in names) == ["T001.png", "T002.png", "T003.png"]
        assert {Path(r["path"]).name: r["sha256"] for r in table_rows(store.path, "file_digests")} == {
            name: _sha(ws.image_root / name) for name in ("T001.png", "T002.png", "T003.png")}


def test_a_run_warms_its_backend_up_before_it_plans_and_a_finished_one_does_not(ws, monkeypatch):
    """The backend's slow set-up (the openai client's import) starts before the plan is made, so the two overlap;
    a run found finished already plans nothing and warms nothing up."""
    import cfkit.probe.plan as plan_module
    from cfkit.backends.openai_chat import OpenAIBackend

    steps: list[str] = []
    planning = plan_module.plan_suite
    monkeypatch.setattr(OpenAIBackend, "warm_up", lambda self: steps.append("warm up"))
    monkeypatch.setattr(plan_module, "plan_suite", lambda *a, **k: steps.append("plan") or planning(*a, **k))
    with ChatServer(scripted_answer) as server, Store(ws.db_path) as store:
        first = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
        assert steps == ["warm up", "plan"] and first.status == "done"
        steps.clear()
        again = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
    assert steps == [] and again.run_id == first.run_id and server.count == 3
