"""The commands a report's notes recommend work where the notes are shown: under ``cfkit study report`` a note
names the study report's own command (``cfkit study report FILE --reviewed-only``, ``cfkit study run FILE``), not
``cfkit report``'s, which would report other runs than the study's (or none); under ``cfkit report`` it names
``cfkit report``'s, and what asks a run again is what made it (a study's run: its file and ``cfkit study run``)."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from support.caption_workspace import write_caption
from support.chat_api_server import ChatServer, Scripted, completion, first_option
from support.probe_runs import add_modality
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(120)

TEXTS = {"T001": ("A grey field with a darker band.", "The band is dark grey."),
         "T002": ("A pale gradient from corner to corner.", "The corner is almost white.")}
LEAVE_OUT = re.compile(r"leave those cases out of the rows with '([^']+)'")


def _recommended(notes: list[str]) -> str:
    found = [m.group(1) for note in notes if (m := LEAVE_OUT.search(note))]
    assert len(found) == 1, notes
    return found[0]


def test_a_study_reports_notes_recommend_the_study_reports_own_reviewed_only(tiny_ws):
    from cfkit.study import load_study
    from cfkit.study.reporting import study_report
    from cfkit.workspace import load_workspace

    ws = tiny_ws
    add_modality(ws, ids=tuple(TEXTS))
    for case, (neutral, evidence) in TEXTS.items():  # T001's caption is a model's draft no person has reviewed
        write_caption(ws, case, neutral=neutral, evidence=evidence,
                      **({"author": "openai:drafter", "reviewed": False} if case == "T001" else {}))
    path = ws / "study.toml"
    path.write_text("[models.y]\nmodel = 'baseline:always-yes'\n[suites.modality]\n[report]\nresamples = 200\n")
    assert run_cli(["-w", str(ws), "study", "run", str(path)]).exit_code == 0
    shown = run_cli(["-w", str(ws), "study", "report", str(path), "--format", "json"], env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    command = _recommended(json.loads(shown.stdout)["notes"])
    # Before: 'cfkit report --reviewed-only', which reports every stored run, not the study's.
    assert command == shlex.join(["cfkit", "-w", str(ws), "study", "report", str(path)]) + " --reviewed-only"
    assert command in " ".join(shown.stderr.split())  # said on stderr alike
    # ... and it does what the note says: the rows over the reviewed captions alone.
    again = run_cli([*shlex.split(command)[1:], "--format", "json"])
    assert again.exit_code == 0, again.output
    assert {(r["n"], r["unreviewed"]) for r in json.loads(again.stdout)["modality"]} == {(1, 0)}
    # The library's study report recommends the same command.
    made = study_report(load_workspace(ws), load_study(path))
    assert _recommended(made.report.notes) == command
    # 'cfkit report' on the same runs names its own.
    single = run_cli(["-w", str(ws), "report", "--format", "json", "--resamples", "200"])
    assert _recommended(json.loads(single.stdout)["notes"]) == "cfkit report --reviewed-only"


def _cut_off_below_64(body, n):
    """Cut off at the token limit before any answer when asked for fewer than 64 tokens; else the first option."""
    if body.get("max_tokens", 0) < 64:
        return Scripted(body=completion("Looking closely at the", model=body["model"], finish_reason="length"))
    return first_option(body, n)


def test_a_studys_cut_off_replies_say_to_raise_the_study_files_max_tokens_and_run_the_study(tiny_ws):
    ws = tiny_ws
    path = ws / "study.toml"
    with ChatServer(_cut_off_below_64) as chat:
        write = lambda limit: path.write_text(  # noqa: E731
            f"[models.t]\nmodel = 'openai:test-model'\nendpoint = '{chat.url}'\nmax_tokens = {limit}\n"
            "[suites.contextcanvas]\n[report]\nresamples = 200\n")
        write(16)
        env = {"OPENAI_API_KEY": "sk-test", "COLUMNS": "400"}
        ran = run_cli(["-w", str(ws), "study", "run", str(path)], env=env)
        shown = run_cli(["-w", str(ws), "study", "report", str(path), "--format", "json"], env=env)
        single = run_cli(["-w", str(ws), "report", "--format", "json", "--resamples", "200"], env=env)
        # Before: 'Raise --max-tokens and run again', an option neither 'study run' nor the study file has.
        advice = (f"Raise the model's max_tokens in {path} and run "
                  f"'{shlex.join(['cfkit', '-w', str(ws), 'study', 'run', str(path)])}' again")
        assert ran.exit_code == 1 and "replies were cut off at the token limit (16 tokens)" in ran.stderr
        assert advice in " ".join(ran.stderr.split())
        problems = json.loads(shown.stdout)["reply_problems"]
        assert len(problems) == 1 and advice in problems[0]["message"]
        assert advice in " ".join(shown.stderr.split())
        # 'cfkit report' on the same run says what made it, as 'runs show' and the view do: not '--max-tokens',
        # an option neither 'study run' nor the study file has.
        assert advice in json.loads(single.stdout)["reply_problems"][0]["message"]
        assert advice in " ".join(single.stderr.split())
        shown_run = run_cli(["-w", str(ws), "runs", "show", json.loads(single.stdout)["reply_problems"][0]["run"]])
        assert advice in " ".join(shown_run.stdout.split())
        # ... and doing what the study's line says mends it: the study asks again with the higher limit.
        write(128)
        again = run_cli(["-w", str(ws), "study", "run", str(path)], env=env)
        assert again.exit_code == 0, again.output
        mended = run_cli(["-w", str(ws), "study", "report", str(path), "--format", "json"], env=env)
        assert mended.exit_code == 0 and json.loads(mended.stdout)["reply_problems"] == []
