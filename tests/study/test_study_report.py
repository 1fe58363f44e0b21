"""cfkit study report over a study whose runs are not all there: what the study file asks and the report cannot
show is said, one line each, and nothing else of the report is lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cfkit.errors import ConfigError
from cfkit.study import load_study
from support.store_sql import table_rows
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(300)

BOTH = ("[models.base]\nmodel = 'baseline:always-no'\n[models.other]\nmodel = 'baseline:majority'\n"
        "{other}[suites.contextcanvas]\n[suites.swap]\n[report]\ncompare = [['base', 'other']]\nresamples = 200\n")


def study_file(ws: Path, other: str = "") -> Path:
    path = ws / "study.toml"
    path.write_text(BOTH.format(other=other))
    return path


@pytest.mark.parametrize("other_has", ["swap only", "no run"])
def test_a_compare_pair_whose_model_has_no_contextcanvas_run_is_left_out_with_a_line(tiny_ws, other_has):
    ws = tiny_ws
    path = study_file(ws)
    assert run_cli(["-w", str(ws), "probe", "run", "-m", "baseline:always-no", "-s", "contextcanvas"]).exit_code == 0
    if other_has == "swap only":
        assert run_cli(["-w", str(ws), "probe", "run", "-m", "baseline:majority", "-s", "swap"]).exit_code == 0
    shown = run_cli(["-w", str(ws), "study", "report", str(path), "--format", "json"])
    # Before: a model with a swap run made the whole report refuse (exit 2, naming a --compare option nobody
    # gave); a model with no run at all dropped the pair in silence.
    # The report is printed whole, and its exit status and last line say it is not the whole study.
    assert shown.exit_code == 1, shown.stderr
    assert shown.stderr.splitlines()[-1].startswith("error: study 'study': the report is not the whole study: ")
    assert "1 compare pair left out" in shown.stderr.splitlines()[-1]
    assert "--compare" not in shown.stderr
    line = next(x for x in shown.stderr.splitlines() if "compare base vs other" in x)
    assert "other has no contextcanvas run with replies (not started)" in line and str(path) in line
    data = json.loads(shown.stdout)
    assert data["compare"] == [] and [r["model"] for r in data["contextcanvas"]] == ["baseline:always-no"]
    assert [r["model"] for r in data["swap"]] == (["baseline:majority"] if other_has == "swap only" else [])
    # A saved JSON report says it too (it had been said on stderr alone), with each run the study left out.
    assert line.removeprefix("warning: ") in data["notes"]
    assert "other contextcanvas: not started; left out of the report." in data["notes"]


def test_a_compare_pair_is_made_once_both_models_have_their_contextcanvas_runs(tiny_ws):
    ws = tiny_ws
    path = study_file(ws)
    assert run_cli(["-w", str(ws), "study", "run", str(path)]).exit_code == 0
    shown = run_cli(["-w", str(ws), "study", "report", str(path), "--format", "json"])
    assert shown.exit_code == 0 and "compare" not in shown.stderr
    assert [(c["base"], c["other"]) for c in json.loads(shown.stdout)["compare"]] == [
        ("baseline:always-no", "baseline:majority")]


def test_a_compare_pair_in_a_study_without_the_contextcanvas_suite_is_refused_before_anything_runs(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(BOTH.format(other="").replace("[suites.contextcanvas]\n", ""))
    with pytest.raises(ConfigError) as raised:
        load_study(path)
    assert "asks no contextcanvas suite" in str(raised.value) and str(path) in str(raised.value)


@pytest.mark.parametrize(("models", "said"), [
    ("[models.short]\nmodel = 'baseline:majority'\nmax_tokens = 64\ndisplay = 'majority 64'\n"
     "[models.long]\nmodel = 'baseline:majority'\nmax_tokens = 2048\ndisplay = 'majority 2048'\n",
     "models 'short' and 'long' are both baseline:majority"),
    ("[models.x]\nmodel = 'baseline:always-no'\ndisplay = 'baseline:majority'\n[models.y]\nmodel = 'baseline:majority'\n",
     "models 'x' and 'y' would both be shown as 'baseline:majority'"),
])
def test_two_models_the_report_would_show_as_one_are_refused_before_anything_is_sent(tiny_ws, models, said):
    ws = tiny_ws
    path = ws / "study.toml"
    path.write_text(models + "[suites.contextcanvas]\n")
    checked = run_cli(["-w", str(ws), "study", "validate", str(path)])
    assert checked.exit_code == 1 and said in checked.stderr and str(path) in checked.stderr
    # Before: validate passed, run asked both models (exit 0), and only the report refused, after the spending.
    ran = run_cli(["-w", str(ws), "study", "run", str(path)])
    assert ran.exit_code == 2 and said in ran.stderr
    assert table_rows(ws, "runs") == []
    # Runs made from an earlier study file: the report refuses in the same words (not a --label it was not given).
    for model, suite in (("baseline:majority", "contextcanvas"), ("baseline:always-no", "contextcanvas")):
        assert run_cli(["-w", str(ws), "probe", "run", "-m", model, "-s", suite]).exit_code == 0
    shown = run_cli(["-w", str(ws), "study", "report", str(path)])
    if "both shown" in said:
        assert shown.exit_code == 2 and said in shown.stderr and "--label" not in shown.stderr


def test_a_model_whose_settings_changed_in_the_study_file_says_which_run_has_the_earlier_ones(tiny_ws):
    ws = tiny_ws
    path = study_file(ws)
    assert run_cli(["-w", str(ws), "study", "run", str(path)]).exit_code == 0
    old = {s["suite"]: s["run_id"] for s in json.loads(run_cli(
        ["-w", str(ws), "study", "status", str(path), "--json"]).stdout) if s["model"] == "other"}
    path.write_text(BOTH.format(other="max_tokens = 100\n"))
    status = run_cli(["-w", str(ws), "study", "status", str(path), "--json"])
    assert status.exit_code == 1
    states = {(s["model"], s["suite"]): s for s in json.loads(status.stdout)}
    for suite in ("contextcanvas", "swap"):
        now = states[("other", suite)]
        # Before: 'not started' and nothing more, as if the model had never been asked.
        assert now["state"] == "not started" and now["run_id"] is None
        assert f"run {old[suite]} has other settings" in now["detail"] and "max_tokens 512 → 100" in now["detail"]
        assert states[("base", suite)]["state"] == "done" and states[("base", suite)]["detail"] is None
    shown = run_cli(["-w", str(ws), "study", "report", str(path), "--format", "json"])
    assert shown.exit_code == 1 and f"run {old['swap']} has other settings" in shown.stderr
    assert "2 runs left out (other contextcanvas: not started, other swap: not started)" in shown.stderr
    assert "baseline:majority" not in {r["model"] for r in json.loads(shown.stdout)["swap"]}


def test_a_report_with_a_run_incomplete_and_a_model_whose_server_is_down_says_so_and_exits_1(tiny_ws):
    """The report is printed whole (the incomplete run's row marked, the down model named), and its last line
    and exit status say that it is not the whole study; once every run is done, it exits 0."""
    from support.chat_api_server import ChatServer, Scripted, error_body, first_option

    ws = tiny_ws
    failing = {"on": True}

    def script(body, n):
        if failing["on"] and n % 3 == 0:
            return Scripted(500, error_body("overloaded", kind="server_error"))
        return first_option(body, n)

    with ChatServer(script) as chat:
        chat.models = [{"id": "served", "object": "model"}]
        path = ws / "study.toml"
        path.write_text(f"[models.served]\nmodel = 'openai:served'\nendpoint = '{chat.url}'\n"
                        "options = { max_retries = 0 }\n"
                        "[models.down]\nmodel = 'openai:down'\nendpoint = 'http://127.0.0.1:9/v1'\n"
                        "[models.no]\nmodel = 'baseline:always-no'\n[suites.contextcanvas]\n[report]\nresamples = 200\n")
        assert run_cli(["-w", str(ws), "study", "run", str(path)]).exit_code == 1
        shown = run_cli(["-w", str(ws), "study", "report", str(path), "--format", "json"])
        assert shown.exit_code == 1, shown.output
        last = shown.stderr.splitlines()[-1]
        assert "the report is not the whole study" in last and "study run" in last
        # 'study run' skipped the model whose server is down (nothing sent), so its run was never started.
        assert "1 run left out (down contextcanvas: not started)" in last
        assert "1 run reported incomplete, its missing answers counted wrong (served contextcanvas" in last
        rows = {r["model"] for r in json.loads(shown.stdout)["contextcanvas"]}
        assert rows == {"openai:served", "baseline:always-no"}  # nothing else of the report is lost
        failing["on"] = False
        path.write_text(path.read_text().replace("[models.down]\nmodel = 'openai:down'\nendpoint = "
                                                 "'http://127.0.0.1:9/v1'\n", ""))
        assert run_cli(["-w", str(ws), "study", "run", str(path)]).exit_code == 0
        assert run_cli(["-w", str(ws), "study", "report", str(path)]).exit_code == 0
