"""A run exported in full and read back says what the run said: for every suite, a report over the export
(``report --predictions``) and over the run imported into a fresh workspace with the same cases gives the same
numbers and the same notes and marks (incomplete, cut off, failed, skipped, stale, older templates, unreviewed
captions) as the report over the run itself.

The runs are real: the CLI against a loopback Chat Completions server that cuts one reply off at the token limit
and fails one request; the counterfactual run skips a pair without an edit, the swap run a three-option case, the
modality run asks part of its suite, one of whose captions is a model's draft no person has reviewed; a second
modality run is left as a cfkit that kept no caption digests recorded it (its unreviewed cases alone). The runs ask
with the workspace's own ``visual-neutral.txt`` (the modality suite's neutral condition). After the runs, a case is
reworded and the system template changed; then, on a copy, that workspace template or a caption is edited too.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.chat_api_server import Scripted, answer_json, completion, error_body, user_text
from support.probe_runs import _accepted_edit, add_modality, openai_run
from support.store_sql import table_rows, update_rows
from support.workspace import REPO, run_cli, write_workspace

SUITES = ("contextcanvas", "modality", "counterfactual", "swap")
#: The modality run recorded as before cfkit kept caption digests: its notes name its unreviewed cases alone.
OLDER = "openai:older-model"


def _script(body, n) -> Scripted:
    text, model = user_text(body), body.get("model")
    if "winter card" in text:  # T002: cut off at the token limit, its answer still read
        return Scripted(body=completion('{"answer": "A", "rea', model=model, finish_reason="length"))
    if "Which event" in text:  # T003: the request fails
        return Scripted(400, error_body("the image could not be decoded"))
    return Scripted(body=completion(answer_json("A"), model=model))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(workspace, run id and export folder per suite) after the runs, with the workspace changed since."""
    pytest.importorskip("aiohttp", reason="the openai extra is not installed: pip install 'cfkit-probes[openai]'")
    from support.chat_api_server import ChatServer

    root = tmp_path_factory.mktemp("round-trip")
    ws = write_workspace(root / "ws")
    add_modality(ws)
    drafted = ws / "captions" / "T001.yaml"  # a model's draft no person has reviewed, asked as it is
    drafted.write_text(drafted.read_text().replace("author: human\nreviewed: true",
                                                   "author: openai:drafter\nreviewed: false"))
    _accepted_edit(ws)  # TX01 has an accepted edit; TX02 (below) has none and is skipped
    spec = (ws / "interventions" / "TX01.yaml").read_text()
    (ws / "interventions" / "TX02.yaml").write_text(spec.replace("TX01", "TX02").replace("case: T001", "case: T002"))
    shutil.copy(ws / "interventions" / "masks" / "TX01.png", ws / "interventions" / "masks" / "TX02.png")
    (root / "part.txt").write_text("T001\n")
    (ws / "probes" / "templates").mkdir()  # the runs ask with the workspace's own neutral template
    neutral = (REPO / "cfkit" / "templates" / "visual-neutral.txt").read_text()
    (ws / "probes" / "templates" / "visual-neutral.txt").write_text(neutral.rstrip() + " (as the workspace has it)\n")
    ids = {}
    with ChatServer(_script) as server:
        for suite in SUITES:
            extra = ["--cases", str(root / "part.txt")] if suite == "modality" else []
            openai_run(ws, server.url, suite, *extra)
        openai_run(ws, server.url, "modality", "--cases", str(root / "part.txt"), model=OLDER)
    for run in json.loads(run_cli(["runs", "list", "-w", str(ws), "--json"]).stdout):
        name = "older" if run["model"] == OLDER else run["suite"]
        ids[name] = run["id"]
        if name == "older":
            _without_caption_digests(ws, run["id"])
        for fmt, suffix in (("jsonl", ".jsonl"), ("csv", ".csv"), ("predictions", ".predictions.jsonl")):
            target = root / f"{name}{suffix}"
            done = run_cli(["runs", "export", run["id"], "-w", str(ws), "--format", fmt, "--output", str(target)])
            assert done.exit_code == 0, done.stderr
    # After the runs: T002 reworded, the system template changed.
    cases = ws / "data" / "cases.jsonl"
    cases.write_text(cases.read_text().replace("a winter card?", "a winter greeting card?"))
    system = (REPO / "cfkit" / "templates" / "system.txt").read_text()
    (ws / "probes" / "templates" / "system.txt").write_text(system + "\nAnswer briefly.\n")
    return ws, ids, root


def _without_caption_digests(ws: Path, run_id: str) -> None:
    """The run's notes as a cfkit that kept no caption digests left them: its unreviewed cases alone."""
    [row] = [r for r in table_rows(ws, "runs") if r["id"] == run_id]
    notes = json.loads(row["notes"])
    assert notes.pop("captions") and notes["unreviewed"] == ["T001"]
    update_rows(ws, "runs", {"notes": json.dumps(notes)}, {"id": run_id})


def _report(ws: Path, *args: str) -> dict:
    result = run_cli(["report", "-w", str(ws), "--format", "json", "--resamples", "100", *args])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def _said(report: dict, suite: str) -> dict:
    """What a report says of ``suite``: its rows, units, missing units with why, notes and reply problems (their
    counts: the advice for replies read from a file is another)."""
    return {"rows": report.get(suite), "units": [u for u in report["units"] if u["suite"] == suite],
            "missing": [m for m in report["missing"] if m["suite"] == suite],
            "notes": [n for n in report["notes"] if n.startswith(f"{suite}: ")],
            "problems": [{k: v for k, v in p.items() if k != "message"} for p in report["reply_problems"]
                         if p["suite"] == suite]}


def _fresh(ws: Path, target: Path) -> Path:
    """A copy of the workspace (the same cases, edits and templates) without its runs."""
    shutil.copytree(ws, target)
    for run in json.loads(run_cli(["runs", "list", "-w", str(target), "--json"]).stdout):
        assert run_cli(["runs", "rm", run["id"], "-w", str(target)]).exit_code == 0
    return target


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize("suite", SUITES)
def test_a_full_export_read_back_says_what_the_run_said(exported, tmp_path, suite, fmt):
    ws, ids, root = exported
    original = _said(_report(ws, "--run", ids[suite], "--only-named"), suite)
    kinds = {m["reason"] for m in original["missing"]} | {"cut off" for p in original["problems"] if p["truncated"]}
    expected = {"contextcanvas": {"transport", "stale", "cut off"}, "modality": {"absent"},
                "counterfactual": {"skipped"}, "swap": {"stale", "cut off"}}[suite]
    assert expected <= kinds  # the run has something of each to say
    # Every answer was rendered from the system template changed since: stale, with the file named.
    assert any("probes/templates/system.txt has another text" in (m["detail"] or "") for m in original["missing"])
    if suite == "modality":  # T001 was asked with a model's draft caption: the row is marked, a note names it
        _assert_unreviewed(original)
    export = root / f"{suite}.{fmt}"

    fresh = _read_back_alike(ws, export, suite, original, tmp_path)


def _read_back_alike(ws: Path, export: Path, suite: str, original: dict, tmp_path: Path) -> Path:
    """A report over ``export`` given to --predictions, and over it imported into a fresh workspace (returned),
    says what the report over the run said: the same words, the workspace's own paths (its cases file, its
    templates folder) aside."""
    assert _said(_report(ws, "--predictions", str(export)), suite) == original
    fresh = _fresh(ws, tmp_path / "fresh")
    imported = run_cli(["runs", "import", str(export), "-w", str(fresh)])
    assert imported.exit_code == 0, imported.stderr
    assert json.loads(json.dumps(_said(_report(fresh), suite)).replace(str(fresh), str(ws))) == original
    return fresh


def _assert_unreviewed(said: dict) -> None:
    [row] = said["rows"]
    assert row["unreviewed"] == 1, row
    assert any("with a caption a model drafted and no person has reviewed (T001)" in n for n in said["notes"])


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_run_that_recorded_only_its_unreviewed_captions_keeps_them_read_back(exported, tmp_path, fmt):
    """A modality run that recorded no caption digests names its cases asked with a draft caption in its notes
    (``unreviewed``) alone: its export carries them (``run_unreviewed``), so the marks and the note stay."""
    ws, ids, root = exported
    original = _said(_report(ws, "--run", ids["older"], "--only-named"), "modality")
    _assert_unreviewed(original)
    export = root / f"older.{fmt}"

    assert _said(_report(ws, "--predictions", str(export)), "modality") == original

    fresh = _fresh(ws, tmp_path / "fresh")
    imported = run_cli(["runs", "import", str(export), "-w", str(fresh)])
    assert imported.exit_code == 0, imported.stderr
    assert json.loads(json.dumps(_said(_report(fresh), "modality")).replace(str(fresh), str(ws))) == original
    [run] = table_rows(fresh, "runs")
    assert json.loads(run["notes"])["unreviewed"] == ["T001"]
    shown = run_cli(["report", "-w", str(fresh), "--resamples", "100"])
    scores = shown.stdout.split("Runs read", 1)[0]  # the tables of numbers (the last one names the runs read)
    named = [line.split("│")[1].strip() for line in scores.splitlines() if line.startswith(f"│ {OLDER}")]
    assert named and all(name.endswith("(unreviewed captions)") for name in named), shown.stdout

    # A file made before cfkit wrote the column reads as before: nothing recorded of unreviewed captions.
    if fmt == "jsonl":
        before = tmp_path / "before.jsonl"
        before.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "run_unreviewed"}) + "\n"
                                  for line in export.read_text().splitlines()))
        assert _said(_report(ws, "--predictions", str(before)), "modality")["rows"][0]["unreviewed"] == 0


#: Edits to the workspace after the runs, on a copy: the neutral template the runs asked with (a workspace text, so
#: one digest over all the templates cannot tell which changed), and the caption T001 was asked with; and (below,
#: "case added") a case no run asked, which a report over the import must say was added since, as over the run.
EDITS = {"template": ("probes/templates/visual-neutral.txt", " (as the workspace has it)", " (edited since)",
                      "probes/templates/visual-neutral.txt has another text than when run"),
         "caption": ("captions/T001.yaml", "A painted scene", "A painted picture",
                     "captions/T001.yaml has another neutral text than when run")}


def _edited(ws: Path, target: Path, edit: str) -> Path:
    """A copy of the workspace, its runs and all, with its system template as the runs asked it and ``edit``
    (:data:`EDITS`) made: the one input changed since that a report marks."""
    shutil.copytree(ws, target)
    (target / "probes" / "templates" / "system.txt").unlink()
    if edit == "case added":  # a case no run asked: each suite's report says why it has no answer
        cases = target / "data" / "cases.jsonl"
        first = json.loads(cases.read_text().splitlines()[0])
        cases.write_text(cases.read_text() + json.dumps(first | {"id": "T009"}) + "\n")
        spec = (target / "interventions" / "TX01.yaml").read_text()  # and a pair of a case the runs asked
        (target / "interventions" / "TX03.yaml").write_text(spec.replace("TX01", "TX03"))
        shutil.copy(target / "interventions" / "masks" / "TX01.png", target / "interventions" / "masks" / "TX03.png")
        return target
    name, before, after, _ = EDITS[edit]
    text = (target / name).read_text()
    assert before in text
    (target / name).write_text(text.replace(before, after))
    return target


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize("suite, edit", [(suite, "template") for suite in SUITES] + [("modality", "caption")]
                         + [(suite, "case added") for suite in SUITES])
def test_an_export_read_back_after_an_edit_marks_what_the_run_marks(exported, tmp_path, suite, edit, fmt):
    """After the template or caption a run asked with is edited, a report over its export and over the imported run
    marks stale the answers the report over the run marks, with the same reasons, and no other notes: the export
    carries the digest of each template the run's prompts were rendered from (``run_template_digests``), not only
    the one digest over all of them, which cannot tell which workspace template changed. After a case is added,
    both say of it what the report over the run says (added since; the command that made the run asks it), not
    that the run is incomplete or the file lacks it: the export has a row for every request the run planned."""
    ws, ids, root = exported
    edited = _edited(ws, tmp_path / "edited", edit)
    original = _said(_report(edited, "--run", ids[suite], "--only-named"), suite)
    if edit == "case added":  # no run asked it: resuming would not; the command that made the run, run again, does
        added = [m["detail"] for m in original["missing"] if m["case"] == "T009" or m["pair"] == "TX03"]
        assert all("added" in d and "run the command that made run" in d for d in added), added
        assert bool(added) == (suite != "modality")  # (modality asks the cases its subset file names)
    elif suite == "modality":  # the neutral answer alone was asked with the neutral template and the caption
        marked = [m for m in original["missing"] if EDITS[edit][3] in (m["detail"] or "")]
        assert [m["condition"] for m in marked] == ["neutral"], original["missing"]
    else:  # the suite's prompts never used the edited template: nothing of it is said
        assert not [m for m in original["missing"] if EDITS[edit][3] in (m["detail"] or "")]
    assert not [n for n in original["notes"] if "cannot be told" in n]
    export = root / f"{suite}.{fmt}"

    fresh = _read_back_alike(edited, export, suite, original, tmp_path)
    [run] = table_rows(fresh, "runs")
    [stored] = [r for r in table_rows(edited, "runs") if r["id"] == ids[suite]]
    assert json.loads(run["notes"])["templates"] == json.loads(stored["notes"])["templates"]


def test_an_export_made_before_the_template_digests_reads_as_documented(exported, tmp_path):
    """A file without ``run_template_digests`` (made before cfkit wrote it) still imports, and is judged by its one
    digest over all the templates (docs/report-schema.md, ``stale``): after an edit of a workspace template the
    run asked with, which changed cannot be told, so its answers are not marked and a note says so."""
    ws, ids, root = exported
    edited = _edited(ws, tmp_path / "edited", "template")
    before = tmp_path / "before.jsonl"
    before.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "run_template_digests"})
                              + "\n" for line in (root / "modality.jsonl").read_text().splitlines()))
    for said in (_said(_report(edited, "--predictions", str(before)), "modality"),):
        assert not [m for m in said["missing"] if "templates/" in (m["detail"] or "")]
        assert [n for n in said["notes"] if "which of them changed since cannot be told" in n]
    fresh = _fresh(edited, tmp_path / "fresh")
    imported = run_cli(["runs", "import", str(before), "-w", str(fresh)])
    assert imported.exit_code == 0, imported.stderr
    [run] = table_rows(fresh, "runs")
    assert run["id"] == ids["modality"] and "templates" not in json.loads(run["notes"])
    said = _said(_report(fresh), "modality")
    assert not [m for m in said["missing"] if "templates/" in (m["detail"] or "")]
    assert [n for n in said["notes"] if "which of them changed since cannot be told" in n]


def test_an_export_read_under_another_label_is_a_run_made_elsewhere_as_once_imported(exported, tmp_path):
    """A report over an export given ``--label`` reads its replies as made elsewhere, as over the run imported with
    that label: the label need not be the name its servers were asked for, so no note says its replies name a
    model plainly not the one asked, and the notes and reply problems (their advice too) are those of the import."""
    ws, ids, root = exported
    export, label = root / "contextcanvas.jsonl", "openai:renamed-model"
    over_file = _report(ws, "--predictions", str(export), "--label", label)
    fresh = _fresh(ws, tmp_path / "fresh")
    imported = run_cli(["runs", "import", str(export), "-w", str(fresh), "--label", label])
    assert imported.exit_code == 0, imported.stderr
    over_import = json.loads(json.dumps(_report(fresh)).replace(str(fresh), str(ws)))
    assert not [n for n in over_file["notes"] if "as asked" in n]
    assert over_file["notes"] == over_import["notes"]
    assert over_file["reply_problems"] == over_import["reply_problems"]


def _split_export(root: Path, tmp_path: Path, later: dict[str, str]) -> tuple[Path, Path]:
    """The contextcanvas export as two exports of two runs of its model (half its cases each), the second run's
    template digests updated by ``later`` (as a run made after those templates were changed)."""
    rows = [json.loads(line) for line in (root / "contextcanvas.jsonl").read_text().splitlines()]
    half = len(rows) // 2
    second = [r | {"run": r["run"] + "-later",
                   "run_template_digests": r["run_template_digests"] | later} for r in rows[half:]]
    files = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    for path, part in zip(files, (rows[:half], second)):
        path.write_text("".join(json.dumps(r) + "\n" for r in part))
    return files


def test_two_exports_of_one_model_and_suite_stand_together_only_when_asked_with_the_same_templates(exported,
                                                                                                     tmp_path):
    """Two exports of two runs of one model and suite are read as one run of both (docs/report-schema.md): where
    the second run was asked with another system template than the first (made after it changed), the report
    cannot judge each answer by its own run's templates from one run, so it refuses in one line rather than
    judging the second file's answers by the first's templates (which marked them stale, silently). Two runs
    asked with the same templates still stand together."""
    from cfkit.prompts import template_digest

    ws, ids, root = exported
    now = template_digest((ws / "probes" / "templates" / "system.txt").read_text())
    first, second = _split_export(root, tmp_path, {"system.txt": now})
    result = run_cli(["report", "-w", str(ws), "--format", "json", "--predictions", str(first), "--predictions",
                      str(second)])
    assert result.exit_code != 0 and not result.stdout
    [line] = result.stderr.strip().splitlines()
    assert str(second) in line and "system.txt" in line and "--label" in line, line
    (tmp_path / "alike").mkdir()
    alike = _split_export(root, tmp_path / "alike", {})
    said = _report(ws, "--predictions", str(alike[0]), "--predictions", str(alike[1]))
    assert [r["run"] for r in said["runs_read"] if r["suite"] == "contextcanvas"] == [
        f"{ids['contextcanvas']} + {ids['contextcanvas']}-later"]
