"""``cfkit audit`` end to end through the CLI: plan, blind labels, a killed and resumed session, κ and AC1,
adjudication, and ``report --ega`` against a hand count and the paper's Table S8."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

from cfkit.store import Store, audit_labels, audits
from support import audit_workspace as aw
from support.audit_session import _items, blind, cli, decision, plan, ws, yn  # noqa: F401  (fixtures)
from support.workspace import run_cli

def _ac1(first: list[bool], second: list[bool]) -> float:
    n = len(first)
    p_o = sum(a == b for a, b in zip(first, second)) / n
    pi = (sum(first) + sum(second)) / (2 * n)
    return (p_o - 2 * pi * (1 - pi)) / (1 - 2 * pi * (1 - pi))


def test_the_whole_audit_through_the_cli(ws):
    ws, run_ids = ws
    plan(ws, run_ids)
    truth = _items(ws)
    # Two annotators, each through their blinded listing and 'audit label'.
    for name in ("alice", "bob"):
        listing = cli(ws, "audit", "items", "--as", name, "--json").stdout
        assert blind(listing, run_ids) and "alice" not in listing.lower()
        rows = json.loads(listing)
        assert all(r["label"] is None for r in rows)  # bob never sees alice's labels
        for row in rows:
            cue, link = decision(name, *truth[row["item"]])
            cli(ws, "audit", "label", row["item"], "--as", name, "--cue", yn(cue), "--link", yn(link))
        if name == "alice":
            assert "18 of 36 planned labels are in" in cli(ws, "audit", "items", "--reveal", code=1).stderr
            assert "no item is labelled by both annotators yet" in cli(ws, "audit", "agreement", code=1).stderr
    status = json.loads(cli(ws, "audit", "status", "--json").stdout)
    assert [(a["name"], a["labelled"]) for a in status["annotators"]] == [("alice", 18), ("bob", 18)]
    # Agreement before adjudication, against scikit-learn's kappa and the AC1 formula.
    agreement = json.loads(cli(ws, "audit", "agreement", "--json", "--resamples", "500").stdout)
    order = sorted(truth)
    correct = {i: aw.ANSWERS[m][c] == (aw.THREE["gold"] if c == "AU09" else aw.CASES[c][0])
               and (m, c) not in aw.FREE_TEXT for i, (m, c) in truth.items()}
    for name, index in (("cue", 0), ("link", 1)):
        first = [decision("alice", *truth[i])[index] for i in order]
        second = [decision("bob", *truth[i])[index] for i in order]
        row = agreement["criteria"][name]
        assert row["n"] == 18
        assert row["kappa"] == pytest.approx(cohen_kappa_score(first, second), abs=1e-12)
        assert row["ac1"] == pytest.approx(_ac1(first, second), abs=1e-12)
        assert row["kappa_ci"][0] <= row["kappa"] <= row["kappa_ci"][1]
    ega_a = [correct[i] and all(decision("alice", *truth[i])) for i in order]
    ega_b = [correct[i] and all(decision("bob", *truth[i])) for i in order]
    assert agreement["criteria"]["ega"]["kappa"] == pytest.approx(cohen_kappa_score(ega_a, ega_b), abs=1e-12)
    disputed = {d["item"] for d in agreement["disagreements"]}
    assert disputed == {i for i in order if decision("alice", *truth[i]) != decision("bob", *truth[i])}
    assert blind(json.dumps(agreement), run_ids) and "alice" not in json.dumps(agreement["disagreements"])
    # The report refuses to pretend while items are pending.
    pending = cli(ws, "report", "--ega", "--format", "json", "--resamples", "200", code=1)
    assert len(json.loads(pending.stdout)["ega_pending"]) == len(disputed)
    assert f"{len(disputed)} audited item{'' if len(disputed) == 1 else 's'} {'has' if len(disputed) == 1 else 'have'} no final label yet" in pending.stderr
    # Adjudication: the disagreements resolved with notes.
    final = {}
    for item in sorted(disputed):
        cue, link = decision("alice", *truth[item])
        cli(ws, "audit", "resolve", item, "--as", "carol", "--cue", yn(cue), "--link", yn(link),
            "--note", "alice's reading holds")
        final[item] = (cue, link)
    for item in order:
        final.setdefault(item, decision("alice", *truth[item]))
    with Store(ws / ".cfkit" / "cfkit.db") as store:
        bases = {f.basis for f in audit_labels.finals(store, audits.find_plan(store).id).values()}
    assert bases == {"agreed", "resolved"}
    # report --ega: EGA and Unsupported equal a hand count of the final labels.
    report = cli(ws, "report", "--ega", "--format", "json", "--resamples", "500")
    data = json.loads(report.stdout)
    assert data["ega_pending"] == [] and data["ega_audit"]["cases"] == 9
    rows = {r["model"]: r for r in data["ega"]}
    assert list(rows) == list(aw.MODELS)
    # --label renames a model in the EGA section too, figures unchanged.
    first = aw.MODELS[0]
    shown = json.loads(cli(ws, "report", "--ega", "--format", "json", "--resamples", "500", "--label",
                           f"{first}=Renamed").stdout)
    assert [r["model"] for r in shown["ega"]] == ["Renamed", *aw.MODELS[1:]]
    assert shown["ega"][0]["ega"] == rows[first]["ega"]
    for model in aw.MODELS:
        mine = [i for i in order if truth[i][0] == model]
        n_correct = sum(correct[i] for i in mine)
        grounded = sum(correct[i] and all(final[i]) for i in mine)
        row = rows[model]
        assert (row["n"], row["correct"], row["grounded"], row["planned"], row["pending"]) == (
            9, n_correct, grounded, 9, 0)
        assert row["accuracy"] == pytest.approx(100 * n_correct / 9, abs=1e-12)
        assert row["ega"] == pytest.approx(100 * grounded / 9, abs=1e-12)
        assert row["unsupported"] == pytest.approx(100 * (n_correct - grounded) / n_correct, abs=1e-12)
        assert row["ega_ci"][0] <= row["ega"] <= row["ega_ci"][1]
        assert set(row) >= {"model", "n", "accuracy", "ega", "unsupported", "accuracy_ci", "ega_ci", "unsupported_ci"}
        assert row["agreement"]["n"] == 9
    # --reference puts the paper's Table S8 beside it.
    md = cli(ws, "report", "--ega", "--reference", "--format", "md", "--resamples", "200").stdout
    for published in ("| Gemini 3.1 Pro (paper) | 100 | 83.00 | — | 79.00 | — | 4.82 | — |",
                      "| GPT-5.2 (paper) | 100 | 65.00 | — | 55.00 | — | 15.38 | — |",
                      "| Qwen3.7-Plus (paper) | 100 | 42.00 | — | 31.00 | — | 26.19 | — |",
                      "| ArtiMuse (paper) | 100 | 21.00 | — | 3.00 | — | 85.71 | — |",
                      "| ArtQuant-APDD (paper) | 100 | 27.00 | — | 0.00 | — | 100.00 | — |"):
        assert published in md.splitlines()
    assert "Table S8, arXiv 2608.26713, p. 26" in md and "### Agreement on the EGA judgement" in md
    latex = cli(ws, "report", "--ega", "--format", "latex", "--resamples", "200").stdout
    assert r"\caption{Agreement on the EGA judgement, before adjudication}" in latex and r"$\kappa$" in latex
    assert "κ" not in latex
    csv_text = cli(ws, "report", "--ega", "--format", "csv", "--resamples", "500").stdout
    gpt = rows[aw.GPT]
    assert f"ega,{aw.GPT},ega,{gpt['ega']!r}" in csv_text and f"ega,{aw.GPT},agreement.kappa," in csv_text
    table = run_cli(["-w", str(ws), "report", "--ega", "--reference", "--resamples", "200"], env={"COLUMNS": "100"})
    shown = table.stdout.splitlines()
    assert any(aw.GPT in line and "[" in line for line in shown)  # the model column never collapses at 100
    # No cell wraps: a table wider than COLUMNS is printed at the width its cells need, one line a row.
    assert all(line.count("[") == line.count("]") for line in shown if "│" in line)
    # Now the record may be un-blinded.
    revealed = json.loads(cli(ws, "audit", "items", "--reveal", "--json").stdout)
    assert {r["model"] for r in revealed} == set(aw.MODELS) and all(r["final"] for r in revealed)


def test_the_published_table_s8_is_transcribed_as_printed():
    from cfkit.report import load_reference

    tables = load_reference()["tables"]
    s8 = [(r["model"], r["accuracy"], r["ega"], r["unsupported"]) for r in tables["tableS8"]["rows"]]
    assert s8 == [("Gemini 3.1 Pro", 83, 79, 4.82), ("GPT-5.2", 65, 55, 15.38), ("Qwen3.7-Plus", 42, 31, 26.19),
                  ("ArtiMuse", 21, 3, 85.71), ("ArtQuant-APDD", 27, 0, 100.0)]
    assert [r["model"] for r in tables["table6"]["rows"]] == [m for m, *_ in s8[:4]]
    assert tables["table6"]["rows"] == tables["tableS8"]["rows"][:4]
    # Unsupported is 100 × (accuracy − EGA) / accuracy on 100 cases; the paper prints it to two decimals.
    for _, accuracy, ega, unsupported in s8:
        assert round(100 * (accuracy - ega) / accuracy, 2) == unsupported


# ── the interactive session on a real terminal ─────────────────────────────


class Terminal:
    """``cfkit audit annotate`` on a pseudo-terminal: read what it draws, type keys."""

    def __init__(self, ws: Path, name: str):
        import pty

        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.environ.update({"TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24"})
            os.execv(sys.executable, [sys.executable, "-m", "cfkit", "-w", str(ws), "audit", "annotate", "--as", name])
        self.output = b""
        self.seen = 0

    def read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:
            return False
        self.output += chunk
        return bool(chunk)

    def expect(self, token: bytes, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while token not in self.output[self.seen:]:
            assert time.monotonic() < deadline, self.output[-400:]
            assert self.read(0.2), f"ended before {token!r}: {self.output[-400:]!r}"
        self.seen = self.output.index(token, self.seen) + len(token)

    def press(self, key: bytes) -> None:
        os.write(self.fd, key)

    def finish(self) -> int:
        deadline = time.monotonic() + 30
        while self.read(0.2) and time.monotonic() < deadline:
            pass
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.fd)


def _alice(ws: Path) -> dict:
    with Store(ws / ".cfkit" / "cfkit.db") as store:
        return audit_labels.labels_by(store, audits.find_plan(store).id, "alice")


def _wait_for(condition, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_an_annotate_session_killed_between_two_decisions_resumes_where_it_stopped(ws):
    ws, run_ids = ws
    plan(ws, run_ids)
    from cfkit.audit.items import annotator_order, load_audit

    with Store(ws / ".cfkit" / "cfkit.db") as store:
        order = [i.id for i in annotator_order(load_audit(store), "alice")]
    term = Terminal(ws, "alice")
    try:
        term.expect(b"1 of 18")
        term.press(b"y")  # cue: yes
        term.press(b"n")  # link: no -> saved, next item
        term.expect(b"2 of 18")
        term.press(b"y")  # the next item's cue: saved at once
        _wait_for(lambda: order[1] in _alice(ws))
    finally:
        term.kill()  # between two decisions: the link of the second item is still open
    labels = _alice(ws)
    assert (labels[order[0]].judgement.cue, labels[order[0]].judgement.link) == (True, False)
    assert (labels[order[1]].judgement.cue, labels[order[1]].judgement.link) == (True, None)
    first_run = term.output
    term = Terminal(ws, "alice")
    try:
        term.expect(b"2 of 18")  # resumed at the first item without a complete label
        term.expect(b"link: ")
        term.press(b"y")
        term.expect(b"3 of 18")
        term.press(b"q")
        term.expect(b"1 decision saved")
        status = term.finish()
    except BaseException:
        term.kill()
        raise
    assert status == 0
    assert _alice(ws)[order[1]].judgement.link is True and _alice(ws)[order[1]].complete
    drawn = (first_run + term.output).decode("utf-8", "replace")
    assert "\x1b[38;2;" in drawn or "\x1b[38;5;" in drawn  # the picture, in colour
    assert blind(drawn, run_ids)


def test_without_a_terminal_the_session_points_to_the_commands_that_need_none(ws):
    ws, run_ids = ws
    plan(ws, run_ids)
    result = cli(ws, "audit", "annotate", "--as", "alice", code=2)
    assert "'cfkit audit items --as alice --json'" in result.stderr and "'cfkit audit label ITEM --as alice" in result.stderr
    result = cli(ws, "audit", "adjudicate", "--as", "carol", code=2)
    assert "'cfkit audit resolve ITEM --as carol" in result.stderr


def test_the_blinded_listing_names_no_model_run_or_other_annotator(ws):
    ws, run_ids = ws
    plan(ws, run_ids)
    first = next(iter(_items(ws)))
    cli(ws, "audit", "label", first, "--as", "bob", "--cue", "no", "--link", "no", "--note", "BOB-NOTE")
    for args in (["--json"], []):
        shown = cli(ws, "audit", "items", "--as", "alice", *args).stdout
        assert blind(shown, run_ids) and "bob" not in shown.lower() and first in shown
    assert json.loads(cli(ws, "audit", "items", "--reveal", "--unblind", "--json").stdout)[0]["model"] in aw.MODELS


def test_worksheets_through_the_cli(ws, tmp_path):
    ws, run_ids = ws
    plan(ws, run_ids)
    sheet = tmp_path / "alice.csv"
    cli(ws, "audit", "export", "--as", "alice", "--output", str(sheet))
    assert blind(sheet.read_text(), run_ids)
    assert "already exists" in cli(ws, "audit", "export", "--as", "alice", "--output", str(sheet), code=2).stderr
    rows = list(csv.DictReader(io.StringIO(sheet.read_text())))
    assert list(rows[0])[-5:] == ["answer_ok", "cue", "link", "unsure", "note"]
    assert {r["cue"] for r in rows} == {""} and {r["answer_ok"] for r in rows} <= {"yes", "no"}
    for n, row in enumerate(rows):
        row.update(cue="yes" if n % 2 else "no", link="no", unsure="yes" if n == 0 else "no")
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    sheet.write_text(out.getvalue())
    result = cli(ws, "audit", "import", str(sheet), "--as", "alice")
    assert "18 labels saved for alice" in result.stderr
    labels = _alice(ws)
    assert len([lab for lab in labels.values() if lab.complete]) == 18
    assert sum(lab.unsure for lab in labels.values()) == 1 and sum(lab.judgement.cue for lab in labels.values()) == 9
    # The same worksheet again changes nothing and says so; the saved labels (and their times) stay as they are.
    again = cli(ws, "audit", "import", str(sheet), "--as", "alice")
    assert "18 labels of alice unchanged, nothing saved." in again.stderr, again.stderr
    assert _alice(ws) == labels
    # Bob labels five items, then imports his whole sheet with one of the five changed: each count is named.
    bob_sheet = tmp_path / "bob.csv"
    cli(ws, "audit", "export", "--as", "bob", "--output", str(bob_sheet))
    bob_rows = list(csv.DictReader(io.StringIO(bob_sheet.read_text())))

    def write_bob(filled: int, first_cue: str) -> None:
        for n, row in enumerate(bob_rows):
            row.update(cue=(first_cue if n == 0 else "yes") if n < filled else "", link="no" if n < filled else "")
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(bob_rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(bob_rows)
        bob_sheet.write_text(out.getvalue())

    write_bob(5, "yes")
    assert "5 labels saved for bob;" in cli(ws, "audit", "import", str(bob_sheet), "--as", "bob").stderr
    write_bob(18, "no")
    mixed = cli(ws, "audit", "import", str(bob_sheet), "--as", "bob")
    assert "14 labels saved for bob (13 new, 1 changed); 4 unchanged." in mixed.stderr, mixed.stderr
    with Store(ws / ".cfkit" / "cfkit.db") as store:
        assert len(audit_labels.labels_by(store, audits.find_plan(store).id, "bob")) == 18  # one row per item
    result = cli(ws, "audit", "import", str(sheet), "--as", "bob", code=2)  # alice's sheet is not bob's labels
    assert result.stderr.count("\n") == 1 and "exported for another annotator" in result.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"item": "zzzzzzzz", "cue": "yes", "link": "no"}\n')
    result = cli(ws, "audit", "import", str(bad), "--as", "alice", code=2)
    assert result.stderr.count("\n") == 1 and "bad.jsonl:1: item 'zzzzzzzz' is not in audit" in result.stderr


def test_report_ega_says_when_the_audited_inputs_changed_since_planning(ws):
    # The EGA rows count the items as frozen at planning; a rerun run or an edited cases file makes the other
    # sections read something else, and the section must say so where it is shown, not only 'audit status'.
    from cfkit.audit.items import load_audit
    from cfkit.audit.labelling import update_label
    from cfkit.store import runs
    from cfkit.store.runs import ReplyFields

    ws, run_ids = ws
    plan(ws, run_ids)
    with Store(ws / ".cfkit" / "cfkit.db") as store:
        audit = load_audit(store)
        for item in audit.items:
            for name in ("alice", "bob"):
                update_label(store, audit, item, name, cue=True, link=True)
    same = json.loads(cli(ws, "report", "--ega", "--format", "json", "--resamples", "100").stdout)
    assert "inputs_changed" not in same["ega_audit"]
    cases = ws / "data" / "cases.jsonl"
    cases.write_text(cases.read_text().replace("Scenario AU01", "Edited AU01"))
    with Store(ws / ".cfkit" / "cfkit.db") as store, store.transaction() as tx:
        runs.write_reply(tx, run_ids[aw.GPT], ("AU01", "", "image"), cache_key=None, raw='{"answer": "A"}',
                         fields=ReplyFields("A", "json", None, "Another reason.", "high", None))
    changed = [f"the cases file {cases} changed", f"run {run_ids[aw.GPT]} was rerun or changed"]
    result = cli(ws, "report", "--ega", "--format", "json", "--resamples", "100")
    data = json.loads(result.stdout)
    assert data["ega_audit"]["inputs_changed"] == changed
    assert data["ega"] == same["ega"]  # the figures are the audited items', unchanged
    assert f"{changed[1]} since planning; the EGA section counts the items as they were audited" in result.stderr
    md = " ".join(cli(ws, "report", "--ega", "--format", "md", "--resamples", "100").stdout.split())
    assert f"Since the audit was planned, {changed[0]}; {changed[1]}: these rows count the items" in md


@pytest.mark.parametrize("copy", [shutil.copy2, shutil.copy], ids=["cp -a", "cp (new mtimes)"])
def test_a_copied_or_moved_workspace_compares_its_own_cases_file_with_the_audit(ws, tmp_path, copy):
    # The plan used to keep the cases file by absolute path: a copy of the workspace said 'is gone' once the
    # original was moved away, and while the original stayed, an edit of the copy's cases file went unseen.
    ws, run_ids = ws
    plan(ws, run_ids)
    moved = tmp_path / "elsewhere" / "ws"
    shutil.copytree(ws, moved, copy_function=copy)
    status = json.loads(cli(moved, "audit", "status", "--json").stdout)
    assert status["inputs_changed"] == []
    shutil.rmtree(ws)  # moved, not copied: nothing is left at the planned path
    result = cli(moved, "audit", "status")
    assert "inputs unchanged since planning" in result.stderr and "gone" not in result.stderr
    cases = moved / "data" / "cases.jsonl"
    cases.write_text(cases.read_text().replace("Scenario AU01", "Edited AU01"))
    status = json.loads(cli(moved, "audit", "status", "--json").stdout)
    assert status["inputs_changed"] == [f"the cases file {cases} changed"]


@pytest.mark.parametrize("args, code, says", [
    (["audit", "label", "zzzz", "--as", "alice", "--cue", "yes", "--link", "no"], 2, "no item 'zzzz'"),
    (["audit", "label", "ITEM", "--as", "alice", "--cue", "maybe", "--link", "no"], 2, "'maybe' is not one of"),
    (["audit", "items"], 2, "give --as NAME (your blinded items) or --reveal"),
    (["audit", "items", "--as", "x" * 50], 2, "an annotator name is 1-40"),
    (["audit", "resolve", "ITEM", "--as", "carol", "--cue", "yes", "--link", "no", "--note", "n"], 1,
     "is not labelled by both annotators yet"),
    (["audit", "resolve", "ITEM", "--as", "carol", "--cue", "yes", "--link", "no"], 2, "Missing option '--note'"),
    (["audit", "status", "--audit", "nope"], 2, "no audit 'nope'"),
    (["report", "--audit", "x"], 2, "--audit chooses the audit of --ega; give --ega too"),
    (["audit", "plan", "--run", "nope"], 2, "no run 'nope'"),
])
def test_mistakes_get_one_line_and_the_right_status(ws, args, code, says):
    ws, run_ids = ws
    plan(ws, run_ids)
    item = next(iter(_items(ws)))
    result = cli(ws, *[item if a == "ITEM" else a for a in args], code=code)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and says in result.stderr.replace("\n", ""), lines
    assert "Traceback" not in result.output


def test_the_guideline_is_printed_and_the_command_module_stays_light(ws):
    ws, _ = ws
    text = cli(ws, "audit", "guideline").stdout
    assert "Cue identified" in text and "Linked to use" in text
    code = ("import sys, cfkit.cli.audit; heavy = [m for m in ('torch', 'numpy', 'scipy', 'PIL', 'openai') "
            "if m in sys.modules]; print(heavy)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"
    assert re.search(r"^\s+audit\s", run_cli(["--help"]).stdout, re.M)
