"""What the judge's labels cost is kept with them (schema 8) and said later, by 'audit status' and 'audit agreement
--judge', with what it leaves out; before, 'audit prelabel' said it once and no command could say it again. A store
from before keeps its labels, and its status says that their cost was not kept."""

from __future__ import annotations

import json

import pytest

from support import audit_workspace as aw
from support.chat_api_server import ChatServer, Scripted, completion
from support.store_sql import store_as_of, user_version
from support.workspace import run_cli

from cfkit.store import SCHEMA_VERSION

JUDGE = "openai:judge-model"
#: 100 prompt and 20 completion tokens a reply (the loopback server's usage) at $1,000 a million: $0.12 a reply.
PRICES = ("-o", "price_in=1000", "-o", "price_out=1000")


def cli(ws, *args, **kw):
    return run_cli(["-w", str(ws), *args], **kw)


def _first_reply_unreadable(body: dict, n: int) -> Scripted:
    """The first request gets no valid Yes/No ('Maybe'); every other one 'Yes'."""
    return Scripted(body=completion("Maybe" if n == 1 else "Yes", model=body["model"]))


@pytest.fixture()
def audited(tmp_path):
    ws = aw.build(tmp_path / "ws")
    run_ids = aw.run_models(ws)
    assert cli(ws, "audit", "plan", "--run", run_ids[aw.GPT], "--run", run_ids[aw.QWEN]).exit_code == 0
    items = len(json.loads(cli(ws, "audit", "items", "--as", "alice", "--json").stdout))
    return ws, items


def _prelabel(ws, server, *more):
    return cli(ws, "audit", "prelabel", "--judge", JUDGE, "-o", f"base_url={server.url}", "-o", "max_retries=1",
               *more, env={"OPENAI_API_KEY": "sk-x"})


def test_the_judges_cost_is_kept_with_its_labels_and_said_by_status_and_agreement(audited):
    ws, items = audited
    labels = 2 * items
    with ChatServer(_first_reply_unreadable) as server:
        first = _prelabel(ws, server, *PRICES)
        assert first.exit_code == 0, first.stderr
        again = _prelabel(ws, server, *PRICES, "--retry-unanswered")  # the unreadable one asked again, and paid
        assert again.exit_code == 0, again.stderr
        assert server.count == labels + 1
    status = cli(ws, "audit", "status")
    assert status.exit_code == 0, status.stderr
    said = " ".join(status.stderr.split())
    cost = (labels + 1) * 0.12
    assert f"judge {JUDGE} on audit" in said
    assert (f"{labels} labels from {labels + 1} replies, cost ${cost:.2f} ({100 * (labels + 1):,} tokens in, "
            f"{20 * (labels + 1):,} out)") in said and "not counted" not in said  # nothing cut off or abandoned
    (judge,) = json.loads(cli(ws, "audit", "status", "--json").stdout)["judges"]
    assert judge["judge"] == JUDGE and (judge["labels"], judge["replies"], judge["not_kept"]) == (labels, labels + 1, 0)
    assert judge["cost_usd"] == pytest.approx(cost) and judge["tokens_in"] == 100 * (labels + 1)

    for row in json.loads(cli(ws, "audit", "items", "--as", "alice", "--json").stdout):
        for person in ("alice", "bob"):
            assert cli(ws, "audit", "label", row["item"], "--as", person, "--cue", "yes", "--link", "yes").exit_code == 0
    agreement = cli(ws, "audit", "agreement", "--judge", JUDGE, "--json", "--resamples", "100")
    assert json.loads(agreement.stdout)["judge_cost"]["cost_usd"] == pytest.approx(cost)
    shown = cli(ws, "audit", "agreement", "--judge", JUDGE, "--resamples", "100")
    assert f"cost ${cost:.2f}" in " ".join(shown.stderr.split())


def test_an_unpriced_judge_says_its_cost_is_not_known_with_its_tokens(audited):
    ws, items = audited
    with ChatServer(_first_reply_unreadable) as server:
        assert _prelabel(ws, server).exit_code == 0
    said = " ".join(cli(ws, "audit", "status").stderr.split())
    assert (f"{2 * items} labels from {2 * items} replies, cost not known: the judge was not priced (give the "
            f"judge's prices: -o price_in=… -o price_out=…, or cfkit.toml [probe.prices]) ({200 * items:,} tokens in") in said


def test_a_store_from_before_keeps_its_labels_and_says_their_cost_was_not_kept(audited):
    ws, items = audited
    with ChatServer(_first_reply_unreadable) as server:
        assert _prelabel(ws, server, *PRICES).exit_code == 0
    db = ws / ".cfkit" / "cfkit.db"
    store_as_of(db, 7)  # the prelabels table as schema 7 had it: no cost columns
    status = cli(ws, "audit", "status", "--json")
    assert status.exit_code == 0, status.stderr
    assert user_version(db) == SCHEMA_VERSION
    (judge,) = json.loads(status.stdout)["judges"]
    assert (judge["labels"], judge["replies"], judge["not_kept"], judge["cost_usd"]) == (2 * items, 0, 2 * items, None)
    said = " ".join(cli(ws, "audit", "status").stderr.split())
    assert f"{2 * items} labels; not counted: {2 * items} labels stored before cfkit kept what the judge cost" in said
    with ChatServer(_first_reply_unreadable) as server:  # a label asked again now is counted, the others are not
        assert _prelabel(ws, server, *PRICES, "--retry-unanswered").exit_code == 0
    (judge,) = json.loads(cli(ws, "audit", "status", "--json").stdout)["judges"]
    assert (judge["replies"], judge["not_kept"], judge["cost_usd"]) == (1, 2 * items - 1, pytest.approx(0.12))


def test_edits_screen_says_what_its_replies_cost_and_keeps_it_with_each_answer(mini_ws):
    # 'edits screen' said nothing of what its judge cost, and its answers kept no cost.
    assert run_cli(["-w", str(mini_ws), "edit", "EX01", "--engine", "classical"]).exit_code == 0
    args = ["-w", str(mini_ws), "edits", "screen", "EX01", "--judge", JUDGE, "-o", "max_retries=0", *PRICES]
    with ChatServer(lambda body, n: Scripted(body=completion("No."))) as server:
        first = run_cli([*args, "-o", f"base_url={server.url}"], env={"OPENAI_API_KEY": "sk-x"})
        asked = server.count
        again = run_cli([*args, "-o", f"base_url={server.url}"], env={"OPENAI_API_KEY": "sk-x"})
        assert server.count == asked  # every answer stored: nothing asked again
    assert first.exit_code == 0, first.stderr
    cost = asked * 0.12
    said = " ".join(first.stderr.split())
    assert (f"this run: {asked} replies, cost ${cost:.2f}; judge {JUDGE}'s stored answers about these edits: "
            f"{asked} answers from {asked} replies, cost ${cost:.2f} ({100 * asked:,} tokens in, {20 * asked:,} out)"
            ) in said
    assert f"this run: nothing asked; judge {JUDGE}'s stored answers about these edits: {asked} answers from " \
        f"{asked} replies, cost ${cost:.2f}" in " ".join(again.stderr.split())
    store_as_of(mini_ws / ".cfkit" / "cfkit.db", 7)  # the screens table as schema 7 had it
    with ChatServer(lambda body, n: Scripted(body=completion("No."))) as server:
        older = run_cli([*args, "-o", f"base_url={server.url}"], env={"OPENAI_API_KEY": "sk-x"})
        assert server.count == 0  # every answer kept by the upgrade: nothing asked again
    assert older.exit_code == 0, older.stderr
    assert f"{asked} answers; not counted: {asked} answers stored before cfkit kept what the judge cost" \
        in " ".join(older.stderr.split())


def test_a_label_asked_again_of_a_priced_judge_keeps_its_unpriced_first_reply_as_not_known(audited):
    # The unreadable label was asked first while the judge was not priced, then again with prices: the row kept the
    # second reply's cost and said 'priced', so the total looked exact ($0.12 for 2 replies) and the first reply's
    # cost, never known, was said nowhere.
    ws, items = audited
    with ChatServer(_first_reply_unreadable) as server:
        assert _prelabel(ws, server).exit_code == 0
        again = _prelabel(ws, server, *PRICES, "--retry-unanswered")
        assert again.exit_code == 0, again.stderr
    (judge,) = json.loads(cli(ws, "audit", "status", "--json").stdout)["judges"]
    assert (judge["labels"], judge["replies"], judge["unreported"], judge["unpriced"]) == (2 * items, 2 * items + 1,
                                                                                          1, 2 * items - 1)
    assert judge["cost_usd"] == pytest.approx(0.12)
    said = " ".join(cli(ws, "audit", "status").stderr.split())
    assert (f"{2 * items} labels from {2 * items + 1} replies, cost at least $0.12: 1 reply without a reported cost"
            ) in said and f"not counted: {2 * items - 1} labels asked while the judge was not priced" in said


def _slow_at(*numbers: int):
    """Requests ``numbers`` answered after 1.5 s (past a 0.5 s timeout: given up once sent), the rest at once."""
    return lambda body, n: Scripted(body=completion("No.", model=body.get("model", "m")),
                                    delay=1.5 if n in numbers else 0.0)


def test_the_judges_abandoned_attempts_are_counted_as_a_probe_runs_are(audited):
    # Attempts that timed out after they were sent (a provider may bill them) were left out of what 'audit prelabel'
    # said its judge cost, though 'probe run' counts them: request 1 timed out once then came, request 2 (the
    # server's 3rd and 4th) timed out twice and failed.
    ws, items = audited
    with ChatServer(_slow_at(1, 3, 4)) as server:
        done = _prelabel(ws, server, *PRICES, "-o", "timeout=0.5", "--json")
    assert done.exit_code == 1  # the request that failed is asked again next run
    data = json.loads(done.stdout)
    assert (data["replies"], data["abandoned_attempts"]) == (2 * items - 1, 3)
    assert data["cost_usd"] == pytest.approx((2 * items - 1) * 0.12) and data["abandoned_usd"] == pytest.approx(0.36)
    assert f"cost ${(2 * items - 1) * 0.12:.2f}; 3 abandoned attempts may be billed on top: up to ~$0.36." \
        in " ".join(done.stderr.split())
    with ChatServer(_slow_at(1, 2)) as server:  # not priced: said, with nothing to estimate them by
        unpriced = cli(ws, "audit", "prelabel", "--judge", "openai:free-judge", "-o", f"base_url={server.url}",
                       "-o", "max_retries=1", "-o", "timeout=0.5", env={"OPENAI_API_KEY": "sk-x"})
    assert unpriced.exit_code == 1
    assert ("cost not known (give the judge's prices: -o price_in=… -o price_out=…, or cfkit.toml [probe.prices]); "
            "2 abandoned attempts may be billed on top (no priced reply to estimate them by)") \
        in " ".join(unpriced.stderr.split())


def test_edits_screen_json_gives_what_this_run_and_the_stored_answers_cost(mini_ws):
    # 'edits screen --json' printed the edits and their answers alone: what the run cost (a cut-off reply, never
    # stored, and abandoned attempts included) and the stored answers' total were on stderr only.
    assert run_cli(["-w", str(mini_ws), "edit", "EX01", "--engine", "classical"]).exit_code == 0

    def script(body: dict, n: int) -> Scripted:
        if n == 1:
            return Scripted(body=completion("No."), delay=1.5)  # given up once sent, then asked again
        return Scripted(body=completion("No.", finish_reason="length" if n == 3 else "stop"))

    with ChatServer(script) as server:
        done = run_cli(["-w", str(mini_ws), "edits", "screen", "EX01", "--judge", JUDGE, "-o", "max_retries=1",
                        "-o", "timeout=0.5", *PRICES, "-o", f"base_url={server.url}", "--json"],
                       env={"OPENAI_API_KEY": "sk-x"})
        asked = server.count
    assert done.exit_code == 1, done.stderr  # the cut-off reply is asked again next run
    data = json.loads(done.stdout)
    replies = asked - 1  # every request but the abandoned attempt got a reply, the cut-off one too
    assert [e["spec"] for e in data["edits"]] == ["EX01"] and len(data["edits"][0]["answers"]) == replies - 1
    assert data["this_run"] == {"replies": replies, "priced": True, "cost_usd": pytest.approx(replies * 0.12),
                                "replies_without_cost": 0, "abandoned_attempts": 1,
                                "abandoned_usd": pytest.approx(0.12), "stopped": None, "not_asked": 0}
    stored = data["stored"]  # the cut-off reply and the abandoned attempt are kept too, in a pending row
    assert (stored["labels"], stored["replies"], stored["cut_off"], stored["abandoned"]) == (replies - 1, replies, 1, 1)
    assert stored["cost_usd"] == pytest.approx(replies * 0.12) and stored["not_counted"] == []


def test_cut_off_replies_and_abandoned_attempts_are_kept_with_the_judges_labels(audited):
    # A reply cut off at the token limit (paid for, never read) and the attempts of a request that timed out were
    # kept nowhere: 'audit status' said only "not counted: replies cut off at the token limit (not kept)", whether
    # any was or not, and nothing of abandoned attempts. Now a pending row keeps their cost (no label: the report
    # and the agreement still find the item not asked) until a reply is read, which adds it to the label's.
    from cfkit.audit.judge_labels import judge_labels
    from cfkit.audit.items import load_audit
    from cfkit.store import open_store, prelabels
    from cfkit.workspace import load_workspace

    ws, items = audited

    def script(body: dict, n: int) -> Scripted:
        if n == 1:
            return Scripted(body=completion("Yes, the", model=body["model"], finish_reason="length"))
        return Scripted(body=completion("Yes", model=body["model"]), delay=1.5 if n in (2, 3) else 0.0)

    with ChatServer(script) as server:
        first = _prelabel(ws, server, *PRICES, "-o", "timeout=0.5")  # 1: cut off; 2 and 3: timed out, failed
        assert first.exit_code == 1
    with open_store(ws / ".cfkit" / "cfkit.db") as store:
        audit = load_audit(store, None)
        assert len(prelabels.prelabels(store, audit.id, judge=JUDGE)) == 2 * items - 2  # the pending rows: no label
        mine = judge_labels(load_workspace(ws), store, audit.id, JUDGE)
        pending = [p for p in prelabels.prelabels(store, audit.id, judge=JUDGE, pending=True) if p.pending]
    assert sorted((p.replies, p.cut_off, p.abandoned, p.value) for p in pending) == [(0, 0, 2, None), (1, 1, 0, None)]
    assert {mine.missing(p.item_id, p.criterion) for p in pending} == {"not_asked"}
    (judge,) = json.loads(cli(ws, "audit", "status", "--json").stdout)["judges"]
    replies = 2 * items - 1  # every label's, and the cut-off one
    assert (judge["labels"], judge["replies"], judge["cut_off"], judge["abandoned"]) == (2 * items - 2, replies, 1, 2)
    assert judge["cost_usd"] == pytest.approx(replies * 0.12) and judge["abandoned_usd"] == pytest.approx(0.24)
    said = " ".join(cli(ws, "audit", "status").stderr.split())
    assert (f"{2 * items - 2} labels from {replies} replies (1 cut off at the token limit, not read), cost "
            f"${replies * 0.12:.2f} ({100 * replies:,} tokens in, {20 * replies:,} out); 2 abandoned attempts may be "
            "billed on top: up to ~$0.24") in said and "not counted" not in said

    with ChatServer(lambda body, n: Scripted(body=completion("No", model=body["model"]))) as server:
        again = _prelabel(ws, server, *PRICES)  # asks only the two, and their replies take over the pending rows
        assert again.exit_code == 0, again.stderr and server.count == 2
    (judge,) = json.loads(cli(ws, "audit", "status", "--json").stdout)["judges"]
    assert (judge["labels"], judge["replies"], judge["cut_off"], judge["abandoned"]) == (2 * items, replies + 2, 1, 2)
    with open_store(ws / ".cfkit" / "cfkit.db") as store:
        taken = [p for p in prelabels.prelabels(store, audit.id, judge=JUDGE) if p.cut_off or p.abandoned]
    assert sorted((p.replies, p.cut_off, p.abandoned, p.value) for p in taken) == [(1, 0, 2, False), (2, 1, 0, False)]


def test_a_schema_8_store_says_its_labels_kept_no_cut_off_replies(audited):
    ws, items = audited
    with ChatServer(_first_reply_unreadable) as server:
        assert _prelabel(ws, server, *PRICES).exit_code == 0
    db = ws / ".cfkit" / "cfkit.db"
    store_as_of(db, 8)  # the prelabels table as schema 8 had it: costs, no cut-off replies nor abandoned attempts
    status = cli(ws, "audit", "status", "--json")
    assert status.exit_code == 0, status.stderr and user_version(db) == SCHEMA_VERSION
    (judge,) = json.loads(status.stdout)["judges"]
    assert (judge["labels"], judge["replies"], judge["cut_off_not_kept"]) == (2 * items, 2 * items, 2 * items)
    assert judge["cost_usd"] == pytest.approx(2 * items * 0.12)
    assert (f"not counted: replies cut off at the token limit and abandoned attempts before {2 * items} labels were "
            "stored (cfkit did not keep them then)") in " ".join(cli(ws, "audit", "status").stderr.split())
    with ChatServer(_first_reply_unreadable) as server:  # the old rows are labels still: nothing asked again
        assert _prelabel(ws, server, *PRICES).exit_code == 0 and server.count == 0


def test_a_cut_off_reply_to_a_label_asked_again_adds_its_cost_and_leaves_the_label(audited):
    # --retry-unanswered asks the unreadable label again; the reply is cut off: the stored no-label stays as it was
    # (asked again next time), and the cut-off reply, paid for, is added to its cost.
    from cfkit.audit.items import load_audit
    from cfkit.store import open_store, prelabels

    ws, items = audited
    with ChatServer(_first_reply_unreadable) as server:
        assert _prelabel(ws, server, *PRICES).exit_code == 0
    with ChatServer(lambda body, n: Scripted(body=completion("Yes, b", model=body["model"],
                                                             finish_reason="length"))) as server:
        assert _prelabel(ws, server, *PRICES, "--retry-unanswered").exit_code == 1 and server.count == 1
    with open_store(ws / ".cfkit" / "cfkit.db") as store:
        rows = prelabels.prelabels(store, load_audit(store, None).id, judge=JUDGE, pending=True)
    (kept,) = [r for r in rows if r.value is None]
    assert (kept.pending, kept.raw, kept.replies, kept.cut_off, kept.cost_usd) == (False, "Maybe", 2, 1,
                                                                                   pytest.approx(0.24))
    assert len(rows) == 2 * items and not any(r.pending for r in rows)


def test_edits_screen_counts_a_pending_rows_cost_in_the_answer_that_takes_it_over(mini_ws):
    # The first run's first question timed out twice once sent and failed: its attempts are kept in a pending row.
    # The next run's answer takes the row over in the store, but the run said (and gave in --json) the answer as it
    # was read, without them: "6 answers from 6 replies" and no abandoned attempt, though the store kept two.
    assert run_cli(["-w", str(mini_ws), "edit", "EX01", "--engine", "classical"]).exit_code == 0
    args = ["-w", str(mini_ws), "edits", "screen", "EX01", "--judge", JUDGE, *PRICES, "--json"]
    with ChatServer(lambda body, n: Scripted(body=completion("No."), delay=1.5 if n in (1, 2) else 0.0)) as server:
        first = run_cli([*args, "-o", f"base_url={server.url}", "-o", "max_retries=1", "-o", "timeout=0.5"],
                        env={"OPENAI_API_KEY": "sk-x"})
    assert first.exit_code == 1 and json.loads(first.stdout)["stored"]["abandoned"] == 2
    with ChatServer(lambda body, n: Scripted(body=completion("No."))) as server:
        again = run_cli([*args, "-o", f"base_url={server.url}"], env={"OPENAI_API_KEY": "sk-x"})
        assert server.count == 1
    data = json.loads(again.stdout)
    stored = data["stored"]
    assert (stored["labels"], stored["replies"], stored["abandoned"]) == (6, 6, 2)
    assert stored["abandoned_usd"] == pytest.approx(0.24)
    (taken,) = [a for a in data["edits"][0]["answers"] if a["abandoned"]]
    assert (taken["replies"], taken["abandoned"]) == (1, 2)
    assert "2 abandoned attempts may be billed on top" in " ".join(again.stderr.split())
