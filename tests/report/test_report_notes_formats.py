"""The lines that qualify a report's numbers reach every format, not the terminal and the JSON alone.

A newer run left out, a unit counted wrong for a failed request, a modality
run asked with a caption no person reviewed: ``cfkit report`` says each on
stderr. Markdown pasted into a paper, LaTeX and a CSV loaded into pandas used
to carry the numbers without those lines; now each ends with them, in the same
words and order (Markdown and LaTeX as a Notes list, the CSV as ``notes``
rows), escaped for its format. Against a real loopback server and a real
store, through the CLI; ``cfkit study report`` writes through the same code.
"""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from cfkit.report import latex_escape, markdown_escape
from support.caption_workspace import write_caption
from support.chat_api_server import ChatServer, Scripted, error_body, user_text
from support.probe_runs import FAST, scripted_answer
from support.workspace import run_cli

pytestmark = pytest.mark.timeout(300)


def _run(ws, url, suite, *extra):
    return run_cli(["-w", str(ws), "probe", "run", "-m", "openai:test-model", "-s", suite, "--base-url", url,
                    *FAST, *extra])


def _report(ws, *extra):
    result = run_cli(["-w", str(ws), "report", "--all-cases", "--resamples", "50", *extra])
    assert result.exit_code == 0, result.stderr
    return result


def _warnings(stderr: str) -> list[str]:
    """The lines stderr says beside the tables (``warning: ``), each whole (a long line may be folded)."""
    lines, current = [], None
    for line in stderr.splitlines():
        if line.startswith("warning: "):
            current = line.removeprefix("warning: ")
            lines.append(current)
        elif current is not None and line.startswith(" ") and lines:
            lines[-1] += " " + line.strip()
        else:
            current = None
    return lines


@pytest.fixture
def qualified(tiny_ws):
    """A report with three kinds of notes: a contextcanvas run whose request for T002 failed (read), a newer
    ``--limit 1`` run of the suite (left out), and a modality run asked with T002's caption a model drafted."""
    ws = tiny_ws
    write_caption(ws, "T001", neutral="A grey field.", evidence="The band is dark.")
    write_caption(ws, "T002", neutral="A pale gradient.", evidence="The corner is white.", author="openai:drafter",
                  reviewed=False)
    write_caption(ws, "T003", neutral="A smooth field.", evidence="The colour shifts.")
    failing = [True]

    def script(body, n):
        if failing[0] and "winter card" in user_text(body):
            return Scripted(status=500, body=error_body("upstream_error 100% & #1 $", kind="server_error"))
        return scripted_answer(body, n)

    with ChatServer(script) as server:  # one endpoint: every run of the model has the same settings
        assert _run(ws, server.url, "contextcanvas").exit_code == 1  # T002 failed
        failing[0] = False
        assert _run(ws, server.url, "contextcanvas", "--limit", "1").exit_code == 0
        assert _run(ws, server.url, "modality", "--all-cases").exit_code == 0
    return ws


def test_each_line_that_qualifies_the_numbers_is_in_markdown_latex_and_csv(qualified):
    shown = _report(qualified, "--format", "json")
    data = json.loads(shown.stdout)
    said = _warnings(shown.stderr)
    # The three kinds, as the terminal says them (and the JSON has them).
    left_out = data["set_aside"][0]["message"]
    failed = next(line for line in said if "counted wrong (transport; contextcanvas 1)" in line)
    unreviewed = next(n for n in data["notes"] if "no person has reviewed (T002)" in n)
    assert said == [left_out, failed, unreviewed], shown.stderr
    assert "upstream_error 100% & #1 $" in failed and "--limit 1" in left_out

    md = _report(qualified, "--format", "md").stdout
    tables, notes = md.split("\n### Notes\n\n")
    assert "| openai:test-model (incomplete) |" in tables and "(unreviewed captions)" in tables
    assert notes.rstrip("\n").split("\n") == [f"- {markdown_escape(line)}" for line in said]
    assert "upstream_error 100% &amp; #1 $" in notes  # as Markdown shows it: '&' written as HTML writes it

    latex = _report(qualified, "--format", "latex").stdout
    tables, notes = latex.split("\n\\paragraph{Notes}\n")
    assert tables.rstrip().endswith(r"\end{table}")
    assert notes.rstrip("\n").split("\n") == [r"\begin{itemize}", *(rf"\item {latex_escape(line)}" for line in said),
                                             r"\end{itemize}"]
    assert r"upstream\_error 100\% \& \#1 \$" in notes and r"(1 request, -{}-limit 1)" in notes
    _assert_tex_text(notes)

    rows = list(csv.reader(io.StringIO(_report(qualified, "--format", "csv").stdout)))
    assert rows[0] == ["section", "model", "metric", "value", "source"] and {len(r) for r in rows} == {5}
    noted = [r for r in rows if r[0] == "notes"]
    assert [(r[1], r[2], r[3], r[4]) for r in noted] == [("", str(k), line, "measured") for k, line in enumerate(said)]
    assert rows[-len(noted):] == noted  # one block, after the other sections
    sections = [r[0] for r in rows[1:]]
    assert sections.index("set_aside") < sections.index("notes")


def _assert_tex_text(text: str) -> None:
    """No character TeX reads as markup is left bare in ``text`` (the notes): every ``%``, ``&``, ``#``, ``$``,
    ``_``, ``^`` and ``~`` escaped, braces balanced, no ``--`` that TeX would set as a dash."""
    bare = re.sub(r"\\(textbackslash|textasciitilde|textasciicircum|textless|textgreater|textbar)\{\}", "", text)
    bare = re.sub(r"\\[%&#$_{}]", "", bare)
    bare = bare.replace("-{}-", "")
    assert not re.search(r"[%&#$_^~]|--", bare), bare
    depth = 0
    for ch in bare:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0, text
    assert depth == 0, text


def test_a_note_with_tex_and_markdown_markup_in_it_is_escaped_in_each(tiny_ws):
    assert run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:random", "-s", "contextcanvas"]).exit_code == 0
    note = r"# run_a: 50% & #2 cost $3 {x} ~ ^ \ | * `y` <b> -- --limit"
    shown = _report(tiny_ws, "--note", note, "--format", "latex").stdout
    item = next(line for line in shown.splitlines() if line.startswith(r"\item "))
    assert item == (r"\item \# run\_a: 50\% \& \#2 cost \$3 \{x\} \textasciitilde{} \textasciicircum{} "
                    r"\textbackslash{} \textbar{} * `y` \textless{}b\textgreater{} -{}- -{}-limit")
    _assert_tex_text(shown.split(r"\paragraph{Notes}")[1])
    md = _report(tiny_ws, "--note", note, "--format", "md").stdout
    item = md.split("### Notes\n\n")[1].splitlines()[0]
    # A list item of its own text: not a heading, the pipe, star and backticks escaped, no raw HTML.
    assert item == r"- \# run_a: 50% &amp; #2 cost $3 {x} ~ ^ \\ \| \* \`y\` &lt;b&gt; -- --limit"
    rows = list(csv.reader(io.StringIO(_report(tiny_ws, "--note", note, "--format", "csv").stdout)))
    assert [r[3] for r in rows if r[0] == "notes"] == [note]


def test_a_report_with_nothing_to_say_has_no_notes(tiny_ws):
    assert run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:random", "-s", "contextcanvas"]).exit_code == 0
    assert "Notes" not in _report(tiny_ws, "--format", "md").stdout
    assert "Notes" not in _report(tiny_ws, "--format", "latex").stdout
    assert not [r for r in csv.reader(io.StringIO(_report(tiny_ws, "--format", "csv").stdout)) if r[0] == "notes"]


def test_study_report_writes_its_runs_left_out_with_the_notes_in_every_format(tiny_ws):
    path = tiny_ws / "study.toml"
    path.write_text("[models.base]\nmodel = 'baseline:always-no'\n[models.other]\nmodel = 'baseline:majority'\n"
                    "[suites.contextcanvas]\n[report]\ncompare = [['base', 'other']]\nresamples = 100\n")
    assert run_cli(["-w", str(tiny_ws), "probe", "run", "-m", "baseline:always-no", "-s",
                    "contextcanvas"]).exit_code == 0
    shown = run_cli(["-w", str(tiny_ws), "study", "report", str(path), "--format", "json"])
    assert shown.exit_code == 1, shown.stderr  # not the whole study
    notes = json.loads(shown.stdout)["notes"]
    left = "other contextcanvas: not started; left out of the report."
    assert left in notes and any("compare base vs other" in n for n in notes)
    # The unit counted wrong (always-no has no answer for T003), then the study's lines (the coverage note of the
    # JSON only under -v: the line on the unit says it).
    said = _warnings(shown.stderr)
    assert said[1:] == [n for n in notes if not n.endswith("listed under missing.")] and len(said) == 3, said
    md = run_cli(["-w", str(tiny_ws), "study", "report", str(path), "--format", "md"]).stdout
    assert md.split("### Notes\n\n")[1].splitlines() == [f"- {markdown_escape(n)}" for n in said]
    latex = run_cli(["-w", str(tiny_ws), "study", "report", str(path), "--format", "latex"]).stdout
    assert rf"\item {latex_escape(left)}" in latex.split(r"\paragraph{Notes}")[1]
    rows = list(csv.reader(io.StringIO(run_cli(["-w", str(tiny_ws), "study", "report", str(path), "--format",
                                                "csv"]).stdout)))
    assert [r[3] for r in rows if r[0] == "notes"] == said
