"""Probe runs end to end: requests, the runner, the cache, resuming, runs commands, baselines, replay.

Model calls go to a real Chat Completions server on 127.0.0.1 (tests/support/chat_api_server.py).
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cfkit.backends import Capabilities, load_backend
from cfkit.errors import InputError
from cfkit.store import Store, reviews
from cfkit.workspace import load_workspace
from support.chat_api_server import ChatServer, Scripted, completion, error_body, user_text
from support.probe_runs import FAST, _accepted_edit, _cli_process, _incomplete_runs, add_modality, many_cases, openai_run, replies, report, scripted_answer
from support.store_sql import delete_rows, table_rows, update_rows
from support.workspace import REPO, aged, gradient_image, run_cli, write_workspace

SECRET = "sk-live-DO-NOT-LEAK-0123456789abcdef"
LOCAL_SECRET = "local-server-key-DO-NOT-LEAK-42"


def run_ids(ws: Path) -> list[str]:
    return [r["id"] for r in table_rows(ws, "runs", "id", order_by="started_at, id")]


# -- requests ------------------------------------------------------------------


def with_secrets_in_cases(root: Path) -> None:
    path = root / "data" / "cases.jsonl"
    cases = [json.loads(line) for line in path.read_text().splitlines()]
    for case in cases:
        case["rationale"] = f"RATIONALE-{case['id']} explains the gold"
        case["provenance"] = {"title": f"TITLE-{case['id']}", "creator": "CREATOR-NAME", "url": "https://x.test/p"}
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))


def test_requests_never_carry_gold_rationale_or_provenance(tiny_ws):
    from cfkit.probe import plan_suite

    with_secrets_in_cases(tiny_ws)
    add_modality(tiny_ws)
    ws = load_workspace(tiny_ws)
    caps = Capabilities(images=True, multi_image=True, json_schema=True, remote=True)
    for suite in ("contextcanvas", "modality"):
        plan = plan_suite(ws, suite, caps)
        for item in plan.items:
            sent = json.dumps(item.request.fingerprint())
            for secret in ("RATIONALE", "TITLE-", "CREATOR-NAME", "x.test", '"gold"'):
                assert secret not in sent
            assert "gold" not in {f.name for f in item.request.meta.__dataclass_fields__.values()}


def test_modality_plan_has_four_conditions_and_images_only_for_image(tiny_ws):
    from cfkit.probe import plan_suite

    add_modality(tiny_ws)
    ws = load_workspace(tiny_ws)
    plan = plan_suite(ws, "modality", Capabilities(images=True, multi_image=True, json_schema=True, remote=True))
    assert [(i.case.id, i.condition) for i in plan.items] == [
        (c, cond) for c in ("T001", "T002") for cond in ("text", "neutral", "evidence", "image")]
    images = {i.condition: i.request.images for i in plan.items if i.case.id == "T001"}
    assert images["text"] == images["neutral"] == images["evidence"] == ()
    assert images["image"][0].data == (tiny_ws / "data" / "images" / "T001.png").read_bytes()
    texts = {i.condition: i.request.user for i in plan.items if i.case.id == "T001"}
    assert "grey block sits in the middle" in texts["evidence"] and "grey block sits" not in texts["neutral"]
    assert plan.gold_labels == {"no": 1, "yes": 1}


def test_two_image_case_goes_as_one_labelled_sheet_to_single_image_backends(tiny_ws):
    from cfkit.probe import plan_suite

    images = tiny_ws / "data" / "images"
    Image.fromarray(gradient_image(40, 30, 5)).save(images / "P1.png")
    Image.fromarray(gradient_image(60, 30, 6)).save(images / "P2.png")
    with (tiny_ws / "data" / "cases.jsonl").open("a") as fh:
        fh.write(json.dumps({"id": "T004", "images": ["P1.png", "P2.png"], "question": "Does the pair fit?",
                             "options": [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}], "gold": "A",
                             "yes_option": "A"}) + "\n")
    ws = load_workspace(tiny_ws)
    multi = plan_suite(ws, "contextcanvas", Capabilities(True, True, True, True)).items[-1].request
    single = plan_suite(ws, "contextcanvas", Capabilities(True, False, False, False)).items[-1].request
    assert [i.data for i in multi.images] == [(images / "P1.png").read_bytes(), (images / "P2.png").read_bytes()]
    assert len(single.images) == 1 and single.images[0].mime == "image/png"
    sheet = np.asarray(Image.open(io.BytesIO(single.images[0].data)).convert("RGB"))
    assert sheet.shape[1] > 100  # both panels side by side at a common height
    # The label band above the panels holds dark text pixels; the panels hold the images' own pixels.
    assert (sheet[:35] < 100).any()
    assert single.user == multi.user  # the same words; only the image packaging differs


# -- end to end against the loopback server --------------------------------------


def test_suite_end_to_end_with_flaky_server_then_rerun_sends_nothing(tiny_ws, monkeypatch):
    # The server refuses response_format, rate-limits once and fails once: every reply still arrives.
    def script(body, n):
        if "response_format" in body:
            return Scripted(400, error_body("response_format is not supported by this server",
                                            param="response_format"))
        if n == 2:
            return Scripted(429, error_body("rate limited", kind="rate_limit_error"), {"retry-after": "0"})
        if n == 4:
            return Scripted(500, error_body("internal", kind="server_error"))
        return scripted_answer(body, n)

    with ChatServer(script) as server:
        first = openai_run(tiny_ws, server.url)
        assert first.exit_code == 0, first.stderr
        sent = server.count
        again = openai_run(tiny_ws, server.url)
        assert again.exit_code == 0, again.stderr
        assert server.count == sent  # the rerun sent nothing
    assert "response_format" in first.stderr  # the fallback is reported
    assert "3 already stored" in again.stderr and "0 sent" in again.stderr
    rows = report(tiny_ws)["contextcanvas"]
    assert len(rows) == 1
    row = rows[0]
    # Scripted answers: T001 A (gold B), T002 A (gold A), T003 C (gold C).
    assert row["model"] == "openai:test-model"
    assert row["n"] == 3 and row["n_binary"] == 2 and row["invalid"] == 0
    assert row["accuracy"] == pytest.approx(200 / 3)
    assert row["yes_rate"] == pytest.approx(100.0) and row["gold_yes_rate"] == pytest.approx(50.0)
    assert {r["case_id"]: r["parse"] for r in replies(tiny_ws)} == {"T001": "json", "T002": "json", "T003": "json"}


def test_api_key_never_reaches_store_exports_or_output(tiny_ws, monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("LOCAL_KEY", LOCAL_SECRET)
    with ChatServer(scripted_answer) as server:
        result = openai_run(tiny_ws, server.url, "contextcanvas", "--api-key-env", "LOCAL_KEY", "--json")
        assert result.exit_code == 0, result.stderr
    assert {h["authorization"] for h in server.headers} == {f"Bearer {LOCAL_SECRET}"}
    run_id = json.loads(result.stdout)["run_id"]
    exported = run_cli(["-w", str(tiny_ws), "runs", "export", run_id])
    shown = run_cli(["-w", str(tiny_ws), "runs", "show", run_id, "--json"])
    listed = run_cli(["-w", str(tiny_ws), "runs", "list", "--json"])
    blobs = [result.stdout, result.stderr, exported.stdout, shown.stdout, listed.stdout]
    blobs += [p.read_bytes().decode("latin-1") for p in (tiny_ws / ".cfkit").glob("cfkit.db*")]
    for secret in (SECRET, LOCAL_SECRET):
        assert not any(secret in blob for blob in blobs)
    assert json.loads(shown.stdout)["run"]["options"]["options"]["api_key_env"] == "LOCAL_KEY"


def test_transport_failures_are_recorded_and_retried_on_the_next_run(tiny_ws):
    overloaded = [True]

    def broken_for_t002(body, n):
        if overloaded[0] and "winter card" in user_text(body):
            return Scripted(503, error_body("overloaded", kind="server_error"))
        return scripted_answer(body, n)

    with ChatServer(broken_for_t002) as server:
        first = openai_run(tiny_ws, server.url)
        assert first.exit_code == 1
        assert "1 of 3 planned requests has no reply: 1 failed (HTTP 503" in first.stderr
        assert server.count == 2 + 3  # T001, T003 once; T002 three times (two retries)
        failed = [r for r in replies(tiny_ws) if r["case_id"] == "T002"][0]
        assert failed["answer"] is None and failed["error"] == "transport" and "HTTP 503" in failed["detail"]
        shown = run_cli(["-w", str(tiny_ws), "runs", "show", run_ids(tiny_ws)[0]])
        assert "incomplete" in shown.stdout and "HTTP 503" in shown.stdout
        overloaded[0] = False
        second = openai_run(tiny_ws, server.url)
        assert second.exit_code == 0 and server.count == 5 + 1  # only the failed request again
    assert {r["case_id"]: r["answer"] for r in replies(tiny_ws)} == {"T001": "A", "T002": "A", "T003": "C"}
    listed = json.loads(run_cli(["-w", str(tiny_ws), "runs", "list", "--json"]).stdout)
    assert listed[0]["status"] == "done" and listed[0]["n_done"] == 3 and listed[0]["n_errors"] == 0


def test_a_dead_endpoint_a_budget_stop_and_a_replay_gap_each_exit_1_and_say_what_is_missing(tiny_ws, tmp_path):
    runs_ = _incomplete_runs(tiny_ws, tmp_path)
    for name, (result, summary) in runs_.items():
        assert result.exit_code == 1, (name, result.stderr)
        assert summary["status"] == "incomplete" and summary["missing"] == {"dead": 3, "budget": 2, "replay": 2}[name]
        error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(error) == 1 and "Traceback" not in result.stderr
        assert f"run {summary['run_id']} is incomplete: {summary['missing']} of 3 planned requests have no reply" \
            in error[0]
        assert f"resume with: cfkit -w {tiny_ws} probe run -m " in error[0]
    dead = runs_["dead"][0].stderr
    assert "3 failed (ConnectionError from http://127.0.0.1:" in dead and "after 3 attempts" in dead
    budget = runs_["budget"][0].stderr
    assert "2 not sent (--max-cost 0.15 USD would be exceeded" in budget
    assert budget.rstrip().endswith("--max-cost 0.25")  # 0.10 a request x 2 left x 1.25
    replay = runs_["replay"][0].stderr
    assert "2 failed (replay:" in replay and "has no contextcanvas prediction for case T001" in replay


def test_a_run_is_identified_by_everything_that_changes_an_answer(tiny_ws):
    def fingerprinted(body, n):
        reply = scripted_answer(body, n)
        reply.body |= {"model": "test-model-2026-11-30", "system_fingerprint": "fp_abc123"}
        return reply

    aged(tiny_ws)  # the last run below, whose server is gone, must find every image's digest in the store
    with ChatServer(fingerprinted) as one, ChatServer(fingerprinted) as two:
        first = json.loads(openai_run(tiny_ws, one.url, "contextcanvas", "--json").stdout)
        before = replies(tiny_ws, first["run_id"])
        # Only --max-tokens differs: another run, asked again; the first run's answers are untouched.
        shorter = json.loads(openai_run(tiny_ws, one.url, "contextcanvas", "--json", "--max-tokens", "100").stdout)
        assert shorter["run_id"] != first["run_id"] and shorter["sent"] == 3
        assert replies(tiny_ws, first["run_id"]) == before
        # Only the endpoint differs, given through OPENAI_BASE_URL: another run, which records where it went.
        env = {"OPENAI_BASE_URL": two.url}
        moved = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas",
                         *FAST, "--json"], env=env)
        moved = json.loads(moved.stdout)
        assert moved["run_id"] not in (first["run_id"], shorter["run_id"]) and two.count == 3
    shown = json.loads(run_cli(["-w", str(tiny_ws), "runs", "show", moved["run_id"], "--json"]).stdout)["run"]
    assert shown["endpoint"] == two.url and shown["settings"]["endpoint"] == two.url
    assert shown["settings"]["generation"] == {"temperature": 0.0, "max_tokens": 512}
    assert shown["versions"]["cfkit"] and "openai" in shown["versions"]
    short = json.loads(run_cli(["-w", str(tiny_ws), "runs", "show", shorter["run_id"], "--json"]).stdout)["run"]
    assert short["settings"]["generation"]["max_tokens"] == 100
    assert {(r["server_model"], r["system_fingerprint"]) for r in replies(tiny_ws, moved["run_id"])} == {
        ("test-model-2026-11-30", "fp_abc123")}
    # A reply answered from the response cache keeps what the server said about itself.
    delete_rows(tiny_ws, "replies", {"run_id": first["run_id"]})
    update_rows(tiny_ws, "runs", {"status": "incomplete"}, {"id": first["run_id"]})
    with ChatServer(fingerprinted) as three:
        again = json.loads(openai_run(tiny_ws, one.url, "contextcanvas", "--json").stdout)
    assert again["run_id"] == first["run_id"] and again["from_cache"] == 3 and three.count == 0
    assert {r["server_model"] for r in replies(tiny_ws, first["run_id"])} == {"test-model-2026-11-30"}


def test_runs_show_gives_each_failure_its_reason_and_runs_rm_removes_a_run_but_not_the_cache(tiny_ws):
    def t002_overloaded(body, n):
        if "winter card" in user_text(body):
            return Scripted(503, error_body("the engine is overloaded, try later", kind="server_error"))
        if "Which event" in user_text(body):
            return Scripted(429, error_body("rate limit reached for requests", kind="rate_limit_error"))
        return scripted_answer(body, n)

    with ChatServer(t002_overloaded) as server:
        run_id = json.loads(openai_run(tiny_ws, server.url, "contextcanvas", "--json").stdout)["run_id"]
    shown = run_cli(["-w", str(tiny_ws), "runs", "show", run_id])
    assert shown.exit_code == 0
    text = " ".join(shown.stdout.split())
    assert "transport × 1: HTTP 503" in text and "the engine is overloaded, try later" in text and "T002 image" in text
    assert "transport × 1: HTTP 429" in text and "rate limit reached" in text and "T003 image" in text
    assert f"endpoint {server.url}" in text
    as_json = json.loads(run_cli(["-w", str(tiny_ws), "runs", "show", run_id, "--json"]).stdout)
    assert {f["case"]: f["error"] for f in as_json["failures"]} == {"T002": "transport", "T003": "transport"}
    removed = run_cli(["-w", str(tiny_ws), "runs", "rm", run_id])
    assert removed.exit_code == 0 and removed.stdout.strip() == run_id
    assert "and its 3 replies; cached responses stay" in removed.stderr
    assert json.loads(run_cli(["-w", str(tiny_ws), "runs", "list", "--json"]).stdout) == []
    with Store(tiny_ws / ".cfkit" / "cfkit.db") as store:
        assert len(table_rows(store.path, "responses")) == 1  # T001's answer stays cached
    unknown = run_cli(["-w", str(tiny_ws), "runs", "rm", "nope"])
    assert unknown.exit_code == 2 and "no run 'nope'" in unknown.stderr


def test_killed_run_resumes_with_only_the_missing_requests(tmp_path):
    n = 60  # 3 s of sending two at a time: room for a loaded machine to be slow to send the signal
    killed_ws, clean_ws = many_cases(tmp_path / "killed", n), many_cases(tmp_path / "clean", n)
    with ChatServer(scripted_answer, latency=0.1) as server:
        proc = _cli_process(killed_ws, server.url, "--concurrency", "2")
        deadline = time.monotonic() + 60
        while server.count < 8 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        stored = len(replies(killed_ws))
        assert 4 <= stored < n
        before = server.count
        resumed = openai_run(killed_ws, server.url, "contextcanvas", "--concurrency", "4")
        assert resumed.exit_code == 0, resumed.stderr
        assert server.count - before == n - stored  # only the missing ones
        clean = openai_run(clean_ws, server.url, "contextcanvas", "--concurrency", "4")
        assert clean.exit_code == 0
    def answers(ws):
        return [(r["case_id"], r["answer"], r["parse"], r["raw"]) for r in replies(ws)]
    assert answers(killed_ws) == answers(clean_ws)
    assert len(answers(killed_ws)) == n


def test_two_processes_on_one_store_do_not_corrupt_it(tmp_path):
    ws = many_cases(tmp_path / "ws", 40)
    with ChatServer(scripted_answer, latency=0.01) as server:
        procs = [_cli_process(ws, server.url, "--concurrency", "4"),
                 subprocess.Popen([sys.executable, "-m", "cfkit", "-w", str(ws), "probe", "run", "-m",
                                   "baseline:random", "-s", "contextcanvas"],
                                  env=os.environ | {"PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)]
        results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    with Store(ws / ".cfkit" / "cfkit.db") as store:
        assert store.integrity_ok()
        counts = Counter(r["run_id"].split("-")[1] for r in table_rows(store.path, "replies", "run_id"))
    assert counts == {"openai": 40, "baseline": 40}


@pytest.mark.parametrize("missing, named", [(3, "M002, M003, M004"), (7, "M002, M003, M004, M005, M006, …")])
def test_modality_with_captions_missing_says_how_many_and_which_in_one_line_and_sends_nothing(tmp_path, missing,
                                                                                              named):
    ws = many_cases(tmp_path / "ws", 8)
    ids = [f"M{i:03d}" for i in range(1, 9)]
    add_modality(ws, ids)
    for case_id in ids[1: 1 + missing]:
        (ws / "captions" / f"{case_id}.yaml").unlink()
    with ChatServer(scripted_answer) as server:
        result = openai_run(ws, server.url, "modality")
        assert result.exit_code == 2 and server.count == 0
        [line] = result.stderr.strip().splitlines()
        assert f"{missing} of 8 selected cases have no caption" in line and f"({named}" in line, line
        assert "cfkit captions draft --model KIND:NAME" in line and "cfkit captions lint" in line
        assert ("M002 M003 M004'" in line) == (missing == 3)  # the draft command names them all when it can
        assert table_rows(ws, "replies") == [] and table_rows(ws, "runs") == []
        # Only the captions the run reads count: the first case alone has its caption.
        assert openai_run(ws, server.url, "modality", "--limit", "1").exit_code == 0


def test_replay_of_an_exported_run_reproduces_its_report(tiny_ws, tmp_path):
    add_modality(tiny_ws)

    def mixed(body, n):
        text = user_text(body)
        if "Visual information: none" in text:
            return Scripted(body=completion("Maybe A or B, hard to say."))  # ambiguous: null answer
        return scripted_answer(body, n)

    with ChatServer(mixed) as server:
        assert openai_run(tiny_ws, server.url, "modality").exit_code == 0
        assert openai_run(tiny_ws, server.url, "contextcanvas").exit_code == 0
    original = report(tiny_ws)
    exported = []
    for run_id in run_ids(tiny_ws):
        path = tmp_path / f"{run_id}.jsonl"
        assert run_cli(["-w", str(tiny_ws), "runs", "export", run_id, "--output", str(path)]).exit_code == 0
        exported.append(path)
        again = run_cli(["-w", str(tiny_ws), "runs", "export", run_id, "--output", str(path)])
        assert again.exit_code == 2 and "already exists" in again.stderr
    replay_ws = tmp_path / "replay"
    write_workspace(replay_ws)
    add_modality(replay_ws)
    for path in exported:
        suite = path.name.split("-")[0]
        result = run_cli(["-w", str(replay_ws), "probe", "run", "-m", f"replay:{path}", "-s", suite])
        assert result.exit_code == 0, result.stderr
    replayed = report(replay_ws)
    strip = lambda rows: [{k: v for k, v in row.items() if k not in ("model", "runs")} for row in rows]  # noqa: E731
    for section in ("contextcanvas", "modality"):
        assert strip(replayed[section]) == strip(original[section])
    assert original["modality"][0]["accuracy"]["text"] == 0.0  # the ambiguous replies count as wrong
    assert {r["error"] for r in replies(replay_ws) if r["condition"] == "text"} == {"ambiguous"}


# -- baselines, budget, counterfactual, CLI ----------------------------------------


def test_baselines(tiny_ws):
    def answers(model, *extra):
        result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", model, "-s", "contextcanvas", "--json", *extra])
        assert result.exit_code == 0, result.stderr
        run_id = json.loads(result.stdout)["run_id"]
        return {r["case_id"]: (r["answer"], r["error"]) for r in replies(tiny_ws, run_id)}

    assert answers("baseline:always-no") == {"T001": ("B", None), "T002": ("B", None), "T003": (None, "refused")}
    # A declined case keeps its reason as the detail, so 'runs show' says why.
    run_id = run_ids(tiny_ws)[-1]
    shown = run_cli(["-w", str(tiny_ws), "runs", "show", run_id])
    assert "refused × 1: baseline always-no has no answer for a case without a Yes/No option" in shown.stdout
    assert answers("baseline:always-yes") == {"T001": ("A", None), "T002": ("A", None), "T003": (None, "refused")}
    # Gold labels: one No, one Yes (a tie goes to No) and C for the three-option case.
    assert answers("baseline:majority") == {"T001": ("B", None), "T002": ("B", None), "T003": ("C", None)}
    first = answers("baseline:random", "-o", "seed=7")
    assert first == answers("baseline:random", "-o", "seed=7")
    assert all(a in ("A", "B", "C") and e is None for a, e in first.values())
    seeds = {tuple(sorted(answers("baseline:random", "-o", f"seed={s}").items())) for s in range(8)}
    assert len(seeds) > 1  # the seed matters


def test_max_cost_stops_before_the_budget_is_exceeded(tiny_ws):
    with ChatServer(scripted_answer) as server:
        no_prices = openai_run(tiny_ws, server.url, "contextcanvas", "--max-cost", "1")
        assert no_prices.exit_code == 2 and "--max-cost needs prices" in no_prices.stderr
        # 100 prompt tokens at 1000 USD per million: 0.10 USD a request.
        priced = openai_run(tiny_ws, server.url, "contextcanvas", "--max-cost", "0.25", "--json",
                            "-o", "price_in=1000", "-o", "price_out=0")
    assert priced.exit_code == 1, priced.stderr
    summary = json.loads(priced.stdout)
    assert server.count == 2 and summary["cost_usd"] == pytest.approx(0.2)
    assert summary["status"] == "incomplete" and "--max-cost 0.25" in summary["stopped"]


def test_counterfactual_pairs_without_edits_are_reported_then_run_with_the_edit(tiny_ws):
    with ChatServer(scripted_answer) as server:
        none = openai_run(tiny_ws, server.url, "counterfactual")
        assert none.exit_code == 2 and "every pair was skipped" in none.stderr and "TX01" in none.stderr
        assert server.count == 0
        edited = _accepted_edit(tiny_ws)
        done = openai_run(tiny_ws, server.url, "counterfactual")
    assert done.exit_code == 0, done.stderr
    sent = {}
    for body in server.requests:
        url = body["messages"][1]["content"][1]["image_url"]["url"]
        sent[len(sent)] = __import__("base64").b64decode(url.split(",", 1)[1])
    assert sorted(sent.values()) == sorted([edited.read_bytes(), (tiny_ws / "data/images/T001.png").read_bytes()])
    assert {(r["pair_id"], r["condition"]) for r in replies(tiny_ws)} == {("TX01", "original"), ("TX01", "edit")}
    row = report(tiny_ws)["counterfactual"][0]
    # Both sides answered A (Yes): the original (gold No) is wrong, the edit (gold Yes) right: stuck on the edit.
    assert (row["n_pairs"], row["orig_acc"], row["edit_acc"], row["stuck_edit"]) == (1, 0.0, 100.0, 1)


def test_exported_edit_answers_carry_the_edit_id_and_image_hash_and_a_re_edit_makes_them_stale(tiny_ws, tmp_path):
    import hashlib

    edited = _accepted_edit(tiny_ws, "TX01", 1)
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-yes", "-s", "counterfactual",
                      "--json"])
    run_id = json.loads(result.stdout)["run_id"]
    exported = [json.loads(x) for x in run_cli(["-w", str(tiny_ws), "runs", "export", run_id]).stdout.splitlines()]
    by_condition = {r["condition"]: r for r in exported}
    assert by_condition["edit"]["edit_id"] == 1
    assert by_condition["edit"]["image_sha256"] == hashlib.sha256(edited.read_bytes()).hexdigest()
    assert "edit_id" not in by_condition["original"]
    assert report(tiny_ws)["counterfactual"][0]["edit_acc"] == 100.0
    # A re-edit that a person accepts becomes the pair's edit: the stored answer was about edit #1.
    _accepted_edit(tiny_ws, "TX01", 2)
    data = report(tiny_ws)
    [stale] = data["missing"]
    assert (stale["condition"], stale["reason"]) == ("edit", "stale")
    assert "answered about edit #1; the pair's selected edit is now #2" in stale["detail"]
    row = data["counterfactual"][0]
    assert row["edit_acc"] == 0.0 and row["incomplete"] is True  # counted wrong, never credited to edit #2
    # The exported file, reported in this workspace, is checked the same way.
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in exported))
    assert [m["reason"] for m in report(tiny_ws, "--predictions", str(path))["missing"]] == ["stale"]
    # Asking again answers about edit #2: a new run, nothing stale.
    again = json.loads(run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-yes", "-s",
                                "counterfactual", "--json"]).stdout)
    assert again["run_id"] != run_id and report(tiny_ws)["missing"] == []


def test_cli_errors_are_one_line_with_exit_2(tiny_ws):
    bad_option = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:random", "-s", "contextcanvas",
                          "-o", "temperature=1"])
    assert bad_option.exit_code == 2
    assert "backend 'baseline' has no option 'temperature' (-o temperature=1). Allowed: seed" in bad_option.stderr
    bad_kind = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "sdxl:x", "-s", "contextcanvas"])
    assert bad_kind.exit_code == 2 and "Unknown backend 'sdxl'" in bad_kind.stderr
    base_url = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:random", "-s", "contextcanvas",
                        "--base-url", "http://x"])
    assert base_url.exit_code == 2 and "--base-url is for openai: models" in base_url.stderr
    no_run = run_cli(["-w", str(tiny_ws), "runs", "show", "nope"])
    assert no_run.exit_code == 2 and "no run 'nope'" in no_run.stderr
    assert "Traceback" not in bad_option.stderr + bad_kind.stderr + no_run.stderr


def test_rejected_key_marks_the_run_failed(tiny_ws):
    with ChatServer(lambda body, n: Scripted(401, error_body("bad key", kind="invalid_api_key"))) as server:
        result = openai_run(tiny_ws, server.url)
    assert result.exit_code == 2 and "wants a key (HTTP 401: bad key), and none was sent to it" in result.stderr
    listed = json.loads(run_cli(["-w", str(tiny_ws), "runs", "list", "--json"]).stdout)
    assert listed[0]["status"] == "failed"


@pytest.mark.parametrize("model, module, extra", [("openai:gpt-5.5", "aiohttp", "openai"),
                                                  ("hf:Qwen/Qwen3-VL-8B-Instruct", "transformers", "hf")])
def test_a_backend_whose_extra_is_not_installed_is_one_line_exit_2_and_records_no_run(tiny_ws, monkeypatch, model,
                                                                                     module, extra):
    # A core-only install, simulated at the import boundary: the module cannot be found or imported.
    monkeypatch.setitem(sys.modules, module, None)
    result = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", model, "-s", "contextcanvas"])
    assert result.exit_code == 2
    kind = model.split(":")[0]
    assert result.stderr == (f"error: the {kind} backend needs '{module}', which is not installed; install cfkit's "
                             f"{extra} extra: pip install 'cfkit-probes[{extra}]'\n")
    assert json.loads(run_cli(["-w", str(tiny_ws), "runs", "list", "--json"]).stdout) == []
    listed = {i["kind"]: i for i in json.loads(run_cli(["probe", "backends", "--json"]).stdout)}
    assert listed[kind]["install"] == f"pip install 'cfkit-probes[{extra}]'"
    assert listed["baseline"]["missing"] is None
    table = run_cli(["probe", "backends"], env={"COLUMNS": "200"})
    assert f"not installed: pip install 'cfkit-probes[{extra}]'" in table.stdout


def test_backends_lists_the_built_ins_with_capabilities():
    result = run_cli(["probe", "backends", "--json"])
    assert result.exit_code == 0
    infos = {i["kind"]: i for i in json.loads(result.stdout)}
    assert set(infos) >= {"openai", "hf", "replay", "baseline"}
    assert infos["openai"]["capabilities"]["json_schema"] and infos["openai"]["package"] == "cfkit-probes"
    assert not infos["hf"]["capabilities"]["multi_image"]
    assert "base_url" in [o["name"] for o in infos["openai"]["options"]]
    table = run_cli(["probe", "backends"])
    assert table.exit_code == 0 and "sheet" in table.stdout


def test_runs_show_accepts_a_unique_prefix(tiny_ws):
    assert run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-no", "-s", "contextcanvas"]
                   ).exit_code == 0
    shown = run_cli(["-w", str(tiny_ws), "runs", "show", "contextcanvas-baseline-always"])
    assert shown.exit_code == 0
    assert "baseline:always-no" in shown.stdout and "B: 2" in shown.stdout


def test_load_backend_refuses_unknown_baseline():
    with pytest.raises(InputError, match="unknown baseline 'always-maybe'"):
        load_backend("baseline:always-maybe")


def test_changed_inputs_make_a_new_run_that_shares_the_response_cache(tiny_ws):
    add_modality(tiny_ws)
    with ChatServer(scripted_answer) as server:
        first_cc = json.loads(openai_run(tiny_ws, server.url, "contextcanvas", "--json").stdout)
        assert server.count == 3
        # The modality image condition asks exactly what contextcanvas asked: answered from the cache.
        modality = json.loads(openai_run(tiny_ws, server.url, "modality", "--json").stdout)
        assert (modality["sent"], modality["from_cache"]) == (6, 2) and server.count == 9
        # Change one caption: a new run; only that case's neutral and evidence questions go to the model.
        caption = tiny_ws / "captions" / "T002.yaml"
        caption.write_text(caption.read_text().replace("grey block in a field", "grey block on a lawn"))
        changed = json.loads(openai_run(tiny_ws, server.url, "modality", "--json").stdout)
        assert changed["run_id"] != modality["run_id"]
        assert (changed["sent"], changed["from_cache"], changed["kept"]) == (2, 6, 0) and server.count == 11
        asked = [user_text(body) for body in server.requests[-2:]]
        assert all("grey block on a lawn" in text for text in asked)
        # The earlier run keeps the answers it got to the earlier questions: nothing stored was replaced.
        assert len(replies(tiny_ws, modality["run_id"])) == 8
        # Change an image: a new contextcanvas run; only the request that shows it is sent.
        Image.fromarray(gradient_image(96, 64, 42)).save(tiny_ws / "data" / "images" / "T001.png")
        images = json.loads(openai_run(tiny_ws, server.url, "contextcanvas", "--json").stdout)
        assert images["run_id"] != first_cc["run_id"]
        assert (images["sent"], images["from_cache"]) == (1, 2) and server.count == 12
        # And with nothing changed, nothing is sent: the same run, found complete.
        same = json.loads(openai_run(tiny_ws, server.url, "contextcanvas", "--json").stdout)
        assert (same["run_id"], same["sent"], same["kept"], same["status"]) == (images["run_id"], 0, 3, "done")
        assert server.count == 12


def test_a_pair_leaving_the_suite_makes_a_new_run_and_the_old_one_keeps_its_answers(tiny_ws):
    spec = (tiny_ws / "interventions" / "TX01.yaml").read_text()
    (tiny_ws / "interventions" / "TX02.yaml").write_text(spec.replace("id: TX01", "id: TX02"))
    _accepted_edit(tiny_ws, "TX01", 1)
    _accepted_edit(tiny_ws, "TX02", 2)
    with ChatServer(scripted_answer) as server:
        first = json.loads(openai_run(tiny_ws, server.url, "counterfactual", "--json").stdout)
        assert {r["pair_id"] for r in replies(tiny_ws)} == {"TX01", "TX02"}
        with Store(tiny_ws / ".cfkit" / "cfkit.db") as store:
            reviews.record(store, "TX02", 2, "reject")
        result = openai_run(tiny_ws, server.url, "counterfactual", "--json")
    assert result.exit_code == 0, result.stderr
    assert "TX02: rejected edit: edit #2 was rejected in review" in result.stderr
    second = json.loads(result.stdout)
    assert second["run_id"] != first["run_id"] and (second["sent"], second["from_cache"]) == (0, 2)
    assert {r["pair_id"] for r in replies(tiny_ws, second["run_id"])} == {"TX01"}
    assert {r["pair_id"] for r in replies(tiny_ws, first["run_id"])} == {"TX01", "TX02"}
    # The report reads the newer run: no answer for TX02 (counted as missing), not the answers to the rejected edit.
    missing = report(tiny_ws)["missing"]
    assert {(m["pair"], m["condition"]) for m in missing} == {("TX02", "original"), ("TX02", "edit")}


def test_probe_commands_import_no_heavy_library():
    code = ("import sys\nfrom cfkit.cli import main\n"
            "try:\n    main(['probe', 'backends', '--json'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('torch', 'transformers', 'openai', 'diffusers', 'lpips', 'skimage') "
            "if m in sys.modules]\nprint('HEAVY', heavy)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert "HEAVY []" in result.stdout, result.stdout + result.stderr


def test_a_rerun_of_a_finished_run_reads_no_case_and_starts_no_planner_or_http_client(tmp_path):
    # What keeps the second 'cfkit probe run' of a finished run fast: it decides by stat alone.
    ws = aged(many_cases(tmp_path / "ws", 3))
    args = ["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", "contextcanvas", *FAST]
    with ChatServer(scripted_answer) as server:
        first = run_cli([*args, "--base-url", server.url, "--json"])
        assert first.exit_code == 0, first.stderr
        code = ("import json, sys\nfrom cfkit.cli import main\n"
                f"try:\n    main({[*args, '--base-url', server.url, '--json']!r})\nexcept SystemExit as exc:\n"
                "    code = exc.code\n"
                "loaded = [m for m in ('cfkit.dataset', 'cfkit.probe.plan', 'cfkit.probe.runner', 'cfkit.probe.sending', "
                "'asyncio', 'aiohttp', 'PIL') if m in sys.modules]\nprint('LOADED', json.dumps(loaded), code)\n")
        again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
        assert server.count == 3  # the rerun sent nothing
    assert 'LOADED [] 0' in again.stdout, again.stdout + again.stderr
    assert json.loads(again.stdout.split("LOADED")[0])["kept"] == 3


def test_a_replay_keeps_what_each_recorded_reply_said_of_itself(tiny_ws, tmp_path):
    # A reply cut off at the token limit is still cut off when replayed: the replayed run is not clean (exit 1,
    # the line says so) and its report marks the row as the original's; the server's model and reasoning stay.
    def cut(body, n):
        if "winter card" in user_text(body):
            reply = completion('{"answer": "A", "reason": "the sn', finish_reason="length", model="served-7b")
            reply["choices"][0]["message"]["reasoning_content"] = "thinking it over"
            return Scripted(body=reply)
        return scripted_answer(body, n)

    with ChatServer(cut) as server:
        original = openai_run(tiny_ws, server.url, "contextcanvas", "--json")
    assert original.exit_code == 1 and "cut off at the token limit" in original.stderr
    exported = tmp_path / "cut.jsonl"
    run_id = json.loads(original.stdout)["run_id"]
    assert run_cli(["-w", str(tiny_ws), "runs", "export", run_id, "--output", str(exported)]).exit_code == 0
    replay_ws = tmp_path / "replay"
    write_workspace(replay_ws)
    replayed = run_cli(["-w", str(replay_ws), "probe", "run", "-m", f"replay:{exported}", "-s", "contextcanvas",
                        "--json"])
    assert replayed.exit_code == 1, replayed.stderr
    assert json.loads(replayed.stdout)["truncated"] == 1 and "1 of 3 replies was cut off" in replayed.stderr
    again = {r["case_id"]: r for r in replies(replay_ws)}
    first = {r["case_id"]: r for r in replies(tiny_ws, run_id)}
    for field in ("truncated", "server_model", "reasoning", "answer", "raw"):
        assert [again[c][field] for c in sorted(again)] == [first[c][field] for c in sorted(first)], field
    assert again["T002"]["truncated"] == 1 and again["T002"]["server_model"] == "served-7b"
    marks = lambda ws: [row["not_clean"] for row in report(ws)["contextcanvas"]]  # noqa: E731
    assert marks(replay_ws) == marks(tiny_ws) == [True]


def test_replay_refuses_ambiguous_files_and_reports_gaps(tiny_ws, tmp_path):
    line = {"suite": "contextcanvas", "case": "T001", "condition": "image", "answer": "B", "parse": "json",
            "error": None, "raw": "B", "reason": None, "confidence": None, "pair": None}
    two_models = tmp_path / "two.jsonl"
    two_models.write_text(json.dumps(line | {"model": "m1"}) + "\n" + json.dumps(line | {"model": "m2"}) + "\n")
    refused = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", f"replay:{two_models}", "-s", "contextcanvas"])
    assert refused.exit_code == 2 and "holds 2 models (m1, m2); choose one with -o model=NAME" in refused.stderr
    partial = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", f"replay:{two_models}", "-s", "contextcanvas",
                       "-o", "model=m2", "--json"])
    assert partial.exit_code == 1, partial.stderr
    summary = json.loads(partial.stdout)
    assert (summary["sent"], summary["errors"], summary["status"]) == (3, 2, "incomplete")
    stored = {r["case_id"]: r for r in replies(tiny_ws, summary["run_id"])}
    assert stored["T001"]["answer"] == "B"
    assert stored["T002"]["error"] == "transport" and "no contextcanvas prediction for case T002" in stored["T002"]["detail"]
    missing = run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "replay:nowhere.jsonl", "-s", "contextcanvas"])
    assert missing.exit_code == 2 and "replay file nowhere.jsonl not found" in missing.stderr


def test_majority_baseline_needs_the_suite():
    with pytest.raises(InputError, match="baseline:majority needs the suite's gold labels"):
        load_backend("baseline:majority")


def test_image_data_reads_the_type_from_the_content(tmp_path):
    import io

    from PIL import Image

    from cfkit.errors import ImageError
    from cfkit.images import image_data

    png_named_jpg = tmp_path / "really-a-png.jpg"
    Image.new("RGB", (4, 3), "red").save(png_named_jpg, format="PNG")
    sent = image_data(png_named_jpg)
    assert sent.mime == "image/png" and sent.data == png_named_jpg.read_bytes()  # the exact bytes, rightly typed
    tiff = tmp_path / "scan.tif"
    Image.new("RGB", (4, 3), "blue").save(tiff)
    converted = image_data(tiff)
    assert converted.mime == "image/png"
    with Image.open(io.BytesIO(converted.data)) as back:
        assert back.format == "PNG" and back.size == (4, 3) and back.getpixel((0, 0)) == (0, 0, 255)
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not an image at all")
    with pytest.raises(ImageError, match="not a readable image"):
        image_data(broken)


@pytest.mark.parametrize("columns", [80, 220])
def test_runs_list_keeps_every_run_id_whole_on_one_line_at_any_width(tiny_ws, columns):
    for model in ("baseline:majority", "baseline:always-no"):
        assert run_cli(["-w", str(tiny_ws), "probe", "run", "-m", model, "-s", "contextcanvas"]).exit_code == 0
    ids = [r["id"] for r in json.loads(run_cli(["-w", str(tiny_ws), "runs", "list", "--json"]).stdout)]
    listed = run_cli(["-w", str(tiny_ws), "runs", "list"], env={"COLUMNS": str(columns)}).stdout
    lines = listed.splitlines()[1:]  # under the title, which names the store
    if columns == 220:  # a table when it fits, drawn within the width ...
        assert "┃ model" in listed and all(len(line) <= columns for line in lines), listed
        assert all(any(f"│ {run_id} " in line for line in lines) for run_id in ids), listed
    else:  # ... and when it does not, each run id alone on its line, whole, to be copied into 'runs show'
        assert "┃" not in listed and set(ids) <= {line.strip() for line in lines}, listed
    assert listed.count("3/3") == 2


def test_a_rerun_without_prices_keeps_the_cost_the_run_recorded(tiny_ws):
    with ChatServer(scripted_answer) as server:
        first = openai_run(tiny_ws, server.url, "contextcanvas", "--json", "-o", "price_in=1000", "-o", "price_out=0")
        assert first.exit_code == 0, first.stderr
        paid = json.loads(first.stdout)
        assert paid["cost_usd"] == pytest.approx(0.30)  # 100 prompt tokens at 1000 USD a million, 3 requests
        again = openai_run(tiny_ws, server.url, "contextcanvas", "--json")  # the same run: nothing left to send
        assert again.exit_code == 0 and json.loads(again.stdout)["run_id"] == paid["run_id"]
    shown = json.loads(run_cli(["-w", str(tiny_ws), "runs", "show", paid["run_id"], "--json"]).stdout)
    assert shown["run"]["cost_usd"] == pytest.approx(0.30)
    listed = run_cli(["-w", str(tiny_ws), "runs", "list"], env={"COLUMNS": "200"}).stdout
    assert "$0.30" in listed


def test_a_backend_missing_two_modules_names_both_in_one_grammatical_line(tiny_ws):
    from cfkit.backends import missing_requirement

    class Needy:
        kind, extra, requires = "needy", "openai", ("cfkit_no_such_a", "cfkit_no_such_b")

    line = missing_requirement(Needy)
    assert line.startswith("the needy backend needs 'cfkit_no_such_a' and 'cfkit_no_such_b', which are not installed")
    empty = run_cli(["-w", str(tiny_ws), "runs", "list"])
    assert empty.exit_code == 0 and empty.stdout == "" and "no runs in" in empty.stderr
