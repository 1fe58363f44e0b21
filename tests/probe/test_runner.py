"""The probe runner without the CLI: bounded concurrency, what is stored, what a rerun sends, failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from cfkit.backends import ProbeRequest, Reply
from cfkit.errors import BackendError
from cfkit.probe import plan_suite, run_probe
from cfkit.store import Store, runs
from cfkit.workspace import load_workspace
from support.counting_backend import Counting
from support.probe_runs import many_cases
from support.store_sql import table_rows


@pytest.fixture
def setup(tmp_path: Path):
    ws = load_workspace(many_cases(tmp_path / "ws", 24))
    store = Store(ws.db_path)
    yield ws, store, plan_suite(ws, "contextcanvas", Counting.capabilities)
    store.close()


def test_every_request_is_answered_within_the_concurrency_bound(setup):
    ws, store, plan = setup
    backend = Counting()
    summary = run_probe(store, backend, plan, concurrency=3)
    assert (summary.status, summary.total, summary.sent, summary.errors) == ("done", 24, 24, 0)
    assert 1 < backend.most_in_flight <= 3
    stored = runs.replies(store, summary.run_id)
    assert len(stored) == 24 and {r.answer for r in stored} == {"A"} and {r.parse for r in stored} == {"json"}
    assert runs.get_run(store, summary.run_id).complete


def test_a_rerun_sends_nothing_and_a_new_run_answers_from_the_cache(setup):
    ws, store, plan = setup
    first = run_probe(store, Counting(), plan, concurrency=4)
    again = Counting()
    summary = run_probe(store, again, plan, concurrency=4)
    assert again.calls == [] and summary.kept == 24 and summary.sent == 0 and summary.run_id == first.run_id


def test_transport_failures_are_stored_and_only_they_are_sent_again(setup):
    ws, store, plan = setup
    flaky = Counting(fail={"M002", "M005"})
    summary = run_probe(store, flaky, plan, concurrency=4)
    assert summary.status == "incomplete" and summary.errors == 2
    assert (summary.failed, summary.not_sent, summary.missing) == (2, 0, 2) and "503" in summary.first_failure
    failed = [r for r in runs.replies(store, summary.run_id) if r.error == "transport"]
    assert {r.case_id for r in failed} == {"M002", "M005"} and all("503" in r.detail for r in failed)
    healed = Counting()
    second = run_probe(store, healed, plan, concurrency=4)
    assert sorted(healed.calls) == ["M002", "M005"] and second.status == "done"


def test_a_budget_stops_sending_before_it_would_be_passed(setup):
    ws, store, plan = setup
    backend = Counting(price=0.01)
    summary = run_probe(store, backend, plan, concurrency=4, max_cost=0.055)
    assert summary.status == "incomplete" and summary.stopped and "--max-cost" in summary.stopped
    assert summary.cost_usd <= 0.055 and len(backend.calls) == 5
    assert (summary.failed, summary.not_sent) == (0, 19)


def test_a_backend_that_cannot_go_on_fails_the_run_and_keeps_what_arrived(setup, monkeypatch):
    # Ctrl-C is tested through a real process in test_probe.py; a fatal backend error ends the run the same way.
    ws, store, plan = setup
    backend = Counting()
    original = backend.answer

    async def rejected_key(request):
        if len(backend.calls) >= 6:
            raise BackendError("401 from the server: the key was rejected")
        return await original(request)

    monkeypatch.setattr(backend, "answer", rejected_key)
    with pytest.raises(BackendError, match="401"):
        run_probe(store, backend, plan, concurrency=2)
    [record] = runs.list_runs(store)
    assert record.status == "failed" and 0 < len(runs.replies(store, record.id)) < 24
    assert record.error == "BackendError: 401 from the server: the key was rejected"  # why it stopped, recorded


def test_a_crash_inside_a_backend_is_recorded_with_the_run(setup, monkeypatch):
    ws, store, plan = setup
    backend = Counting()

    async def broken(request):
        raise ModuleNotFoundError("No module named 'tokenizers'")

    monkeypatch.setattr(backend, "answer", broken)
    with pytest.raises(ModuleNotFoundError):
        run_probe(store, backend, plan, concurrency=1)
    [record] = runs.list_runs(store)
    assert record.status == "failed" and record.error == "ModuleNotFoundError: No module named 'tokenizers'"


def test_a_run_records_its_settings_versions_and_what_each_reply_was(setup):
    from importlib.metadata import version

    ws, store, plan = setup
    summary = run_probe(store, Counting(), plan, concurrency=2, protocol="paper")
    record = runs.get_run(store, summary.run_id)
    assert record.settings["generation"] == {"temperature": 0.0, "max_tokens": 512}
    assert record.settings["protocol"] == record.protocol == "paper"
    assert record.versions["cfkit"] == record.cfkit_version
    assert record.versions["openai"] == version("openai") and record.versions["torch"] == version("torch")
    assert record.requests_sha256 and record.settings_sha256
    reply = runs.replies(store, summary.run_id)[0]
    image = plan.items[0].request.images[0].data
    assert reply.image_sha256 == __import__("hashlib").sha256(image).hexdigest()
    assert reply.edit_id is None  # only an 'edit' question shows an edit


class Thinking(Counting):
    """Replies with a reasoning block, a reasoning text beside it, and a length past the storage cap."""

    async def answer(self, request: ProbeRequest) -> Reply:
        self.calls.append(request.meta.case_id)
        return Reply(raw="<think>the letter is a sad one</think>B", reasoning="server trace", raw_chars=70_000)


def test_a_reply_stores_its_full_length_reasoning_and_parser_version_and_a_cache_hit_rebuilds_them(setup):
    from cfkit.parse import PARSER_VERSION

    ws, store, plan = setup
    first = run_probe(store, Thinking(), plan, concurrency=4)
    stored = runs.replies(store, first.run_id)
    expected = {("B", "leading-id", 70_000, "server trace\n\nthe letter is a sad one", PARSER_VERSION)}
    assert {(r.answer, r.parse, r.raw_chars, r.reasoning, r.parser) for r in stored} == expected
    assert {r.raw for r in stored} == {"<think>the letter is a sad one</think>B"}  # raw as the model wrote it
    runs.delete_run(store, first.run_id)
    again = Counting()  # would answer A: every answer must come from the cache instead
    second = run_probe(store, again, plan, concurrency=4)
    assert again.calls == [] and second.from_cache == 24
    rebuilt = runs.replies(store, second.run_id)
    assert {(r.answer, r.parse, r.raw_chars, r.reasoning, r.parser) for r in rebuilt} == expected


def test_replies_are_committed_in_batches_and_a_crash_loses_at_most_the_open_batch(setup):
    import sqlite3

    from cfkit.probe.recording import Recorder

    ws, store, plan = setup
    runs.open_run(store, "r1", model="counting:test", suite="contextcanvas", options={}, cfkit_version="0",
                  templates_sha256="", n_requests=24, notes={})
    recorder = Recorder(store, "r1", cache_as=None, batch=10, seconds=60.0)

    def visible() -> int:  # what another process (or a rerun after kill -9) would see
        return sum(r["run_id"] == "r1" for r in table_rows(ws.db_path, "replies", "run_id"))

    answer = Reply(raw='{"answer": "A", "reason": "r", "confidence": "low"}')
    for item in plan.items[:9]:
        recorder.reply(item, "k", answer)
    assert visible() == 0 and not recorder.due()  # queued, not committed
    recorder.reply(plan.items[9], "k", answer)
    assert visible() == 10 and recorder.commits == 1  # the tenth reply commits the batch
    for item in plan.items[10:13]:
        recorder.transport(item, "k", "503 from the server")
    assert visible() == 10
    recorder.flush()
    assert visible() == 13 and recorder.commits == 2


def test_a_run_commits_far_fewer_times_than_it_stores_replies(setup, monkeypatch):
    ws, store, plan = setup
    real = store.transaction
    opened = []

    def counting():
        opened.append(1)
        return real()

    monkeypatch.setattr(store, "transaction", counting)
    summary = run_probe(store, Counting(), plan, concurrency=4)
    assert summary.sent == 24 and len(runs.replies(store, summary.run_id)) == 24
    assert len(opened) < 24 / 2  # every write of the run: opening, leases, replies, closing


def test_each_run_records_the_library_versions_and_the_backend_s_own(setup, tmp_path):
    """The installed versions are read once per process; every run still records them, with its backend's."""
    from cfkit.probe.identity import library_versions

    ws, store, plan = setup
    plain, own = Counting(), Counting()
    own.versions = {"server": "1.2.3", "cfkit": "as the backend says"}
    first = run_probe(store, plain, plan, concurrency=2)
    with Store(tmp_path / "other.db") as other:
        second = run_probe(other, own, plan, concurrency=2)
        assert runs.get_run(other, second.run_id).versions == library_versions(own)
    assert runs.get_run(store, first.run_id).versions == library_versions(plain)
    assert library_versions(own)["server"] == "1.2.3" and library_versions(own)["cfkit"] == "as the backend says"
