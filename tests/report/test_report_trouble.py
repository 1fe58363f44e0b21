"""Replies that are not answers, end to end against a real loopback server: empty replies (a broken chat
template) and replies cut off at the token limit each get one loud, specific line from ``probe run`` (which
exits 1) and from ``report``, and an ``Inv.`` count in every table the model appears in."""

from __future__ import annotations

import json
import socket

import pytest

from cfkit.parse.trouble import not_clean, reply_trouble
from support.chat_api_server import ChatServer, Scripted, answer_json, completion, user_text
from support.probe_runs import FAST
from support.store_sql import delete_rows
from support.workspace import run_cli


def _empty(body, n) -> Scripted:
    return Scripted(body=completion(""))


def _cut(body, n) -> Scripted:
    return Scripted(body=completion("Looking at the picture, the", finish_reason="length", completion_tokens=8))


def _cut_but_answered(body, n) -> Scripted:
    return Scripted(body=completion(answer_json("A"), finish_reason="length"))


def _run(ws, url, model, suite="contextcanvas", *extra):
    return run_cli(["-w", str(ws), "probe", "run", "-m", model, "-s", suite, "--base-url", url, *FAST, *extra])


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_empty_and_cut_off_replies_are_loud_in_probe_run_and_report_and_counted_in_every_table(tiny_ws):
    with ChatServer(_empty) as empty, ChatServer(_cut) as cut:
        runs = {}
        for model, server in (("openai:empty-model", empty), ("openai:cut-model", cut)):
            for suite in ("contextcanvas", "swap"):
                result = _run(tiny_ws, server.url, model, suite, "--max-tokens", "8", "--json")
                # Every request has a stored reply, but the run is not clean: exit 1, one line saying why.
                assert result.exit_code == 1, result.output
                runs[(model, suite)] = json.loads(result.stdout)["run_id"]
                said = _flat(result.stderr)
                assert "Traceback" not in result.output
                if model == "openai:empty-model":
                    n = 3 if suite == "contextcanvas" else 4
                    assert f"openai:empty-model {suite}: {n} of {n} replies have no valid answer, {n} of them empty" \
                           in said
                    assert "chat template" in said and f"runs unparsed {runs[(model, suite)]}' shows them" in said
                else:
                    n = 3 if suite == "contextcanvas" else 4
                    assert f"openai:cut-model {suite}: {n} of {n} replies were cut off at the token limit (8 tokens)" \
                           in said
                    assert "Raise --max-tokens and run again" in said
                summary = json.loads(result.stdout)
                assert summary["status"] == "done" and summary["missing"] == 0
    data = json.loads(run_cli(["-w", str(tiny_ws), "report", "--format", "json", "--resamples", "50"]).stdout)
    rows = {r["model"]: r for r in data["contextcanvas"]}
    assert rows["openai:empty-model"]["invalid"] == 3 and rows["openai:cut-model"]["invalid"] == 3
    swaps = {r["model"]: r for r in data["swap"]}
    # Each row says it rests on such replies, in the JSON and so in the CSV's long form.
    assert all(r["not_clean"] is True for r in [*rows.values(), *swaps.values()])
    csv = run_cli(["-w", str(tiny_ws), "report", "--format", "csv", "--resamples", "50"]).stdout.splitlines()
    assert "contextcanvas,openai:cut-model,not_clean,true,measured" in csv
    assert "swap,openai:empty-model,not_clean,true,measured" in csv
    assert (swaps["openai:cut-model"]["invalid_original"], swaps["openai:cut-model"]["invalid_swapped"]) == (2, 2)
    problems = {(p["model"], p["suite"]): p for p in data["reply_problems"]}
    assert set(problems) == set(runs)
    assert problems[("openai:cut-model", "contextcanvas")] | {"message": ""} == {
        "model": "openai:cut-model", "suite": "contextcanvas", "condition": None, "replies": 3, "invalid": 3,
        "empty": 0, "truncated": 3, "run": runs[("openai:cut-model", "contextcanvas")], "message": ""}
    assert problems[("openai:empty-model", "swap")]["empty"] == 4
    table = run_cli(["-w", str(tiny_ws), "report", "--resamples", "50"], env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.stderr
    said = _flat(table.stderr)
    for (model, suite), problem in problems.items():
        assert _flat(problem["message"]) in said
        assert said.count(f"{model} {suite}:") >= 1
    assert "openai:cut-model contextcanvas: 3 of 3 replies were cut off at the token limit (8 tokens)" in said
    # The Inv. column: 3 in the two ContextCanvas tables, 2/2 in the option-order accuracy table, for both models
    # (the option-order bias table, the same rows, has no room for it within 100 columns).
    scores = table.stdout.split("Runs read", 1)[0]  # the tables of numbers (the last one names the runs read)
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in scores.splitlines() if "openai:" in line]
    cc = [cells for cells in rows if cells[-1] == "3"]
    swap = [cells for cells in rows if cells[-1] == "2/2"]
    assert len(cc) == 4 and len(swap) == 2, table.stdout
    # … and each of their rows says so itself, so a table copied on its own still does (legend under it).
    assert {cells[0] for cells in rows} == {"openai:empty-model (not clean)", "openai:cut-model (not clean)"}
    # The legend under Tables 2 and S4 and the option-order accuracy table (the bias table's caption is one line).
    assert _flat(table.stdout).count("Rows marked (not clean) rest on replies cut off at the token limit") == 3


def test_a_reply_cut_off_after_its_answer_still_counts_and_is_still_said(tiny_ws):
    server = ChatServer(_cut_but_answered).__enter__()
    result = _run(tiny_ws, server.url, "openai:long-model", "contextcanvas", "--json")
    assert result.exit_code == 1
    assert ("3 of 3 replies were cut off at the token limit (512 tokens); each still gave a valid answer. Raise "
            "--max-tokens and run again.") in _flat(result.stderr)
    assert json.loads(result.stdout)["truncated"] == 3 and json.loads(result.stdout)["invalid"] == 0
    data = json.loads(run_cli(["-w", str(tiny_ws), "report", "--format", "json", "--resamples", "50"]).stdout)
    assert data["contextcanvas"][0]["invalid"] == 0
    assert [p["truncated"] for p in data["reply_problems"]] == [3]
    # Its figures count those answers, with no invalid one to show for it: the row's mark says what they rest on;
    # a clean model's row has none.
    clean = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:majority", "-s", "contextcanvas"])
    assert clean.exit_code == 0
    md = run_cli(["-w", str(tiny_ws), "report", "--format", "md", "--resamples", "50"]).stdout
    assert "| openai:long-model (not clean) | 3 |" in md and "| baseline:majority | 3 |" in md
    data = json.loads(run_cli(["-w", str(tiny_ws), "report", "--format", "json", "--resamples", "50"]).stdout)
    assert {r["model"]: r["not_clean"] for r in data["contextcanvas"]} == {
        "openai:long-model": True, "baseline:majority": False}
    pytest.importorskip("pandas")
    import cfkit

    table2 = cfkit.Workspace(tiny_ws).report(resamples=50).table("2").set_index("model")
    assert table2["not_clean"].to_dict() == {"openai:long-model": True, "baseline:majority": False}
    assert "Rows marked (not clean) rest on replies cut off at the token limit" in md
    # A rerun finds the run finished and still says it (and still exits 1).
    try:
        again = _run(tiny_ws, server.url, "openai:long-model", "contextcanvas")
        assert server.count == 3  # nothing sent again
    finally:
        server.__exit__(None, None, None)
    assert again.exit_code == 1 and "cut off at the token limit" in again.stderr
    # The exported predictions carry the mark, and a report from the file says the same.
    exported = run_cli(["-w", str(tiny_ws), "runs", "export", json.loads(result.stdout)["run_id"]])
    assert all(json.loads(line)["truncated"] is True for line in exported.stdout.splitlines())


def _prose(body, n) -> Scripted:
    return Scripted(body=completion("It depends on the occasion and the audience."))


def test_replies_without_an_option_are_said_and_counted_but_are_not_marked_not_clean(tiny_ws):
    """Answers the parser found no option in are answers (counted wrong under Inv.): the report says so, and the
    run ends clean, so its rows carry no '(not clean)' mark; that is for replies cut off or mostly empty."""
    with ChatServer(_prose) as server:
        result = _run(tiny_ws, server.url, "openai:prose-model")
    assert result.exit_code == 0 and "the parser found no option in most of them" in _flat(result.stderr)
    data = json.loads(run_cli(["-w", str(tiny_ws), "report", "--format", "json", "--resamples", "50"]).stdout)
    assert [(p["model"], p["invalid"], p["truncated"], p["empty"]) for p in data["reply_problems"]] == [
        ("openai:prose-model", 3, 0, 0)]
    assert data["contextcanvas"][0]["invalid"] == 3 and data["contextcanvas"][0]["not_clean"] is False
    md = run_cli(["-w", str(tiny_ws), "report", "--format", "md", "--resamples", "50"]).stdout
    assert "| openai:prose-model | 3 |" in md and "not clean" not in md


def test_not_clean_is_cut_off_replies_or_mostly_empty_ones():
    assert not_clean(1, 0, 100) and not_clean(0, 51, 100)
    assert not not_clean(0, 50, 100) and not not_clean(0, 0, 100)


def test_the_likely_cause_is_the_one_most_replies_share():
    assert reply_trouble("m s", 10, 2, 1, 0, 512, "cmd") is None  # mostly fine: nothing to say
    assert "cut off" in reply_trouble("m s", 10, 0, 0, 1, 512, "cmd")  # any cut-off reply is said
    assert "empty" in reply_trouble("m s", 10, 9, 8, 0, 512, "cmd")
    unparsed = reply_trouble("m s", 10, 9, 1, 0, 512, "cmd")
    assert "found no option" in unparsed and "'cmd' shows them" in unparsed
    # Empty replies that stopped at the token limit (a model that spent them all on reasoning): the limit.
    assert "cut off at the token limit (64 tokens)" in reply_trouble("m s", 10, 10, 10, 10, 64, "cmd")


def test_a_model_with_empty_replies_gets_an_invalid_count_per_modality_condition(tiny_ws):
    for case in ("T001", "T002", "T003"):
        (tiny_ws / "captions" / f"{case}.yaml").write_text("neutral: A plain grey field.\nevidence: It is grey.\n")
    with ChatServer(_empty) as server:
        result = _run(tiny_ws, server.url, "openai:empty-model", "modality", "--all-cases")
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if "12 of 12 replies have no valid answer" in line]
    assert len(lines) == 1 and lines[0].startswith("error:")  # said once, as the reason for the exit status
    data = json.loads(run_cli(["-w", str(tiny_ws), "report", "--all-cases", "--format", "json",
                               "--resamples", "50"]).stdout)
    assert data["modality"][0]["invalid"] == {"text": 3, "neutral": 3, "evidence": 3, "image": 3}
    assert data["modality"][0]["accuracy"]["image"] == 0.0
    assert [(p["suite"], p["empty"]) for p in data["reply_problems"]] == [("modality", 12)]
    md = run_cli(["-w", str(tiny_ws), "report", "--all-cases", "--format", "md", "--resamples", "50"])
    assert "| Inv. |" in md.stdout and "| 3/3/3/3 |" in md.stdout
    assert "| openai:empty-model (not clean) | 3 |" in md.stdout  # the suite's trouble is in its conditions


# ── runs of one model with different settings: that model alone is set aside, with one line ──


def _report_json(ws, *extra):
    return run_cli(["-w", str(ws), "report", "--format", "json", "--resamples", "50", *extra])


def test_a_run_with_no_reply_yet_is_left_out_with_one_line_naming_it_and_why(tiny_ws):
    # A model whose server was down for its whole run has nothing to count: its rows are left out, and the report
    # says so (it had been left out in silence: a study's report simply had one model fewer).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"  # bound, never listening: refused
        down = _run(tiny_ws, dead, "openai:down-model", "contextcanvas", "--json")
    assert down.exit_code == 1
    run_id = json.loads(down.stdout)["run_id"]
    said = (f"openai:down-model: its contextcanvas run {run_id} has no reply yet (incomplete: nothing is listening "
            f"at {dead} (connection refused)")
    alone = run_cli(["report", "-w", str(tiny_ws)])
    assert alone.exit_code == 2 and said in _flat(alone.stderr)  # nothing else to report: the same line, as error
    with ChatServer(lambda body, n: Scripted(body=completion(answer_json("A")))) as up:
        assert _run(tiny_ws, up.url, "openai:up-model").exit_code == 0
    both = run_cli(["report", "-w", str(tiny_ws), "--format", "json", "--resamples", "200"])
    assert both.exit_code == 0
    assert said in _flat(both.stderr) and "the report leaves it out until it has one." in _flat(both.stderr)
    data = json.loads(both.stdout)
    assert [r["model"] for r in data["contextcanvas"]] == ["openai:up-model"]
    assert [a["runs"] for a in data["set_aside"]] == [[run_id]]


def test_a_smoke_test_with_other_settings_is_left_out_with_one_line_and_every_model_is_reported(tiny_ws):
    from support.probe_runs import scripted_answer

    assert run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-yes", "-s", "contextcanvas"]).exit_code == 0
    with ChatServer(scripted_answer) as server:
        smoke = _run(tiny_ws, server.url, "openai:test-model", "contextcanvas", "--limit", "2", "--max-tokens", "8",
                     "--json")
        full = _run(tiny_ws, server.url, "openai:test-model", "swap", "--json")
        smoke_id, full_id = (json.loads(r.stdout)["run_id"] for r in (smoke, full))
        report = _report_json(tiny_ws)
        assert report.exit_code == 0, report.stderr
        data = json.loads(report.stdout)
        assert {r["model"] for r in data["contextcanvas"]} == {"baseline:always-yes"}
        assert [r["model"] for r in data["swap"]] == ["openai:test-model"] and data["swap"][0]["runs"] == [full_id]
        assert [(a["model"], a["runs"], a["refused"]) for a in data["set_aside"]] == [
            ("openai:test-model", [smoke_id], False)]
        said = [line for line in report.stderr.splitlines() if "openai:test-model" in line]
        assert len(said) == 1 and smoke_id in said[0] and "max_tokens 8" in said[0] and "max_tokens 512" in said[0]
        # A second full run with other settings: now that model alone is refused (exit 1), the other stays.
        other = _run(tiny_ws, server.url, "openai:test-model", "contextcanvas", "--max-tokens", "64", "--json")
        other_id = json.loads(other.stdout)["run_id"]
    refused = _report_json(tiny_ws)
    assert refused.exit_code == 1, refused.stderr
    data = json.loads(refused.stdout)
    assert [r["model"] for r in data["contextcanvas"]] == ["baseline:always-yes"] and data["swap"] == []
    assert [(a["model"], a["refused"]) for a in data["set_aside"]] == [("openai:test-model", True)]
    lines = [line for line in _flat(refused.stderr).split("warning: ") if "openai:test-model has runs" in line]
    assert len(lines) == 1 and other_id in lines[0] and full_id in lines[0] and "--mixed-settings" in lines[0]
    assert "1 model left out for runs with different settings (openai:test-model)" in _flat(refused.stderr)
    # --run chooses for its model and suite; the other model stays, the swap run of other settings is named.
    chosen = _report_json(tiny_ws, "--run", other_id)
    assert chosen.exit_code == 0, chosen.stderr
    data = json.loads(chosen.stdout)
    rows = {r["model"]: r["runs"] for r in data["contextcanvas"]}
    assert set(rows) == {"baseline:always-yes", "openai:test-model"} and rows["openai:test-model"] == [other_id]
    assert data["swap"] == [] and full_id in data["set_aside"][0]["message"]
    both = _report_json(tiny_ws, "--run", other_id, "--run", full_id)
    assert both.exit_code == 0 and json.loads(both.stdout)["set_aside"] == []
    # --mixed-settings reports the model anyway, from the newest run of each suite, and says so.
    mixed = _report_json(tiny_ws, "--mixed-settings")
    assert mixed.exit_code == 0, mixed.stderr
    data = json.loads(mixed.stdout)
    assert {r["model"] for r in data["contextcanvas"]} == {"baseline:always-yes", "openai:test-model"}
    assert data["swap"][0]["runs"] == [full_id]
    assert "its rows mix runs of different settings (--mixed-settings)" in data["set_aside"][0]["message"]


# ── why a pair has no answer: the reason the run recorded when it skipped it ──


def test_a_pair_skipped_for_a_rejected_edit_a_failed_check_or_no_edit_says_so_in_the_report(tiny_ws):
    from support.probe_runs import _accepted_edit

    from cfkit.store import Store, checks, reviews

    spec = (tiny_ws / "interventions" / "TX01.yaml").read_text()
    for pair in ("TX02", "TX03", "TX04"):
        (tiny_ws / "interventions" / f"{pair}.yaml").write_text(spec.replace("id: TX01", f"id: {pair}"))
    _accepted_edit(tiny_ws, "TX01", 1)
    _accepted_edit(tiny_ws, "TX02", 2)
    _accepted_edit(tiny_ws, "TX03", 3)
    with Store(tiny_ws / ".cfkit" / "cfkit.db") as store:
        reviews.record(store, "TX02", 2, "reject")
        delete_rows(store.path, "reviews", {"edit_id": 3})
        checks.insert(store, 3, "TX03", [checks.NewCheck("composite", {}, "fail", ["SSIM outside 0.71 < 0.95"], True)])
    run = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-yes", "-s", "counterfactual", "--json"])
    assert run.exit_code == 0, run.stderr
    run_id = json.loads(run.stdout)["run_id"]
    result = _report_json(tiny_ws)
    missing = {(m["pair"], m["condition"]): m for m in json.loads(result.stdout)["missing"]}
    assert {pair for pair, _ in missing} == {"TX02", "TX03", "TX04"} and len(missing) == 6
    assert {m["reason"] for m in missing.values()} == {"skipped"}
    assert missing[("TX02", "edit")]["detail"].startswith(f"not asked by run {run_id}: rejected edit: edit #2 was "
                                                          "rejected in review")
    assert missing[("TX03", "original")]["detail"] == (
        f"not asked by run {run_id}: failed check: edit #3 failed its preservation check (SSIM outside 0.71 < "
        "0.95); accept it in 'cfkit review TX03', or run 'cfkit edit TX03' again")
    assert missing[("TX04", "edit")]["detail"] == f"not asked by run {run_id}: no edit yet; run 'cfkit edit TX04'"
    assert not any("suite has changed" in m["detail"] for m in missing.values())
    # On stderr: one line for the model and reason, not one per unit; each unit under -v.
    table = run_cli(["-w", str(tiny_ws), "report", "--resamples", "50"], env={"COLUMNS": "250"})
    warned = [line for line in table.stderr.splitlines() if line.startswith("warning:")]
    assert len(warned) == 1 and "baseline:always-yes: 6 units without a usable answer" in warned[0]
    assert "(skipped; counterfactual 6)" in warned[0]
    verbose = run_cli(["-w", str(tiny_ws), "report", "--resamples", "50", "-v"], env={"COLUMNS": "250"})
    assert "pair TX03, condition edit: skipped (not asked by run" in " ".join(verbose.stderr.split())


def test_a_pair_skipped_by_a_run_that_also_ended_incomplete_says_skipped_not_resume(tiny_ws):
    """Resuming a run never asks a pair it skipped (a rejected edit), so the report gives the skip as the reason
    even when the same run ended incomplete for its other units."""
    from support.probe_runs import _accepted_edit
    from support.store_sql import update_rows

    from cfkit.store import Store, reviews

    spec = (tiny_ws / "interventions" / "TX01.yaml").read_text()
    (tiny_ws / "interventions" / "TX02.yaml").write_text(spec.replace("id: TX01", "id: TX02"))
    _accepted_edit(tiny_ws, "TX01", 1)
    _accepted_edit(tiny_ws, "TX02", 2)
    with Store(tiny_ws / ".cfkit" / "cfkit.db") as store:
        reviews.record(store, "TX02", 2, "reject")
    run = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-yes", "-s", "counterfactual", "--json"])
    assert run.exit_code == 0, run.stderr
    run_id = json.loads(run.stdout)["run_id"]
    delete_rows(tiny_ws, "replies", {"run_id": run_id, "pair_id": "TX01", "condition": "edit"})
    update_rows(tiny_ws, "runs", {"status": "stopped", "n_done": 1}, {"id": run_id})  # as a stopped run leaves it
    missing = {(m["pair"], m["condition"]): m for m in json.loads(_report_json(tiny_ws).stdout)["missing"]}
    assert missing[("TX01", "edit")]["reason"] == "absent" and "is stopped" in missing[("TX01", "edit")]["detail"]
    assert {missing[("TX02", c)]["reason"] for c in ("original", "edit")} == {"skipped"}
    assert missing[("TX02", "edit")]["detail"].startswith(f"not asked by run {run_id}: rejected edit")


def test_runs_show_counts_replies_without_an_answer_among_the_replies_that_came_back(tiny_ws):
    """Failed requests are not replies: 'N of M have no valid answer' counts both over the replies received."""
    def script(body, n) -> Scripted:
        if "spring fair" in user_text(body):  # T001's request fails every time
            return Scripted(status=500, body={"error": {"message": "boom"}})
        return Scripted(body=completion("Looking at the picture, the", finish_reason="length", completion_tokens=8))

    with ChatServer(script) as server:
        result = _run(tiny_ws, server.url, "openai:test-model", "contextcanvas", "--max-tokens", "8", "--json")
    assert result.exit_code == 1, result.output
    run_id = json.loads(result.stdout)["run_id"]
    shown = _flat(run_cli(["-w", str(tiny_ws), "runs", "show", run_id], env={"COLUMNS": "250"}).output)
    assert "2 of 2 replies were cut off at the token limit (8 tokens); 2 of 2 have no valid answer" in shown, shown


# ── a replayed predictions file is labelled by the model it names, or by -o label=NAME ──


def test_a_replayed_file_is_labelled_by_its_model_in_tables_and_by_label_when_asked(tiny_ws, tmp_path):
    lines = [{"model": "openai:gpt-5.5", "suite": "contextcanvas", "case": case, "condition": "image",
              "answer": answer, "parse": "json"} for case, answer in (("T001", "B"), ("T002", "A"), ("T003", "C"))]
    path = tmp_path / "pred-x.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", f"replay:{path}", "-s", "contextcanvas", "--json"])
    assert run.exit_code == 0, run.stderr
    assert json.loads(run.stdout)["model"] == "openai:gpt-5.5"
    table = run_cli(["-w", str(tiny_ws), "report", "--resamples", "50"], env={"COLUMNS": "250"})
    assert table.exit_code == 0 and "openai:gpt-5.5" in table.stdout and str(path) not in table.output
    labelled = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", f"replay:{path}", "-o", "label=GPT-5.5 (replayed)",
                        "-s", "contextcanvas"])
    assert labelled.exit_code == 0, labelled.stderr
    data = json.loads(_report_json(tiny_ws).stdout)
    assert {r["model"]: r["accuracy"] for r in data["contextcanvas"]} == {
        "openai:gpt-5.5": 100.0, "GPT-5.5 (replayed)": 100.0}
    # --label shows a model under another name everywhere; --compare and the groups then use that name.
    shown = _report_json(tiny_ws, "--label", "openai:gpt-5.5=GPT-5.5", "--compare", "GPT-5.5=GPT-5.5 (replayed)")
    assert shown.exit_code == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert {(r["model"], r["group"]) for r in data["contextcanvas"]} == {("GPT-5.5", "closed"),
                                                                         ("GPT-5.5 (replayed)", None)}
    assert (data["compare"][0]["base"], data["compare"][0]["other"]) == ("GPT-5.5", "GPT-5.5 (replayed)")
    assert {u["model"] for u in data["units"]} == {"GPT-5.5", "GPT-5.5 (replayed)"}
    unknown = _report_json(tiny_ws, "--label", "openai:gpt-9=X")
    assert unknown.exit_code == 2 and "the report has no model 'openai:gpt-9'" in _flat(unknown.stderr)
    clash = _report_json(tiny_ws, "--label", "openai:gpt-5.5=GPT-5.5 (replayed)")
    assert clash.exit_code == 2 and "would both be shown as 'GPT-5.5 (replayed)'" in _flat(clash.stderr)


def test_replies_a_batch_returns_cut_off_are_recorded_and_said_by_collect(tiny_ws):
    from support.batch_api_server import BatchServer

    with BatchServer(_cut) as server:
        sent = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                        "--base-url", server.url, *FAST, "--batch", "--max-tokens", "8", "--json"])
        assert sent.exit_code == 0, sent.stderr
        run_id = json.loads(sent.stdout)["run_id"]
        done = run_cli(["-w", str(tiny_ws), "probe", "collect", run_id, "--wait", "--poll", "1", "--json"])
    assert done.exit_code == 1, done.output
    assert json.loads(done.stdout)["truncated"] == 3
    assert "openai:test-model contextcanvas: 3 of 3 replies were cut off at the token limit (8 tokens)" in \
        _flat(done.stderr)
    data = json.loads(_report_json(tiny_ws).stdout)
    assert [(p["run"], p["truncated"]) for p in data["reply_problems"]] == [(run_id, 3)]
    shown = json.loads(run_cli(["-w", str(tiny_ws), "runs", "show", run_id, "--json"]).stdout)
    assert [(c["condition"], c["truncated"]) for c in shown["conditions"]] == [("image", 3)]
    unparsed = run_cli(["-w", str(tiny_ws), "runs", "unparsed", run_id], env={"COLUMNS": "200"})
    assert unparsed.stdout.count("(cut off at the token limit)") == 3


def test_a_local_model_that_generated_its_whole_budget_without_ending_is_cut_off():
    from cfkit.backends.hf_local import _hit_limit

    assert _hit_limit([5, 6, 7], 3, {2})  # three of three tokens, the last no end-of-sequence: cut off
    assert not _hit_limit([5, 6, 2], 3, {2})  # it ended on its last allowed token
    assert not _hit_limit([5, 6, 2], 3, {9, 2})  # several end tokens
    assert not _hit_limit([5, 2], 3, {2})  # ended early
    assert _hit_limit([5, 6, 7], 3, set())  # no end token known: the budget used up is all we can tell


def test_a_modality_condition_that_is_mostly_not_answered_is_named_when_the_suite_as_a_whole_is_fine():
    from cfkit.predictions import Prediction
    from cfkit.report.trouble import reply_troubles

    preds = {}
    for i in range(10):
        for condition in ("text", "neutral", "evidence", "image"):
            empty = condition == "text" and i < 8
            p = Prediction(model="m", suite="modality", case=f"C{i}", condition=condition,
                           answer=None if empty else "A", error="missing" if empty else None, raw="" if empty else "A")
            preds[(p.case, "", condition)] = p
    [found] = reply_troubles({"modality": {"m": preds}}, {}, {})
    assert (found.condition, found.replies, found.invalid, found.empty, found.run) == ("text", 10, 8, 8, None)
    assert found.message.startswith("m modality (text): 8 of 10 replies have no valid answer, 8 of them empty")


def test_only_named_reports_the_named_runs_alone(tiny_ws):
    for model in ("baseline:always-yes", "baseline:always-no"):
        assert run_cli(["-w", str(tiny_ws), "probe", "run", "-m", model, "-s", "contextcanvas"]).exit_code == 0
    listed = json.loads(run_cli(["-w", str(tiny_ws), "runs", "list", "--json"]).stdout)
    yes = next(r["id"] for r in listed if r["model"] == "baseline:always-yes")
    both = json.loads(_report_json(tiny_ws, "--run", yes).stdout)
    assert {r["model"] for r in both["contextcanvas"]} == {"baseline:always-yes", "baseline:always-no"}
    alone = json.loads(_report_json(tiny_ws, "--run", yes, "--only-named").stdout)
    assert [r["model"] for r in alone["contextcanvas"]] == ["baseline:always-yes"]


def test_the_view_lists_cut_off_replies_under_its_truncated_filter_and_says_so_on_the_case_page(tiny_ws, tmp_path):
    def cut_one(body, n) -> Scripted:
        if "winter card" in json.dumps(body):
            return _cut(body, n)
        return Scripted(body=completion(answer_json("A")))

    with ChatServer(cut_one) as server:
        assert _run(tiny_ws, server.url, "openai:long-model").exit_code == 1
    site = tmp_path / "site"
    assert run_cli(["view", "-w", str(tiny_ws), "--export", str(site)]).exit_code == 0
    listed = (site / "cases-truncated-1.html").read_text()
    assert "case-T002.html" in listed and "case-T001.html" not in listed
    assert "cut off at the token limit" in (site / "case-T002.html").read_text()
    assert "cut off at the token limit" not in (site / "case-T001.html").read_text()


def test_the_counts_by_condition_are_those_of_one_reply_at_a_time():
    """_counts tallies the replies by their distinct fields; counted one reply at a time it gives the same."""
    import random

    from cfkit.predictions import Prediction
    from cfkit.report.trouble import _counts

    rng = random.Random(7)
    preds = [Prediction(model="m", suite="modality", case=f"C{i}", condition=rng.choice(["text", "image", "neutral"]),
                        answer=answer, error=None if answer else rng.choice([None, "refused", "transport", "missing"]),
                        raw=rng.choice([None, "", "  ", "B maybe"]), truncated=rng.choice([None, True]))
             for i in range(400) for answer in [rng.choice(["A", None])]]
    expected = _plain_counts(preds)
    got = _counts(preds)
    assert got == expected and list(got) == list(expected)
    assert all(row[2] for row in got.values()) and all(row[3] for row in got.values())  # every count exercised


def _plain_counts(preds) -> dict[str, list[int]]:
    """Per condition: replies (transport failures left out), no valid option, empty, cut off — one reply at a
    time, the oracle of the counts."""
    expected: dict[str, list[int]] = {}
    for p in preds:
        row = expected.setdefault(p.condition, [0, 0, 0, 0])
        if p.error == "transport":
            continue
        row[0] += 1
        row[1] += p.answer is None
        row[2] += p.answer is None and p.error != "refused" and not (p.raw or "").strip()
        row[3] += bool(p.truncated)
    return expected


@pytest.mark.parametrize("seed", range(6))
def test_reply_counts_equal_a_plain_count_of_each_reply(seed):
    """The counts per condition (replies, no valid option, empty, cut off) equal a plain loop over the replies,
    whether all of them came back whole (counted per condition) or some failed, were refused or cut off."""
    import random

    from cfkit.predictions import Prediction
    from cfkit.report.trouble import _counts

    rng = random.Random(seed)
    unusual = seed % 2  # even seeds: no error and nothing cut off
    preds = [Prediction(model="m", suite="modality", case=f"C{i}", condition=rng.choice(["text", "image", "neutral"]),
                        answer=(answer := rng.choice(["A", "B", None])),
                        error=(rng.choice([None, "transport", "refused", "missing"]) if unusual and answer is None
                               else None),
                        raw=rng.choice(["", "  ", "yes", None]),
                        truncated=rng.choice([None, False, True]) if unusual else rng.choice([None, False]))
             for i in range(300)]
    expected = _plain_counts(preds)
    got = _counts(preds)
    assert got == expected and list(got) == list(expected)
