"""Replies read and keyed when their batch is committed (cfkit.probe.recording): the rows stored are those a
reply-by-reply reading stores, a failed request of a lazy plan keeps its key, and a reply that cannot be read
does not cost the rest of its batch. Real stores, a real Chat Completions server on 127.0.0.1, real PNGs."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest

from cfkit.backends import Reply, load_backend
from cfkit.parse import PARSER_VERSION, parse_answer
from cfkit.probe import cache_key, plan_suite, probe_suite
from cfkit.probe.image_refs import Digests
from cfkit.probe.recording import Recorder
from cfkit.store import Store, runs
from cfkit.workspace import load_workspace
from support.chat_api_server import ChatServer, Scripted, answer_json, completion, error_body
from support.counting_backend import Counting
from support.probe_runs import many_cases
from support.store_sql import table_rows

ANSWERS = ['{"answer": "B", "reason": "a sad letter", "confidence": "high"}', "<think>hmm</think>A", "A. Yes\nB. No",
           "I'm sorry, I cannot tell.", "Neither, really"]


def _varied(body, n) -> Scripted:
    return Scripted(body=completion(ANSWERS[n % len(ANSWERS)]))


def test_replies_read_and_keyed_in_batches_store_what_each_reading_gives(tmp_path: Path):
    """24 requests of a lazy plan, answered in five ways: each stored row has the parse of its own raw text, the
    cache key and image digest of the bytes it sent, and the responses cache holds each under that key."""
    ws = load_workspace(many_cases(tmp_path / "ws", 24))
    with ChatServer(_varied) as server, Store(ws.db_path) as store:
        backend = load_backend("openai:test-model", {"base_url": server.url})
        full = plan_suite(ws, "contextcanvas", backend.capabilities, digests=Digests(None))
        summary = probe_suite(ws, store, "openai:test-model", "contextcanvas",
                              options={"base_url": server.url, "max_retries": 0}, concurrency=8)
        assert (summary.sent, summary.errors, summary.status) == (24, 0, "done")
        stored = {r.case_id: r for r in runs.replies(store, summary.run_id)}
        cached = {row["cache_key"]: row["raw"] for row in table_rows(store.path, "responses", "cache_key, raw")}
    assert len({r.raw for r in stored.values()}) == len(ANSWERS)  # every kind of answer came back
    for item in full.items:
        row = stored[item.case.id]
        expected = parse_answer(row.raw, item.case.options)
        assert (row.answer, row.parse, row.error, row.reason, row.confidence, row.parser) == (
            expected.answer, expected.rule, expected.error, expected.reason, expected.confidence, PARSER_VERSION)
        assert row.cache_key == cache_key(backend, item.request)
        image = ws.image_root / item.case.images[0]
        assert row.image_sha256 == hashlib.sha256(image.read_bytes()).hexdigest()
        assert cached[row.cache_key] == row.raw


def test_a_failed_request_of_a_lazy_plan_is_stored_with_the_key_of_what_it_sent(tmp_path: Path):
    ws = load_workspace(many_cases(tmp_path / "ws", 6))

    def refusing(body, n) -> Scripted:
        if "Is picture 3 " in body["messages"][1]["content"][0]["text"]:
            return Scripted(status=400, body=error_body("this one is refused"))
        return Scripted(body=completion(answer_json("A")))

    with ChatServer(refusing) as server, Store(ws.db_path) as store:
        backend = load_backend("openai:test-model", {"base_url": server.url})
        full = plan_suite(ws, "contextcanvas", backend.capabilities, digests=Digests(None))
        summary = probe_suite(ws, store, "openai:test-model", "contextcanvas",
                              options={"base_url": server.url, "max_retries": 0}, concurrency=4)
        stored = {r.case_id: r for r in runs.replies(store, summary.run_id)}
    assert summary.errors == 1 and summary.status == "incomplete"
    failed = [r for r in stored.values() if r.error == "transport"]
    assert len(failed) == 1 and "this one is refused" in failed[0].detail
    keys = {item.case.id: cache_key(backend, item.request) for item in full.items}
    assert {case_id: r.cache_key for case_id, r in stored.items()} == keys


@pytest.fixture
def setup(tmp_path: Path):
    ws = load_workspace(many_cases(tmp_path / "ws", 12))
    with Store(ws.db_path) as store:
        runs.open_run(store, "r1", model="counting:test", suite="contextcanvas", options={}, cfkit_version="0",
                      templates_sha256="", n_requests=12, notes={})
        yield store, plan_suite(ws, "contextcanvas", Counting.capabilities)


def test_a_reply_that_cannot_be_read_does_not_cost_the_rest_of_its_batch(setup):
    store, plan = setup
    recorder = Recorder(store, "r1", cache_as=None, batch=100, seconds=60.0)
    answer = Reply(raw='{"answer": "A", "reason": "r", "confidence": "low"}')
    broken = replace(plan.items[2], case=replace(plan.items[2].case, options=()))  # no options: cannot be read
    for item in [*plan.items[:2], broken, *plan.items[3:6]]:
        recorder.reply(item, "k", answer)
    with pytest.raises(ValueError):
        recorder.flush()
    stored = {r.case_id: r.answer for r in runs.replies(store, "r1")}
    assert stored == {item.case.id: "A" for item in [*plan.items[:2], *plan.items[3:6]]}
    recorder.flush()  # nothing left queued: the failed reply is not stored, and is sent again on the next run
    assert len(runs.replies(store, "r1")) == 5


def test_a_reply_queued_without_its_key_needs_the_digests_to_take_it_from(setup):
    store, plan = setup
    recorder = Recorder(store, "r1", cache_as=None)
    with pytest.raises(ValueError, match="digests"):
        recorder.reply(plan.items[0], None, Reply(raw="A"))
    recorder.keyer = lambda item, shas: (f"key-{shas[0]}", item)
    recorder.reply(plan.items[0], None, Reply(raw="A"), shas=("abc",))
    recorder.flush()
    assert [r.cache_key for r in runs.replies(store, "r1")] == ["key-abc"]
