"""Images held by reference: a plan holds paths and digests, each image is read when its request is sent,
and a digest cache in the store (path, size, mtime) keeps a rerun from reading unchanged files again."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import io
import json
import os
import time
from pathlib import Path

import pytest
from PIL import Image

from cfkit.backends import Capabilities, ImageData
from cfkit.errors import ImageError
from cfkit.images import png_bytes, side_by_side
from cfkit.probe import plan_suite, probe_suite, run_probe
from cfkit.probe import image_refs
from cfkit.probe.image_refs import Digests, ImageRef
from cfkit.probe.sending_images import SendingImages
from cfkit.store import Store, runs
from cfkit.store.digests import RACY_S
from cfkit.workspace import load_workspace
from support.chat_api_server import ChatServer
from support.counting_backend import Counting
from support.probe_runs import openai_run, scripted_answer
from support.store_sql import forget_digests, table_rows
from support.workspace import aged, gradient_image, run_cli

CAPS = Capabilities(images=True, multi_image=True, json_schema=True, remote=True)
HOUR_AGO = time.time() - 3600


def _age(folder: Path) -> None:
    """Files as a user's are: written long before the run (a digest of a just-written file is checked again)."""
    for path in folder.iterdir():
        os.utime(path, (HOUR_AGO, HOUR_AGO))


@pytest.fixture
def ws(tiny_ws):
    _age(tiny_ws / "data" / "images")
    return load_workspace(tiny_ws)


@pytest.fixture
def hashes(monkeypatch) -> list[str]:
    """The files read and hashed, in order."""
    seen: list[str] = []
    real = image_refs._read_hashed

    def counting(path):
        seen.append(path.name)
        return real(path)

    monkeypatch.setattr(image_refs, "_read_hashed", counting)
    return seen


def test_a_plan_holds_paths_and_digests_and_reads_each_image_when_sent(ws):
    plan = plan_suite(ws, "contextcanvas", CAPS)
    ref = plan.items[0].request.images[0]
    assert isinstance(ref, ImageRef)
    assert not [f.name for f in dataclasses.fields(ref) if isinstance(getattr(ref, f.name), bytes)]
    data = (ws.image_root / "T001.png").read_bytes()
    assert ref.sha256 == hashlib.sha256(data).hexdigest() and ref.mime == "image/png" and ref.size == (96, 64)
    assert ref.load() == ImageData(data, "image/png")


def test_the_digest_cache_spares_a_rerun_every_read_and_notices_a_changed_file(ws, hashes):
    with Store(ws.db_path) as store:
        first = plan_suite(ws, "contextcanvas", CAPS, store=store)
        assert sorted(hashes) == ["T001.png", "T002.png", "T003.png"]
        hashes.clear()
        again = plan_suite(ws, "contextcanvas", CAPS, store=store)
        assert hashes == []  # nothing read: path, size and mtime matched
        assert [i.request.fingerprint() for i in again.items] == [i.request.fingerprint() for i in first.items]
        # A new image under the same name is read again, and its requests change.
        Image.fromarray(gradient_image(96, 64, 9)).save(ws.image_root / "T002.png")
        os.utime(ws.image_root / "T002.png", (HOUR_AGO + 60, HOUR_AGO + 60))
        changed = plan_suite(ws, "contextcanvas", CAPS, store=store)
        assert hashes == ["T002.png"]
        assert changed.items[1].request.images[0].sha256 == hashlib.sha256(
            (ws.image_root / "T002.png").read_bytes()).hexdigest()
        assert changed.items[1].request.fingerprint() != first.items[1].request.fingerprint()


def test_a_digest_taken_just_after_a_write_is_checked_again_then_trusted(ws, hashes):
    # A rewrite of the same size within one tick of the filesystem clock keeps the mtime, so a digest taken
    # right after a write is not trusted the next time; once taken later, it is.
    # The file's mtime is put half a second ahead, so that the first digest is taken "just after the write"
    # however slowly a loaded machine gets to it (it had 50 ms), and the second one only once that window is over.
    fresh = ws.image_root / "T001.png"
    Image.fromarray(gradient_image(96, 64, 4)).save(fresh)
    written = time.time_ns() + 500_000_000
    os.utime(fresh, ns=(written, written))
    read = []
    with Store(ws.db_path) as store:
        for _ in range(3):
            hashes.clear()
            digests = Digests(store)
            digests.prefetch([fresh])
            digests.save()
            read.append(len(hashes))
            time.sleep(max(0.0, (written - time.time_ns()) / 1e9 + RACY_S * 1.5))
    assert read == [1, 1, 0]


def test_files_hashed_in_threads_get_the_digests_one_thread_gives_and_the_first_bad_file_is_named(
        tmp_path, monkeypatch):
    monkeypatch.setattr(image_refs, "HASH_THREADS", 2)
    monkeypatch.setattr(image_refs, "HASH_RUN_BYTES", 3000)  # a few files a run: many runs, several ahead
    paths = []
    for i in range(40):
        path = tmp_path / f"img{i:02d}.png"
        path.write_bytes(png_bytes(gradient_image(24 + i, 16)))
        paths.append(path)
    threaded = Digests(None)
    threaded.prefetch(paths)
    assert threaded.hashed == 40
    for path in paths:
        serial = image_refs._hash_file(path, os.stat(path))
        assert dataclasses.replace(threaded.file(path), hashed_at_ns=0) == dataclasses.replace(serial, hashed_at_ns=0)
        assert threaded.sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    (tmp_path / "img07.png").write_bytes(b"not an image")
    (tmp_path / "img30.png").write_bytes(b"not one either")
    with pytest.raises(ImageError, match="img07.png: not a readable image"):
        Digests(None).prefetch(paths)


def test_other_image_types_are_sent_as_png_and_keyed_by_the_bytes_sent(ws):
    tiff = ws.image_root / "T003.tif"
    Image.fromarray(gradient_image(40, 30, 3)).save(tiff)
    [ref] = Digests(None).refs([tiff], as_sheet=False)
    sent = ref.load()
    assert ref.kind == "png" and sent.mime == "image/png" and ref.sha256 == hashlib.sha256(sent.data).hexdigest()
    assert sent.data == png_bytes(Image.open(tiff).convert("RGB"))


def test_two_images_for_a_single_image_backend_are_one_sheet_drawn_when_sent(ws):
    paths = [ws.image_root / "T001.png", ws.image_root / "T002.png"]
    [sheet] = Digests(None).refs(paths, as_sheet=True)
    expected = side_by_side(paths, ["First image", "Second image"])
    assert sheet.kind == "sheet" and sheet.load() == expected
    assert sheet.sha256 == hashlib.sha256(expected.data).hexdigest()
    assert sheet.size == Image.open(io.BytesIO(expected.data)).size


def test_an_image_changed_after_planning_is_not_sent_under_the_old_key(ws):
    with Store(ws.db_path) as store:
        plan = plan_suite(ws, "contextcanvas", Counting.capabilities, store=store)
        Image.fromarray(gradient_image(96, 64, 8)).save(ws.image_root / "T002.png")  # after planning
        backend = Counting()
        summary = run_probe(store, backend, plan, concurrency=2)
        assert sorted(backend.calls) == ["T001", "T003"] and summary.status == "incomplete"
        [failed] = [r for r in runs.replies(store, summary.run_id) if r.error == "transport"]
        assert failed.case_id == "T002" and "changed after the run was planned" in failed.detail
        # Planned again, the new image is a new request (a new run), sent with its own bytes.
        again = plan_suite(ws, "contextcanvas", Counting.capabilities, store=store)
        second = run_probe(store, Counting(), again, concurrency=2)
        assert second.run_id != summary.run_id and second.status == "done" and second.from_cache == 2


def test_requests_in_flight_that_share_an_image_read_it_once(ws, monkeypatch):
    plan = plan_suite(ws, "contextcanvas", CAPS)
    request = plan.items[0].request
    loads = []
    real = ImageRef.load
    monkeypatch.setattr(ImageRef, "load", lambda self: loads.append(self) or real(self))
    sending = SendingImages()
    first, second = sending.acquire(request), sending.acquire(request)
    assert len(loads) == 1 and first.images[0] is second.images[0] and isinstance(first.images[0], ImageData)
    sending.release(request)
    sending.release(request)
    assert sending._held == {}  # nothing kept once no request in flight holds it
    sending.acquire(request)
    assert len(loads) == 2


def test_a_rerun_reads_no_image_and_a_dry_run_remembers_nothing(tiny_ws, hashes):
    _age(tiny_ws / "data" / "images")
    ws = load_workspace(tiny_ws)
    with ChatServer(scripted_answer) as server:
        with Store(ws.db_path) as store:
            first = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
            assert first.sent == 3 and hashes == []  # read to be sent, not hashed before (test_send_while_planning)
            assert len(table_rows(store.path, "file_digests")) == 3  # yet remembered from the bytes sent
            hashes.clear()
            again = probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})
            assert again.sent == 0 and hashes == []
            forget_digests(store.path, "T003.png")
            before = len(table_rows(store.path, "file_digests"))
        preview = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                           "--base-url", server.url, "--dry-run", "--json"])
        assert preview.exit_code == 0 and json.loads(preview.stdout)["stored"] == 3
    with Store(ws.db_path) as store:
        assert len(table_rows(store.path, "file_digests")) == before  # the dry run wrote nothing


def test_a_rerun_on_unchanged_files_decides_by_stat_alone_and_any_changed_input_is_noticed(tiny_ws, monkeypatch):
    import cfkit.dataset as dataset

    ws = load_workspace(aged(tiny_ws, HOUR_AGO))
    real_load = dataset.load_cases
    loads = []
    monkeypatch.setattr(dataset, "load_cases", lambda *a: loads.append(1) or real_load(*a))
    with ChatServer(scripted_answer) as server, Store(ws.db_path) as store:
        def again():
            loads.clear()
            return probe_suite(ws, store, "openai:test-model", "contextcanvas", options={"base_url": server.url})

        first = again()
        assert first.sent == 3 and loads
        rerun = again()
        assert (rerun.run_id, rerun.sent, rerun.kept, loads) == (first.run_id, 0, 3, [])  # no file read or parsed
        # The same bytes with a new mtime: read again, found unchanged by content, still nothing sent.
        os.utime(ws.cases_path, (HOUR_AGO + 5, HOUR_AGO + 5))
        touched = again()
        assert (touched.run_id, touched.sent, len(loads)) == (first.run_id, 0, 1)
        assert again().sent == 0 and loads == []  # the new mtimes are remembered
        # A template override that was absent: the requests change, a new run answers them.
        override = ws.probes_dir / "templates" / "system.txt"
        override.parent.mkdir(parents=True, exist_ok=True)
        override.write_text("You judge pictures. Answer with JSON.\n")
        os.utime(override, (HOUR_AGO + 9, HOUR_AGO + 9))
        changed = again()
        assert changed.run_id != first.run_id and changed.sent == 3 and len(loads) == 1
