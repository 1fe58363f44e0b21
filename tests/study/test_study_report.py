"""cfkit study report over a study whose runs are not all there: what the study file asks and the report cannot
show is said, one line each, and nothing else of the report is lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cfkit.errors import ConfigError
from cfkit.study import load_study
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
    assert shown.exit_code == 0, shown.stderr
    assert "--compare" not in shown.stderr
    line = next(x for x in shown.stderr.splitlines() if "compare base vs other" in x)
    assert "other has no contextcanvas run with replies (not started)" in line and str(path) in line
    data = json.loads(shown.stdout)
    assert data["compare"] == [] and [r["model"] for r in data["contextcanvas"]] == ["baseline:always-no"]
    assert [r["model"] for r in data["swap"]] == (["baseline:majority"] if other_has == "swap only" else [])


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
