"""cfkit study: the file and its refusals, a study of baselines and loopback servers from one command, shared
pacing per endpoint, kill -9 and SIGTERM in the middle, status, and a report equal to the per-run reports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cfkit.cli.study_display import display_lines
from cfkit.errors import ConfigError
from cfkit.probe import RunProgress
from cfkit.study import load_study
from cfkit.study.jobs import StudyRun
from support.chat_api_server import ChatServer, Scripted, completion, first_option, listing
from support.counting_server import Counting
from support.probe_runs import many_cases
from support.store_sql import table_rows
from support.workspace import REPO, run_cli

pytestmark = pytest.mark.timeout(300)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# -- the file ------------------------------------------------------------------


@pytest.mark.parametrize(("text", "said"), [
    ("[models.a]\nmodel='baseline:majority'\n[suites.nosuch]\n", "'nosuch' is not a suite"),
    ("[models.a]\nmodel='openai:x'\nendpoint='gone'\n[suites.swap]\n", "names endpoint 'gone'"),
    ("[models.a]\nmodel='baseline:majority'\n[suites.swap]\n[report]\ncompare=[['a','b']]\n", "compare names 'b'"),
    ("[models.a]\nmodel='baseline:majority'\ndisplay='x'\n[models.b]\nmodel='baseline:random'\ndisplay='x'\n"
     "[suites.swap]\n", "both shown as 'x'"),
    ("[models.a]\nmodel='baseline:majority'\nendpoint='http://h/v1'\n[suites.swap]\n", "only openai: models"),
    ("[models.a]\nmodel='baseline:majority'\ncolour=1\n[suites.swap]\n", "unknown field 'models.a.colour'"),
    ("[models.a]\nmodel='baseline:majority'\ndisplay='a=b'\n[suites.swap]\n", "holds '='"),
    ("[models.a\n", "not valid TOML"),
    ("[suites.swap]\n", "field 'models' is required"),
    ("[Models.a]\nmodel='baseline:majority'\n[suites.swap]\n", "unknown field 'Models' (did you mean 'models'?)"),
    ("[models.a]\nModel='baseline:majority'\n[suites.swap]\n",
     "unknown field 'models.a.Model' (did you mean 'model'?)"),
])
def test_a_bad_study_file_is_refused_in_one_line_naming_the_file(tmp_path, text, said):
    path = write(tmp_path / "s.toml", text)
    with pytest.raises(ConfigError) as raised:
        load_study(path)
    message = str(raised.value)
    assert said in message and str(path) in message and "\n" not in message


def test_study_new_writes_an_example_that_validates_and_runs(tmp_path):
    ws = many_cases(tmp_path / "ws", 6)
    assert run_cli(["-w", str(ws), "study", "new", "study.toml"]).exit_code == 0
    assert run_cli(["-w", str(ws), "study", "new", "study.toml"]).exit_code == 2  # no silent overwrite
    text = (ws / "study.toml").read_text()
    assert text.count("#") > 20  # commented
    path = write(ws / "small.toml", text.replace("[suites.counterfactual]\n", "").replace("[suites.modality]\n", ""))
    checked = run_cli(["-w", str(ws), "study", "validate", str(path), "--json"])
    assert checked.exit_code == 0, checked.output
    data = json.loads(checked.stdout)
    assert [(r["model"], r["suite"], r["requests"]) for r in data["runs"]] == [
        ("always-no", "contextcanvas", 6), ("always-no", "swap", 12), ("majority", "contextcanvas", 6),
        ("majority", "swap", 12)]
    assert run_cli(["-w", str(ws), "study", "run", str(path)]).exit_code == 0


def test_validate_names_an_unreachable_endpoint_and_a_missing_subset(tmp_path):
    ws = many_cases(tmp_path / "ws", 4)
    path = write(ws / "s.toml", "[endpoints.dead]\nurl='http://127.0.0.1:9/v1'\n"
                                "[models.m]\nmodel='openai:m'\nendpoint='dead'\n"
                                "[suites.modality]\nsubset='nosuch.txt'\n")
    result = run_cli(["-w", str(ws), "study", "validate", str(path)])
    assert result.exit_code == 1
    assert "endpoint dead: nothing is listening at" in result.stderr and "(connection refused)" in result.stderr
    assert "nosuch.txt not found" in result.stderr


def test_validate_names_a_model_its_endpoint_does_not_list_before_anything_is_sent(tmp_path):
    """A misspelt model (or one sent to the wrong server) is a problem of each of its runs, with the models the
    endpoint lists; a model it lists, and one a provider lists as models/NAME, pass; nothing is sent."""
    ws = many_cases(tmp_path / "ws", 4)
    with ChatServer() as chat, ChatServer() as replica:
        chat.models = [{"id": "model-a", "object": "model"}, {"id": "models/model-c", "object": "model"}]
        replica.models = [{"id": "model-b", "object": "model"}]
        path = write(ws / "s.toml", f"[endpoints.e]\nurl='{chat.url}'\n"
                                    "[models.a]\nmodel='openai:model-a'\nendpoint='e'\n"
                                    "[models.c]\nmodel='openai:model-c'\nendpoint='e'\n"
                                    "[models.typo]\nmodel='openai:modle-a'\nendpoint='e'\n"
                                    f"[models.other]\nmodel='openai:model-b'\nendpoints=['e', '{replica.url}']\n"
                                    "[suites.contextcanvas]\n[suites.swap]\n")
        result = run_cli(["-w", str(ws), "study", "validate", str(path), "--json"])
        assert chat.count == 0 and replica.count == 0
    assert result.exit_code == 1, result.output
    answer = json.loads(result.stdout)
    problems = answer["problems"]
    assert len(problems) == 2, problems  # one model, on two suites
    typo = [p for p in problems if p.startswith("typo on ")]
    assert len(typo) == 2 and all(f"endpoint e ({chat.url}) cannot answer for 'modle-a' (it serves model-a, models/model-c, not 'modle-a'" in p
                                  and "did you mean 'model-a'" in p for p in typo), typo
    # A model with replicas needs one that lists it; the others would be left out of its runs, as probe run does.
    (note,) = answer["notes"]
    assert note.startswith("model other: replica e would be left out of its runs") and "(it serves model-a, models/model-c, not 'model-b';" in note


def test_validate_passes_a_model_one_of_whose_replicas_is_down_and_says_which_is_left_out(tmp_path):
    from support.transformers_server import free_port

    ws = many_cases(tmp_path / "ws", 4)
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with ChatServer() as chat:
        chat.models = [{"id": "model-a", "object": "model"}]
        path = write(ws / "s.toml", f"[endpoints.up]\nurl='{chat.url}'\n[endpoints.down]\nurl='{dead}'\n"
                                    "[models.a]\nmodel='openai:model-a'\nendpoints=['up', 'down']\n"
                                    "[suites.contextcanvas]\n")
        result = run_cli(["-w", str(ws), "study", "validate", str(path)])
        assert chat.count == 0
        assert result.exit_code == 0, result.output
        (line,) = [x for x in result.stderr.splitlines() if "left out" in x]
        assert "model a: replica down would be left out of its runs (nothing is listening at" in line
        assert "4 requests, 4 to send" in result.stdout
        # Every replica down: the model's runs cannot run.
        path.write_text(path.read_text().replace(f"url='{chat.url}'", f"url='http://127.0.0.1:{free_port()}/v1'"))
        down = run_cli(["-w", str(ws), "study", "validate", str(path)])
    assert down.exit_code == 1 and "no replica can answer for 'model-a' (up: " in down.stdout


# -- running -------------------------------------------------------------------


def two_behind_one(ws: Path, url: str, *, concurrency: int, rate: float | None = None, suites=("contextcanvas",)):
    rate_line = f"rate = {rate}\n" if rate else ""
    text = (f"[endpoints.shared]\nurl = '{url}'\nconcurrency = {concurrency}\n{rate_line}"
            "[models.a]\nmodel = 'openai:model-a'\nendpoint = 'shared'\n"
            "[models.b]\nmodel = 'openai:model-b'\nendpoint = 'shared'\n"
            "[models.no]\nmodel = 'baseline:always-no'\n"
            + "".join(f"[suites.{s}]\n" for s in suites))
    return write(ws / "study.toml", text)


def test_two_models_behind_one_endpoint_never_exceed_its_concurrency_together(tmp_path):
    ws = many_cases(tmp_path / "ws", 40)
    script = Counting(0.05, gather=3)
    with ChatServer(script) as chat:
        chat.models = listing("model-a", "model-b")
        path = two_behind_one(ws, chat.url, concurrency=3)
        result = run_cli(["-w", str(ws), "study", "run", str(path)])
        assert result.exit_code == 0, result.output
    assert len(script.models) == 80
    assert script.most <= 3
    assert script.most == 3  # the limit is used, not undershot
    # The two runs were interleaved: both models were being asked before either finished.
    first_b = script.models.index("model-b")
    last_a = len(script.models) - 1 - script.models[::-1].index("model-a")
    assert first_b < last_a


def test_an_endpoint_rate_holds_for_all_its_runs_together(tmp_path):
    ws = many_cases(tmp_path / "ws", 10)
    script = Counting(0.0)
    with ChatServer(script) as chat:
        chat.models = listing("model-a", "model-b")
        path = two_behind_one(ws, chat.url, concurrency=8, rate=20)
        assert run_cli(["-w", str(ws), "study", "run", str(path)]).exit_code == 0
    assert len(script.starts) == 20
    span = script.starts[-1] - script.starts[0]
    assert span >= 19 / 20 * 0.9  # 20 requests at 20 a second: at least 19 gaps of 50 ms (some slack for clocks)


def test_a_failing_run_does_not_stop_the_others_and_the_exit_names_it(tmp_path):
    ws = many_cases(tmp_path / "ws", 6)

    def script(body, n):
        if body["model"] == "model-b":
            return Scripted(400, {"error": {"message": "no such model", "type": "invalid_request_error"}})
        return first_option(body, n)

    with ChatServer(script) as chat:
        chat.models = listing("model-a", "model-b")
        path = two_behind_one(ws, chat.url, concurrency=2)
        result = run_cli(["-w", str(ws), "study", "run", str(path)])
    assert result.exit_code == 1
    last = result.stderr.strip().splitlines()[-1]
    assert "1 of 3 runs incomplete" in last and "b contextcanvas" in last and "study run" in last
    status = run_cli(["-w", str(ws), "study", "status", str(path), "--json"])
    states = {(s["model"], s["state"]) for s in json.loads(status.stdout)}
    assert states == {("a", "done"), ("b", "incomplete"), ("no", "done")}
    # 'study run' sends the user to 'study status' for why: it says what stopped the run, as the run recorded it.
    (b,) = [s for s in json.loads(status.stdout) if s["model"] == "b"]
    assert b["detail"] and "no such model" in b["detail"], b


def test_a_run_whose_replies_are_cut_off_is_complete_but_not_clean(tmp_path):
    ws = many_cases(tmp_path / "ws", 4)

    def script(body, n):
        if body["model"] == "model-b":  # talks past the token limit: the text stops mid-sentence
            return Scripted(body=completion("Looking at the picture, the", finish_reason="length", model=body["model"]))
        return first_option(body, n)

    with ChatServer(script) as chat:
        chat.models = listing("model-a", "model-b")
        path = two_behind_one(ws, chat.url, concurrency=2)
        result = run_cli(["-w", str(ws), "study", "run", str(path)])
    assert result.exit_code == 1
    assert "b contextcanvas: 4 of 4 replies were cut off at the token limit" in result.stderr
    assert "Raise the model's max_tokens in" in result.stderr  # the study file's setting, not probe run's option
    last = result.stderr.strip().splitlines()[-1]
    assert "1 run complete but not clean (b contextcanvas)" in last
    status = run_cli(["-w", str(ws), "study", "status", str(path), "--json"])
    assert {s["state"] for s in json.loads(status.stdout)} == {"done"}  # nothing is missing: every reply stored
    # … and status says which run is not clean, as 'study run' did (its exit status is about what is missing).
    details = {(s["model"], s["suite"]): s["detail"] for s in json.loads(status.stdout)}
    assert details.pop(("b", "contextcanvas")) == "complete but not clean: 4 of 4 replies cut off at the token limit"
    assert set(details.values()) == {None}
    shown = run_cli(["-w", str(ws), "study", "status", str(path)])
    assert shown.exit_code == 0 and "(complete but not clean: 4 of 4 replies cut off" in shown.stdout


def test_a_run_answered_by_servers_of_two_models_is_complete_but_not_clean(tmp_path):
    ws = many_cases(tmp_path / "ws", 4)

    def script(body, n):  # model-b's server answers half of its requests as another model
        reply = first_option(body, n)
        reply.body["model"] = "model-x" if body["model"] == "model-b" and n % 2 else body["model"]
        return reply

    with ChatServer(script) as chat:
        chat.models = listing("model-a", "model-b")
        path = two_behind_one(ws, chat.url, concurrency=2)
        result = run_cli(["-w", str(ws), "study", "run", str(path)])
    assert result.exit_code == 1
    assert "b contextcanvas: the replies came from servers that said they were 2 different models" in result.stderr
    assert "1 run complete but not clean (b contextcanvas)" in result.stderr.strip().splitlines()[-1]
    status = json.loads(run_cli(["-w", str(ws), "study", "status", str(path), "--json"]).stdout)
    details = {(s["model"], s["suite"]): s["detail"] for s in status}
    assert details.pop(("b", "contextcanvas")).startswith("complete but not clean: the replies came from servers "
                                                          "that said they were 2 different models: 'model-")
    assert set(details.values()) == {None}


def test_a_run_whose_server_answered_every_request_as_another_model_is_noted_and_clean(tmp_path):
    ws = many_cases(tmp_path / "ws", 4)

    def script(body, n):  # model-b's server serves what it loaded, whatever the name asked
        reply = first_option(body, n)
        reply.body["model"] = "llava-1.5-7b" if body["model"] == "model-b" else body["model"]
        return reply

    with ChatServer(script) as chat:
        chat.models = listing("model-a", "model-b")
        path = two_behind_one(ws, chat.url, concurrency=2)
        result = run_cli(["-w", str(ws), "study", "run", str(path)])
    assert result.exit_code == 0, result.stderr  # a note, not a failure
    (line,) = [x for x in result.stderr.splitlines() if "as asked" in x]
    assert "b contextcanvas: every reply of run " in line and "named model 'llava-1.5-7b', not 'model-b'" in line
    status = run_cli(["-w", str(ws), "study", "status", str(path), "--json"])
    assert status.exit_code == 0
    details = {(s["model"], s["suite"]): s["detail"] for s in json.loads(status.stdout)}
    assert details.pop(("b", "contextcanvas")) == ("every reply named model 'llava-1.5-7b', not 'model-b' as asked: "
                                                  "check --base-url and what the server loaded")
    assert set(details.values()) == {None}


def _study_process(ws: Path, path: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cfkit", "-w", str(ws), "study", "run", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


def _stored(ws: Path) -> int:
    return sum(r["error"] != "transport" for r in table_rows(ws, "replies", "error"))


@pytest.mark.parametrize("how", ["kill", "term"])
def test_a_study_stopped_in_the_middle_resumes_asking_only_what_is_missing(tmp_path, how):
    ws = many_cases(tmp_path / "ws", 60)
    script = Counting(0.05)
    with ChatServer(script) as chat:
        chat.models = listing("model-a", "model-b")
        path = two_behind_one(ws, chat.url, concurrency=2, suites=("contextcanvas", "swap"))
        process = _study_process(ws, path)
        deadline = time.monotonic() + 120
        while len(script.models) < 40 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.02)
        assert process.poll() is None, process.communicate()
        if how == "kill":  # while it runs, status says so, counting the replies stored so far
            while _stored(ws) == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            before = _stored(ws)
            running = run_cli(["-w", str(ws), "study", "status", str(path), "--json"])
            shown = json.loads(running.stdout)
            assert "running" in {s["state"] for s in shown}, running.output
            assert 0 < before <= sum(s["done"] for s in shown) <= _stored(ws), running.output
        process.send_signal(signal.SIGKILL if how == "kill" else signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
        if how == "term":
            assert process.returncode == 143, stderr  # as a process ended by SIGTERM
            assert "interrupted" in stderr and "study run" in stderr
        asked_before = len(script.models)
        stored = _stored(ws)
        status = run_cli(["-w", str(ws), "study", "status", str(path), "--json"])
        assert status.exit_code == 1
        assert {s["state"] for s in json.loads(status.stdout) if s["model"] != "no"} <= {"incomplete", "not started"}
        # Each incomplete run says why (a run stopped by SIGTERM had no detail at all).
        assert all("interrupted" in s["detail"] for s in json.loads(status.stdout) if s["state"] == "incomplete")
        # Every reply stored before the stop is counted where it is shown, even when the process was killed
        # before it could record its counts.
        assert sum(s["done"] for s in json.loads(status.stdout)) == stored
        listed = run_cli(["-w", str(ws), "runs", "list", "--json"])
        assert sum(r["n_done"] for r in json.loads(listed.stdout)) == stored, listed.output
        again = run_cli(["-w", str(ws), "study", "run", str(path)])
        assert again.exit_code == 0, again.output
        total = _stored(ws)
        # 60 contextcanvas + 120 swap requests for each of the two served models, and the baseline's.
        assert total == 2 * 180 + 60 + 120
        # Only what was lost at the stop (asked, but its reply not yet committed) was asked twice; the swap suite's
        # original-order requests are the contextcanvas ones, answered from the response cache.
        lost = asked_before - (stored - _baseline_rows(ws))
        assert 0 <= lost <= 12  # in flight (2), and replies of the last tenth of a second not yet committed
        assert len(script.bodies) - len(set(script.bodies)) <= lost
        asked = len(script.bodies)
        assert run_cli(["-w", str(ws), "study", "run", str(path)]).exit_code == 0
        assert len(script.bodies) == asked  # a finished study asks nothing


def _baseline_rows(ws: Path) -> int:
    return sum("baseline" in r["run_id"] and r["error"] != "transport"
               for r in table_rows(ws, "replies", "run_id, error"))


# -- display -------------------------------------------------------------------


def test_the_live_display_fits_80_by_24_with_forty_runs():
    runs = []
    for i in range(40):
        run = StudyRun(f"a-rather-long-model-name-{i}", "counterfactual", f"a-rather-long-model-name-{i}", "x")
        run.state = ("sending", "done", "failed", "waiting")[i % 4]
        run.progress = RunProgress(total=1204, done=i * 30, errors=i % 3, cost_usd=1.5 * i, priced=True)
        if run.state == "failed":
            run.error = "the server refused the key: 401 Unauthorized, check $OPENAI_API_KEY and try again"
        runs.append(run)
    lines = display_lines(runs, 80, 24)
    assert len(lines) <= 23 and all(len(line) <= 80 for line in lines)
    assert lines[0].startswith("study: 10/40 runs done")
    assert any("sending" in line and "/1204" in line and "failed" in line for line in lines)
    assert lines[-1].startswith("… ") or " done" in lines[-1]


def test_batch_submits_where_the_backend_has_a_batch_api_and_a_rerun_collects(tmp_path):
    from support.batch_api_server import BatchServer

    ws = many_cases(tmp_path / "ws", 5)
    with BatchServer(first_option, polls=1) as server:
        path = write(ws / "study.toml", f"[models.api]\nmodel = 'openai:test-model'\nendpoint = '{server.url}'\n"
                                        "[models.no]\nmodel = 'baseline:always-no'\n[suites.contextcanvas]\n")
        submitted = run_cli(["-w", str(ws), "study", "run", str(path), "--batch", "--json"])
        assert submitted.exit_code == 0, submitted.output
        states = {r["model"]: r["state"] for r in json.loads(submitted.stdout)}
        assert states == {"api": "submitted", "no": "done"}
        assert server.calls("POST", "/chat/completions") == 0
        status = run_cli(["-w", str(ws), "study", "status", str(path), "--json"])
        assert {s["model"]: s["state"] for s in json.loads(status.stdout)}["api"] == "waiting"
        collected = run_cli(["-w", str(ws), "study", "run", str(path), "--json"])
        assert collected.exit_code == 0, collected.output
        assert {r["state"] for r in json.loads(collected.stdout)} == {"done"}
        assert server.calls("POST", "/chat/completions") == 0  # every answer came from the batch


def test_a_batch_still_running_is_said_with_what_collects_it(tmp_path):
    from support.batch_api_server import BatchServer

    ws = many_cases(tmp_path / "ws", 2)
    with BatchServer(first_option, polls=10) as server:
        path = write(ws / "study.toml", f"[models.api]\nmodel = 'openai:test-model'\nendpoint = '{server.url}'\n"
                                        "[suites.contextcanvas]\n")
        submitted = run_cli(["-w", str(ws), "study", "run", str(path), "--batch", "--json"])
        assert submitted.exit_code == 0, submitted.output
        [run_id] = [r["run_id"] for r in json.loads(submitted.stdout)]
        again = run_cli(["-w", str(ws), "study", "run", str(path), "--json"])
        [row] = json.loads(again.stdout)
        assert row["state"] == "waiting"
        assert (f"1 batch still running; 'cfkit study run' again later collects it (or 'cfkit probe collect {run_id} "
                "--wait')") in row["notes"]


def test_a_batch_the_provider_lost_is_said_with_the_way_out_and_after_final_the_study_resends_its_requests(
        tmp_path):
    from support.batch_api_server import BatchServer

    ws = many_cases(tmp_path / "ws", 3)
    with BatchServer(first_option, polls=1) as server:
        path = write(ws / "study.toml", f"[models.api]\nmodel = 'openai:test-model'\nendpoint = '{server.url}'\n"
                                        "[suites.contextcanvas]\n")
        submitted = run_cli(["-w", str(ws), "study", "run", str(path), "--batch", "--json"])
        assert submitted.exit_code == 0, submitted.output
        [run_id] = [r["run_id"] for r in json.loads(submitted.stdout)]
        server.forgotten.update(server.batches)
        lost = run_cli(["-w", str(ws), "study", "run", str(path), "--json"])
        [row] = json.loads(lost.stdout)
        assert row["state"] == "waiting" and not any("still running" in note for note in row["notes"])
        assert (f"1 batch the provider no longer knows (HTTP 404); if it is gone for good, 'cfkit probe collect "
                f"{run_id} --final' stores its requests as failed, and 'cfkit study run' then sends them again"
                in row["notes"])
        assert run_cli(["-w", str(ws), "probe", "collect", run_id, "--final"]).exit_code == 1
        resumed = run_cli(["-w", str(ws), "study", "run", str(path), "--json"])
        assert resumed.exit_code == 0, resumed.output
        assert [r["state"] for r in json.loads(resumed.stdout)] == ["done"]
        assert server.calls("POST", "/chat/completions") == 3  # the given-up requests, sent live


def test_status_says_stale_when_the_inputs_changed_and_a_rerun_asks_the_new_questions(tmp_path):
    ws = many_cases(tmp_path / "ws", 4)
    script = Counting(0.0)
    with ChatServer(script) as chat:
        chat.models = listing("model-a", "model-b")
        path = two_behind_one(ws, chat.url, concurrency=2)
        assert run_cli(["-w", str(ws), "study", "run", str(path)]).exit_code == 0
        assert len(script.bodies) == 8
        cases = ws / "data" / "cases.jsonl"
        cases.write_text(cases.read_text().replace("Is picture 1 suitable", "Is picture one suitable"))
        status = run_cli(["-w", str(ws), "study", "status", str(path), "--json"])
        assert status.exit_code == 1
        states = {s["model"]: (s["state"], s["detail"]) for s in json.loads(status.stdout)}
        assert states["a"][0] == states["b"][0] == states["no"][0] == "stale"
        assert "inputs changed" in states["a"][1]
        assert run_cli(["-w", str(ws), "study", "run", str(path)]).exit_code == 0
        assert len(script.bodies) == 10  # the one changed question, for each served model; the rest from the cache
        status = run_cli(["-w", str(ws), "study", "status", str(path)])
        assert status.exit_code == 0 and status.stdout.count(" done ") == 3


def test_a_paper_protocol_model_behind_an_endpoint_takes_the_endpoints_concurrency(tmp_path):
    ws = many_cases(tmp_path / "ws", 12)
    script = Counting(0.05, gather=6)  # each reply waits until six were in flight at once
    with ChatServer(script) as chat:
        chat.models = listing("paper-model")
        path = write(ws / "study.toml", f"[endpoints.e]\nurl = '{chat.url}'\nconcurrency = 6\n"
                                        "[models.p]\nmodel = 'openai:paper-model'\nendpoint = 'e'\n"
                                        "protocol = 'paper'\nmax_tokens = 64\n[suites.contextcanvas]\n")
        result = run_cli(["-w", str(ws), "study", "run", str(path)])
        assert result.exit_code == 0, result.output
    assert len(script.bodies) == 12 and script.most == 6
    assert {json.loads(b)["temperature"] for b in script.bodies} == {0}  # the paper's settings reached the wire


def test_a_model_with_replicas_passes_every_url_and_is_paced_as_one_endpoint(tmp_path):
    from cfkit.study.jobs import model_options, replicas_refused

    ws = many_cases(tmp_path / "ws", 3)
    path = write(ws / "study.toml", "[endpoints.one]\nurl = 'http://127.0.0.1:9/v1'\nconcurrency = 3\nrate = 5\n"
                                    "[endpoints.two]\nurl = 'http://127.0.0.1:10/v1'\nconcurrency = 4\nrate = 2\n"
                                    "[models.r]\nmodel = 'openai:m'\nendpoints = ['one', 'two']\n[suites.swap]\n")
    study = load_study(path)
    assert model_options(study, "r")["base_url"] == ["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"]
    name, paced = study.endpoint_of("r")
    assert (name, paced.concurrency, paced.rate) == ("one+two", 7, 7)
    from cfkit.backends import check_installed

    takes_lists = "list" in str(check_installed("openai").Options.model_fields["base_url"].annotation)
    refused = replicas_refused(study, "r")
    if takes_lists:  # a cfkit whose openai backend spreads requests over replicas
        assert refused is None
    else:
        assert "lists 2 endpoints (replicas)" in refused and "takes one base URL" in refused
        result = run_cli(["-w", str(ws), "study", "run", str(path)])
        assert result.exit_code == 1 and "takes one base URL" in result.output


def test_the_study_report_shows_each_model_under_its_display_name_with_its_group_and_compare_pair(tiny_ws):
    ws = tiny_ws
    path = write(ws / "study.toml", "[models.base]\nmodel = 'baseline:always-no'\ndisplay = 'Base model'\n"
                                    "group = 'base'\n[models.tuned]\nmodel = 'baseline:majority'\n"
                                    "display = 'Tuned (specialist)'\ngroup = 'specialist'\n[models.plain]\n"
                                    "model = 'baseline:always-yes'\n[suites.contextcanvas]\n"
                                    "[report]\ncompare = [['base', 'tuned']]\nresamples = 200\n")
    assert run_cli(["-w", str(ws), "study", "run", str(path)]).exit_code == 0
    shown = run_cli(["-w", str(ws), "study", "report", str(path), "--format", "json"])
    assert shown.exit_code == 0, shown.stderr
    joint = json.loads(shown.stdout)
    assert {r["model"]: r["group"] for r in joint["contextcanvas"]} == {
        "Base model": "base", "Tuned (specialist)": "specialist", "baseline:always-yes": None}
    assert [(c["base"], c["other"]) for c in joint["compare"]] == [("Base model", "Tuned (specialist)")]
    alone = json.loads(run_cli(["-w", str(ws), "report", "--format", "json", "--resamples", "200"]).stdout)
    by_model = {r["model"]: r["accuracy"] for r in alone["contextcanvas"]}
    assert {r["model"]: r["accuracy"] for r in joint["contextcanvas"]} == {
        "Base model": by_model["baseline:always-no"], "Tuned (specialist)": by_model["baseline:majority"],
        "baseline:always-yes": by_model["baseline:always-yes"]}
    table = run_cli(["-w", str(ws), "study", "report", str(path)], env={"COLUMNS": "120"})
    assert "Tuned (specialist)" in table.stdout and "baseline:majority" not in table.stdout
