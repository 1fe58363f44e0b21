"""Inputs that change under a run: a cases file rewritten while ``cfkit probe run`` reads it.

A run asks what it parsed. Whatever it records about its inputs (the digest a
rerun matches by content, the size and mtime a rerun matches by ``stat``) must
describe those same bytes; otherwise a rerun takes the edited file for the one
the run asked, finds the run finished, and sends nothing, while the report
says the edited case's answer is stale and asks for that very rerun.
"""

from __future__ import annotations

import os
import time

import pytest

import cfkit.dataset
from support.chat_api_server import ChatServer, user_text
from support.probe_runs import many_cases, openai_run, report, scripted_answer
from support.workspace import aged


@pytest.mark.parametrize("touched", [False, True], ids=["as-edited", "touched-after"])
def test_a_cases_file_replaced_while_the_run_reads_it_is_asked_again_on_the_next_run(tmp_path, monkeypatch,
                                                                                        touched):
    ws = aged(many_cases(tmp_path / "ws", 4))
    (ws / "interventions" / "TX01.yaml").unlink()  # (its case is not in these cases)
    cases_path = ws / "data" / "cases.jsonl"
    edited = cases_path.read_text().replace("Is picture 2 suitable", "Is picture 2 really suitable")
    read = cfkit.dataset.load_cases

    def read_then_replaced(path, image_root):
        found = read(path, image_root)
        if "really" not in cases_path.read_text():  # an editor saves (write aside, rename) just after the read
            aside = cases_path.with_name("cases.jsonl.new")
            aside.write_text(edited)
            at = time.time() - 1  # saved while the run was still parsing: before it took its digest
            os.utime(aside, (at, at))
            os.replace(aside, cases_path)
        return found

    with ChatServer(scripted_answer) as server:
        monkeypatch.setattr(cfkit.dataset, "load_cases", read_then_replaced)
        assert openai_run(ws, server.url).exit_code == 0
        monkeypatch.setattr(cfkit.dataset, "load_cases", read)
        assert server.count == 4 and not any("really" in user_text(body) for body in server.requests)
        stale = [m for m in report(ws)["missing"] if m["reason"] == "stale"]
        assert [m["case"] for m in stale] == ["M002"]  # the report knows the run asked the older question
        if touched:  # the same content under a new mtime: a rerun that matches by content, not by stat
            at = time.time() - 1800
            os.utime(cases_path, (at, at))
        again = openai_run(ws, server.url)
        assert again.exit_code == 0, again.stderr
        assert server.count == 5 and "really" in user_text(server.requests[-1])  # only the edited case sent
    assert [m for m in report(ws)["missing"] if m["reason"] == "stale"] == []
