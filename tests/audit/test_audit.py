"""The audit library: planning, blinding, orders, labels, agreement, adjudication and worksheets, on stored runs.

The runs come from the real openai backend talking to a loopback chat server
(tests/support/audit_workspace.py); the two models name themselves in their reasons.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

from cfkit.audit.adjudication import needs_resolution, resolve_item
from cfkit.audit.agreement import audit_agreement
from cfkit.audit.exchange import export_worksheet, import_worksheet
from cfkit.audit.items import annotator_order, blinded_items, check_annotator, load_audit, revealed_items
from cfkit.audit.labelling import update_label
from cfkit.audit.plan import input_drift, plan_audit
from cfkit.errors import Incomplete, LabelError, NotFoundError, UsageError
from cfkit.store import Store, audit_labels, audits, runs
from cfkit.store.audits import content_digest
from cfkit.store.runs import ReplyFields
from cfkit.visible import from_spreadsheet_cell as restore
from cfkit.visible import spreadsheet_cell as neutralise
from cfkit.workspace import load_workspace
from support import audit_workspace as aw
from support.store_sql import delete_rows, update_rows


@pytest.fixture
def ws(source, tmp_path):
    root, run_ids = source
    shutil.copytree(root, tmp_path / "ws")
    return load_workspace(tmp_path / "ws"), run_ids


def _plan(ws, run_ids, **kw):
    with Store(ws.db_path) as store:
        return plan_audit(ws, store, list(run_ids.values()), **kw)


def _set_reply(ws, run_id: str, case: str, reason: str, answer: str = "A") -> None:
    with Store(ws.db_path) as store, store.transaction() as tx:
        runs.write_reply(tx, run_id, (case, "", "image"), cache_key=None, raw=json.dumps({"answer": answer}),
                         fields=ReplyFields(answer, "json", None, reason, "high", None))


# ── planning ───────────────────────────────────────────────────────────────


def test_a_plan_freezes_one_blinded_item_per_run_and_case(ws):
    ws, run_ids = ws
    result = _plan(ws, run_ids)
    assert (result.items, result.models, result.cases) == (18, 2, 9)
    with Store(ws.db_path) as store:
        items = audits.items(store, result.plan.id)
    assert {(i.model, i.case_id) for i in items} == {(m, c) for m in aw.MODELS for c in [*aw.CASES, "AU09"]}
    assert sorted(i.position for i in items) == list(range(18))
    for item in items:
        assert re.fullmatch(r"[0-9a-f]{8}", item.id) and item.case_id.lower() not in item.id
        assert not any(word in item.response.lower() for word in aw.FORBIDDEN), item.response
        fields = {k: getattr(item, k) for k in ("case_id", "question", "options", "gold", "yes_option", "rationale",
                                                 "images", "answer", "parse", "error", "response")}
        assert item.content_sha256 == content_digest(**fields)
    free_text = next(i for i in items if i.case_id == "AU03" and i.model == aw.GPT)
    assert free_text.response == aw.FREE_TEXT[aw.GPT, "AU03"]  # no reason field: the raw reply is shown
    inputs = result.plan.inputs
    import hashlib
    assert inputs["cases"]["sha256"] == hashlib.sha256(ws.cases_path.read_bytes()).hexdigest()
    assert [r["model"] for r in inputs["runs"]] == list(aw.MODELS)
    assert all(re.fullmatch(r"[0-9a-f]{64}", r["replies_sha256"]) for r in inputs["runs"])


def test_a_rerun_or_an_edited_cases_file_never_changes_an_audited_item(ws):
    ws, run_ids = ws
    plan_id = _plan(ws, run_ids).plan.id
    with Store(ws.db_path) as store:
        before = audits.items(store, plan_id)
        assert input_drift(ws, store, audits.find_plan(store)) == []
    ws.cases_path.write_text(ws.cases_path.read_text().replace("Scenario AU01", "Edited AU01"))
    _set_reply(ws, run_ids[aw.GPT], "AU01", "A different reason altogether.")
    with Store(ws.db_path) as store:
        assert audits.items(store, plan_id) == before
        drift = input_drift(ws, store, audits.find_plan(store))
    assert drift == [f"the cases file {ws.cases_path} changed", f"run {run_ids[aw.GPT]} was rerun or changed"]


def test_balanced_sampling_takes_half_gold_yes_half_gold_no_with_the_seed(ws):
    ws, run_ids = ws
    picks = []
    for seed in (0, 0, 5):
        result = _plan(ws, run_ids, balanced=4, seed=seed, force=True)
        with Store(ws.db_path) as store:
            cases = sorted({i.case_id for i in audits.items(store, result.plan.id)})
        assert sum(aw.CASES[c][0] == "A" for c in cases) == 2 and len(cases) == 4
        assert result.plan.notes == ["--balanced draws from two-option cases only: 1 other case left out"]
        picks.append(cases)
    assert picks[0] == picks[1]
    with pytest.raises(UsageError, match="needs 5 gold-Yes and 5 gold-No .* there are 4 and 4"):
        _plan(ws, run_ids, balanced=10, force=True)


def test_a_cases_file_chooses_the_cases_and_every_run_must_have_them(ws):
    ws, run_ids = ws
    subset = ws.root / "audit.txt"
    subset.write_text("AU02\nAU07  # two cases\n")
    result = _plan(ws, run_ids, cases_file=subset)
    assert (result.items, result.plan.selection["mode"]) == (4, "cases")
    # a gap in one run, as a run that ended incomplete leaves
    delete_rows(ws.db_path, "replies", {"run_id": run_ids[aw.QWEN], "case_id": "AU07"})
    with pytest.raises(NotFoundError, match=f"run {run_ids[aw.QWEN]} has no usable reply for case AU07"):
        _plan(ws, run_ids, cases_file=subset, force=True)
    default = _plan(ws, run_ids, force=True)  # without a file, the case is left out and said
    assert default.cases == 8 and default.plan.notes == [
        "1 case left out: not answered (or failed in transport) in every run"]


def test_plans_that_cannot_be_audited_are_refused(ws):
    ws, run_ids = ws
    gpt = run_ids[aw.GPT]
    with Store(ws.db_path) as store:
        with pytest.raises(UsageError, match="given twice"):
            plan_audit(ws, store, [gpt, gpt])
        with pytest.raises(UsageError, match="--cases FILE or --balanced N, not both"):
            plan_audit(ws, store, [gpt], cases_file="x", balanced=2)
        update_rows(store.path, "runs", {"suite": "modality"}, {"id": gpt})
        with pytest.raises(UsageError, match="is a modality run; the audit grades contextcanvas replies"):
            plan_audit(ws, store, [gpt])
        plan_audit(ws, store, [run_ids[aw.QWEN]])
        with pytest.raises(UsageError, match="is not finished .* pass --force"):
            plan_audit(ws, store, [run_ids[aw.QWEN]])


# ── blinding and orders ────────────────────────────────────────────────────


def test_each_annotator_has_a_stable_order_of_their_own(ws):
    ws, run_ids = ws
    _plan(ws, run_ids)
    with Store(ws.db_path) as store:
        audit = load_audit(store)
        alice, again, bob = (annotator_order(audit, n) for n in ("alice", "alice", "bob"))
    assert [i.id for i in alice] == [i.id for i in again] != [i.id for i in bob]
    assert sorted(i.id for i in alice) == sorted(i.id for i in bob) == sorted(i.id for i in audit.items)


def test_an_annotators_listing_is_blind_and_holds_only_their_own_labels(ws):
    ws, run_ids = ws
    _plan(ws, run_ids)
    with Store(ws.db_path) as store:
        audit = load_audit(store)
        first, second = audit.items[:2]
        update_label(store, audit, first, "bob", cue=False, link=False, note="BOB-SECRET-NOTE")
        update_label(store, audit, second, "alice", cue=True)
        listing = blinded_items(store, audit, "alice")
    text = json.dumps(listing).lower()
    assert not any(word in text for word in aw.FORBIDDEN) and "bob-secret-note" not in text and "bob" not in text
    labelled = {row["item"]: row["label"] for row in listing}
    assert labelled[first.id] is None
    assert labelled[second.id]["cue"] is True and labelled[second.id]["link"] is None
    assert [row["order"] for row in listing] == list(range(1, 19))


def test_the_record_is_revealed_only_once_every_label_is_in(ws):
    ws, run_ids = ws
    _plan(ws, run_ids)
    with Store(ws.db_path) as store:
        audit = load_audit(store)
        with pytest.raises(Incomplete, match="0 of 36 planned labels are in"):
            revealed_items(store, audit)
        for item in audit.items:
            for name in ("alice", "bob"):
                update_label(store, audit, item, name, cue=True, link=True)
        shown = revealed_items(store, audit)
    assert {row["model"] for row in shown} == set(aw.MODELS)
    row = next(r for r in shown if r["case"] == "AU02" and r["model"] == aw.QWEN)
    assert (row["run"], row["correct"], row["final"]["basis"]) == (run_ids[aw.QWEN], False, "agreed")
    assert set(row["labels"]) == {"alice", "bob"}


# ── labels ─────────────────────────────────────────────────────────────────


def test_answer_correct_starts_from_the_parser_and_changes_keep_the_rest(ws):
    ws, run_ids = ws
    _plan(ws, run_ids)
    with Store(ws.db_path) as store:
        audit = load_audit(store)
        item = next(i for i in audit.items if i.case_id == "AU02" and i.model == aw.QWEN)  # answered B, gold A
        label = update_label(store, audit, item, "alice", cue=True)
        assert (label.judgement.answer_ok, label.judgement.cue, label.judgement.link) == (False, True, None)
        label = update_label(store, audit, item, "alice", answer_ok=True, note="the parser misread it")
        label = update_label(store, audit, item, "alice", link=False)
    assert (label.judgement.answer_ok, label.judgement.cue, label.judgement.link) == (True, True, False)
    assert label.note == "the parser misread it" and label.complete
    with pytest.raises(UsageError, match="annotator name is 1-40"):
        check_annotator("bad\x1bname")


# ── agreement and adjudication ─────────────────────────────────────────────

#: (cue, link) per annotator for the 18 items, in plan order: disagreements on both criteria.
ALICE = [(1, 1), (1, 0), (0, 0), (1, 1), (1, 1), (0, 1), (1, 1), (1, 0), (0, 0),
         (1, 1), (1, 1), (0, 0), (1, 1), (1, 0), (1, 1), (0, 1), (1, 1), (1, 1)]
BOB = [(1, 1), (1, 1), (0, 0), (0, 1), (1, 1), (0, 0), (1, 1), (1, 0), (1, 0),
       (1, 1), (0, 1), (0, 0), (1, 1), (1, 1), (1, 1), (0, 1), (1, 0), (1, 1)]


def _label_all(store, audit) -> None:
    for item, a, b in zip(audit.items, ALICE, BOB):
        update_label(store, audit, item, "alice", cue=bool(a[0]), link=bool(a[1]))
        update_label(store, audit, item, "bob", cue=bool(b[0]), link=bool(b[1]))


def _ac1(first: list[bool], second: list[bool]) -> float:
    """Gwet's AC1 for two raters and two categories, written out by hand."""
    n = len(first)
    p_o = sum(a == b for a, b in zip(first, second)) / n
    pi = (sum(first) + sum(second)) / (2 * n)
    chance = 2 * pi * (1 - pi)
    return (p_o - chance) / (1 - chance)


def test_agreement_matches_scikit_learn_and_the_hand_formula(ws):
    ws, run_ids = ws
    _plan(ws, run_ids)
    with Store(ws.db_path) as store:
        audit = load_audit(store)
        with pytest.raises(Incomplete, match="no item is labelled by both"):
            audit_agreement(store, audit)
        _label_all(store, audit)
        result = audit_agreement(store, audit, n_resamples=500)
    correct = [i.parser_correct for i in audit.items]
    for name, index in (("cue", 0), ("link", 1)):
        first = [bool(a[index]) for a in ALICE]
        second = [bool(b[index]) for b in BOB]
        got = result.criteria[name]
        # Tolerance: float rounding only (both compute from the same counts).
        assert got.kappa == pytest.approx(cohen_kappa_score(first, second), abs=1e-12)
        assert got.ac1 == pytest.approx(_ac1(first, second), abs=1e-12)
        assert got.raw == pytest.approx(100 * sum(a == b for a, b in zip(first, second)) / 18, abs=1e-12)
    ega_a = [c and bool(a[0]) and bool(a[1]) for c, a in zip(correct, ALICE)]
    ega_b = [c and bool(b[0]) and bool(b[1]) for c, b in zip(correct, BOB)]
    assert result.criteria["ega"].kappa == pytest.approx(cohen_kappa_score(ega_a, ega_b), abs=1e-12)
    assert result.criteria["answer"].kappa_undefined is None and result.criteria["answer"].raw == 100.0
    differing = [i.id for i, a, b in zip(audit.items, ALICE, BOB) if a != b]
    assert [p.item.id for p in result.disagreements] == differing
    data = result.to_dict()
    assert list(data["criteria"]) == ["answer", "cue", "link", "ega"]
    assert {"n", "raw", "kappa", "kappa_ci", "ac1", "table"} <= set(data["criteria"]["cue"])
    assert "alice" not in json.dumps(data["disagreements"]) and "annotator_1" in data["disagreements"][0]


def test_agreement_before_every_label_needs_force(ws):
    ws, run_ids = ws
    _plan(ws, run_ids)
    with Store(ws.db_path) as store:
        audit = load_audit(store)
        for item in audit.items[:5]:
            for name in ("alice", "bob"):
                update_label(store, audit, item, name, cue=True, link=True)
        with pytest.raises(Incomplete, match="5 of 18 items are labelled by both"):
            audit_agreement(store, audit)
        assert len(audit_agreement(store, audit, unblind=True, n_resamples=100).pairs) == 5


def test_disagreements_and_unsure_marks_need_a_resolution_with_a_note(ws):
    ws, run_ids = ws
    _plan(ws, run_ids)
    with Store(ws.db_path) as store:
        audit = load_audit(store)
        _label_all(store, audit)
        agreed = next(i for i, a, b in zip(audit.items, ALICE, BOB) if a == b)
        update_label(store, audit, agreed, "bob", unsure=True)
        waiting = needs_resolution(store, audit)
        assert agreed.id in {p.item.id for p in waiting}
        assert len(waiting) == 1 + sum(a != b for a, b in zip(ALICE, BOB))
        other = next(i for i, a, b in zip(audit.items, ALICE, BOB) if a == b and i.id != agreed.id)
        with pytest.raises(UsageError, match="same label .* agreed; pass --force"):
            resolve_item(store, audit, other, "carol", cue=True, link=True, note="x")
        with pytest.raises(UsageError, match="needs a note"):
            resolve_item(store, audit, agreed, "carol", cue=True, link=True, note="")
        final = resolve_item(store, audit, agreed, "carol", cue=False, link=True, note="the cue is not visible")
        assert (final.basis, final.decided_by, final.judgement.cue) == ("resolved", "carol", False)
        with pytest.raises(UsageError, match="was resolved by carol"):
            resolve_item(store, audit, agreed, "carol", cue=True, link=True, note="again")
        assert agreed.id not in {p.item.id for p in needs_resolution(store, audit)}
        unlabelled = _plan(ws, run_ids, force=True)
        fresh = load_audit(store, unlabelled.plan.id)
        with pytest.raises(Incomplete, match="not labelled by both annotators"):
            resolve_item(store, fresh, fresh.items[0], "carol", cue=True, link=True, note="n")


# ── worksheets ─────────────────────────────────────────────────────────────


def test_csv_cells_a_spreadsheet_would_run_are_neutralised_and_restored():
    for cell in ("=HYPERLINK(\"http://x\")", "+1", "-2", "@SUM(A1)", "\tx", "\rx"):
        assert neutralise(cell) == "'" + cell and restore(neutralise(cell)) == cell
    assert neutralise("plain") == "plain" and restore("'quoted") == "'quoted"


def test_a_worksheet_goes_out_blind_and_comes_back_as_labels(ws):
    ws, run_ids = ws
    _set_reply(ws, run_ids[aw.GPT], "AU01", '=HYPERLINK("http://evil.example","click")')
    _plan(ws, run_ids)
    with Store(ws.db_path) as store:
        audit = load_audit(store)
        text = export_worksheet(store, audit, "alice", "csv")
        assert not any(word in text.lower() for word in aw.FORBIDDEN)
        rows = list(csv.DictReader(io.StringIO(text)))
        assert all(not row["response"].startswith("=") for row in rows)
        assert "'=HYPERLINK" in text
        for row, (cue, link) in zip(rows, ALICE):
            row["cue"], row["link"] = ("yes" if cue else "no"), ("y" if link else "n")
        rows[0]["note"] = "=a note that looks like a formula"
        rows[1]["cue"] = rows[1]["link"] = ""  # left for later
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows([{**r, "note": neutralise(r["note"])} for r in rows])
        result = import_worksheet(store, audit, "alice", Path("sheet.csv"), out.getvalue())
        assert (result.saved, result.blank) == (17, 1)
        own = audit_labels.labels_by(store, audit.id, "alice")
        assert own[rows[0]["item"]].note == "=a note that looks like a formula"
        assert rows[1]["item"] not in own
        jsonl = export_worksheet(store, audit, "alice", "jsonl")
        first = json.loads(jsonl.splitlines()[0])
        assert first["item"] == rows[0]["item"] and first["cue"] is bool(ALICE[0][0])


@pytest.mark.parametrize("line, message", [
    ('{"item": "zzzzzzzz", "cue": "yes", "link": "no"}', "item 'zzzzzzzz' is not in audit"),
    ('{"item": "ITEM", "cue": "maybe", "link": "no"}', "cue is 'maybe'; write yes or no"),
    ('{"item": "ITEM", "cue": "yes"}', "has cue but no link"),
    ('{"item": "ITEM", "cue": "yes", "link": "no"}\n{"item": "ITEM", "cue": "no", "link": "no"}', "labelled again"),
    ("[1, 2]", "expected a JSON object"),
    ("{oops", "not valid JSON"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
])
def test_a_bad_worksheet_saves_nothing_and_names_the_line(ws, line, message):
    ws, run_ids = ws
    _plan(ws, run_ids)
    with Store(ws.db_path) as store:
        audit = load_audit(store)
        good = f'{{"item": "{audit.items[1].id}", "cue": "yes", "link": "yes"}}\n'
        text = good + line.replace("ITEM", audit.items[0].id) + "\n"
        with pytest.raises(LabelError, match=re.escape(message) if "'" not in message else message.replace("'", ".")):
            import_worksheet(store, audit, "alice", Path("sheet.jsonl"), text)
        assert audit_labels.labels(store, audit.id) == []


def test_a_worksheet_csv_with_an_unclosed_quote_names_the_problem(ws):
    ws, run_ids = ws
    _plan(ws, run_ids)
    with Store(ws.db_path) as store:
        audit = load_audit(store)
        text = f'item,cue,link\n{audit.items[0].id},"yes,no\n' + "x" * 140_000 + "\n"
        with pytest.raises(LabelError, match="sheet.csv:.*never closed"):
            import_worksheet(store, audit, "alice", Path("sheet.csv"), text, "csv")
        assert audit_labels.labels(store, audit.id) == []
