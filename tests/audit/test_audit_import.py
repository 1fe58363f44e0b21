"""Importing labels: a worksheet is saved as the labels of the annotator it belongs to, whole or not at all.

Two ways an import used to save wrong labels: another annotator's filled-in
worksheet imported ``--as`` someone else became that person's labels (the
agreement then read 100%), and re-importing a worksheet after an item was
adjudicated stopped at that item with some rows already saved.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from cfkit.audit.adjudication import resolve_item
from cfkit.audit.exchange import export_worksheet, import_worksheet
from cfkit.audit.items import load_audit
from cfkit.audit.labelling import update_label
from cfkit.audit.plan import plan_audit
from cfkit.errors import LabelError
from cfkit.interop.annotation import export_tasks, import_tasks
from cfkit.store import Store, audit_labels
from cfkit.workspace import load_workspace
from support.workspace import run_cli




def _filled(text: str, cue: str, link: str) -> tuple[str, list[dict]]:
    """A CSV worksheet with every row's cue and link filled in."""
    rows = list(csv.DictReader(io.StringIO(text)))
    for row in rows:
        row["cue"], row["link"] = cue, link
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue(), rows


def _snapshot(store, audit, name):
    return {ref: (label.judgement, label.unsure, label.note, label.updated_at)
            for ref, label in audit_labels.labels_by(store, audit.id, name).items()}

@pytest.fixture
def audit_ws(audited):
    """The planned audit's workspace (tests/audit/conftest.py)."""
    return audited[0]



def test_another_annotators_worksheet_is_refused_and_saves_nothing(audit_ws):
    with Store(audit_ws.db_path) as store:
        audit = load_audit(store)
        alice_sheet, _ = _filled(export_worksheet(store, audit, "alice", "csv"), "yes", "yes")
        assert import_worksheet(store, audit, "alice", Path("alice.csv"), alice_sheet).saved == len(audit.items)
        update_label(store, audit, audit.items[0], "bob", cue=False, link=False)
        before = _snapshot(store, audit, "bob")
        with pytest.raises(LabelError, match=r"alice\.csv:\d+: item \w+ is number \d+ in this worksheet but number "
                                             r"\d+ in bob's order.*exported for another annotator.*--as bob"):
            import_worksheet(store, audit, "bob", Path("alice.csv"), alice_sheet)
        assert _snapshot(store, audit, "bob") == before
        # Sorted by case in a spreadsheet, or with the order column deleted, bob's own worksheet still imports.
        bob_sheet, rows = _filled(export_worksheet(store, audit, "bob", "csv"), "no", "yes")
        rows.sort(key=lambda row: (row["case"], row["item"]))
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        assert import_worksheet(store, audit, "bob", Path("bob.csv"), out.getvalue()).saved == len(audit.items)
        bare = "".join(json.dumps({"item": row["item"], "cue": "yes", "link": "no"}) + "\n" for row in rows)
        assert import_worksheet(store, audit, "bob", Path("bob.jsonl"), bare).saved == len(audit.items)


@pytest.mark.parametrize("fmt", ["label-studio", "argilla"])
def test_another_annotators_labelling_tool_export_is_refused(audit_ws, fmt):
    with Store(audit_ws.db_path) as store:
        audit = load_audit(store)
        for item in audit.items:
            update_label(store, audit, item, "alice", cue=True, link=False)
        exported = export_tasks(store, audit, "alice", fmt)  # alice's own labels ride along as her annotation
        back = import_tasks(store, audit, "alice", Path("alice.json"), exported, fmt)
        assert (back.unchanged, back.saved) == (len(audit.items), 0)  # her own labels, back as they were
        with pytest.raises(LabelError, match=r"alice\.json:\d+: .* in bob's order.*exported for another annotator"):
            import_tasks(store, audit, "bob", Path("alice.json"), exported, fmt)
        assert audit_labels.labels_by(store, audit.id, "bob") == {}


def test_a_worksheet_imported_again_after_adjudication_keeps_the_resolution_and_saves_all_or_nothing(audit_ws):
    with Store(audit_ws.db_path) as store:
        audit = load_audit(store)
        for item in audit.items:
            update_label(store, audit, item, "alice", cue=True, link=True)
            update_label(store, audit, item, "bob", cue=True, link=item is not audit.items[-1])
        disputed = audit.items[-1]
        resolve_item(store, audit, disputed, "carol", cue=True, link=False, note="the link is not made")
        sheet = export_worksheet(store, audit, "alice", "csv")
        rows = list(csv.DictReader(io.StringIO(sheet)))

        # Exported and imported back unchanged: every other row unchanged, the adjudicated one left as it is.
        result = import_worksheet(store, audit, "alice", Path("alice.csv"), sheet)
        assert (result.saved, result.unchanged, result.blank, result.adjudicated) == (0, len(audit.items) - 1, 0, 1)

        # A change to another row and to the adjudicated item's row: refused at the adjudicated row's line,
        # and the other change is not saved either.
        changed = [dict(row) for row in rows]
        other = next(row for row in changed if row["item"] != disputed.id)
        other["cue"] = "no"
        line = next(n for n, row in enumerate(changed, start=2) if row["item"] == disputed.id)
        changed[line - 2]["link"] = "no"
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(changed)
        before = _snapshot(store, audit, "alice")
        with pytest.raises(LabelError, match=rf"alice\.csv:{line}: item {disputed.id} was adjudicated on .* final "
                                             "label stands"):
            import_worksheet(store, audit, "alice", Path("alice.csv"), out.getvalue())
        assert _snapshot(store, audit, "alice") == before
        final = audit_labels.finals(store, audit.id)[disputed.id]
        assert (final.basis, final.judgement.link) == ("resolved", False)


@pytest.mark.parametrize("resolved, said", [(1, "1 row of adjudicated items, unchanged, left as it is."),
                                            (2, "2 rows of adjudicated items, unchanged, left as they are.")])
def test_import_says_the_adjudicated_rows_it_left_in_the_number_of_their_count(audit_ws, tmp_path, resolved, said):
    with Store(audit_ws.db_path) as store:
        audit = load_audit(store)
        for item in audit.items:
            update_label(store, audit, item, "alice", cue=True, link=True)
            update_label(store, audit, item, "bob", cue=True, link=item not in audit.items[-resolved:])
        for item in audit.items[-resolved:]:
            resolve_item(store, audit, item, "carol", cue=True, link=False, note="the link is not made")
        sheet = tmp_path / "alice.csv"
        sheet.write_text(export_worksheet(store, audit, "alice", "csv"))
    result = run_cli(["-w", str(audit_ws.root), "audit", "import", str(sheet), "--as", "alice"])
    assert result.exit_code == 0, result.output
    assert result.stderr.rstrip().endswith(said), result.stderr
