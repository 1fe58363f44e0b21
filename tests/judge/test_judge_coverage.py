"""Asking the judge again the audit replies that gave no Yes/No (`cfkit audit prelabel --retry-unanswered`).

A reply with no valid Yes/No (a refusal, an unclear or empty one) was kept for
good: no rerun asked it again, short of editing the question file. The flag
asks those again, and only those, and keeps every valid label.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest

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
    assert "2 answer(s) stored now (2 of them asked again for want of a valid Yes/No)" in again.stderr
    assert {(_response(b), CUE_QUESTION in user_text(b)) for b in asked} == shy
    _, after = _store_labels(ws, JUDGE, version)
    kept = {(p.item_id, p.criterion): p for p in before if p.value is not None}
    assert {(p.item_id, p.criterion): p for p in after if (p.item_id, p.criterion) in kept} == kept
    assert sorted(p.value for p in after if (p.item_id, p.criterion) not in kept) == [False, False]
    agreement = json.loads(cli(ws, "audit", "agreement", "--judge", JUDGE, "--unblind", "--json",
                               "--resamples", "100").stdout)
    assert [r["n"] for r in agreement["judge"] if r["against"] == "Annotator 1"] == [len(rows), len(rows)]
