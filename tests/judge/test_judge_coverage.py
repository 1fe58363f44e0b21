"""How much of the audit the judge's numbers cover, and asking again the replies that gave no Yes/No.

`cfkit audit agreement --judge` gave n per row and nothing else: a row over 8 of
14 items read like one over all of them. Each row now says how many of the
audit's items it covers and why each other item is left out (the judge gave no
valid Yes/No; its label is of an older wording of the questions; it was not
asked or its request failed; the annotator has not labelled it), stderr says
it, and the exit status is 1 while the judge's labels are what is missing.

A reply with no valid Yes/No was kept for good: `audit prelabel
--retry-unanswered` asks those again, and only those.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

import cfkit

from support import audit_workspace as aw
from support.chat_api_server import ChatServer, Scripted, completion, user_text
from support.workspace import run_cli

JUDGE = "openai:coverage-judge"
KEY = {"OPENAI_API_KEY": "sk-x"}
CUE_QUESTION = "Does the response name"


def cli(ws, *args, **kw):
    return run_cli(["-w", str(ws), *args], **kw)


def _response(body: dict) -> str:
    return re.search(r"<<<(.*)>>>", user_text(body), re.S).group(1)


def _store_labels(ws, judge: str, version: str):
    """The people's labels and the judge's labels of one prompt version, read straight from the store."""
    from cfkit.audit.items import load_audit
    from cfkit.store import audit_labels, open_store, prelabels

    with open_store(ws / ".cfkit" / "cfkit.db") as store:
        audit = load_audit(store)
        people = {a.number: audit_labels.labels_by(store, audit.id, a.name)
                  for a in audit_labels.annotators(store, audit.id)}
        mine = [p for p in prelabels.prelabels(store, audit.id, judge=judge) if p.prompt_version == version]
    return people, mine


@pytest.fixture(scope="module")
def half_labelled(tmp_path_factory):
    """An audit that alice labelled whole and bob all but its last three items."""
    ws = aw.build(tmp_path_factory.mktemp("coverage") / "ws")
    run_ids = aw.run_models(ws)
    assert cli(ws, "audit", "plan", "--run", run_ids[aw.GPT], "--run", run_ids[aw.QWEN]).exit_code == 0
    rows = json.loads(cli(ws, "audit", "items", "--as", "alice", "--json").stdout)
    assert len(rows) > 6 and len({r["response"] for r in rows}) == len(rows)
    for n, row in enumerate(rows):
        assert cli(ws, "audit", "label", row["item"], "--as", "alice", "--cue", "yes" if n % 3 else "no",
                   "--link", "yes").exit_code == 0
        if n < len(rows) - 3:
            assert cli(ws, "audit", "label", row["item"], "--as", "bob", "--cue", "yes" if n % 4 else "no",
                       "--link", "no" if n % 5 == 0 else "yes").exit_code == 0
    return ws, rows


def test_each_judge_row_says_what_it_covers_and_why_the_rest_is_left_out(half_labelled, tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(half_labelled[0], ws)
    rows = half_labelled[1]
    refused, unasked, stale = rows[0]["response"], rows[1]["response"], rows[2]["response"]

    def script(body: dict, n: int) -> Scripted:
        response, cue = _response(body), CUE_QUESTION in user_text(body)
        if cue and response == refused:  # refused: stored as no label
            return Scripted(body=completion(None, model=body["model"], refusal="I can't help with that."))
        if (not cue and response == unasked) or (response == stale and "closely" in user_text(body)):
            return Scripted(status=400, body={"error": {"message": "bad request"}})
        return Scripted(body=completion("Yes" if len(response) % 2 else "No", model=body["model"]))

    args = ["audit", "prelabel", "--judge", JUDGE, "-o", "max_retries=0", "--json"]
    with ChatServer(script) as server:
        assert cli(ws, *args, "-o", f"base_url={server.url}", env=KEY).exit_code == 1
        # The question file is edited: the third item's new requests fail, so only its old labels are left.
        (ws / "probes" / "templates").mkdir(parents=True, exist_ok=True)
        text = (Path(cfkit.__file__).parent / "templates" / "judge-audit.yaml").read_text(encoding="utf-8")
        assert "Judge its response." in text
        (ws / "probes" / "templates" / "judge-audit.yaml").write_text(
            text.replace("Judge its response.", "Judge its response closely."), encoding="utf-8")
        second = cli(ws, *args, "-o", f"base_url={server.url}", env=KEY)
    assert second.exit_code == 1
    version = json.loads(second.stdout)["prompt_version"]

    result = cli(ws, "audit", "agreement", "--judge", JUDGE, "--unblind", "--json", "--resamples", "200")
    assert result.exit_code == 1, result.stderr
    judged = json.loads(result.stdout)["judge"]
    total = len(rows)
    bob_missing = {r["item"] for r in rows[-3:]}
    expected = {  # (annotator, criterion) -> reasons; an item is counted once, under the first reason that holds
        (1, "cue"): {"no_valid_answer": 1, "stale": 1, "not_asked": 0, "no_person_label": 0},
        (1, "link"): {"no_valid_answer": 0, "stale": 1, "not_asked": 1, "no_person_label": 0},
        (2, "cue"): {"no_valid_answer": 1, "stale": 1, "not_asked": 0, "no_person_label": 3},
        (2, "link"): {"no_valid_answer": 0, "stale": 1, "not_asked": 1, "no_person_label": 3},
    }
    assert {(int(r["against"].split()[-1]), r["criterion"]): r["left_out"] for r in judged} == expected
    people, mine = _store_labels(ws, JUDGE, version)
    judge_values = {(p.item_id, p.criterion): p.value for p in mine}
    checked = 0
    for row in judged:
        number, criterion = int(row["against"].split()[-1]), row["criterion"]
        assert row["items"] == total and row["n"] == total - sum(row["left_out"].values())
        # An independent count of the items both labelled, and scikit-learn's κ over them.
        counted = sorted(i for i in people[number] if judge_values.get((i, criterion)) is not None
                         and getattr(people[number][i].judgement, criterion) is not None)
        assert row["n"] == len(counted)
        assert not (number == 2 and bob_missing & set(counted))
        person = [getattr(people[number][i].judgement, criterion) for i in counted]
        model = [judge_values[i, criterion] for i in counted]
        if row["kappa"] is not None:
            assert row["kappa"] == pytest.approx(cohen_kappa_score(person, model), abs=1e-12)
            checked += 1
        assert row["raw"] == pytest.approx(100 * sum(p == m for p, m in zip(person, model)) / len(counted))
    assert checked >= 2
    # stderr: one line per row that leaves items out, and one error line saying how to fill the judge's gaps.
    lines = result.stderr.splitlines()
    assert sum(line.startswith(f"warning: judge {JUDGE} against Annotator") and f"of {total} items" in line
               for line in lines) == 4
    assert any("Annotator 2 on cue" in line and "3 not labelled by the annotator" in line and "1 stale" in line
               and "1 no valid Yes/No" in line for line in lines)
    error = [line for line in lines if line.startswith("error:")]
    assert len(error) == 1 and "Traceback" not in result.stderr
    assert f"'cfkit audit prelabel --judge {JUDGE}' asks those not asked, failed or stale" in error[0]
    assert f"'cfkit audit prelabel --judge {JUDGE} --retry-unanswered'" in error[0]
    table = cli(ws, "audit", "agreement", "--judge", JUDGE, "--unblind", "--resamples", "200", env={"COLUMNS": "200"})
    assert table.exit_code == 1 and "left out" in table.stdout and "not labelled by the annotator" in table.stdout


def test_rows_left_short_only_by_people_still_labelling_exit_0(half_labelled, tmp_path):
    # The judge labelled everything; only bob's unlabelled items are left out, which --unblind asked for.
    ws = tmp_path / "ws"
    shutil.copytree(half_labelled[0], ws)
    with ChatServer(lambda body, n: Scripted(body=completion("Yes", model=body["model"]))) as server:
        asked = cli(ws, "audit", "prelabel", "--judge", JUDGE, "-o", f"base_url={server.url}", env=KEY)
    assert asked.exit_code == 0, asked.stderr
    result = cli(ws, "audit", "agreement", "--judge", JUDGE, "--unblind", "--json", "--resamples", "100")
    assert result.exit_code == 0, result.stderr
    judged = json.loads(result.stdout)["judge"]
    total = len(half_labelled[1])
    assert [r["n"] for r in judged if r["against"] == "Annotator 1"] == [total, total]
    assert [r["left_out"]["no_person_label"] for r in judged if r["against"] == "Annotator 2"] == [3, 3]
    assert "Annotator 2 on cue" in result.stderr and "Annotator 1 on" not in result.stderr


def test_retry_unanswered_asks_again_only_the_replies_without_a_yes_no(half_labelled, tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(half_labelled[0], ws)
    rows = half_labelled[1]
    shy = {(rows[0]["response"], True), (rows[3]["response"], False)}  # (response, cue question) refused at first

    def refusing(body: dict, n: int) -> Scripted:
        if (_response(body), CUE_QUESTION in user_text(body)) in shy:
            return Scripted(body=completion(None, model=body["model"], refusal="I can't help with that."))
        return Scripted(body=completion("Yes", model=body["model"]))

    args = ["audit", "prelabel", "--judge", JUDGE, "-o", "max_retries=0", "--json"]
    with ChatServer(refusing) as server:
        first = cli(ws, *args, "-o", f"base_url={server.url}", env=KEY)
        plain = cli(ws, *args, "-o", f"base_url={server.url}", env=KEY)
        assert len(server.requests) == 2 * len(rows)  # the plain rerun asked nothing
    assert first.exit_code == 0 and json.loads(first.stdout)["invalid"] == 2
    assert "(2 without a valid Yes/No, not asked again: --retry-unanswered asks them)" in plain.stderr
    version = json.loads(first.stdout)["prompt_version"]
    _, before = _store_labels(ws, JUDGE, version)

    # A retry whose requests fail loses nothing: the stored no-labels stay, and the exit status is 1.
    with ChatServer(lambda body, n: Scripted(status=400, body={"error": {"message": "down"}})) as server:
        down = cli(ws, *args, "--retry-unanswered", "-o", f"base_url={server.url}", env=KEY)
        assert len(server.requests) == 2
    assert down.exit_code == 1 and json.loads(down.stdout)["asked_again"] == 2
    assert _store_labels(ws, JUDGE, version)[1] == before

    # Now the judge answers: only the two are asked, the valid labels stay as they were.
    asked: list[dict] = []

    def answering(body: dict, n: int) -> Scripted:
        asked.append(body)
        return Scripted(body=completion("No", model=body["model"]))

    with ChatServer(answering) as server:
        again = cli(ws, *args, "--retry-unanswered", "-o", f"base_url={server.url}", env=KEY)
    assert again.exit_code == 0, again.stderr
    done = json.loads(again.stdout)
    assert done["asked_again"] == 2 and done["asked"] == 2 and done["already_stored"] == 2 * len(rows) - 2
    assert done["already_stored_invalid"] == 0 and done["invalid"] == 0
    assert "2 answers stored now (2 of them asked again for want of a valid Yes/No)" in again.stderr
    assert {(_response(b), CUE_QUESTION in user_text(b)) for b in asked} == shy
    _, after = _store_labels(ws, JUDGE, version)
    kept = {(p.item_id, p.criterion): p for p in before if p.value is not None}
    assert {(p.item_id, p.criterion): p for p in after if (p.item_id, p.criterion) in kept} == kept
    assert sorted(p.value for p in after if (p.item_id, p.criterion) not in kept) == [False, False]
    agreement = json.loads(cli(ws, "audit", "agreement", "--judge", JUDGE, "--unblind", "--json",
                               "--resamples", "100").stdout)
    assert all(r["left_out"]["no_valid_answer"] == 0 for r in agreement["judge"])
