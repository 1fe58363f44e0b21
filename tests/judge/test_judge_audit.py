"""``cfkit audit prelabel``: a judge model labels the audit's cue and link, blind, and is measured against people.

Two people (alice, bob) label every item; a loopback judge, scripted as a
careful reader (cue: the response names the rationale's cue; link: it also
says why), labels them too. Its κ against each person must equal scikit-learn's
on the same labels; the people-only EGA must be today's; the judge must see no
model or run of the audited items.
"""

from __future__ import annotations

import json
import re

import pytest
from sklearn.metrics import cohen_kappa_score

from support import audit_workspace as aw
from support.chat_api_server import ChatServer, Scripted, completion, user_text
from support.workspace import run_cli

JUDGE = "openai:judge-model"


def cli(ws, *args, **kw):
    return run_cli(["-w", str(ws), *args], **kw)


def judge_script(bodies: list[dict]):
    def script(body: dict, n: int) -> Scripted:
        bodies.append(body)
        text = user_text(body)
        response = re.search(r"<<<(.*)>>>", text, re.S).group(1)
        rationale = re.search(r"decisive visible cue: (.*)\n", text).group(1)
        cue = next((c for _, c in aw.CASES.values() if c in rationale), aw.THREE["cue"])
        names_cue = cue in response
        if "Does the response name" in text:
            yes = names_cue
        else:
            yes = names_cue and "decides it" in response and len(response) % 3 != 0  # some links judged missing
        return Scripted(body=completion("Yes" if yes else "No", model=body["model"]))
    return script


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    ws = aw.build(tmp_path_factory.mktemp("prelabel") / "ws")
    run_ids = aw.run_models(ws)
    assert cli(ws, "audit", "plan", "--run", run_ids[aw.GPT], "--run", run_ids[aw.QWEN]).exit_code == 0
    rows = json.loads(cli(ws, "audit", "items", "--as", "alice", "--json").stdout)
    for n, row in enumerate(rows):  # alice: every cue and link yes; bob: every third link no
        assert cli(ws, "audit", "label", row["item"], "--as", "alice", "--cue", "yes", "--link", "yes").exit_code == 0
        assert cli(ws, "audit", "label", row["item"], "--as", "bob", "--cue", "yes" if n % 4 else "no",
                   "--link", "no" if n % 3 == 0 else "yes").exit_code == 0
    bodies: list[dict] = []
    with ChatServer(judge_script(bodies)) as server:
        args = ["audit", "prelabel", "--judge", JUDGE, "-o", f"base_url={server.url}", "-o", "max_retries=1"]
        first = cli(ws, *args, "--json", env={"OPENAI_API_KEY": "sk-x"})
        again = cli(ws, *args, env={"OPENAI_API_KEY": "sk-x"})
    return ws, run_ids, rows, first, again, bodies


def test_the_judge_labels_every_item_once_and_resumes(labelled):
    ws, _, rows, first, again, bodies = labelled
    assert first.exit_code == 0, first.stderr
    done = json.loads(first.stdout)
    assert done["asked"] == 2 * len(rows) and done["already_stored"] == 0 and done["failed"] == []
    assert len(bodies) == 2 * len(rows)  # the second run asked nothing
    assert again.exit_code == 0 and f"{2 * len(rows)} already stored" in again.stderr


def test_the_judge_sees_no_model_or_run_of_the_audited_items(labelled):
    _, run_ids, _, _, _, bodies = labelled
    for body in bodies:
        text = json.dumps(body["messages"]).lower()
        assert not [w for w in ("gpt-5.5", "qwen", "alibaba", "openai") if w in text]
        assert not [r for r in run_ids.values() if r.lower() in text]
        assert re.search(r"<<<.+>>>", text)  # the (masked) response is there


def _labels(ws):
    from cfkit.audit.items import load_audit
    from cfkit.store import audit_labels, open_store, prelabels

    with open_store(ws / ".cfkit" / "cfkit.db") as store:
        audit = load_audit(store)
        people = {a.number: audit_labels.labels_by(store, audit.id, a.name)
                  for a in audit_labels.annotators(store, audit.id)}
        judge = prelabels.latest(store, audit.id, JUDGE)
    return people, judge


def test_judge_against_person_kappa_equals_scikit_learn(labelled):
    ws = labelled[0]
    result = cli(ws, "audit", "agreement", "--judge", JUDGE, "--json", "--resamples", "200")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)["judge"]
    people, judge = _labels(ws)
    checked = 0
    for row in rows:
        number = int(row["against"].split()[-1])
        criterion = row["criterion"]
        items = sorted(i for i in judge if i in people[number])
        person = [getattr(people[number][i].judgement, criterion) for i in items]
        model = [judge[i][criterion] for i in items]
        assert row["n"] == len(items)
        if len(set(person) | set(model)) > 1 and row["kappa"] is not None:
            assert row["kappa"] == pytest.approx(cohen_kappa_score(person, model), abs=1e-12)
            checked += 1
    assert checked >= 2
    table = cli(ws, "audit", "agreement", "--judge", JUDGE, "--resamples", "200")
    assert "The judge against each annotator" in table.stdout and "alice" not in table.stdout


def test_people_only_ega_is_unchanged_and_the_judges_is_marked(labelled):
    ws = labelled[0]
    plain = json.loads(cli(ws, "report", "--ega", "--format", "json", "--resamples", "200").stdout)
    people = json.loads(cli(ws, "report", "--ega", "--ega-labels", "people", "--format", "json",
                            "--resamples", "200").stdout)
    assert plain["ega"] == people["ega"] and "labels" not in plain["ega_audit"]
    judged = cli(ws, "report", "--ega", "--ega-labels", "judge", "--judge", JUDGE, "--format", "json",
                 "--resamples", "200")
    data = json.loads(judged.stdout)
    assert data["ega_audit"]["labels"] == "judge" and data["ega_audit"]["judge"] == JUDGE
    assert data["ega_audit"]["judge_labelled"] > 0
    assert [r["ega"] for r in data["ega"]] != [r["ega"] for r in plain["ega"]]
    table = cli(ws, "report", "--ega", "--ega-labels", "judge", "--judge", JUDGE, "--resamples", "200")
    assert f"judge model {JUDGE}'s labels, not a person's" in " ".join(table.stdout.split())
    missing = cli(ws, "report", "--ega", "--ega-labels", "judge", "--resamples", "200")
    assert missing.exit_code == 2 and "--judge" in missing.stderr


def test_items_the_judge_left_without_a_label_are_said_with_why_and_how_to_fill_them(labelled, tmp_path):
    # A judge that mumbles on some cue questions, answers one with nothing, and fails one link request: those
    # items are no labels, listed with why, and the advice fits (not "adjudicate").
    import shutil

    ws = tmp_path / "ws"
    shutil.copytree(labelled[0], ws)
    rows, judge = labelled[2], "openai:mumbling-judge"
    mumbled, empty, failed = rows[0]["response"], rows[1]["response"], rows[2]["response"]

    def script(body: dict, n: int) -> Scripted:
        text = user_text(body)
        response = re.search(r"<<<(.*)>>>", text, re.S).group(1)
        cue_question = "Does the response name" in text
        if cue_question and response == mumbled:
            return Scripted(body=completion("It is hard to say.", model=body["model"]))
        if cue_question and response == empty:
            return Scripted(body=completion("", model=body["model"]))
        if not cue_question and response == failed:
            return Scripted(status=400, body={"error": {"message": "bad request"}})
        return Scripted(body=completion("Yes", model=body["model"]))

    assert len({mumbled, empty, failed}) == 3
    with ChatServer(script) as server:
        asked = cli(ws, "audit", "prelabel", "--judge", judge, "-o", f"base_url={server.url}", "-o", "max_retries=0",
                    env={"OPENAI_API_KEY": "sk-x"})
    assert asked.exit_code == 1 and "2 without a valid Yes/No, 1 failed" in asked.stderr
    with ChatServer(lambda body, n: Scripted(status=400, body={"error": {"message": "down"}})) as server:
        again = cli(ws, "audit", "prelabel", "--judge", judge, "-o", f"base_url={server.url}", "-o", "max_retries=0",
                    env={"OPENAI_API_KEY": "sk-x"})
    # The second run asks only the failed request, and says that the two stored non-answers stay.
    assert again.exit_code == 1 and "(2 without a valid Yes/No, not asked again: --retry-unanswered asks them)" \
        in again.stderr
    assert "0 answers stored now" in again.stderr and "1 failed" in again.stderr
    result = cli(ws, "report", "--ega", "--ega-labels", "judge", "--judge", judge, "--format", "json",
                 "--resamples", "100")
    assert result.exit_code == 1
    why = {p["item"]: p["why"] for p in json.loads(result.stdout)["ega_pending"]}
    assert why == {rows[0]["item"]: "the judge's reply gave no valid Yes/No",
                   rows[1]["item"]: "the judge's reply gave no valid Yes/No",
                   rows[2]["item"]: "the judge was not asked, or its request failed"}
    error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "adjudicate" not in error[0], error
    assert f"'cfkit audit prelabel --judge {judge}' asks what the judge was not asked or failed" in error[0]
    assert f"'cfkit audit prelabel --judge {judge} --retry-unanswered'" in error[0] and "people+judge" in error[0]
    assert f"item {rows[0]['item']}: the judge's reply gave no valid Yes/No" in result.stderr


def _token_limit(body: dict) -> int:
    return body.get("max_completion_tokens") or body.get("max_tokens")


def test_a_reply_cut_off_at_the_token_limit_is_no_label_and_is_asked_again(labelled, tmp_path):
    # A judge that needs more than 16 tokens: at the limit, "Yes, the response names the" was read as a Yes (it may
    # have gone on "... but not the cue, so No"), and an empty cut-off reply (a reasoning model's whole budget spent
    # thinking) was kept as no label and never asked again. Neither is read now: both are failures, exit 1, asked
    # again by the next run, which --max-tokens lets through whole.
    import shutil

    from cfkit.audit.items import load_audit
    from cfkit.store import open_store, prelabels

    ws = tmp_path / "ws"
    shutil.copytree(labelled[0], ws)
    judge = "openai:wordy-judge"

    def script(body: dict, n: int) -> Scripted:
        if _token_limit(body) < 64:
            cut = "Yes, the response names the" if "Does the response name" in user_text(body) else ""
            return Scripted(body=completion(cut, model=body["model"], finish_reason="length"))
        return Scripted(body=completion("No. The response names the wrong thing.", model=body["model"]))

    args = ["audit", "prelabel", "--judge", judge, "-o", "max_retries=0", "--json"]
    with ChatServer(script) as server:
        cut = cli(ws, *args, "-o", f"base_url={server.url}", env={"OPENAI_API_KEY": "sk-x"})
        with open_store(ws / ".cfkit" / "cfkit.db") as store:
            stored = prelabels.prelabels(store, load_audit(store, None).id, judge=judge)
        assert cut.exit_code == 1 and stored == []
        items = len(labelled[2])
        assert len(json.loads(cut.stdout)["failed"]) == 2 * items
        assert "cut off at the token limit (16 tokens)" in cut.stderr and "--max-tokens" in cut.stderr
        report = cli(ws, "report", "--ega", "--ega-labels", "judge", "--judge", judge, "--resamples", "100")
        assert report.exit_code == 2 and f"judge {judge} has no labels" in report.stderr
        whole = cli(ws, *args, "--max-tokens", "64", "-o", f"base_url={server.url}", env={"OPENAI_API_KEY": "sk-x"})
    assert whole.exit_code == 0, whole.stderr
    assert json.loads(whole.stdout)["failed"] == [] and json.loads(whole.stdout)["asked"] == 2 * items
    with open_store(ws / ".cfkit" / "cfkit.db") as store:
        labels = prelabels.latest(store, load_audit(store, None).id, judge)
    assert {v for item in labels.values() for v in item.values()} == {False}


def test_labels_asked_with_an_edited_question_file_are_stale_and_never_mixed_with_the_new_ones(labelled, tmp_path):
    # After the question file was edited, the report and the agreement counted the judge's newest label of each
    # item and criterion whatever question asked it: a rerun that got only the cue answers mixed new cue labels with
    # old link labels, silently. Only the labels of the questions as they are now count; the rest is said.
    import shutil

    from pathlib import Path

    import cfkit

    ws = tmp_path / "ws"
    shutil.copytree(labelled[0], ws)
    (ws / "probes" / "templates").mkdir(parents=True, exist_ok=True)
    edited = (Path(cfkit.__file__).parent / "templates" / "judge-audit.yaml").read_text(encoding="utf-8").replace("Judge its response.",
                                                                                     "Judge its response closely.")
    (ws / "probes" / "templates" / "judge-audit.yaml").write_text(edited, encoding="utf-8")
    report = ["report", "--ega", "--ega-labels", "judge", "--judge", JUDGE, "--resamples", "100"]
    for args in (report, ["audit", "agreement", "--judge", JUDGE, "--resamples", "100"]):
        stale = cli(ws, *args)
        assert stale.exit_code == 2, stale.stderr
        assert f"judge {JUDGE} has no labels in audit" in stale.stderr and "stale" in stale.stderr
        assert f"'cfkit audit prelabel --judge {JUDGE}'" in stale.stderr

    def cue_only(body: dict, n: int) -> Scripted:  # the new questions: cue answered, every link request fails
        if "Does the response name" in user_text(body):
            return Scripted(body=completion("No", model=body["model"]))
        return Scripted(status=400, body={"error": {"message": "bad request"}})

    with ChatServer(cue_only) as server:
        asked = cli(ws, "audit", "prelabel", "--judge", JUDGE, "-o", f"base_url={server.url}", "-o", "max_retries=0",
                    env={"OPENAI_API_KEY": "sk-x"})
    assert asked.exit_code == 1
    result = cli(ws, *report, "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["ega"] == [] or all(row["n"] == 0 for row in data["ega"])
    # Every link label is of the old wording only: said as stale, not as never asked.
    assert {p["why"] for p in data["ega_pending"]} == {"the judge's label was asked with an older wording of the "
                                                       "questions"}
    assert len(data["ega_pending"]) == len(labelled[2])
    assert "asks again what was asked with an older wording" in result.stderr
    agreed = cli(ws, "audit", "agreement", "--judge", JUDGE, "--json", "--resamples", "100")
    assert agreed.exit_code == 1
    rows = json.loads(agreed.stdout)["judge"]
    items = len(labelled[2])
    assert {row["criterion"] for row in rows if row["n"] == items} == {"cue"}
    assert all(row["n"] == 0 and row["kappa"] is None and row["left_out"]["stale"] == items
               for row in rows if row["criterion"] == "link")


def test_what_the_judge_cost_is_said_cut_off_replies_included(labelled, tmp_path):
    # The judge is a paid model too: prelabel said how many answers it stored and nothing of what they cost, so a
    # study's judging bill was found only on the provider's invoice. It now sums every reply's cost, priced as
    # 'probe run' prices a model (-o price_in/price_out, or cfkit.toml [probe.prices]); a reply cut off at the
    # token limit is not read but was paid for, and counts.
    import shutil

    from cfkit.money import usd

    ws = tmp_path / "ws"
    shutil.copytree(labelled[0], ws)
    cut_item, failed_item = labelled[2][0]["response"], labelled[2][1]["response"]
    paid: list[tuple[int, int]] = []  # (tokens in, tokens out) of each reply the server sent

    def script(body: dict, n: int) -> Scripted:
        text = user_text(body)
        link = "Does the response name" not in text
        if link and failed_item in text:  # fails outright: nothing paid
            return Scripted(status=400, body={"error": {"message": "bad request"}})
        out = 16 if link and cut_item in text else 1  # cut off at the token limit, or a whole "Yes"
        paid.append((300 + n, out))
        return Scripted(body=completion("Yes, the" if out == 16 else "Yes", model=body["model"],
                                        prompt_tokens=300 + n, completion_tokens=out,
                                        finish_reason="length" if out == 16 else "stop"))

    priced = ["-o", "price_in=2.5", "-o", "price_out=10"]
    with ChatServer(script) as server:
        first = cli(ws, "audit", "prelabel", "--judge", "openai:paid-judge", "-o", f"base_url={server.url}",
                    "-o", "max_retries=0", *priced, "--json", env={"OPENAI_API_KEY": "sk-x"})
    data = json.loads(first.stdout)
    assert first.exit_code == 1 and data["priced"] is True and data["replies_without_cost"] == 0
    assert len(data["failed"]) == 2 and data["replies"] == data["asked"] + 1 == len(paid)  # the cut-off one, paid
    assert data["cost_usd"] == pytest.approx(sum(i * 2.5 + o * 10 for i, o in paid) / 1e6, rel=1e-12)
    assert f"{data['replies']} replies, cost {usd(data['cost_usd'])}." in first.stderr

    (ws / "cfkit.toml").write_text((ws / "cfkit.toml").read_text()
                                   + '\n[probe.prices."openai:toml-judge"]\ninput = 1.0\noutput = 4.0\n')
    with ChatServer(lambda body, n: Scripted(body=completion("No", model=body["model"], prompt_tokens=1000,
                                                             completion_tokens=1))) as server:
        configured = cli(ws, "audit", "prelabel", "--judge", "openai:toml-judge", "-o", f"base_url={server.url}",
                         "--json", env={"OPENAI_API_KEY": "sk-x"})
        unpriced = cli(ws, "audit", "prelabel", "--judge", "openai:free-judge", "-o", f"base_url={server.url}",
                       env={"OPENAI_API_KEY": "sk-x"})
    replies = 2 * len(labelled[2])
    assert json.loads(configured.stdout)["cost_usd"] == pytest.approx(replies * 1004 / 1e6, rel=1e-12)
    assert unpriced.exit_code == 0
    assert (f"{replies} replies, cost not known (give the judge's prices: -o price_in=… -o price_out=…, or "
            "cfkit.toml [probe.prices])") in " ".join(unpriced.stderr.split())


def test_labels_answered_by_two_models_under_one_judge_name_are_said_to_mix_them(labelled, tmp_path):
    # One judge name, two models: a local server's weights swapped between a first run (cue answered, link
    # failed) and the run that filled the links. The κ and the EGA counted both models' labels as one judge's,
    # silently. The model each server says answered is stored with the label; more than one is now said.
    import shutil

    ws = tmp_path / "ws"
    shutil.copytree(labelled[0], ws)
    judge = "openai:local-judge"

    def served_by(name: str, answer_links: bool):
        def script(body: dict, n: int) -> Scripted:
            if not answer_links and "Does the response name" not in user_text(body):
                return Scripted(status=400, body={"error": {"message": "not now"}})
            return Scripted(body=completion("Yes", model=name))
        return script

    args = ["audit", "prelabel", "--judge", judge, "-o", "max_retries=0"]
    with ChatServer(served_by("weights-a", answer_links=False)) as server:
        assert cli(ws, *args, "-o", f"base_url={server.url}", env={"OPENAI_API_KEY": "sk-x"}).exit_code == 1
    with ChatServer(served_by("weights-b", answer_links=True)) as server:
        assert cli(ws, *args, "-o", f"base_url={server.url}", env={"OPENAI_API_KEY": "sk-x"}).exit_code == 0
    line = (f"judge {judge}'s labels were answered by 2 models its server named (weights-a, weights-b), so the "
            "figures built on them mix those models")
    agreed = cli(ws, "audit", "agreement", "--judge", judge, "--json", "--resamples", "100")
    assert agreed.exit_code == 0 and line in " ".join(agreed.stderr.split())
    assert all(line in row["mixed_models"] for row in json.loads(agreed.stdout)["judge"])
    report = cli(ws, "report", "--ega", "--ega-labels", "judge", "--judge", judge, "--format", "json",
                 "--resamples", "100")
    assert line in json.loads(report.stdout)["ega_audit"]["judge_mixed_models"]
    assert line in " ".join(report.stderr.split())
    # One model behind the name (the module's judge): nothing said.
    single = cli(ws, "audit", "agreement", "--judge", JUDGE, "--json", "--resamples", "100")
    assert "mix" not in single.stderr and not any("mixed_models" in r for r in json.loads(single.stdout)["judge"])
    plain = cli(ws, "report", "--ega", "--ega-labels", "judge", "--judge", JUDGE, "--format", "json",
                "--resamples", "100")
    assert "judge_mixed_models" not in json.loads(plain.stdout)["ega_audit"]


def test_an_undefined_kappa_of_the_judge_is_said_under_its_table_naming_the_judge_and_the_annotator(labelled,
                                                                                                    tmp_path):
    """Alice said yes to every cue and link; a judge that does too leaves κ against her 0/0. The judge's table
    said only "undefined" while the people's gave the reason, and the reason said "both annotators"."""
    import shutil

    ws = tmp_path / "ws"
    shutil.copytree(labelled[0], ws)
    yes = "openai:yes-judge"
    with ChatServer(lambda body, n: Scripted(body=completion("Yes", model=body["model"]))) as server:
        assert cli(ws, "audit", "prelabel", "--judge", yes, "-o", f"base_url={server.url}",
                   env={"OPENAI_API_KEY": "sk-x"}).exit_code == 0
    rows = json.loads(cli(ws, "audit", "agreement", "--judge", yes, "--json", "--resamples", "100").stdout)["judge"]
    undefined = {(r["against"], r["criterion"]): r["kappa_undefined"] for r in rows if r["kappa"] is None}
    n = rows[0]["n"]
    said = f"the judge and Annotator 1 both labelled all {n} items 'yes': chance agreement is 1, so κ is 0/0"
    assert set(undefined) == {("Annotator 1", "cue"), ("Annotator 1", "link")}
    assert all(reason.startswith(said) for reason in undefined.values()), undefined
    table = cli(ws, "audit", "agreement", "--judge", yes, "--resamples", "100", env={"COLUMNS": "300"})
    lines = [" ".join(line.split()) for line in table.stdout.splitlines()]
    for criterion in ("cue", "link"):
        assert f"{criterion}: {said}; AC1 stays defined" in lines
    assert not any("both annotators" in line and "judge" not in line for line in lines[-12:])
    # Every interval is given to three places, the people's as the judge's, as their coefficients are.
    intervals = re.findall(r"\[(-?\d+\.\d+), (-?\d+\.\d+)\]", table.stdout)
    assert intervals and all(len(x.split(".")[1]) == 3 for pair in intervals for x in pair)
