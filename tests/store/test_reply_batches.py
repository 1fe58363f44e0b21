"""The reply tables' batched writers (what a run's commits use) and the claim's read of settled requests."""

from __future__ import annotations

from pathlib import Path

import pytest

from cfkit.store import Store, responses, runs
from cfkit.store.responses import CachedResponse
from cfkit.store.runs import ReplyFields, ReplyProvenance

FIELDS = ReplyFields(answer="A", parse="json", error=None, reason="r", confidence="high", detail=None,
                     reasoning="thought", parser="3")
FAILED = ReplyFields(answer=None, parse=None, error="transport", reason=None, confidence=None, detail="refused")


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / ".cfkit" / "cfkit.db") as opened:
        yield opened


def _open(store: Store, run_id: str) -> str:
    runs.open_run(store, run_id, model="openai:m", suite="counterfactual", options={}, cfkit_version="0",
                  templates_sha256="t", n_requests=4, notes={})
    return run_id


def test_replies_written_in_one_batch_read_back_as_one_at_a_time_writes_do(store):
    """The same replies through write_replies in one run and write_reply in another: every field alike."""
    provenance = ReplyProvenance(edit_id=3, image_sha256="b" * 64, server_model="srv", system_fingerprint="fp",
                                 truncated=True, endpoint="http://127.0.0.1:1")
    wanted = [(("T1", "CF01", "edit"), "k1", "text", FIELDS, 0.5, provenance, 99),
              (("T1", "CF01", "original"), "k2", None, FAILED, None, ReplyProvenance(), None),
              (("T2", "", "image"), "k3", "B", FIELDS, None, ReplyProvenance(image_sha256="c" * 64), None)]
    one, batched = _open(store, "one"), _open(store, "batched")
    stamp = "2026-01-02T03:04:05+00:00"
    with store.transaction() as tx:
        for key, cache_key, raw, fields, cost, prov, chars in wanted:
            runs.write_reply(tx, one, key, cache_key=cache_key, raw=raw, fields=fields, cost_usd=cost,
                             provenance=prov, raw_chars=chars, created_at=stamp)
        runs.write_replies(tx, [runs.reply_row(batched, key, cache_key=cache_key, raw=raw, fields=fields,
                                               cost_usd=cost, provenance=prov, raw_chars=chars, created_at=stamp)
                                for key, cache_key, raw, fields, cost, prov, chars in wanted])
    alone, together = runs.replies(store, one), runs.replies(store, batched)
    assert [r.__dict__ | {"run_id": None} for r in alone] == [r.__dict__ | {"run_id": None} for r in together]
    assert [(r.case_id, r.condition, r.cache_key, r.edit_id) for r in together] == [
        ("T1", "edit", "k1", 3), ("T1", "original", "k2", None), ("T2", "image", "k3", None)]


def test_responses_cached_in_one_batch_answer_and_an_existing_key_is_kept(store):
    first = CachedResponse(cache_key="k1", raw="old", usage={"prompt_tokens": 3}, latency_s=0.5)
    with store.transaction() as tx:
        responses.put(tx, first, backend="openai", model="m")
    rows = [responses.response_row(CachedResponse(cache_key=key, raw=raw, usage={"n": i}, truncated=True),
                                   backend="openai", model="m", created_at="2026-01-02T03:04:05+00:00")
            for i, (key, raw) in enumerate([("k1", "new"), ("k2", "two"), ("k3", None)])]
    with store.transaction() as tx:
        responses.put_rows(tx, rows)
    found = responses.cached(store, ["k1", "k2", "k3", "k4"])
    assert sorted(found) == ["k1", "k2", "k3"]
    assert found["k1"].raw == "old" and found["k1"].usage == {"prompt_tokens": 3}  # INSERT OR IGNORE: kept
    assert (found["k2"].raw, found["k2"].usage, found["k2"].truncated) == ("two", {"n": 1}, True)
    assert found["k3"].raw is None


def test_a_backends_reply_is_cached_as_the_cached_response_of_its_fields_would_be(store):
    """What a run's commit caches straight from a reply (every field set) reads back as the reply it was."""
    from dataclasses import fields

    from cfkit.backends import Reply

    reply = Reply(raw="B", usage={"prompt_tokens": 7, "completion_tokens": 2}, latency_s=0.25, cost_usd=0.001,
                  refused=True, server_model="srv", system_fingerprint="fp", raw_chars=300_000, reasoning="hmm",
                  truncated=True, endpoint="http://127.0.0.1:2")
    shared = [f.name for f in fields(CachedResponse) if f.name != "cache_key"]
    response = CachedResponse(cache_key="k9", **{name: getattr(reply, name) for name in shared})
    stamp = "2026-01-02T03:04:05+00:00"
    direct = responses.reply_response_row("k9", reply, backend="openai", model="m", created_at=stamp)
    assert direct == responses.response_row(response, backend="openai", model="m", created_at=stamp)
    with store.transaction() as tx:
        responses.put_rows(tx, [direct])
    assert responses.cached(store, ["k9"])["k9"] == response


def test_answered_finds_stored_replies_of_that_very_request_only(store):
    """A claim's check: a reply counts when its cache key is the one wanted (or any, when not known yet) and it
    is not a transport failure; other conditions, pairs and runs of the same case do not count."""
    run_id, other = _open(store, "run"), _open(store, "other")
    rows = [(run_id, ("T1", "CF01", "edit"), "k1", FIELDS), (run_id, ("T1", "CF01", "original"), "k2", FAILED),
            (run_id, ("T1", "CF02", "edit"), "k3", FIELDS), (run_id, ("T2", "", "image"), "old", FIELDS),
            (other, ("T3", "", "image"), "k5", FIELDS)]
    with store.transaction() as tx:
        runs.write_replies(tx, [runs.reply_row(r, key, cache_key=ck, raw="x", fields=f) for r, key, ck, f in rows])
    wanted = {("T1", "CF01", "edit"): "k1", ("T1", "CF01", "original"): "k2", ("T1", "CF02", "edit"): None,
              ("T2", "", "image"): "new", ("T3", "", "image"): "k5", ("T4", "", "image"): None}
    with store.transaction() as tx:
        found = runs.answered(tx, run_id, wanted)
    assert found == {("T1", "CF01", "edit"), ("T1", "CF02", "edit")}


def test_answered_reads_more_cases_than_one_statement_takes(store):
    run_id = _open(store, "many")
    keys = [(f"C{i:04d}", "", "image") for i in range(1203)]
    with store.transaction() as tx:
        runs.write_replies(tx, [runs.reply_row(run_id, key, cache_key=f"k{i}", raw="x", fields=FIELDS)
                                for i, key in enumerate(keys) if i % 2 == 0])
    with store.transaction() as tx:
        found = runs.answered(tx, run_id, {key: f"k{i}" for i, key in enumerate(keys)})
    assert found == {key for i, key in enumerate(keys) if i % 2 == 0}
