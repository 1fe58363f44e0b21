"""Case subsets: the one reader every command uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cfkit.errors import InputError
from cfkit.lint import lint_captions
from cfkit.workspace import load_workspace
from support.caption_workspace import CASES, make_caption_ws
from support.workspace import run_cli


@pytest.fixture
def cws(tmp_path: Path) -> Path:
    return make_caption_ws(tmp_path / "cws")



def test_modality_subset_file_is_the_default_selection(cws):
    ws = load_workspace(cws)
    (cws / "captions" / "T003.yaml").unlink()
    (cws / "probes" / "modality-100.txt").write_text("T001\nT002\n")
    assert lint_captions(ws).ok  # T003 is outside the subset, so its missing caption is fine


def test_subset_file_errors_name_file_and_line(cws):
    ws = load_workspace(cws)
    (cws / "probes" / "bad.txt").write_text("T001\nNOPE\n")
    with pytest.raises(InputError, match=r"bad\.txt:2: case 'NOPE'"):
        lint_captions(ws, subset="bad.txt")


def test_every_command_treats_a_configured_but_missing_subset_the_same_way(cws, tmp_path):
    # captions build / lint / draft and report: one refusal line naming the file and the ways on.
    pred = tmp_path / "p.jsonl"
    pred.write_text('{"model": "m", "suite": "modality", "case": "T001", "condition": "text", "answer": "A"}\n')
    commands = [["captions", "build"], ["captions", "lint"], ["captions", "draft", "-m", "openai:test", "-o", "base_url=http://127.0.0.1:9/v1"],
                ["report", "--predictions", str(pred)], ["probe", "run", "-m", "baseline:majority", "-s", "modality"],
                ["probe", "run", "-m", "baseline:majority", "-s", "modality", "--dry-run"]]
    for args in commands:
        result = run_cli(["-w", str(cws), *args])
        assert result.exit_code == 2, (args, result.output)
        line = result.stderr.strip()
        assert line.count("\n") == 0 and "modality-100.txt" in line and "does not exist" in line, args
        assert "--subset FILE or --all-cases" in line, args
    (cws / "probes" / "two.txt").write_text("T001\nT002  # a trailing comment is allowed everywhere\n")
    built = run_cli(["-w", str(cws), "captions", "build", "--subset", "two.txt"])
    assert built.exit_code == 0 and {json.loads(line)["case"] for line in built.stdout.splitlines()} == {"T001", "T002"}
    assert run_cli(["-w", str(cws), "captions", "lint", "--subset", "two.txt"]).exit_code == 0
    reported = run_cli(["-w", str(cws), "report", "--predictions", str(pred), "--subset", "two.txt", "--format", "json"])
    assert reported.exit_code == 0 and json.loads(reported.stdout)["modality"][0]["n"] == 2
    everything = run_cli(["-w", str(cws), "captions", "build", "--all-cases", "--condition", "text"])
    assert everything.exit_code == 0 and len(everything.stdout.splitlines()) == len(CASES)
    both = run_cli(["-w", str(cws), "captions", "build", "--subset", "two.txt", "--all-cases"])
    assert both.exit_code == 2 and "not both" in both.stderr
    # probe run takes the same two overrides; each case set is a run of its own, and recorded.
    runs = {}
    for flags, n in ((["--subset", "two.txt"], 2 * 4), (["--all-cases"], len(CASES) * 4)):
        ran = run_cli(["-w", str(cws), "probe", "run", "-m", "baseline:majority", "-s", "modality", *flags, "--json"])
        assert ran.exit_code == 0, ran.output
        summary = json.loads(ran.stdout)
        assert summary["total"] == n, summary
        runs[flags[0]] = summary["run_id"]
    assert runs["--subset"] != runs["--all-cases"]
    shown = json.loads(run_cli(["-w", str(cws), "runs", "show", runs["--subset"], "--json"]).stdout)
    assert shown["run"]["selection"]["subset"]["path"].endswith("two.txt")
    both = run_cli(["-w", str(cws), "probe", "run", "-m", "baseline:majority", "-s", "modality", "--subset", "two.txt",
                    "--all-cases"])
    assert both.exit_code == 2 and "not both" in both.stderr
    other_suite = run_cli(["-w", str(cws), "probe", "run", "-m", "baseline:majority", "-s", "contextcanvas",
                           "--all-cases"])
    assert other_suite.exit_code == 2 and "--all-cases is for the modality suite" in other_suite.stderr


def test_a_modality_run_over_every_case_is_reported_over_the_subset_with_a_note(tmp_path):
    # Table S9 is over the subset: answers about other cases (a run made with --all-cases) are left out and said,
    # and the rows are those of a run over the subset alone; --all-cases scores every case.
    rows = {}
    for name, flags in (("subset", []), ("every", ["--all-cases"])):
        ws = make_caption_ws(tmp_path / name)
        (ws / "probes" / "modality-100.txt").write_text("T001\nT002\n")
        ran = run_cli(["-w", str(ws), "probe", "run", "-m", "baseline:always-yes", "-s", "modality", *flags])
        assert ran.exit_code == 0, ran.output
        reported = run_cli(["-w", str(ws), "report", "--format", "json"])
        assert reported.exit_code == 0, reported.output
        report = json.loads(reported.stdout)
        rows[name] = [{k: v for k, v in row.items() if k != "runs"} for row in report["modality"]]  # ids differ
        said = [n for n in report["notes"] if "outside the modality subset" in n]
        if name == "subset":
            assert said == []
        else:
            outside = (len(CASES) - 2) * 4  # four conditions a case
            assert said == [f"modality: {outside} answers of baseline:always-yes about {len(CASES) - 2} cases outside "
                            "the modality subset (first T003) are left out of its rows, which are over the subset; "
                            "'cfkit report --all-cases' scores every case."], report["notes"]
            assert said[0] in reported.stderr
            everything = json.loads(run_cli(["-w", str(ws), "report", "--format", "json", "--all-cases"]).stdout)
            assert everything["modality"][0]["n"] == len(CASES)
            assert not [n for n in everything["notes"] if "outside the modality subset" in n]
    assert rows["every"] == rows["subset"] and rows["subset"][0]["n"] == 2
