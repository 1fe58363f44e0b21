"""The view's runs page marks a run whose replies are not clean (cut off at the token limit, or mostly empty)
where ``cfkit study status`` says "complete but not clean" of it and the report marks its rows: not a plain
"done" beside a full count, with the line ``cfkit runs show`` says of its replies."""

from __future__ import annotations

import html
import json
import re

import pytest

from support.chat_api_server import ChatServer, Scripted, completion, first_option
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(120)


def _cut_off(body, n):
    """Every reply of model 'cut' is cut off at the token limit before any answer; other models answer."""
    if body["model"] == "cut":
        return Scripted(body=completion("Looking closely at the", model="cut", finish_reason="length"))
    return first_option(body, n)


def _row(page: str, run_id: str) -> str:
    return re.search(rf"<tr[^>]*>\s*<td[^>]*><code>{run_id}</code>.*?</tr>", page, re.S).group(0)


def test_the_runs_page_marks_a_run_whose_replies_were_cut_off_as_study_status_and_the_report_do(tiny_ws, tmp_path):
    ws = tiny_ws
    path = ws / "study.toml"
    env = {"OPENAI_API_KEY": "sk-test", "COLUMNS": "400"}
    with ChatServer(_cut_off) as chat:
        chat.models = [{"id": "cut", "object": "model"}, {"id": "fine", "object": "model"}]
        path.write_text(f"[endpoints.e]\nurl = '{chat.url}'\n[models.cut]\nmodel = 'openai:cut'\nendpoint = 'e'\n"
                        "[models.fine]\nmodel = 'openai:fine'\nendpoint = 'e'\n[suites.contextcanvas]\n")
        assert run_cli(["-w", str(ws), "study", "run", str(path)], env=env).exit_code == 1
        status = {s["model"]: s for s in json.loads(run_cli(["-w", str(ws), "study", "status", str(path), "--json"],
                                                           env=env).stdout)}
    report = json.loads(run_cli(["-w", str(ws), "report", "--format", "json"], env=env).stdout)
    assert status["cut"]["state"] == "done" and "complete but not clean: 3 of 3 replies cut off" in status["cut"]["detail"]
    assert {r["model"]: r["not_clean"] for r in report["contextcanvas"]} == {"openai:cut": True, "openai:fine": False}
    assert run_cli(["-w", str(ws), "view", "--export", str(tmp_path / "site")]).exit_code == 0
    page = (tmp_path / "site" / "index.html").read_text()
    cut, fine = status["cut"]["run_id"], status["fine"]["run_id"]
    # Before: 'done' and 3/3, nothing more.
    assert "complete but not clean" in _row(page, cut) and "not clean" not in _row(page, fine)
    shown = run_cli(["-w", str(ws), "runs", "show", cut], env={"COLUMNS": "2000"}).stdout
    said = next(line.removeprefix("replies ") for line in shown.splitlines() if "cut off at the token limit" in line)
    assert "3 of 3 replies were cut off at the token limit" in said
    assert said.replace(f"cfkit -w {ws} runs", "cfkit runs") in html.unescape(page)


def test_a_study_run_cut_off_is_told_to_raise_the_study_file_s_max_tokens_not_a_flag_study_run_lacks(tiny_ws, tmp_path):
    """'cfkit study run' has no --max-tokens: the runs page and 'cfkit runs show' name the study file's max_tokens
    and the command that asks again, as 'cfkit study report' does (cfkit.report.commands); a run of 'cfkit probe
    run' keeps --max-tokens."""
    ws = tiny_ws
    path = ws / "study.toml"
    env = {"OPENAI_API_KEY": "sk-test", "COLUMNS": "2000"}
    with ChatServer(_cut_off) as chat:
        chat.models = [{"id": "cut", "object": "model"}]
        path.write_text(f"[endpoints.e]\nurl = '{chat.url}'\n[models.cut]\nmodel = 'openai:cut'\nendpoint = 'e'\n"
                        "max_tokens = 64\n[suites.contextcanvas]\n")
        assert run_cli(["-w", str(ws), "study", "run", str(path)], env=env).exit_code == 1
        alone = run_cli(["-w", str(ws), "probe", "run", "-m", "openai:cut", "-s", "swap", "--base-url",
                         f"{chat.url}/v1", "--max-tokens", "32"], env=env)
        assert alone.exit_code == 1, alone.stderr
    [studied] = [r for r in json.loads(run_cli(["-w", str(ws), "runs", "list", "--json"]).stdout)
                 if r["suite"] == "contextcanvas"]
    probed = alone.stdout.strip().splitlines()[-1]
    assert run_cli(["-w", str(ws), "view", "--export", str(tmp_path / "site")]).exit_code == 0
    page = html.unescape((tmp_path / "site" / "index.html").read_text())
    said = re.search(rf'<li id="replies-{studied["id"]}"[^>]*>(.*?)</li>', page, re.S).group(1)
    again = f"Raise the model's max_tokens in {path} and run 'cfkit -w {ws} study run {path}' again"
    assert again in said and "--max-tokens" not in said
    shown = run_cli(["-w", str(ws), "runs", "show", studied["id"]], env={"COLUMNS": "2000"}).stdout
    assert again in shown and "--max-tokens" not in shown
    said = re.search(rf'<li id="replies-{probed}"[^>]*>(.*?)</li>', page, re.S).group(1)
    assert "Raise --max-tokens and run again" in said and "study" not in said
