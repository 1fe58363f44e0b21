"""The audit tables and their owners: a frozen plan, places, labels saved decision by decision, final labels."""

from __future__ import annotations

from pathlib import Path

import pytest

from cfkit.errors import NotFoundError, StoreError, UsageError
from cfkit.store import SCHEMA_VERSION, Store, audit_labels, audits, now
from cfkit.store.audit_labels import Judgement
from cfkit.store.audits import AuditItem, AuditPlan, ItemImage, content_digest
from support.store_sql import schema_2_store, table_names, table_rows, user_version


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / ".cfkit" / "cfkit.db") as opened:
        yield opened


def _item(item_id: str, case: str, position: int, *, audit_id: str = "audit-1", model: str = "m1",
          answer: str | None = "A") -> AuditItem:
    fields = dict(case_id=case, question=f"Is {case} suitable?", options=(("A", "Yes"), ("B", "No")), gold="A",
                  yes_option="A", rationale="the red lantern", images=(ItemImage(f"{case}.png", "ab" * 32),),
                  answer=answer, parse="json", error=None, response="It shows [model] and a red lantern.")
    return AuditItem(id=item_id, audit_id=audit_id, position=position, run_id=f"run-{model}", model=model,
                     masked=1, content_sha256=content_digest(**fields), **fields)


def _plan(store: Store, audit_id: str = "audit-1", n: int = 3) -> list[AuditItem]:
    items = [_item(f"{i:x}{audit_id[-1]}c0ffee", f"C{i}", n - i, audit_id=audit_id) for i in range(n)]
    audits.create(store, AuditPlan(audit_id, now(), 0, 2, {"mode": "all"}, {"runs": []}, []), items)
    return items


def _label(store, item_id, who, answer_ok=True, cue=True, link=True, unsure=False, note=None):
    return audit_labels.save_label(store, "audit-1", item_id, who, Judgement(answer_ok, cue, link), unsure=unsure,
                                   note=note, places=2)


def test_a_plan_reads_back_as_written_in_plan_order(store):
    written = _plan(store)
    plan = audits.find_plan(store)
    assert (plan.id, plan.annotators, plan.selection) == ("audit-1", 2, {"mode": "all"})
    got = audits.items(store, "audit-1")
    assert [i.position for i in got] == [1, 2, 3]
    assert sorted(got, key=lambda i: i.id) == sorted(written, key=lambda i: i.id)
    assert got[0].images[0] == ItemImage("C2.png", "ab" * 32) and got[0].options == (("A", "Yes"), ("B", "No"))
    assert audits.find_item(store, "audit-1", got[0].id[:2].upper()) == got[0]  # a unique start, any case
    with pytest.raises(NotFoundError, match="no item 'zz'"):
        audits.find_item(store, "audit-1", "zz")
    assert audits.item_ids_taken(store, [got[0].id, "nope"]) == {got[0].id}


def test_a_plan_and_its_items_land_together_or_not_at_all(store):
    items = _plan(store)
    twin = [items[0]]  # the same item id again: the second plan must leave no trace
    with pytest.raises(StoreError, match="UNIQUE constraint failed: audit_items.id"):
        audits.create(store, AuditPlan("audit-2", now(), 0, 2, {}, {}, []), twin)
    assert [p.id for p in audits.list_plans(store)] == ["audit-1"]


def test_plans_are_found_by_id_start_or_newest(store):
    with pytest.raises(NotFoundError, match="no audit .* plan one with 'cfkit audit plan"):
        audits.find_plan(store)
    _plan(store, "audit-1")
    _plan(store, "audit-2")
    assert audits.find_plan(store).id == "audit-2"
    assert audits.find_plan(store, "audit-1").id == "audit-1"
    with pytest.raises(UsageError, match="matches 2 audits"):
        audits.find_plan(store, "audit")
    with pytest.raises(NotFoundError, match="no audit 'x'"):
        audits.find_plan(store, "x")


def test_agreement_is_written_when_both_labels_match_and_withdrawn_when_one_changes(store):
    item = _plan(store)[0].id
    _label(store, item, "alice")
    assert audit_labels.finals(store, "audit-1") == {}  # one label is not agreement
    _label(store, item, "bob")
    final = audit_labels.finals(store, "audit-1")[item]
    assert (final.basis, final.decided_by, final.judgement) == ("agreed", "alice, bob", Judgement(True, True, True))
    _label(store, item, "bob", link=False)
    assert audit_labels.finals(store, "audit-1") == {}
    _label(store, item, "bob", link=True, unsure=True)  # same values, but bob wants it discussed
    assert audit_labels.finals(store, "audit-1") == {}
    _label(store, item, "bob", link=True, unsure=False)
    assert audit_labels.finals(store, "audit-1")[item].basis == "agreed"


def test_an_undecided_criterion_is_no_agreement(store):
    item = _plan(store)[0].id
    _label(store, item, "alice", cue=None, link=None)
    _label(store, item, "bob", cue=None, link=None)
    assert audit_labels.finals(store, "audit-1") == {}
    assert not audit_labels.labels_by(store, "audit-1", "alice")[item].complete


def test_places_are_numbered_in_order_and_a_third_name_is_refused(store):
    first, second = _plan(store)[:2]
    _label(store, second.id, "bob")
    _label(store, first.id, "alice")
    _label(store, first.id, "bob")
    assert [(a.number, a.name) for a in audit_labels.annotators(store, "audit-1")] == [(1, "bob"), (2, "alice")]
    with pytest.raises(UsageError, match="already has its 2 annotators and 'carol' is not one of them"):
        _label(store, first.id, "carol")
    assert {lab.annotator for lab in audit_labels.labels(store, "audit-1")} == {"alice", "bob"}


def test_a_resolution_needs_a_note_and_freezes_the_labels(store):
    item = _plan(store)[0].id
    _label(store, item, "alice", cue=False)
    _label(store, item, "bob")
    with pytest.raises(UsageError, match="needs a note"):
        audit_labels.resolve(store, "audit-1", item, "carol", Judgement(True, True, False), "  ")
    final = audit_labels.resolve(store, "audit-1", item, "carol", Judgement(True, True, False), " cue is named ")
    assert audit_labels.finals(store, "audit-1")[item] == final
    assert (final.basis, final.decided_by, final.note) == ("resolved", "carol", "cue is named")
    with pytest.raises(UsageError, match="was adjudicated .* its labels can no longer change"):
        _label(store, item, "alice", cue=True)
    assert audit_labels.labels_by(store, "audit-1", "alice")[item].judgement.cue is False  # nothing changed


def test_an_annotators_labels_are_theirs_alone(store):
    items = _plan(store)
    _label(store, items[0].id, "alice", note="mine")
    _label(store, items[1].id, "bob", note="his")
    assert set(audit_labels.labels_by(store, "audit-1", "alice")) == {items[0].id}
    assert audit_labels.labels_by(store, "audit-1", "alice")[items[0].id].note == "mine"


def test_a_version_2_store_gains_the_audit_tables_and_keeps_its_rows(tmp_path: Path):
    path = tmp_path / "cfkit.db"
    schema_2_store(path)
    with Store(path) as store:
        assert user_version(store.path) == SCHEMA_VERSION
        tables = table_names(store.path)
        assert {"audit_plans", "audit_items", "audit_annotators", "audit_labels", "audit_finals"} <= tables
        assert table_rows(store.path, "runs", "id")[0]["id"] == "r1"
        _plan(store)
    with Store(path) as again:  # opening once more changes nothing (idempotent DDL)
        assert len(audits.items(again, "audit-1")) == 3
