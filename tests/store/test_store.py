"""The store and its table owners, without the CLI: records, selection rules, migrations, concurrency."""

from __future__ import annotations

import multiprocessing
import re
from pathlib import Path

import pytest

from cfkit.errors import NotFoundError, StoreError, UsageError
from cfkit.store import OWNER_NAMES, SCHEMA_VERSION, Store, checks, edits, responses, reviews, runs
from cfkit.store.checks import NewCheck
from cfkit.store.edits import NewEdit
from cfkit.store.responses import CachedResponse
from cfkit.store.runs import ReplyFields
from support.store_sql import (insert_edit_row, numbers_database, numbers_in, schema_1_store, set_user_version,
                               table_names, user_version)
from support.workspace import REPO


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / ".cfkit" / "cfkit.db") as opened:
        yield opened


def _new(spec_id: str = "CF01", **more) -> NewEdit:
    return NewEdit(spec_id=spec_id, spec_sha256="s", engine="classical", model="m", params={"op": "remove"},
                   seed=None, prompt="p", source_sha256="a", mask_sha256="b", started_at="2026-01-01T00:00:00+00:00",
                   **more)


def _ok_edit(store: Store, spec_id: str = "CF01", verdict: str | None = "pass") -> int:
    edit_id = edits.insert_pending(store, _new(spec_id))
    edits.mark_written(store, edit_id, raw_path=f"edits/{spec_id}/{edit_id}-raw.png", raw_sha256="r",
                       composite_path=f"edits/{spec_id}/{edit_id}-composite.png", composite_sha256="c")
    if verdict is not None:
        checks.insert(store, edit_id, spec_id, [NewCheck("composite", {}, verdict, [], False)])
    return edit_id


# ── edits ──────────────────────────────────────────────────────────────────


def test_an_edit_reads_failed_until_its_files_are_recorded(store):
    edit_id = edits.insert_pending(store, _new())
    pending = edits.get(store, edit_id)
    assert pending.status == "failed" and pending.error == "interrupted before its files were written"
    assert pending.label == "synthetic counterfactual diagnostic"
    edits.mark_written(store, edit_id, raw_path="edits/CF01/1-raw.png", raw_sha256="r",
                       composite_path="edits/CF01/1-composite.png", composite_sha256="c")
    done = edits.get(store, edit_id)
    assert done.status == "ok" and done.error is None
    assert done.composite_path == store.path.parent / "edits" / "CF01" / "1-composite.png"
    assert done.variants == ["raw", "composite"]


def test_unknown_edit_is_not_found(store):
    with pytest.raises(NotFoundError, match="no edit #7"):
        edits.get(store, 7)
    assert edits.find(store, 7) is None


def test_selected_edit_prefers_an_accept_then_the_newest_passing_unrejected_one(store):
    first, second, third = (_ok_edit(store, verdict=v) for v in ("pass", "pass", "fail"))
    assert edits.selected(store, "CF01").id == second  # the newest that passed
    assert edits.selected(store, "CF01", require_accepted=True) is None
    reviews.record(store, "CF01", second, "reject", "blurry")
    assert edits.selected(store, "CF01").id == first
    reviews.record(store, "CF01", third, "accept")
    assert edits.selected(store, "CF01", require_accepted=True).id == third  # a person's accept wins
    reviews.record(store, "CF01", first, "accept")
    assert edits.selected(store, "CF01").id == first  # the most recent accept
    reviews.record(store, "CF01", first, "reject", "changed my mind")
    assert edits.selected(store, "CF01").id == third  # third's own decision is still an accept
    assert edits.selected(store, "NOPE") is None


def test_a_decision_belongs_to_its_edit(store):
    older, newer = _ok_edit(store), _ok_edit(store)
    reviews.record(store, "CF01", older, "accept", "good")
    assert reviews.on_edit(store, older).decision == "accept"
    assert reviews.on_edit(store, newer) is None  # the spec's newest decision is not the newer edit's
    assert reviews.latest_for_spec(store, "CF01").edit_id == older
    with pytest.raises(UsageError, match="not one of accept, reject, skip"):
        reviews.record(store, "CF01", older, "maybe")


# ── checks ─────────────────────────────────────────────────────────────────


def test_the_latest_check_comes_back_in_one_shape(store):
    edit_id = _ok_edit(store, verdict=None)
    assert checks.latest(store, edit_id) is None
    checks.insert(store, edit_id, "CF01", [NewCheck("raw", {"ssim_out": 0.9}, "fail", ["SSIM"], True)])
    assert checks.latest(store, edit_id) is None  # no composite check yet
    assert checks.latest(store, edit_id, variant=None).variant == "raw"
    checks.insert(store, edit_id, "CF01", [NewCheck("composite", {"ssim_out": 0.99}, "pass", [], False)])
    latest = checks.latest(store, edit_id, variant=None)
    assert (latest.variant, latest.verdict, latest.label) == ("composite", "pass", "pass (without LPIPS)")
    assert set(checks.latest_by_variant(store, edit_id)) == {"raw", "composite"}


# ── runs, replies, responses ──────────────────────────────────────────────


def _open(store: Store, run_id: str = "counterfactual-m-1") -> str:
    runs.open_run(store, run_id, model="baseline:x", suite="counterfactual", options={}, cfkit_version="0",
                  templates_sha256="t", n_requests=2, notes={})
    return run_id


FIELDS = ReplyFields(answer="A", parse="json", error=None, reason="r", confidence="high", detail=None)


def test_a_reply_reads_back_with_every_field_it_was_written_with(store):
    """Replies are read by column position: each field must come back under its own name, in both readers."""
    import dataclasses

    from cfkit.store.runs import ReplyProvenance, ReplyRecord

    run_id = _open(store)
    fields = ReplyFields(answer=None, parse=None, error="unparseable", reason="why", confidence="low",
                         detail="said", reasoning="thought", parser="3")
    provenance = ReplyProvenance(edit_id=7, image_sha256="a" * 64, server_model="srv", system_fingerprint="fp",
                                 truncated=True, endpoint="http://127.0.0.1:1")
    with store.transaction() as tx:
        runs.write_reply(tx, run_id, ("T1", "CF01", "edit"), cache_key="k", raw="text", fields=fields, cost_usd=0.25,
                         provenance=provenance, raw_chars=99, created_at="2026-01-02T03:04:05+00:00")
        runs.write_reply(tx, run_id, ("T1", "CF01", "original"), cache_key=None, raw=None, fields=FIELDS)
    expected = ReplyRecord(run_id=run_id, case_id="T1", pair_id="CF01", condition="edit", cache_key="k", answer=None,
                           parse=None, error="unparseable", reason="why", confidence="low", raw="text", detail="said",
                           created_at="2026-01-02T03:04:05+00:00", cost_usd=0.25, edit_id=7, image_sha256="a" * 64,
                           server_model="srv", system_fingerprint="fp", raw_chars=99, reasoning="thought",
                           parser="3", truncated=True, endpoint="http://127.0.0.1:1")
    first, second = runs.replies(store, run_id)
    assert first == expected and runs.unanswered(store, run_id) == [expected]
    assert second.truncated is False and second.answer == "A" and second.raw is None
    assert dataclasses.replace(second) == second  # what __init__ makes of the same fields
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.answer = "B"


def test_replies_are_stored_and_replaced_and_a_run_is_removed_with_its_replies_but_not_the_cache(store):
    run_id = _open(store)
    with store.transaction() as tx:
        runs.write_reply(tx, run_id, ("T1", "CF01", "original"), cache_key="k1", raw="{}", fields=FIELDS, cost_usd=0.5)
        runs.write_reply(tx, run_id, ("T1", "CF01", "edit"), cache_key="k2", raw="{}", fields=FIELDS)
    with store.transaction() as tx:
        runs.write_reply(tx, run_id, ("T1", "CF01", "edit"), cache_key="k3", raw="{}", fields=FIELDS)
    index = {r.key: r for r in runs.replies(store, run_id)}
    assert set(index) == {("T1", "CF01", "original"), ("T1", "CF01", "edit")} and index[("T1", "CF01", "edit")].cache_key == "k3"
    assert runs.settled_keys(store, run_id) == {("T1", "CF01", "original"): "k1", ("T1", "CF01", "edit"): "k3"}
    assert runs.reply_states(store, run_id) == [(("T1", "CF01", "original"), FIELDS.answer is not None, FIELDS.error, None, False, False),
                                                (("T1", "CF01", "edit"), FIELDS.answer is not None, FIELDS.error, None, False, False)]
    runs.finish_run(store, run_id, status="done", n_done=2, n_errors=0, notes={})
    assert runs.get_run(store, run_id).cost_usd == 0.5
    with store.transaction() as tx:
        responses.put(tx, CachedResponse("k1", "{}"), backend="baseline", model="baseline:x")
    other = _open(store, "counterfactual-m-2")
    with store.transaction() as tx:
        runs.write_reply(tx, other, ("T1", "CF01", "edit"), cache_key="k9", raw="{}", fields=FIELDS)
    assert runs.delete_run(store, run_id) == (2, 0)
    assert runs.get_run(store, run_id) is None and runs.replies(store, run_id) == []
    assert [r.run_id for r in runs.replies(store, other)] == [other]  # another run's replies stay
    assert set(responses.cached(store, ["k1"])) == {"k1"}  # and so does the response cache


def test_a_rerun_without_prices_keeps_the_recorded_cost(store):
    run_id = _open(store)
    with store.transaction() as tx:
        runs.write_reply(tx, run_id, ("T1", "", "image"), cache_key="k", raw="x", fields=FIELDS, cost_usd=0.25)
    runs.finish_run(store, run_id, status="done", n_done=1, n_errors=0, notes={})
    with store.transaction() as tx:  # the same reply stored again by a rerun that has no prices
        runs.write_reply(tx, run_id, ("T1", "", "image"), cache_key="k", raw="x", fields=FIELDS)
    runs.finish_run(store, run_id, status="done", n_done=1, n_errors=0, notes={})
    assert runs.get_run(store, run_id).cost_usd == 0.25


def test_runs_are_found_by_id_or_unique_start(store):
    for run_id in ("modality-a-1", "modality-b-2", "contextcanvas-a-3"):
        _open(store, run_id)
    assert runs.find_run(store, "contextcanvas").id == "contextcanvas-a-3"
    with pytest.raises(UsageError, match="matches 2 runs"):
        runs.find_run(store, "modality")
    with pytest.raises(NotFoundError, match="no run 'zzz'"):
        runs.find_run(store, "zzz")
    with pytest.raises(UsageError, match="empty"):
        runs.find_run(store, " ")


def test_the_response_cache_keeps_the_first_response_of_a_key(store):
    with store.transaction() as tx:
        responses.put(tx, CachedResponse("k", "first", {"prompt_tokens": 3}, 0.1, 0.01), backend="b", model="m")
        responses.put(tx, CachedResponse("k", "second"), backend="b", model="m")
    found = responses.cached(store, ["k", "absent"])
    assert set(found) == {"k"} and found["k"].raw == "first" and found["k"].usage == {"prompt_tokens": 3}
    many = [f"key{i}" for i in range(1200)]  # more than one parameter chunk
    assert responses.cached(store, many) == {}


# ── the store itself ───────────────────────────────────────────────────────


def test_a_store_from_a_newer_cfkit_is_refused(tmp_path: Path):
    path = tmp_path / "cfkit.db"
    set_user_version(path, SCHEMA_VERSION + 1)
    with pytest.raises(StoreError, match="written by a newer cfkit"):
        Store(path)


def test_a_first_version_store_is_migrated_and_keeps_its_rows(tmp_path: Path):
    path = tmp_path / "cfkit.db"
    schema_1_store(path)
    with Store(path) as store:
        assert user_version(store.path) == SCHEMA_VERSION
        [reply] = runs.replies(store, "r1")
        assert (reply.answer, reply.cost_usd) == ("A", None)
        runs.finish_run(store, "r1", status="done", n_done=1, n_errors=0, notes={})
        old = runs.get_run(store, "r1")
        assert old.cost_usd == 1.5  # the cost recorded before the migration stays
        # What later versions record reads as not recorded on an old run, not as made up.
        assert (old.settings, old.settings_sha256, old.versions, old.endpoint) == ({}, None, {}, None)
        assert (reply.edit_id, reply.server_model) == (None, None)
        assert (reply.raw_chars, reply.reasoning, reply.parser) == (None, None, None)  # read before versions were kept
        cached = responses.cached(store, ["k"])["k"]
        assert (cached.server_model, cached.raw_chars, cached.reasoning) == (None, None, None)


def test_a_damaged_store_is_one_store_error(tmp_path: Path):
    path = tmp_path / "cfkit.db"
    path.write_bytes(b"not a database" * 512)
    with pytest.raises(StoreError, match="not a readable SQLite store"):
        Store(path)


def _writer(path: str, run_id: str, count: int) -> None:
    with Store(Path(path)) as store:
        _open(store, run_id)
        for i in range(count):
            with store.transaction() as tx:
                runs.write_reply(tx, run_id, (f"T{i}", "", "image"), cache_key=None, raw=None, fields=FIELDS)


def test_concurrent_writers_on_a_new_store_lose_nothing(tmp_path: Path):
    path = str(tmp_path / "fresh" / "cfkit.db")  # neither process finds a store: both create and migrate it
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(path, f"run-{k}", 60)) for k in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    with Store(Path(path)) as store:
        assert [len(runs.replies(store, f"run-{k}")) for k in range(3)] == [60, 60, 60]
        assert store.integrity_ok()


# ── ownership ──────────────────────────────────────────────────────────────


#: Every table and the owner module that holds its SQL; its DDL and migrations are in cfkit/store/tables/ under
#: the owner's name.
OWNERS = {"edits": "edits", "checks": "checks", "reviews": "reviews", "runs": "runs", "replies": "runs",
          "responses": "responses", "file_digests": "digests", "leases": "leases", "batches": "batches",
          "audit_plans": "audits", "audit_items": "audits", "audit_annotators": "audit_labels",
          "audit_labels": "audit_labels", "audit_finals": "audit_labels", "screens": "screens",
          "prelabels": "prelabels"}


def _holders(pattern: re.Pattern) -> set[str]:
    return {p.relative_to(REPO).as_posix() for p in (REPO / "cfkit").rglob("*.py") if pattern.search(p.read_text())}


@pytest.mark.parametrize("table", sorted(OWNERS))
def test_each_tables_sql_lives_in_its_owner_only(table):
    """Reads and writes in the owner; the table's definition (CREATE, ALTER, its indexes) in the owner's schema
    module alone, which the owner re-exports."""
    dml = re.compile(rf"\b(FROM|INTO|UPDATE|JOIN)\s+{table}\b", re.IGNORECASE)
    ddl = re.compile(rf"\bTABLE(?: IF NOT EXISTS)?\s+{table}\b|\bON\s+{table}\s*\(", re.IGNORECASE)
    assert _holders(dml) == {f"cfkit/store/{OWNERS[table]}.py"}
    assert _holders(ddl) == {f"cfkit/store/tables/{OWNERS[table]}.py"}


def test_every_table_is_created_by_a_new_store(store):
    assert table_names(store.path) == set(OWNERS)


def test_each_owner_re_exports_its_schema_module():
    import importlib

    import cfkit.store as store_package

    for name in store_package.OWNER_NAMES:
        owner = importlib.import_module(f"cfkit.store.{name}")
        schema = importlib.import_module(f"cfkit.store.tables.{name}")
        assert owner.DDL is schema.DDL and owner.MIGRATIONS is schema.MIGRATIONS, name


def test_a_new_store_is_made_without_importing_the_owners(tmp_path: Path):
    """Creating a store (and migrating an old one) reads the schema modules only: a first ``probe run`` on a new
    workspace does not build the records of the edit, review and audit tables it never touches."""
    import json
    import subprocess
    import sys

    old = tmp_path / "old.db"
    schema_1_store(old)
    code = ("import json, sys; from pathlib import Path; from cfkit.store import Store\n"
            "for path in sys.argv[1:]:\n    Store(Path(path)).close()\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('cfkit.store'))))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "new.db"), str(old)], capture_output=True,
                          text=True, timeout=120, check=True)
    loaded = set(json.loads(done.stdout))
    owners = {f"cfkit.store.{name}" for name in OWNER_NAMES}
    assert not loaded & owners, loaded & owners
    assert {f"cfkit.store.tables.{name}" for name in OWNER_NAMES} <= loaded
    assert user_version(tmp_path / "new.db") == user_version(old) == SCHEMA_VERSION
    assert table_names(tmp_path / "new.db") == table_names(old) == set(OWNERS)


def test_a_broken_constraint_is_not_reported_as_a_damaged_file(store):
    edit_id = _ok_edit(store)
    with pytest.raises(StoreError, match="broke a rule of the schema") as info:
        with store.transaction() as tx:
            insert_edit_row(tx, edit_id)
    assert "damaged" not in str(info.value)
    assert edits.get(store, edit_id).status == "ok"  # rolled back, nothing lost


def test_processes_opening_a_new_store_at_once_all_get_it(tmp_path: Path):
    # The second of two connections switching a new file to WAL at the same moment is told "locked" at once;
    # the store retries rather than fail the command. Ten new stores, two processes each.
    import subprocess
    import sys

    code = "import sys; from pathlib import Path; from cfkit.store import Store; Store(Path(sys.argv[1])).close()"
    for n in range(10):
        path = tmp_path / f"new-{n}.db"
        procs = [subprocess.Popen([sys.executable, "-c", code, str(path)], stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        errors = [p.communicate(timeout=60)[1] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], errors


def test_every_owner_module_is_named_so_its_tables_are_created():
    """The owners are imported lazily, by name: an owner missing from OWNER_NAMES would get no tables."""
    from pathlib import Path

    import cfkit.store as store_package

    folder = Path(store_package.__file__).parent
    modules = {p.stem for p in folder.glob("*.py")} - {"__init__", "db"}
    assert set(store_package.OWNER_NAMES) == modules


def test_query_in_asks_any_number_of_values(tmp_path: Path):
    """Past SQLite's old 999-parameter limit too: the values are asked in chunks and every match comes back."""
    db = numbers_database(tmp_path / "t.db", 3000)
    wanted = list(range(0, 6000, 2))  # 3,000 values, half of them absent
    assert sorted(numbers_in(db, wanted)) == list(range(0, 3000, 2))
    assert numbers_in(db, []) == []
    db.close()
