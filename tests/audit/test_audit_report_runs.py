"""``cfkit report --ega`` beside the runs the report's other tables read.

An audit freezes the replies of the runs it was planned over. When a model is
run again, the report's tables read the newer run while the EGA rows still
count the audited replies: a model's accuracy in one table and its EGA in the
next then rest on different replies. And a model the other tables leave out
(``--run ... --only-named``) keeps its EGA row. Either must be said where the
rows are shown, not left for the reader to find.
"""

from __future__ import annotations

import csv
import io
import json
import re

from cfkit.audit.items import load_audit
from cfkit.audit.labelling import update_label
from cfkit.report import latex_escape
from cfkit.store import Store
from support import audit_workspace as aw
from support.audit_session import cli, plan, ws  # noqa: F401  (fixtures)
from support.chat_api_server import ChatServer, Scripted, answer_json, completion, user_text


def _label_everything(ws) -> None:
    with Store(ws / ".cfkit" / "cfkit.db") as store:
        audit = load_audit(store)
        for item in audit.items:
            for name in ("alice", "bob"):
                update_label(store, audit, item, name, cue=True, link=True)


def _run_gpt_again(ws) -> str:
    """A newer run of GPT-5.5 that answers every case with its gold: not the replies the audit labelled."""
    def script(body: dict, n: int) -> Scripted:
        case_id = re.search(r"Scenario (AU\d\d)", user_text(body)).group(1)
        gold = aw.THREE["gold"] if case_id == aw.THREE["id"] else aw.CASES[case_id][0]
        return Scripted(body=completion(answer_json(gold, "It is pretty."), model=body["model"]))

    with ChatServer(script) as server:
        result = cli(ws, "probe", "run", "-m", aw.GPT, "-s", "contextcanvas", "--base-url", server.url,
                     "-o", "max_retries=0", "--json")
    return json.loads(result.stdout)["run_id"]


def test_an_ega_row_of_replies_the_other_tables_no_longer_read_says_which_runs(ws):
    ws, run_ids = ws
    plan(ws, run_ids)
    _label_everything(ws)
    before = cli(ws, "report", "--ega", "--format", "json", "--resamples", "100")
    audited = json.loads(before.stdout)
    assert "other_runs" not in audited["ega_audit"] and "the audit labelled" not in before.stderr
    newer = _run_gpt_again(ws)
    result = cli(ws, "report", "--ega", "--run", newer, "--format", "json", "--resamples", "100")
    data = json.loads(result.stdout)
    gpt = next(r for r in data["contextcanvas"] if r["model"] == aw.GPT)
    assert gpt["accuracy"] == 100.0 and gpt["runs"] == [newer]  # the table reads the newer run
    # The EGA rows still count the audited replies, and now say so.
    assert data["ega"] == audited["ega"]
    line = (f"the other tables read run {newer} of {aw.GPT}, the audit labelled its run {run_ids[aw.GPT]}")
    assert data["ega_audit"]["other_runs"] == [line]
    assert f"{line}; its EGA row counts the audited replies, not the ones the other tables count." \
        in " ".join(result.stderr.split())
    md = " ".join(cli(ws, "report", "--ega", "--run", newer, "--format", "md", "--resamples", "100").stdout.split())
    assert f"Not the replies the other tables count: {line}; these rows count the audited replies." in md
    # The line stderr says is among the notes of every format a copy of the tables is made from.
    said = f"audit {audited['ega_audit']['audit']}: {line}; its EGA row counts the audited replies, not the ones " \
           "the other tables count."
    assert f"- {said}" in md.split("### Notes")[1]
    latex = cli(ws, "report", "--ega", "--run", newer, "--format", "latex", "--resamples", "100").stdout
    assert rf"\item {latex_escape(said)}" in latex.split(r"\paragraph{Notes}")[1].splitlines()
    rows = csv.reader(io.StringIO(cli(ws, "report", "--ega", "--run", newer, "--format", "csv", "--resamples",
                                      "100").stdout))
    assert said in [r[3] for r in rows if r[0] == "notes"]


def test_an_ega_section_shown_unblinded_says_so_with_the_notes(ws):
    ws, run_ids = ws
    plan(ws, run_ids)  # nobody has labelled yet
    line = "un-blinded (--unblind): the EGA section is shown while annotators are still labelling."
    shown = cli(ws, "report", "--ega", "--unblind", "--format", "md", "--resamples", "100", code=1)
    assert f"warning: {line}" in shown.stderr.splitlines()  # said once
    assert shown.stderr.count(line) == 1
    assert f"- {line}" in shown.stdout.split("### Notes")[1].splitlines()
    latex = cli(ws, "report", "--ega", "--unblind", "--format", "latex", "--resamples", "100", code=1).stdout
    assert r"\item un-blinded (-{}-unblind): the EGA section is shown while annotators are still labelling." \
        in latex.splitlines()


def test_an_ega_row_of_a_model_the_other_tables_leave_out_says_so_under_its_shown_name(ws):
    ws, run_ids = ws
    plan(ws, run_ids)
    _label_everything(ws)
    result = cli(ws, "report", "--ega", "--run", run_ids[aw.QWEN], "--only-named", "--label", f"{aw.GPT}=GPT",
                 "--format", "json", "--resamples", "100")
    data = json.loads(result.stdout)
    assert [r["model"] for r in data["contextcanvas"]] == [aw.QWEN]
    assert [r["model"] for r in data["ega"]] == ["GPT", aw.QWEN]
    assert data["ega_audit"]["other_runs"] == [
        f"GPT is not in the other tables (the audit labelled its run {run_ids[aw.GPT]})"]
