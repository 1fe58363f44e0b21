"""Answers to prompts whose probe templates changed after the run are stale, and only those.

A run records the digest of each template its requests were rendered from. A
template edited in ``probes/templates/`` after the run changes the prompts of
the answers rendered from it: those answers are stale (counted wrong, listed
under ``missing`` with reason ``stale``, the row marked in every format, with
the command that asks again), and ``study status`` calls the run stale. The
answers of another suite, or of another condition, whose prompts do not use
that template stand, and their run is done. A rerun sends only the requests
whose prompts changed (the rest come from the response cache) and the report
is clean again. A run made before cfkit recorded each template's digest has
one digest over all of them: its texts are found among the templates now and
cfkit's defaults where they can be, and otherwise a note says that which
templates changed cannot be told, marking nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cfkit.prompts import packaged_template
from support.chat_api_server import ChatServer
from support.probe_runs import add_modality, openai_run, scripted_answer
from support.store_sql import table_rows, update_rows
from support.workspace import run_cli

MODEL = "openai:test-model"


def _template(ws: Path, name: str, text: str) -> None:
    folder = ws / "probes" / "templates"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def _report(ws: Path, fmt: str = "json"):
    result = run_cli(["-w", str(ws), "report", "--format", fmt, "--resamples", "50"])
    assert result.exit_code == 0, result.stderr
    return (json.loads(result.stdout) if fmt == "json" else result.stdout), result.stderr


def _section(text: str, title: str, end: str) -> str:
    """The part of an exported report from a table's title to the next ``end``."""
    return text.split(title, 1)[1].split(end, 1)[0]


@pytest.fixture
def served(tiny_ws):
    add_modality(tiny_ws)  # T001 and T002, with reviewed captions
    with ChatServer(scripted_answer) as server:
        for suite in ("modality", "contextcanvas"):
            assert openai_run(tiny_ws, server.url, suite).exit_code == 0
        yield tiny_ws, server


def _posts(server) -> int:
    return server.count


def _study(ws: Path, url: str) -> Path:
    path = ws / "study.toml"
    path.write_text(f"[models.api]\nmodel = '{MODEL}'\nendpoint = '{url}'\n[suites.contextcanvas]\n"
                    "[suites.modality]\n")
    return path


def _states(ws: Path, path: Path) -> dict[str, str]:
    result = run_cli(["-w", str(ws), "study", "status", str(path), "--json"])
    return {s["suite"]: s["state"] for s in json.loads(result.stdout)}


def test_an_edited_template_marks_the_answers_rendered_from_it_in_every_format_and_a_rerun_clears_them(served,
                                                                                                    tmp_path):
    ws, server = served
    study = _study(ws, server.url)
    assert _states(ws, study) == {"contextcanvas": "done", "modality": "done"}
    before, _ = _report(ws)
    assert not before["missing"]
    _template(ws, "visual-text.txt", packaged_template("visual-text.txt") + "\nYou cannot see the picture.\n")

    data, said = _report(ws)
    stale = [m for m in data["missing"] if m["reason"] == "stale"]
    # Only the modality Text answers were rendered from visual-text.txt: not Neutral, Evidence, Image, nor ContextCanvas.
    assert sorted((m["suite"], m["case"], m["condition"]) for m in stale) == [
        ("modality", "T001", "text"), ("modality", "T002", "text")]
    assert "probes/templates/visual-text.txt has another text than when run modality-" in stale[0]["detail"]
    assert "run the modality suite again" in stale[0]["detail"]
    [modality], [canvas] = data["modality"], data["contextcanvas"]
    assert modality["incomplete"] and modality["invalid"]["text"] == 2 and modality["accuracy"]["text"] == 0
    assert not canvas["incomplete"] and canvas == before["contextcanvas"][0]
    assert not any("template" in note for note in data["notes"])  # no suite-wide note over-claims any more
    assert "stale" in said and "visual-text.txt" in said

    csv_text, _ = _report(ws, "csv")
    assert f"modality,{MODEL},incomplete,true" in csv_text and f"contextcanvas,{MODEL},incomplete,false" in csv_text
    markdown, _ = _report(ws, "md")
    assert f"| {MODEL} (incomplete) |" in _section(markdown, "### Modality conditions", "###")
    assert "(incomplete)" not in _section(markdown, "### ContextCanvas (as in Table 2)", "###")
    latex, _ = _report(ws, "latex")
    assert f"{MODEL} (incomplete) &" in _section(latex, r"\caption{Modality conditions", r"\end{table}")
    assert "(incomplete)" not in _section(latex, r"\caption{ContextCanvas (as in Table 2)", r"\end{table}")
    table = run_cli(["-w", str(ws), "report", "--resamples", "50"])
    assert f"{MODEL} (incomplete)" in _section(table.stdout, "Modality conditions", "\n\n")
    assert "(incomplete)" not in _section(table.stdout, "ContextCanvas (as in Table 2)", "\n\n")

    site = tmp_path / "site"
    assert run_cli(["-w", str(ws), "view", "--export", str(site)]).exit_code == 0
    for case in ("T001", "T002"):
        page = (site / f"case-{case}.html").read_text()
        assert page.count("stale: counted wrong") == 1, case  # the Text answer alone
        assert "visual-text.txt has another text than when run modality-" in page
    page = (site / "report.html").read_text()
    assert f"{MODEL} (incomplete)" in _section(page, "<h2>Modality conditions", "<h2>")
    assert "(incomplete)" not in _section(page, "<h2>ContextCanvas (as in Table 2)", "<h2>")

    # study status agrees: the modality run is stale, the contextcanvas run (its prompts unchanged) done.
    assert _states(ws, study) == {"contextcanvas": "done", "modality": "stale"}

    sent = _posts(server)
    assert openai_run(ws, server.url, "modality").exit_code == 0
    assert _posts(server) == sent + 2  # the two Text questions; the rest came from the cache
    again, _ = _report(ws)
    assert not again["missing"] and not again["modality"][0]["incomplete"]
    assert _states(ws, study) == {"contextcanvas": "done", "modality": "done"}


def test_a_shared_template_marks_both_suites_and_white_space_at_its_ends_marks_none(served):
    ws, server = served
    _template(ws, "system.txt", "\n\n" + packaged_template("system.txt").strip() + "\n\n\n")  # no prompt changes
    data, _ = _report(ws)
    assert not data["missing"]
    sent = _posts(server)
    assert openai_run(ws, server.url, "contextcanvas").exit_code == 0 and _posts(server) == sent  # nothing asked

    _template(ws, "system.txt", packaged_template("system.txt") + "\nAnswer briefly.\n")
    data, _ = _report(ws)
    assert {(m["suite"], m["reason"]) for m in data["missing"]} == {("modality", "stale"), ("contextcanvas", "stale")}
    assert len(data["missing"]) == 2 * 4 + 3  # every answer of both suites: system.txt is in every prompt


def test_a_template_that_cannot_be_read_now_marks_its_answers_with_what_is_wrong(served):
    ws, _ = served
    _template(ws, "visual-neutral.txt", "No slot here.\n")
    data, _ = _report(ws)
    assert {(m["case"], m["condition"]) for m in data["missing"]} == {("T001", "neutral"), ("T002", "neutral")}
    assert "must contain exactly 1 of '{neutral}'" in data["missing"][0]["detail"]


def _as_an_older_cfkit_recorded(ws: Path) -> None:
    """Every run's record as cfkit kept it before it recorded each template's digest: the one digest alone."""
    for run in table_rows(ws, "runs"):
        notes = json.loads(run["notes"])
        assert "templates" in notes
        del notes["templates"]
        update_rows(ws, "runs", {"notes": json.dumps(notes)}, {"id": run["id"]})


def test_an_older_run_with_one_digest_is_compared_where_its_templates_can_be_found_and_said_where_not(tiny_ws):
    add_modality(tiny_ws)
    _template(tiny_ws, "user.txt", packaged_template("user.txt").replace("Options:", "Choose from:"))
    with ChatServer(scripted_answer) as server:
        for suite in ("modality", "contextcanvas"):
            assert openai_run(tiny_ws, server.url, suite).exit_code == 0
    _as_an_older_cfkit_recorded(tiny_ws)
    data, _ = _report(tiny_ws)
    assert not data["missing"] and not data["notes"]  # the digest is the one of the templates now

    # visual-text.txt changed since: the run's texts are found (user.txt as now, the rest cfkit's defaults), and
    # only the Text answers are marked.
    _template(tiny_ws, "visual-text.txt", "There is no picture.")
    data, _ = _report(tiny_ws)
    assert {(m["suite"], m["condition"]) for m in data["missing"]} == {("modality", "text")}
    assert not [n for n in data["notes"] if "template" in n]

    # user.txt changed again: what the runs were asked with is neither the file now nor cfkit's default, so which
    # templates changed cannot be told; nothing is marked, and a note per suite says so.
    _template(tiny_ws, "user.txt", packaged_template("user.txt").replace("Options:", "Pick one of:"))
    data, said = _report(tiny_ws)
    assert not data["missing"] and not data["modality"][0]["incomplete"]
    notes = [n for n in data["notes"] if "one digest over all the probe templates" in n]
    assert sorted(n.split(":")[0] for n in notes) == ["contextcanvas", "modality"]
    assert "cannot be told, so its answers are not marked stale; run the suite again" in notes[0]
    assert "one digest over all the probe templates" in said
    shutil.rmtree(tiny_ws / "probes" / "templates")  # cfkit's defaults alone now: still not what the runs were asked
    data, _ = _report(tiny_ws)
    assert not data["missing"] and len([n for n in data["notes"] if "one digest" in n]) == 2
